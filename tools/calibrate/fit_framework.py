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
figures) stays as shipped. The device file's own figures are the upper bounds of the search (its
FlashAttention-2 figure bounds any attention kernel's).

A framework whose runs call no fused attention kernel (--attention-kernel left out: Megatron's
and DeepSpeed's unfused softmax, which the memory model times) has its GEMM figure fitted alone.
A framework with fewer than three published runs on the device (two at least) is fitted on all
of them, and each run's error as a prediction is that of the fit on the others (leave one out).

With --write it writes configs/calibration/DEVICE.FRAMEWORK.json, which a scenario of that
framework on that device lays over the device's calibration (models/device.cpp, load_device).

    python3 tools/calibrate/fit_framework.py --framework llm-foundry --device H100-SXM \\
        --attention-kernel flash-attention-1 --cases configs/validation/llm-foundry --write
    python3 tools/calibrate/fit_framework.py --framework deepspeed-megatron --device A100-SXM4-80GB \\
        --cases configs/validation --write
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
    ap.add_argument("--attention-kernel", help="the framework profile's fused attention kernel, fitted beside the "
                    "GEMM figure (left out: the GEMM figure alone)")
    ap.add_argument("--cases", required=True, help="a folder of that framework's published runs")
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    ap.add_argument("--tolerance", type=float, default=0.004)
    ap.add_argument("--write", action="store_true", help="write configs/calibration/DEVICE.FRAMEWORK.json")
    a = ap.parse_args()

    with open(os.path.join(a.configs, "devices", a.device + ".json")) as f:
        device_file = json.load(f)
    if "calibration_of" in device_file:  # the same silicon as another device: fit that one
        sys.exit(f"{a.device} takes the calibration of {device_file['calibration_of']} (calibration_of); "
                 f"fit that device, whose figures {a.device} then uses")
    shipped = device_file["calibration"]
    gemm_upper = shipped["gemm_efficiency"]
    # The device's common fused attention (FlashAttention-2) bounds every attention kernel's figure.
    attention_upper = shipped["attention_efficiency"] if a.attention_kernel else None
    runs = []
    for name in sorted(os.listdir(a.cases)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(a.cases, name)) as f:
            case = json.load(f)
        if "validation" in case and case["training"].get("framework") == a.framework and \
                case["platform"]["node_groups"][0]["gpu"] == a.device:
            runs.append(name)
    if len(runs) < 2:
        sys.exit(f"fewer than 2 published {a.framework} runs on {a.device} in {a.cases}: nothing to predict a run from")
    # Every third run by name is held out; with fewer than three, each is predicted by the others.
    leave_one_out = len(runs) < 3
    held = [] if leave_one_out else [n for i, n in enumerate(runs) if i % 3 == 2]
    fitted = [n for n in runs if n not in held]

    work = tempfile.mkdtemp(prefix="stepsim-fit-framework-")
    try:
        config_dir = config_copy(a.configs, work)
        calibration = os.path.join(config_dir, "calibration", f"{a.device}.{a.framework}.json")

        def folder(part, names):
            path = os.path.join(work, part)
            os.makedirs(path)
            for n in names:
                shutil.copy(os.path.join(a.cases, n), path)
            return path

        def figures(gemm, attention):
            out = {"device": a.device, "framework": a.framework, "gemm_efficiency": gemm}
            if a.attention_kernel:
                out["attention_efficiency_by_kernel"] = {a.attention_kernel: attention}
            return out

        def report(gemm, attention, cases_dir):
            with open(calibration, "w") as f:
                json.dump(figures(gemm, attention), f)
            return accuracy(a.stepsim, config_dir, cases_dir)

        def fit(cases_dir):
            """The (GEMM, attention) pair that minimises the MAPE over the runs in cases_dir."""
            def gemm_at(attention):
                return golden(lambda g: report(g, attention, cases_dir)["mape_pct"], 0.3, gemm_upper, a.tolerance)
            if not a.attention_kernel:
                return gemm_at(None), None
            best_gemm = {}

            def mape_at_attention(attention):
                # For each attention figure, the GEMM figure that fits best; the MAPE at that pair.
                best_gemm[attention] = gemm_at(attention)
                return report(best_gemm[attention], attention, cases_dir)["mape_pct"]

            attention = golden(mape_at_attention, 0.1, attention_upper, a.tolerance)
            return best_gemm.get(attention) or gemm_at(attention), attention

        fit_dir = folder("fit", fitted)
        gemm, attention = fit(fit_dir)
        fit_report = report(gemm, attention, fit_dir)
        predicted = []  # (case, error as a prediction)
        if leave_one_out:
            for n in runs:
                others = folder("without-" + n[:-5], [m for m in runs if m != n])
                alone = folder("only-" + n[:-5], [n])
                g, att = fit(others)
                predicted += [(c["case"], c["error_pct"]) for c in report(g, att, alone)["cases"]]
        else:
            predicted = [(c["case"], c["error_pct"]) for c in report(gemm, attention, folder("held", held))["cases"]]
        predicted_mape = sum(abs(e) for _, e in predicted) / len(predicted)
        how = "each predicted by the fit on the others" if leave_one_out else "every third run by name held out"
        attention_text = f", {a.attention_kernel} {attention} (upper bound {attention_upper})" if a.attention_kernel else ""
        print(f"{a.framework} on {a.device}: gemm_efficiency {gemm} (upper bound {gemm_upper}){attention_text}")
        print(f"  fitted on {len(fitted)} runs: MAPE {fit_report['mape_pct']:.1f}%; "
              f"as predictions ({how}): MAPE {predicted_mape:.1f}% over {len(predicted)}")
        for case, error in predicted:
            print(f"  predicted {case:<46} {error:+6.1f}%")
        if a.write:
            out = os.path.join(a.configs, "calibration", f"{a.device}.{a.framework}.json")
            written = figures(gemm, attention)
            written["fitted_on"] = [n[:-5] for n in fitted]
            written["held_out"] = [n[:-5] for n in held]
            what = (f"the GEMM throughput ({gemm} of the dense peak) and the {a.attention_kernel} speed "
                    f"({attention} of it)" if a.attention_kernel else f"the GEMM throughput ({gemm} of the dense peak)")
            bounds = (f"Upper bounds: the device file's {gemm_upper} and {attention_upper}." if a.attention_kernel
                      else f"Upper bound: the device file's {gemm_upper}.")
            written["source"] = (
                f"fitted by tools/calibrate/fit_framework.py on {len(fitted)} published {a.framework} runs on "
                f"{a.device} ({os.path.relpath(a.cases, ROOT)}, {how}): {what} those runs sustain; MAPE "
                f"{fit_report['mape_pct']:.1f}% over the fitted runs, {predicted_mape:.1f}% as predictions. {bounds}")
            write_calibration(out, written)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
