#!/usr/bin/env python3
"""Fits a framework's host time between training steps on one device, on that framework's published runs.

What a published run's throughput measures is the train loop's wall time per iteration (Megatron's
'interval-time' timer, NeMo's train_step_timing), not the GPUs' busy time alone. Between one step's
weight update, which synchronises the host (the gradient norm's .item()), and the next step's
first kernel, the host runs the loop's Python: the optimizer's host side, logging, the data
iterator, the garbage collector (Megatron's --manual-gc exists to line these pauses up across
ranks). Every GPU waits for it, and the slowest host holds back the others at the next
collective. It weighs on short steps (a small model, few micro-batches) and vanishes on long
ones. No source gives it as a number, so it is fitted here: the one figure `step_host_overhead`
(seconds per step) that minimises `stepsim accuracy`'s mean absolute percentage error over the
framework's published runs on the device, found in every folder given, every third run by name
held out to show the fit's error as a prediction. Everything else stays as shipped.

With --write it sets step_host_overhead in configs/calibration/DEVICE.FRAMEWORK.json (the file a
scenario of that framework on that device lays over the device's calibration, models/device.cpp),
with the runs it was fitted on and held out from, which `stepsim accuracy --leave-out` refits.
Fit the GEMM figures again afterwards (fit_runs.py), then this one, until neither moves.

    python3 tools/calibrate/fit_step_overhead.py --framework megatron-core --device H100-SXM \\
        --cases configs/validation configs/validation/nemo --write
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from fitting import accuracy, config_copy, golden, write_calibration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The search's upper bound: a host time per step of a second would be a stalled job, not a loop.
UPPER_S = 1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--cases", required=True, nargs="+", help="folders of published runs")
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    ap.add_argument("--tolerance", type=float, default=0.002, help="seconds")
    ap.add_argument("--write", action="store_true", help="set step_host_overhead in configs/calibration/DEVICE.FRAMEWORK.json")
    a = ap.parse_args()

    runs = {}  # file name -> path
    for folder in a.cases:
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not name.endswith(".json") or not os.path.isfile(path):
                continue
            with open(path) as f:
                case = json.load(f)
            if "validation" not in case or case.get("training", {}).get("framework") != a.framework:
                continue
            if any(g.get("gpu") != a.device for g in case["platform"]["node_groups"]):
                continue
            if name in runs:
                sys.exit(f"{name} is in two of the folders given: {os.path.dirname(runs[name])} and {folder}")
            runs[name] = path
    names = sorted(runs)
    if len(names) < 3:
        sys.exit(f"fewer than 3 published {a.framework} runs on {a.device} in {', '.join(a.cases)}: "
                 "too few to fit one and hold a third out")
    held = [n for i, n in enumerate(names) if i % 3 == 2]
    fitted = [n for n in names if n not in held]

    work = tempfile.mkdtemp(prefix="stepsim-fit-step-overhead-")
    try:
        config_dir = config_copy(a.configs, work)
        calibration = os.path.join(config_dir, "calibration", f"{a.device}.{a.framework}.json")
        shipped = {}
        if os.path.exists(calibration):
            with open(calibration) as f:
                shipped = json.load(f)

        def folder(part, chosen):
            path = os.path.join(work, part)
            os.makedirs(path)
            for n in chosen:
                shutil.copy(runs[n], path)
            return path

        def report(seconds, cases_dir):
            figures = dict(shipped, device=a.device, framework=a.framework, step_host_overhead=f"{seconds * 1e3:.3f}ms")
            with open(calibration, "w") as f:
                json.dump(figures, f)
            return accuracy(a.stepsim, config_dir, cases_dir)

        fit_dir, held_dir = folder("fit", fitted), folder("held", held)
        before = report(0.0, fit_dir)["mape_pct"]
        seconds = golden(lambda s: report(s, fit_dir)["mape_pct"], 0.0, UPPER_S, a.tolerance)
        fit_mape = report(seconds, fit_dir)["mape_pct"]
        held_before = report(0.0, held_dir)
        held_after = report(seconds, held_dir)
        print(f"{a.framework} on {a.device}: step_host_overhead {seconds * 1e3:.0f} ms")
        print(f"  fitted on {len(fitted)} runs: MAPE {before:.1f}% without it, {fit_mape:.1f}% with it")
        print(f"  held out ({len(held)} runs, every third by name): MAPE {held_before['mape_pct']:.1f}% without it, "
              f"{held_after['mape_pct']:.1f}% with it")
        errors_before = {c["case"]: c["error_pct"] for c in held_before["cases"]}
        for c in held_after["cases"]:
            print(f"  predicted {c['case']:<56} {errors_before[c['case']]:+6.1f}% -> {c['error_pct']:+6.1f}%")
        if a.write:
            out = os.path.join(a.configs, "calibration", f"{a.device}.{a.framework}.json")
            written = {}
            if os.path.exists(out):
                with open(out) as f:
                    written = json.load(f)
            written.setdefault("device", a.device)
            written.setdefault("framework", a.framework)
            written["step_host_overhead"] = f"{seconds * 1e3:.0f}ms"
            written["step_host_overhead_fitted_on"] = [n[:-5] for n in fitted]
            written["step_host_overhead_held_out"] = [n[:-5] for n in held]
            folders = ", ".join(os.path.relpath(os.path.abspath(c), ROOT) for c in a.cases)
            written["step_host_overhead_source"] = (
                f"fitted by tools/calibrate/fit_step_overhead.py on {len(fitted)} published {a.framework} runs on "
                f"{a.device} ({folders}; every third run by name held out): the host time per step outside the "
                f"micro-batches that those runs' measured iteration times hold, {seconds * 1e3:.0f} ms; MAPE over the "
                f"fitted runs {before:.1f}% without it, {fit_mape:.1f}% with it; over the {len(held)} held-out runs "
                f"{held_before['mape_pct']:.1f}% without it, {held_after['mape_pct']:.1f}% with it.")
            write_calibration(out, written)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
