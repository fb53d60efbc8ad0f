#!/usr/bin/env python3
"""Fits configs/calibration/links.json's `nccl_group_launch.per_gpu`: what one host thread spends
per GPU when nccl-tests drives several GPUs from it (-g N, "nThread 1 nGpus N" in its header).

Such a thread enqueues each iteration's collective on its N GPUs one after another, so an
iteration takes at least N of these launches (tools/driver/collective_bench.hpp
nccl_tests_iteration_seconds). Where the launches are the longer part, the published time is N
launches and nothing of the network: the smallest rows of a case run with -g N, whose time
stepsim's collective on the GPUs (its base latency and steps, timed without the floor) is below.

This program takes the published cases with `gpus_per_thread` > 1 (configs/calibration/
nccl_tests_published.json), times each of their rows up to 4 KiB with `stepsim collective` (one
GPU per thread: no floor), and takes a case as host-bound where the median of those rows is
measured slower than the median of the model's: its launch is that measured median / N. The
figure is the geometric mean over the host-bound cases (every case weighs the same, however many
rows it printed). Rows printed as bus bandwidth alone are read back to a time where the bandwidth
has two significant digits (0.10 GB/s or more). With --write it sets the figure and its source in
links.json.

    python3 tools/calibrate/fit_group_launch.py --write
"""

import argparse
import json
import math
import os
import subprocess
import sys

from fitting import set_links_figures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = 4 * 2**10  # rows up to this size: the flat floor of nccl-tests' curves, before any bandwidth term


def bus_factor(op, n):
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def measured_us(case, row):
    if row.get("time_us"):
        return row["time_us"]
    busbw = row.get("busbw_GBps", 0)
    if busbw >= 0.1:
        return row["bytes"] * bus_factor(case["op"], case["gpus"]) / (busbw * 1e9) * 1e6
    return None


def median(values):
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def model_us(stepsim, case, sizes):
    cmd = [stepsim, "collective", "--preset", case["preset"], "--nodes", str(case["nodes"]), "--gpus",
           str(case["gpus"]), "--op", case["op"], "--algorithm", case.get("algorithm", "auto"),
           "--sizes", ",".join(f"{int(s)}B" for s in sizes), "--json", "-"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [r["time_us"] for r in json.loads(out)["rows"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=os.path.join(ROOT, "configs", "calibration", "nccl_tests_published.json"))
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    ap.add_argument("--write", action="store_true", help="set the figure in links.json")
    a = ap.parse_args()

    per_case = []
    for case in json.load(open(a.cases))["cases"]:
        g = case.get("gpus_per_thread", 1)
        if g <= 1:
            continue
        rows = [(r["bytes"], measured_us(case, r)) for r in case["rows"] if r["bytes"] <= TINY]
        rows = [(b, t) for b, t in rows if t is not None]
        if not rows:
            continue
        model = model_us(a.stepsim, case, [b for b, _ in rows])
        measured, alone = median([t for _, t in rows]), median(model)
        if measured > alone:
            per_case.append((case["name"], g, len(rows), measured / g))
            print(f"{case['name']}: -g {g}, {len(rows)} rows up to 4 KiB, median {measured:.2f} us against "
                  f"{alone:.2f} us for the collective alone: host-bound, {measured / g:.2f} us per GPU")
        else:
            print(f"{case['name']}: -g {g}, {len(rows)} rows up to 4 KiB, median {measured:.2f} us against "
                  f"{alone:.2f} us for the collective alone: not host-bound")
    if not per_case:
        sys.exit("no published case with gpus_per_thread > 1 is host-bound: nothing to fit")
    figure = math.exp(sum(math.log(m) for *_, m in per_case) / len(per_case))
    figure = round(figure, 1)
    names = ", ".join(f"{n} (-g {g}, median of {k} rows: {m:.2f} us per GPU)" for n, g, k, m in per_case)
    print(f"nccl_group_launch.per_gpu = {figure:g}us, the geometric mean over {len(per_case)} cases")
    if a.write:
        source = (f"fitted by tools/calibrate/fit_group_launch.py on the published nccl-tests cases run with -g N "
                  f"(configs/calibration/nccl_tests_published.json gpus_per_thread), from the cases whose rows up to "
                  f"4 KiB are measured slower than stepsim's collective alone (median against median), their "
                  f"time that of N launches: {names}; the geometric mean over them")
        set_links_figures(a.configs, ["nccl_group_launch"], {"per_gpu": f"{figure:g}us", "per_gpu_source": source})


if __name__ == "__main__":
    main()
