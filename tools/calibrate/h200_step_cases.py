#!/usr/bin/env python3
"""Turns the training steps measured on an H200 (tools/calibrate/train_step.py) into scenarios.

configs/calibration/measurements/H200-SXM.train_steps.json holds, per model, the configuration train_step.py ran
and the median step time it measured on one NVIDIA H200 SXM. This program writes one scenario per
row beside it, so that `stepsim accuracy configs/validation/h200-pytorch` compares the prediction
with a measurement that nothing in stepsim was fitted on:

  - the model as train_step.py builds it: a GPT with LayerNorm, GeLU, 4h MLP, untied embeddings;
  - one GPU, bf16, no recompute, Adam, one micro-batch per step (global batch = micro-batch);
  - the `pytorch-autocast` framework profile: plain PyTorch, eager, torch.autocast over fp32
    parameters, scaled_dot_product_attention (flash);
  - the metric is the step time in seconds, as measured.

    python3 tools/calibrate/h200_step_cases.py       # rewrites configs/validation/h200-pytorch/*.json
"""

import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDER = os.path.join(ROOT, "configs", "validation", "h200-pytorch")
MEASURED = os.path.join(ROOT, "configs", "calibration", "measurements", "H200-SXM.train_steps.json")


def case_name(row):
    size = re.match(r"GPT (\S+)", row["name"]).group(1)
    return f"h200_pytorch_gpt{size}_seq{row['seq_length']}_mb{row['micro_batch_size']}"


def scenario(row, measured):
    name = case_name(row)
    return {
        "name": name,
        "description": f"{row['name']} on 1 x NVIDIA H200 SXM, plain PyTorch eager, bf16 autocast, micro-batch "
                       f"{row['micro_batch_size']}, sequence {row['seq_length']}: one training step",
        "model": {
            "name": row["name"],
            "num_layers": row["num_layers"],
            "hidden_size": row["hidden_size"],
            "num_attention_heads": row["num_attention_heads"],
            "ffn_hidden_size": 4 * row["hidden_size"],
            "seq_length": row["seq_length"],
            "vocab_size": row["vocab_size"],
            "mlp": "gelu",
            "norm": "layernorm",
            "tied_embeddings": False,
        },
        "training": {
            "global_batch_size": row["micro_batch_size"],
            "micro_batch_size": row["micro_batch_size"],
            "precision": "bf16",
            "recompute": "none",
            "attention": "flash",
            "optimizer": "adam",
            "framework": "pytorch-autocast",
        },
        "parallelism": {"tensor": 1, "pipeline": 1, "data": 1, "schedule": "1f1b"},
        "platform": {
            "node_groups": [{
                "count": 1,
                "gpu": "H200-SXM",
                "gpus_per_node": 1,
                "intra_node": {"type": "nvswitch", "bandwidth": "450GBps", "latency": "1us"},
                "nic": {"count": 1, "bandwidth": "400Gbps", "latency": "1.3us"},
            }],
            "network": {"topology": "fat_tree"},
        },
        "validation": {
            "case": name,
            "tier": "own measurement",
            "source": {
                "citation": f"measured by the stepsim developers with tools/calibrate/train_step.py on one NVIDIA H200 "
                            f"SXM, {measured['date']} (torch {measured['versions']['torch']}); "
                            f"configs/calibration/measurements/H200-SXM.train_steps.json, row '{row['name']}', micro-batch "
                            f"{row['micro_batch_size']}, sequence {row['seq_length']}",
            },
            "metric": "seconds_per_iteration",
            "measured": round(row["step_seconds"], 5),
            "unit": "s/step",
            "notes": measured["setup"] + f"; {row['parameters']} parameters (biases and learned positions "
                     "included); steps ranged " + f"{row['step_seconds_min']:.4f}-{row['step_seconds_max']:.4f} s",
            "assumptions": ["biases, learned position embeddings and the fp32 loss are the only parts of the measured "
                            "model stepsim's GPT leaves out or counts differently"],
        },
    }


def main():
    with open(MEASURED) as f:
        measured = json.load(f)
    for old in os.listdir(FOLDER):
        if old.startswith("h200_pytorch_") and old.endswith(".json"):
            os.remove(os.path.join(FOLDER, old))
    for row in measured["rows"]:
        doc = scenario(row, measured)
        with open(os.path.join(FOLDER, doc["name"] + ".json"), "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print(doc["name"])


if __name__ == "__main__":
    main()
