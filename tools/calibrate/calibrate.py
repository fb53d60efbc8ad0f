#!/usr/bin/env python3
"""stepsim calibration kit: times the kernels stepsim's cost model predicts, on this machine's GPU.

Sweeps GEMM shapes (fp32, tf32, fp16, bf16 and fp8 where the GPU and torch support them), fused
attention (torch scaled_dot_product_attention, causal, forward and backward), bandwidth-bound
kernels (copy, add, gelu, layernorm, softmax) and, when started by torchrun on several GPUs, NCCL
collectives through torch.distributed (all_reduce, all_gather, reduce_scatter). Writes one JSON
file that `stepsim calibrate fit FILE -o configs/calibration/DEVICE.json` fits the model to. The
file names the fused-attention kernel torch ran the attention rows with (`attention_kernel`:
scaled_dot_product_attention picks cuDNN's or FlashAttention-2 by torch and cuDNN version), so
that the fit gives that kernel, not every kernel, the figures measured.

Needs only PyTorch with CUDA:
    python3 tools/calibrate/calibrate.py -o h200.json
    torchrun --nproc_per_node 8 tools/calibrate/calibrate.py -o h200.json   # adds NCCL collectives
"""

import argparse
import datetime
import json
import os
import platform
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

# torch's device name -> stepsim's catalogue name (configs/devices/); first match wins.
CATALOGUE = [
    ("GH200", "GH200"),
    ("H200", "H200-SXM"),
    ("H100 PCIe", "H100-PCIe"),
    ("H100 NVL", "H100-NVL"),
    ("H100", "H100-SXM"),
    ("H800", "H800-SXM"),
    ("A800-SXM4-80GB", "A800-SXM4-80GB"),
    ("L40S", "L40S"),
    ("B200", "B200"),
    ("A100 80GB PCIe", "A100-PCIe-80GB"),
    ("A100-SXM4-80GB", "A100-SXM4-80GB"),
    ("A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("A100-SXM-80GB", "A100-SXM4-80GB"),
    ("V100-SXM2-32GB", "V100-SXM2-32GB"),
    ("V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("V100-SXM3-32GB", "V100-SXM3-32GB"),
    ("L4", "L4"),
    ("T4", "T4"),
    ("RTX 4090", "RTX-4090"),
    ("P40", "Tesla-P40"),
    ("MI300X", "MI300X"),
    ("MI250X", "MI250X"),
]

ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
TORCH_DTYPE = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def catalogue_name(torch_name):
    for key, name in CATALOGUE:
        if key in torch_name:
            return name
    return None


def time_samples(run, warmup, repeats, inner):
    """The mean time of `inner` back-to-back calls of `run`, `repeats` times, in seconds, sorted."""
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / inner)
    samples.sort()
    return samples


def time_kernel(run, warmup, repeats, inner):
    """Median over `repeats` of the mean time of `inner` back-to-back launches, in seconds."""
    samples = time_samples(run, warmup, repeats, inner)
    return samples[len(samples) // 2]


def time_graph(run, warmup, repeats, inner):
    """As time_kernel, but the `inner` launches replayed from one CUDA graph, so that a kernel
    shorter than the host's dispatch is timed on the GPU, not at the rate the host issues it (on
    the H200 of configs/calibration/measurements/H200-SXM.json eager PyTorch issued a GEMM every
    19 us). None where the work cannot be captured; the caller then times it eagerly."""
    try:
        for _ in range(warmup):  # library handles, workspaces and heuristics chosen outside capture
            run()
        side = torch.cuda.Stream()  # PyTorch's recipe: one call on a side stream before capture
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(inner):
                run()
    except (RuntimeError, TypeError):
        torch.cuda.synchronize()
        return None
    samples = time_samples(graph.replay, 1, repeats, 1)
    return samples[len(samples) // 2] / inner


class SmClock:
    """The SM clock NVML reads after each row (MHz), where NVML answers: a sweep heats the GPU and
    its clock falls under the power limit, which a row's time alone does not show."""

    def __init__(self):
        self.handle = None
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        except Exception:  # no NVML here: rows go without a clock
            self.handle = None

    def read(self):
        if self.handle is None:
            return None
        try:
            return self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)
        except Exception:
            return None


def timed(args, run, graphs=True):
    """A row's seconds and how they were timed: from a CUDA graph unless --no-graphs, `graphs` is
    false or the work cannot be captured, else eagerly; with the SM clock just after."""
    inner = args.inner
    seconds = time_graph(run, args.warmup, args.repeats, inner) if graphs and not args.no_graphs else None
    timing = "graph"
    if seconds is None:
        seconds, timing = time_kernel(run, args.warmup, args.repeats, inner), "eager"
    row = {"seconds": seconds, "timing": timing}
    clock = args.clock.read()
    if clock is not None:
        row["sm_clock_mhz"] = clock
    return row


def gemm_shapes(quick):
    shapes = [(s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192)]
    shapes += [(4096, 4096, k) for k in (64, 128, 256, 512, 1024)]
    hiddens = (1024, 4096) if quick else (1024, 2048, 4096, 6144, 8192)
    for h in hiddens:  # a transformer layer's GEMMs at 4096 tokens: QKV, projection, MLP up and down
        shapes += [(4096, 3 * h, h), (4096, h, h), (4096, 4 * h, h), (4096, h, 4 * h)]
        if not quick:  # and backward's: QKV's input gradient, QKV's and MLP down's weight gradients
            shapes += [(4096, h, 3 * h), (h, 3 * h, 4096), (4 * h, h, 4096)]
    if not quick:  # the logits of GPT-2's and Llama 3's vocabularies
        shapes += [(4096, 50304, 1024), (4096, 50304, 2048), (4096, 128256, 4096)]
    shapes += [(1000, 1000, 1000), (3000, 5000, 700), (128, 8192, 8192), (8192, 128, 8192), (16384, 1024, 64)]
    # Around a wave boundary: 256x128 tiles, as many as the GPU has SMs, then one row more.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    shapes += [(256 * sms, 128, 8192), (256 * sms + 16, 128, 8192)]
    return shapes


def fp8_matmul(m, n, k):
    """A callable running one fp8 (e4m3) GEMM through torch._scaled_mm, or None if unsupported."""
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None
    if m % 16 or n % 16 or k % 16:
        return None
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
    one = torch.ones((), device="cuda")

    def run():
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    try:
        run()
        torch.cuda.synchronize()
    except (RuntimeError, TypeError):
        return None
    return run


def sweep_gemms(args, rows):
    for dtype in ("fp32", "tf32", "fp16", "bf16", "fp8"):
        if dtype == "bf16" and not torch.cuda.is_bf16_supported():
            continue
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        for m, n, k in gemm_shapes(args.quick):
            if dtype == "fp8":
                run = fp8_matmul(m, n, k)
                if run is None:
                    continue
            else:
                a = torch.randn(m, k, device="cuda", dtype=TORCH_DTYPE[dtype])
                b = torch.randn(k, n, device="cuda", dtype=TORCH_DTYPE[dtype])
                c = torch.empty(m, n, device="cuda", dtype=TORCH_DTYPE[dtype])

                def run(a=a, b=b, c=c):
                    torch.matmul(a, b, out=c)

            row = {"kind": "gemm", "m": m, "n": n, "k": k, "batch": 1, "dtype": dtype, **timed(args, run)}
            rows.append(row)
            log(args, f"gemm {dtype} {m}x{n}x{k}: {row['seconds'] * 1e6:.1f} us ({row['timing']})")
    torch.backends.cuda.matmul.allow_tf32 = False


# The stepsim attention kernel (configs/devices/*.json attention_efficiency_by_kernel) each of
# scaled_dot_product_attention's CUDA backends is: its flash backend is the FlashAttention-2 code
# vendored in aten/src/ATen/native/transformers/cuda/flash_attn. The others have no figure.
SDPA_KERNELS = {"CUDNN_ATTENTION": "cudnn", "FLASH_ATTENTION": "flash-attention-2"}


def sdpa_kernel_name(q, k, v):
    """The backend torch dispatches a causal scaled_dot_product_attention of these tensors to
    (torch._fused_sdp_choice: the same choice as the call), as a stepsim kernel name, or None."""
    try:
        from torch.nn.attention import SDPBackend
        choice = torch._fused_sdp_choice(q, k, v, is_causal=True)
    except (AttributeError, ImportError, RuntimeError, TypeError):
        return None
    for backend, kernel in SDPA_KERNELS.items():
        if hasattr(SDPBackend, backend) and choice == int(getattr(SDPBackend, backend)):
            return kernel
    return None


def sweep_attention(args, rows):
    dtype = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    seqs = (512, 2048, 8192) if args.quick else (512, 1024, 2048, 4096, 8192)
    for seq in seqs:
        for head_dim in (64, 128):
            batch_heads = 16 * 8192 // seq  # the same tokens per launch at every length
            shape = (1, batch_heads, seq, head_dim)
            q, k, v = (torch.randn(shape, device="cuda", dtype=TORCH_DTYPE[dtype], requires_grad=True) for _ in range(3))
            args.attention_kernels.add(sdpa_kernel_name(q, k, v))  # None: a backend without a figure

            def forward():
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

            # Eager: autograd's backward is not captured, and every attention row runs past the
            # host's dispatch anyway (44 us and up on an H200).
            rows.append({"kind": "attention", "batch_heads": batch_heads, "seq": seq, "head_dim": head_dim,
                         "causal": True, "backward": False, "dtype": dtype, **timed(args, forward, False)})
            out = forward()
            grad = torch.randn_like(out)

            def backward():
                torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

            rows.append({"kind": "attention", "batch_heads": batch_heads, "seq": seq, "head_dim": head_dim,
                         "causal": True, "backward": True, "dtype": dtype, **timed(args, backward, False)})
            log(args, f"attention {dtype} seq {seq} head_dim {head_dim}: backward {rows[-1]['seconds'] * 1e6:.1f} us")


def sweep_memory(args, rows):
    dtype = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    eb = ELEMENT_BYTES[dtype]
    hidden = 1024
    size = 1 << 16  # bytes of one tensor, up to 1 GiB
    while size <= (1 << 30):
        elements = size // eb
        x = torch.randn(elements // hidden, hidden, device="cuda", dtype=TORCH_DTYPE[dtype])
        y = torch.randn_like(x)
        z = torch.empty_like(x)
        weight = torch.ones(hidden, device="cuda", dtype=TORCH_DTYPE[dtype])
        bias = torch.zeros(hidden, device="cuda", dtype=TORCH_DTYPE[dtype])
        tensor_bytes = x.numel() * eb
        # name -> (kernel, bytes it reads and writes)
        kernels = {
            "copy": (lambda: z.copy_(x), 2 * tensor_bytes),
            "add": (lambda: torch.add(x, y, out=z), 3 * tensor_bytes),
            "gelu": (lambda: F.gelu(x), 2 * tensor_bytes),
            "layernorm": (lambda: F.layer_norm(x, (hidden,), weight, bias), 2 * tensor_bytes),
            "softmax": (lambda: torch.softmax(x, dim=-1), 2 * tensor_bytes),
        }
        for name, (run, moved) in kernels.items():
            rows.append({"kind": "memory", "name": name, "bytes": moved, "dtype": dtype, **timed(args, run)})
        log(args, f"memory kernels on {tensor_bytes} bytes: copy {rows[-5]['seconds'] * 1e6:.1f} us")
        del x, y, z
        size *= 4


def sweep_collectives(args, rows):
    world = dist.get_world_size()
    size = 1 << 20
    while size <= args.max_collective_bytes:
        elements = size // 2
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            if op == "all_reduce":
                buf = torch.ones(elements, device="cuda", dtype=torch.bfloat16)

                def run(buf=buf):
                    dist.all_reduce(buf)
            elif op == "all_gather":  # `bytes`: the gathered tensor, as stepsim counts a collective
                out = torch.empty(elements - elements % world, device="cuda", dtype=torch.bfloat16)
                part = torch.ones(out.numel() // world, device="cuda", dtype=torch.bfloat16)

                def run(out=out, part=part):
                    dist.all_gather_into_tensor(out, part)
            else:
                full = torch.ones(elements - elements % world, device="cuda", dtype=torch.bfloat16)
                part = torch.empty(full.numel() // world, device="cuda", dtype=torch.bfloat16)

                def run(full=full, part=part):
                    dist.reduce_scatter_tensor(part, full)

            dist.barrier()
            seconds = time_kernel(run, args.warmup, args.repeats, max(1, args.inner // 4))
            slowest = torch.tensor([seconds], device="cuda", dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            rows.append({"kind": "collective", "op": op, "bytes": size, "gpus": world, "seconds": slowest.item()})
            log(args, f"{op} {size} bytes on {world} GPUs: {slowest.item() * 1e6:.1f} us")
        size *= 4


def log(args, text):
    if args.verbose and (not dist.is_initialized() or dist.get_rank() == 0):
        print(text, file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--out", default="measurements.json", help="measurement file to write")
    parser.add_argument("--device", help="stepsim catalogue name (default: guessed from torch's device name)")
    parser.add_argument("--quick", action="store_true", help="fewer shapes (about a minute)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=7, help="timed repetitions; the median is kept")
    parser.add_argument("--inner", type=int, default=10, help="launches per timed repetition")
    parser.add_argument("--max-collective-bytes", type=int, default=1 << 30)
    parser.add_argument("--skip", default="", help="comma-separated kinds to skip: gemm,attention,memory,collective")
    parser.add_argument("--no-graphs", action="store_true",
                        help="time GEMM and memory rows eagerly, not replayed from CUDA graphs")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("calibrate.py: no CUDA GPU visible to torch")

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl")
    rank = dist.get_rank() if distributed else 0
    skip = set(filter(None, args.skip.split(",")))
    args.clock = SmClock()
    args.attention_kernels = set()  # the fused-attention kernels the attention rows ran

    rows = []
    torch.manual_seed(0)
    if rank == 0:  # kernels are timed on one GPU; the others only join the collectives
        if "gemm" not in skip:
            sweep_gemms(args, rows)
        if "attention" not in skip:
            sweep_attention(args, rows)
        if "memory" not in skip:
            sweep_memory(args, rows)
    if distributed:
        dist.barrier()
        if "collective" not in skip:
            sweep_collectives(args, rows)

    if rank == 0:
        props = torch.cuda.get_device_properties(0)
        name = torch.cuda.get_device_name(0)
        versions = {"torch": torch.__version__, "cuda": str(torch.version.cuda), "python": platform.python_version()}
        if torch.backends.cudnn.is_available():
            versions["cudnn"] = str(torch.backends.cudnn.version())
        if distributed:
            versions["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
        doc = {
            "format": "stepsim-kernel-measurements/1",
            "device": name,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "versions": versions,
            "gpus": dist.get_world_size() if distributed else 1,
            "sm_count": props.multi_processor_count,
            "command": " ".join(sys.argv),
            "rows": rows,
        }
        # One kernel with a figure for every attention row: `stepsim calibrate fit` gives it the
        # rows' figures (rows split over backends, or on one without a figure, fit the common one).
        if len(args.attention_kernels) == 1 and None not in args.attention_kernels:
            doc["attention_kernel"] = next(iter(args.attention_kernels))
        stepsim_name = args.device or catalogue_name(name)
        if stepsim_name:
            doc["stepsim_device"] = stepsim_name
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"wrote {args.out}: {len(rows)} rows measured on {name}"
              f"{' (stepsim device ' + stepsim_name + ')' if stepsim_name else ''}")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
