// torchtitan (PyTorch's own pre-training stack, 2024): FSDP2 over Meta's reference Llama, run
// eagerly. Its parameters and gradients are sharded as pytorch-fsdp's; what differs is the model
// code: without torch.compile each norm, rotary embedding and gated activation is a chain of
// PyTorch ops, not a fused kernel (FrameworkProfile::eager_ops); training.compile fuses them. Its
// FP8 is torchao's float8 linear layers (FrameworkProfile::fp8_dynamic_scaling).
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "torchtitan",
    "torchtitan: FSDP2 over Meta's Llama in eager PyTorch (unfused RMSNorm, RoPE and SwiGLU unless training.compile), "
    "FP8 as torchao's float8",
    FrameworkProfile{
        .attention = "flash",
        .overlap_grad_reduce = true,
        .bucket_parameters = 0, // one reduce-scatter per wrapped unit (a transformer block), not buckets
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        // Async tensor parallelism when asked for (parallelism.tensor_comm_overlap): the
        // reduce-scatter after a row-parallel GEMM leaves in one chunk per tensor rank.
        .tensor_overlap_reduce_chunks = 0,
        .eager_ops = true,
        .selective_recompute = "op",
        .recompute_stops_early = true,
        .fp8_dynamic_scaling   = true,
        .sources = {"eager_ops: torchtitan/models/norms.py (RMSNorm._norm: x * torch.rsqrt(x.pow(2).mean(-1, "
                    "keepdim=True) + eps) on x.float(), then .type_as(x) and * self.weight; norm_type \"rmsnorm\" "
                    "and compile = false in train_configs/llama2_13b.toml, llama2_70b.toml, llama3_70b.toml); "
                    "torchtitan/models/llama/model.py (apply_rotary_emb: view_as_complex(xq.float()...) * freqs_cis, "
                    "view_as_real, .type_as(xq); repeat_kv; output.transpose(1, 2).contiguous() after "
                    "F.scaled_dot_product_attention; FeedForward.forward: w2(F.silu(w1(x)) * w3(x))), 2024",
                    "selective_recompute: torchtitan/parallelisms/parallelize_llama.py (checkpoint_wrapper: "
                    "selective_ac_option \"op\" saves the outputs of no_recompute_list = aten.mm, the flash and "
                    "efficient scaled_dot_product_attention and reduce_scatter_tensor, except every second mm "
                    "(meta[mm_count_key] % 2 == 0); a digit k wraps every k-th block in a full checkpoint, "
                    "training.recompute \"full\" with recompute_every k), 2024",
                    "recompute_stops_early: torchtitan/parallelisms/parallelize_llama.py (ptd_checkpoint_wrapper with "
                    "CheckpointImpl.NO_REENTRANT, checkpoint_fn=torch.utils.checkpoint.checkpoint); "
                    "torch/utils/checkpoint.py (_enable_checkpoint_early_stop, _recomputation_hook.pack_hook raises "
                    "_StopRecomputationError when recomp_counter reaches the forward's saved tensors), 2024",
                    "overlap_grad_reduce: torch/distributed/_composable/fsdp (fully_shard: each transformer block "
                    "reduce-scattered from its post-backward hook), torchtitan/parallelisms/parallelize_llama.py",
                    "attention: torch.nn.functional.scaled_dot_product_attention (flash backend)",
                    "compile: torchtitan/train.py and parallelize_llama.py (training.compile: torch.compile of each "
                    "transformer block, Inductor's fused Triton kernels for the elementwise ops); "
                    "benchmarks/llama3_h100_202412_torchtitan.md (FSDP 5,762 against FSDP + torch.compile 6,667 "
                    "tokens/s per GPU, Llama 3.1 8B on 8 H100), 2024",
                    "tensor_overlap_reduce_chunks: torch/distributed/_symmetric_memory/__init__.py "
                    "(_fused_matmul_reduce_scatter: the matmul cut into group_size chunks, each reduce-scattered as it "
                    "is produced; _fused_all_gather_matmul likewise), which torchtitan's "
                    "parallelism.enable_async_tensor_parallel turns on (torch._inductor.config._micro_pipeline_tp), 2024",
                    "fp8_dynamic_scaling: torchtitan model.converters \"float8\" (torchao.float8.convert_to_float8_training, "
                    "filter_fqns \"output\": the output layer stays bf16); torchao/float8/float8_linear.py "
                    "(matmul_with_hp_or_float8_args: ctx.save_for_backward(input_hp, weight_hp_t), "
                    "hp_tensor_to_float8_dynamic for the input, the weight, the output gradient, and again for "
                    "weight_for_grad_input and input_for_grad_weight in backward; tensor_already_casted_to_fp8 skips "
                    "the weights FSDP gathered in float8), 2025"}});

} // namespace
} // namespace stepsim
