#!/usr/bin/env python3
"""stepsim's end-to-end check on one GPU: times whole training steps of GPT models in plain PyTorch.

Each model is a GPT as stepsim's `generic` framework profile describes PyTorch (torch.nn layers,
fused causal attention through scaled_dot_product_attention, LayerNorm, GeLU, untied embeddings),
trained in bf16 autocast with fp32 parameters and fused AdamW, one micro-batch per step, no
recompute. A step is forward, backward and the optimizer; its time is the median of the timed
steps after warm-up (CUDA events around each step). The file it writes holds, per model, the
configuration a stepsim scenario needs and the measured step time, so that the prediction can be
compared with a run that nothing was fitted on:

    python3 tools/calibrate/train_step.py -o h200_steps.json
"""

import argparse
import datetime
import json
import platform
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from calibrate import time_samples  # tools/calibrate/calibrate.py, beside this file

# name, layers, hidden, heads, micro-batch, sequence, vocabulary (GPT-2's, padded to 64).
MODELS = [
    ("GPT 125M", 12, 768, 12, 16, 2048, 50304),
    ("GPT 350M", 24, 1024, 16, 8, 2048, 50304),
    ("GPT 760M", 24, 1536, 16, 8, 2048, 50304),
    ("GPT 1.3B", 24, 2048, 16, 8, 2048, 50304),
    ("GPT 2.7B", 32, 2560, 32, 4, 2048, 50304),
]


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, seq, vocab):
        super().__init__()
        self.vocab = vocab
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens, targets):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, self.vocab), targets.view(-1))


def time_steps(model, micro, seq, warmup, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, model.vocab, (micro, seq), device="cuda")
    targets = torch.randint(0, model.vocab, (micro, seq), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(tokens, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    samples = time_samples(step, warmup, steps, 1)
    return samples[len(samples) // 2], samples


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--out", default="steps.json")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--budget", type=float, default=240, help="seconds; later models are skipped past it")
    parser.add_argument("--model", action="append", default=[],
                        help="NAME,LAYERS,HIDDEN,HEADS,MICRO,SEQ,VOCAB instead of the built-in list (repeatable)")
    args = parser.parse_args()
    models = MODELS
    if args.model:
        models = []
        for text in args.model:
            name, *numbers = text.split(",")
            models.append((name, *(int(x) for x in numbers)))
    if not torch.cuda.is_available():
        sys.exit("train_step.py: no CUDA GPU visible to torch")
    torch.backends.cuda.matmul.allow_tf32 = True
    began = time.time()
    rows = []
    for name, layers, hidden, heads, micro, seq, vocab in models:
        if time.time() - began > args.budget:
            print(f"skipped {name}: past the {args.budget:.0f} s budget", flush=True)
            continue
        torch.manual_seed(0)
        torch.cuda.reset_peak_memory_stats()
        model = GPT(layers, hidden, heads, seq, vocab).cuda()
        parameters = sum(p.numel() for p in model.parameters())
        median, samples = time_steps(model, micro, seq, args.warmup, args.steps)
        peak = torch.cuda.max_memory_allocated()
        rows.append({"name": name, "num_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
                     "seq_length": seq, "vocab_size": vocab, "micro_batch_size": micro,
                     "parameters": parameters, "step_seconds": median,
                     "step_seconds_min": samples[0], "step_seconds_max": samples[-1],
                     "peak_allocated_bytes": peak})
        print(f"{name}: {parameters / 1e6:.0f} M parameters, micro-batch {micro}: step {median * 1e3:.1f} ms "
              f"({6 * parameters * micro * seq / median / 1e12:.0f} TFLOP/s by 6ND), peak {peak / 2**30:.1f} GiB",
              flush=True)
        del model
        torch.cuda.empty_cache()
    doc = {
        "format": "stepsim-step-measurements/1",
        "device": torch.cuda.get_device_name(0),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "versions": {"torch": torch.__version__, "cuda": str(torch.version.cuda),
                     "python": platform.python_version()},
        "setup": "plain PyTorch eager: torch.nn GPT (LayerNorm, GeLU, biases, untied embeddings, learned "
                 "positions), scaled_dot_product_attention causal, bf16 autocast over fp32 parameters, "
                 "AdamW(fused=True), one micro-batch per step, loss in fp32",
        "command": " ".join(sys.argv),
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(rows)} models")


if __name__ == "__main__":
    main()
