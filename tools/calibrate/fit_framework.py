#!/usr/bin/env python3
"""Fits what one framework's software stack reaches on one device, on that framework's published runs.

A framework's published runs on a device (llm-foundry's MPT tables: dozens of rows over model sizes
and sequence lengths) sustain a GEMM throughput and an attention kernel speed of their own: the
PyTorch, cuBLAS and FlashAttention versions they ran, which no kernel benchmark in hand measured.
Short sequences are mostly GEMMs, long ones mostly attention, so the rows tell the two apart. This
program searches the pair (gemm_efficiency, attention efficiency of the framework's kernel) that
minimises `stepsim accuracy`'s mean absolute percentage error over two thirds of the runs (every
third run by name is held out) and reports the error on the held-out third as a prediction.
Everything else (the behaviours of the framework profile, the network, the device's other
figures) stays as shipped. The device file's own figures are the upper bounds of the search.

With --write it writes configs/calibration/DEVICE.FRAMEWORK.json, which a scenario of that
framework on that device lays over the device's calibration (models/device.cpp, load_device).

    python3 tools/calibrate/fit_framework.py --framework llm-foundry --device H100-SXM \\
        --attention-kernel flash-attention-1 --cases configs/validation/llm-foundry --write
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from fitting import accuracy, config_copy, golden, write_calibration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--attention-kernel", required=True, help="the framework profile's attention kernel")
    ap.add_argument("--cases", required=True, help="a folder of that framework's published runs")
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    ap.add_argument("--tolerance", type=float, default=0.004)
    ap.add_argument("--write", action="store_true", help="write configs/calibration/DEVICE.FRAMEWORK.json")
    a = ap.parse_args()

    with open(os.path.join(a.configs, "devices", a.device + ".json")) as f:
        shipped = json.load(f)["calibration"]
    gemm_upper = shipped["gemm_efficiency"]
    attention_upper = shipped.get("attention_efficiency_by_kernel", {}).get(a.attention_kernel,
                                                                            shipped["attention_efficiency"])
    runs = []
    for name in sorted(os.listdir(a.cases)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(a.cases, name)) as f:
            case = json.load(f)
        if "validation" in case and case["training"].get("framework") == a.framework and \
                case["platform"]["node_groups"][0]["gpu"] == a.device:
            runs.append(name)
    if len(runs) < 3:
        sys.exit(f"fewer than 3 published {a.framework} runs on {a.device} in {a.cases}")
    held = [n for i, n in enumerate(runs) if i % 3 == 2]
    fitted = [n for n in runs if n not in held]

    work = tempfile.mkdtemp(prefix="stepsim-fit-framework-")
    try:
        config_dir = config_copy(a.configs, work)
        dirs = {}
        for part, names in (("fit", fitted), ("held", held)):
            dirs[part] = os.path.join(work, part)
            os.makedirs(dirs[part])
            for n in names:
                shutil.copy(os.path.join(a.cases, n), dirs[part])
        calibration = os.path.join(config_dir, "calibration", f"{a.device}.{a.framework}.json")

        def figures(gemm, attention):
            return {"device": a.device, "framework": a.framework, "gemm_efficiency": gemm,
                    "attention_efficiency_by_kernel": {a.attention_kernel: attention}}

        def report(gemm, attention, part="fit"):
            with open(calibration, "w") as f:
                json.dump(figures(gemm, attention), f)
            return accuracy(a.stepsim, config_dir, dirs[part])

        best_gemm = {}

        def mape_at_attention(attention):
            # For each attention figure, the GEMM figure that fits best; the MAPE at that pair.
            gemm = golden(lambda g: report(g, attention)["mape_pct"], 0.3, gemm_upper, a.tolerance)
            best_gemm[attention] = gemm
            return report(gemm, attention)["mape_pct"]

        attention = golden(mape_at_attention, 0.1, attention_upper, a.tolerance)
        gemm = best_gemm.get(attention) or golden(lambda g: report(g, attention)["mape_pct"], 0.3, gemm_upper,
                                                  a.tolerance)
        fit_report, held_report = report(gemm, attention), report(gemm, attention, "held")
        print(f"{a.framework} on {a.device}: gemm_efficiency {gemm} (upper bound {gemm_upper}), "
              f"{a.attention_kernel} {attention} (upper bound {attention_upper})")
        print(f"  fitted on {len(fitted)} runs: MAPE {fit_report['mape_pct']:.1f}%; "
              f"held out {len(held)}: MAPE {held_report['mape_pct']:.1f}%")
        for c in held_report["cases"]:
            print(f"  held out  {c['case']:<46} {c['error_pct']:+6.1f}%")
        if a.write:
            out = os.path.join(a.configs, "calibration", f"{a.device}.{a.framework}.json")
            written = figures(gemm, attention)
            written["fitted_on"] = [n[:-5] for n in fitted]
            written["held_out"] = [n[:-5] for n in held]
            written["source"] = (
                f"fitted by tools/calibrate/fit_framework.py on {len(fitted)} published {a.framework} runs on "
                f"{a.device} ({os.path.relpath(a.cases, ROOT)}, every third run by name held out): the GEMM "
                f"throughput ({gemm} of the dense peak) and the {a.attention_kernel} speed ({attention} of it) "
                f"those runs sustain; MAPE {fit_report['mape_pct']:.1f}% over the fitted runs, "
                f"{held_report['mape_pct']:.1f}% over the {len(held)} held out. Upper bounds: the device file's "
                f"{gemm_upper} and {attention_upper}.")
            write_calibration(out, written)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
