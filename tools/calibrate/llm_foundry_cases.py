#!/usr/bin/env python3
"""Turns MosaicML llm-foundry's published MPT benchmark tables into validation scenarios.

The tables (scripts/train/benchmarking/README.md of mosaicml/llm-foundry at 061f2c7c, "MPT
Training Benchmarks") list, per row, the model size, sequence length, GPUs, micro-batch, gradient
accumulation, global batch, activation checkpointing and the measured throughput in tokens per
second, each run for about 12 steps on the MosaicML platform. Their rows are copied as printed into
configs/validation/llm-foundry/*.md (one file per table); this program writes one scenario per row
beside them, named after the row, as the three MPT cases of configs/validation/ are written:

  - the model from scripts/train/yamls/pretrain/mpt-SIZE.yaml (d_model, n_heads, n_layers,
    expansion_ratio 4, vocab 50368), modelled as a GPT with LayerNorm and tied embeddings (MPT's
    ALiBi and bias-free layers are not modelled: its biases are counted);
  - FSDP FULL_SHARD as ZeRO-3, activation checkpointing as full recompute, bf16;
  - the llm-foundry framework profile (FlashAttention-2);
  - nodes of 8 GPUs on NVSwitch; H100 nodes with 8 x 400 Gb/s NICs (the table names no network),
    A100 nodes with 8 x 200 Gb/s (the table's "1600 Gbps node-node interconnect").

    python3 tools/calibrate/llm_foundry_cases.py          # rewrites configs/validation/llm-foundry/*.json
"""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDER = os.path.join(ROOT, "configs", "validation", "llm-foundry")
COMMIT = "061f2c7ce64e655100286584a7629e2a09f827ba"
URL = "https://github.com/mosaicml/llm-foundry/tree/main/scripts/train/benchmarking"

# scripts/train/yamls/pretrain/mpt-SIZE.yaml: d_model, n_heads, n_layers.
MODELS = {
    "125m": (768, 12, 12),
    "350m": (1024, 16, 24),
    "760m": (1536, 12, 24),
    "1b": (2048, 16, 24),
    "3b": (2560, 20, 32),
    "7b": (4096, 32, 32),
    "13b": (5120, 40, 40),
    "30b": (7168, 56, 48),
    "70b": (8192, 64, 80),
}

# The table's GPU column: the device file and the NICs of its nodes.
GPUS = {
    "h100_80gb": ("H100-SXM", "450GBps", "400Gbps", "1.3us"),
    "a100_80gb": ("A100-SXM4-80GB", "300GBps", "200Gbps", "2us"),
}

COLUMNS = ["model", "seq", "gpus", "gpu", "mfu", "hfu", "model_tflop", "micro_batch", "grad_accum", "global_batch",
           "samples_per_s", "tokens_per_s", "tokens_per_s_per_gpu", "global_batch_tokens", "precision", "mp_mode",
           "sharding", "activation_checkpointing", "cpu_offload", "parameters"]


def rows(path):
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == len(COLUMNS):
                yield dict(zip(COLUMNS, cells))


def scenario(row, table):
    d_model, heads, layers = MODELS[row["model"]]
    gpu, nvlink, nic, nic_latency = GPUS[row["gpu"]]
    gpus, seq = int(row["gpus"]), int(row["seq"])
    checkpointing = row["activation_checkpointing"] == "True"
    name = f"mpt_{row['model']}_seq{seq}_mb{row['micro_batch']}_{gpus}x{row['gpu']}"
    return name, {
        "name": name,
        "description": f"MPT-{row['model'].upper()} at sequence {seq} on {gpus} x {gpu}: FSDP FULL_SHARD, llm-foundry "
                       f"(MosaicML's published benchmark table, row as printed)",
        "model": {"name": f"MPT-{row['model'].upper()}", "num_layers": layers, "hidden_size": d_model,
                  "num_attention_heads": heads, "ffn_hidden_size": 4 * d_model, "seq_length": seq,
                  "vocab_size": 50368, "mlp": "gelu", "norm": "layernorm", "tied_embeddings": True},
        "training": {"global_batch_size": int(row["global_batch"]), "micro_batch_size": int(row["micro_batch"]),
                     "precision": "bf16", "recompute": "full" if checkpointing else "none", "attention": "flash",
                     "optimizer": "adam", "framework": "llm-foundry"},
        "parallelism": {"tensor": 1, "pipeline": 1, "data": gpus, "zero_stage": 3},
        "platform": {"node_groups": [{"count": gpus // 8, "gpu": gpu, "gpus_per_node": 8,
                                      "intra_node": {"type": "nvswitch", "bandwidth": nvlink, "latency": "1us"},
                                      "nic": {"count": 8, "bandwidth": nic, "latency": nic_latency}}],
                     "network": {"topology": "fat_tree"}},
        "validation": {
            "case": name,
            "source": {"citation": "MosaicML llm-foundry 'MPT Training Benchmarks' (table rows as printed)",
                       "url": URL,
                       "measured_values_from": f"scripts/train/benchmarking/README.md @ {COMMIT}, table '{table}'",
                       "config_from": f"scripts/train/yamls/pretrain/mpt-{row['model']}.yaml"},
            "measured_as_printed": {k: row[k] for k in ("mfu", "hfu", "micro_batch", "grad_accum", "global_batch",
                                                        "tokens_per_s", "precision", "mp_mode", "sharding",
                                                        "activation_checkpointing")},
            "metric": "tokens_per_s",
            "measured": float(row["tokens_per_s"]),
            "unit": "tokens per second",
            "assumptions": ["FSDP FULL_SHARD as ZeRO-3 with resharding after forward",
                            "MPT's ALiBi and no-bias layers modelled as a GPT with LayerNorm (biases counted)",
                            f"8 x {nic} NICs per node"],
        },
    }


def main():
    tables = {"h100_80gb_bf16.md": "H100 80GB BF16", "a100_80gb_bf16.md": "A100 80GB with 1600 Gbps node-node "
                                                                          "interconnect (RoCE)"}
    written = 0
    for file, table in tables.items():
        path = os.path.join(FOLDER, file)
        if not os.path.exists(path):
            continue
        for row in rows(path):
            # Rows the scenario cannot state: a global batch that micro-batches do not divide
            # (llm-foundry's last micro-batch is then shorter), or nodes not filled.
            if int(row["global_batch"]) % (int(row["micro_batch"]) * int(row["gpus"])) or int(row["gpus"]) % 8:
                continue
            name, s = scenario(row, table)
            with open(os.path.join(FOLDER, name + ".json"), "w") as f:
                json.dump(s, f, indent=2)
                f.write("\n")
            written += 1
    print(f"{written} scenarios written to {FOLDER}")


if __name__ == "__main__":
    main()
