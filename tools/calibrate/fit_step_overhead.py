#!/usr/bin/env python3
"""Fits a framework's host time on one device, on that framework's published runs: between training
steps (--figure step_host_overhead, the default) or per kernel launch (--figure host_launch_overhead).

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

With --write it sets the figure in configs/calibration/DEVICE.FRAMEWORK.json (the file a
scenario of that framework on that device lays over the device's calibration, models/device.cpp),
with the runs it was fitted on and held out from, which `stepsim accuracy --leave-out` refits;
not where it predicts the held-out runs worse than none does.
Fit the GEMM figures again afterwards (fit_runs.py), then this one, until neither moves.

    python3 tools/calibrate/fit_step_overhead.py --framework megatron-core --device H100-SXM \\
        --cases configs/validation configs/validation/nemo --write

--figure host_launch_overhead fits, the same way, the host's time per kernel launch instead
(seconds per launch of stepsim's kernels): the framework's Python module code, PyTorch's
dispatcher and the launch call, which the host spends on every kernel it issues. The host runs
ahead of the GPU, so this shows only where it falls behind: small layers, or where the host waits
for the GPU (after each pipeline transfer under Megatron, in each MoE layer's token dispatch:
sim/engine/compute.cpp, wait_for_host). Published figures of it vary by an order of magnitude with
the framework and its version (README, Host launches), and a kernel of stepsim's lowering is not
one framework call, so it is fitted per framework and device here, on runs where it binds:

    python3 tools/calibrate/fit_step_overhead.py --figure host_launch_overhead --framework megatron-core \\
        --device B200 --cases configs/validation/megatron-bridge configs/validation/megatron-bridge-moe --write
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from fitting import accuracy, config_copy, golden, write_calibration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Each figure's search unit (seconds; the search rounds to three decimals of it), its range and
# tolerance in that unit, the unit it is written in (name, per second), and what it is, as
# `stepsim accuracy --leave-out` refits it (tools/stepsim/calibration_override.hpp,
# kHostTimeRanges). A host time per step of a second would be a stalled job, not a loop; a
# millisecond per launch is seven times the slowest published module call (140 us, README: Host
# launches).
FIGURES = {
    "step_host_overhead": dict(search_unit=1.0, upper=1.0, tolerance=0.002, unit=("ms", 1e3),
                               what="the host time per step outside the micro-batches"),
    "host_launch_overhead": dict(search_unit=1e-6, upper=1000.0, tolerance=1.0, unit=("us", 1e6),
                                 what="the host time per kernel launch"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--cases", required=True, nargs="+", help="folders of published runs")
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    ap.add_argument("--figure", choices=sorted(FIGURES), default="step_host_overhead")
    ap.add_argument("--tolerance", type=float, help="in the figure's search unit, s or us (default: the figure's own)")
    ap.add_argument("--write", action="store_true", help="set the figure in configs/calibration/DEVICE.FRAMEWORK.json")
    a = ap.parse_args()
    figure = FIGURES[a.figure]
    tolerance = a.tolerance if a.tolerance is not None else figure["tolerance"]
    unit, scale = figure["unit"]

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

    work = tempfile.mkdtemp(prefix="stepsim-fit-host-time-")
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
            figures = dict(shipped, device=a.device, framework=a.framework)
            figures[a.figure] = f"{seconds * scale:.3f}{unit}"
            with open(calibration, "w") as f:
                json.dump(figures, f)
            return accuracy(a.stepsim, config_dir, cases_dir)

        fit_dir, held_dir = folder("fit", fitted), folder("held", held)
        before = report(0.0, fit_dir)["mape_pct"]
        step = figure["search_unit"]
        seconds = golden(lambda x: report(x * step, fit_dir)["mape_pct"], 0.0, figure["upper"], tolerance) * step
        fit_mape = report(seconds, fit_dir)["mape_pct"]
        held_before = report(0.0, held_dir)
        held_after = report(seconds, held_dir)
        print(f"{a.framework} on {a.device}: {a.figure} {seconds * scale:.0f} {unit}")
        print(f"  fitted on {len(fitted)} runs: MAPE {before:.1f}% without it, {fit_mape:.1f}% with it")
        print(f"  held out ({len(held)} runs, every third by name): MAPE {held_before['mape_pct']:.1f}% without it, "
              f"{held_after['mape_pct']:.1f}% with it")
        errors_before = {c["case"]: c["error_pct"] for c in held_before["cases"]}
        for c in held_after["cases"]:
            print(f"  predicted {c['case']:<56} {errors_before[c['case']]:+6.1f}% -> {c['error_pct']:+6.1f}%")
        # A figure that predicts the held-out runs worse than none is not a property of the
        # framework on this device but of the runs it was fitted on: it is not written.
        if a.write and held_after["mape_pct"] > held_before["mape_pct"]:
            print(f"  not written: the held-out runs are predicted worse with it ({held_before['mape_pct']:.1f}% -> "
                  f"{held_after['mape_pct']:.1f}%)")
        elif a.write:
            out = os.path.join(a.configs, "calibration", f"{a.device}.{a.framework}.json")
            written = {}
            if os.path.exists(out):
                with open(out) as f:
                    written = json.load(f)
            written.setdefault("device", a.device)
            written.setdefault("framework", a.framework)
            written[a.figure] = f"{seconds * scale:.0f}{unit}"
            written[f"{a.figure}_fitted_on"] = [n[:-5] for n in fitted]
            written[f"{a.figure}_held_out"] = [n[:-5] for n in held]
            folders = ", ".join(os.path.relpath(os.path.abspath(c), ROOT) for c in a.cases)
            written[f"{a.figure}_source"] = (
                f"fitted by tools/calibrate/fit_step_overhead.py --figure {a.figure} on {len(fitted)} published "
                f"{a.framework} runs on {a.device} ({folders}; every third run by name held out): {figure['what']} "
                f"that those runs' measured iteration times hold, {seconds * scale:.0f} {unit}; MAPE over the "
                f"fitted runs {before:.1f}% without it, {fit_mape:.1f}% with it; over the {len(held)} held-out runs "
                f"{held_before['mape_pct']:.1f}% without it, {held_after['mape_pct']:.1f}% with it.")
            write_calibration(out, written)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
