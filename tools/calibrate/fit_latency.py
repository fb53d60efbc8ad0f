#!/usr/bin/env python3
"""Fits one latency figure of configs/calibration/links.json, named by its path in the file, on the
published nccl-tests cases run on the given presets: what one step of a collective costs on a kind
of NIC (`nic_kinds.efa.step_latency`), or what one hop of NVLS-tree's trees between nodes costs
(`protocols.nvls_tree.step_between_nodes`).

Rows of 8 KiB to 1 MiB are latency-bound: there a collective's time is its steps' latencies more
than its bytes over the links. This program runs `stepsim collective --compare` on the cases of
the presets (configs/calibration/nccl_tests_published.json by default) and searches, by bisection,
the latency whose mean log error of the time over those rows is zero (as many times predicted
too short as too long, by ratio). A longer step never makes a collective faster, so the error
grows with the latency and the root is unique; where the rows are predicted too slow even at the
smallest latency searched (--lo), the fit is that bound and says so. Everything else stays as
shipped. With --write it
sets the figure and its source (the key beside it, named as the figure with `_source` after it)
in links.json.

    python3 tools/calibrate/fit_latency.py --figure nic_kinds.efa.step_latency --preset aws-p4de --write
    python3 tools/calibrate/fit_latency.py --figure nic_kinds.efa-v2.step_latency --preset aws-p5 --write
    python3 tools/calibrate/fit_latency.py --figure protocols.nvls_tree.step_between_nodes --preset dgx-h100-superpod --write
    python3 tools/calibrate/fit_latency.py --figure nvswitch.step_latency_by_gpu.H100-SXM --same-for H200-SXM \
        --same-for H800-SXM --preset dgx-h100 --case nvidia_dgxc_dgxh100_1node --lo 0 --hi 5 --write
"""

import argparse
import json
import math
import os
import sys

from fitting import PublishedCompare, set_links_figures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = (8 * 2**10, 2**20)  # the family of sizes `stepsim collective --compare` calls small


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--figure", required=True,
                    help="the latency's path in links.json, keys joined by dots: nic_kinds.efa.step_latency, ...")
    ap.add_argument("--preset", action="append", required=True,
                    help="fit on the published cases run on this platform preset (repeatable)")
    ap.add_argument("--same-for", action="append", default=[], metavar="KEY",
                    help="a sibling of the figure that takes the same value, fitted with it (repeatable): another "
                         "GPU of the same NVLink generation in nvswitch.step_latency_by_gpu")
    ap.add_argument("--case", action="append", default=[],
                    help="of the presets' cases, only those whose name contains this (repeatable; default all)")
    ap.add_argument("--cases", default=os.path.join(ROOT, "configs", "calibration", "nccl_tests_published.json"))
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    ap.add_argument("--lo", type=float, default=0.5, help="smallest latency searched, microseconds")
    ap.add_argument("--hi", type=float, default=500.0, help="largest latency searched, microseconds")
    ap.add_argument("--write", action="store_true", help="set the figure in links.json")
    a = ap.parse_args()
    *entry, leaf = a.figure.split(".")

    with PublishedCompare(a.stepsim, a.configs, a.cases, a.preset, lambda size: SMALL[0] <= size <= SMALL[1],
                          "of 8 KiB-1 MiB", a.case) as compare:
        links, rows, names = compare.links, compare.rows, compare.names
        parent = links
        for key in entry:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict) or not isinstance(parent.get(leaf), str):
            sys.exit(f"links.json has no latency at {a.figure}")

        def run(latency_us):
            """Mean log error of the time over the small rows, and their busbw MAPE (percent)."""
            for key in [leaf] + a.same_for:
                parent[key] = f"{latency_us:g}us"
            result = compare.run()
            logs = [math.log(r["measured_busbw_GBps"] / r["predicted_busbw_GBps"])  # time = bytes / busbw
                    for c in result["cases"] for r in c["rows"] if r["family"] == "small"]
            return sum(logs) / len(logs), 100 * result["small"]["mape"]

        shipped = parent[leaf]
        before_log, before = run(float(shipped.removesuffix("us")))
        lo, hi = a.lo, a.hi
        bound = ""
        if run(hi)[0] < 0:
            sys.exit(f"the rows are predicted too fast even with {hi} us")
        if run(lo)[0] > 0:  # too slow even at the smallest latency allowed: the fit is that bound
            hi, bound = lo, f" (at the lower bound searched: even with {lo:g} us the rows are predicted too slow)"
        while hi - lo > 0.1:  # the figure is written to a tenth of a microsecond
            mid = (lo + hi) / 2
            if run(mid)[0] < 0:
                lo = mid
            else:
                hi = mid
        latency = round((lo + hi) / 2, 1)
        after_log, after = run(latency)
        print(f"{a.figure} on {', '.join(a.preset)}: {shipped} -> {latency:g}us{bound}; over {rows} rows of 8 KiB-1 MiB "
              f"mean log error of the time {before_log:+.3f} -> {after_log:+.3f}, busbw MAPE {before:.1f}% -> "
              f"{after:.1f}% ({names})")
        if a.write:
            source = (f"fitted by tools/calibrate/fit_latency.py (mean log error of the time zero{bound}) on the {rows} "
                      f"rows of 8 KiB-1 MiB of the published nccl-tests cases run on presets {', '.join(a.preset)} "
                      f"(configs/calibration/nccl_tests_published.json: {names}): busbw MAPE {after:.1f}%, against "
                      f"{before:.1f}% with the figure before the fit ({shipped})")
            figures = {leaf: f"{latency:g}us", f"{leaf}_source": source}
            for key in a.same_for:
                figures[key] = f"{latency:g}us"
                figures[f"{key}_source"] = f"{leaf}'s figure, fitted with it (--same-for): {source}"
            set_links_figures(a.configs, entry, figures)


if __name__ == "__main__":
    main()
