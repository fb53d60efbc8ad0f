#!/usr/bin/env python3
"""Fits what one step of a collective costs on one kind of NIC (`nic_kinds.KIND.step_latency` in
configs/calibration/links.json) on the published nccl-tests cases run on the given presets.

Rows of 8 KiB to 1 MiB are latency-bound: there a collective's time is its steps' latencies more
than its bytes over the links. This program runs `stepsim collective --compare` on the cases of
the presets (configs/calibration/nccl_tests_published.json by default) and searches, by bisection,
the step latency whose mean log error of the time over those rows is zero (as many times predicted
too short as too long, by ratio). A longer step never makes a collective faster, so the error
grows with the latency and the root is unique. Everything else stays as shipped. With --write it
sets the figure and its source (`step_latency_source`) in links.json.

    python3 tools/calibrate/fit_nic_latency.py --kind efa --preset aws-p4de --preset aws-p5 --write
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
    ap.add_argument("--kind", required=True, help="the nic_kinds entry of links.json: efa, tcpx, tcpxo, ...")
    ap.add_argument("--preset", action="append", required=True,
                    help="fit on the published cases run on this platform preset (repeatable)")
    ap.add_argument("--cases", default=os.path.join(ROOT, "configs", "calibration", "nccl_tests_published.json"))
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    ap.add_argument("--lo", type=float, default=0.5, help="smallest step latency searched, microseconds")
    ap.add_argument("--hi", type=float, default=500.0, help="largest step latency searched, microseconds")
    ap.add_argument("--write", action="store_true", help="set the figure in links.json")
    a = ap.parse_args()

    with PublishedCompare(a.stepsim, a.configs, a.cases, a.preset, lambda size: SMALL[0] <= size <= SMALL[1],
                          "of 8 KiB-1 MiB") as compare:
        links, rows, names = compare.links, compare.rows, compare.names
        if a.kind not in links.get("nic_kinds", {}):
            sys.exit(f"links.json has no nic_kinds entry \"{a.kind}\"")

        def run(latency_us):
            """Mean log error of the time over the small rows, and their busbw MAPE (percent)."""
            links["nic_kinds"][a.kind]["step_latency"] = f"{latency_us:g}us"
            result = compare.run()
            logs = [math.log(r["measured_busbw_GBps"] / r["predicted_busbw_GBps"])  # time = bytes / busbw
                    for c in result["cases"] for r in c["rows"] if r["family"] == "small"]
            return sum(logs) / len(logs), 100 * result["small"]["mape"]

        shipped = json.load(open(os.path.join(a.configs, "calibration", "links.json")))["nic_kinds"][a.kind]["step_latency"]
        before_log, before = run(float(shipped.removesuffix("us")))
        lo, hi = a.lo, a.hi
        if run(lo)[0] > 0 or run(hi)[0] < 0:
            sys.exit(f"the mean log error does not change sign between {lo} and {hi} us")
        while hi - lo > 0.5:  # half a microsecond: the figure is written in whole microseconds
            mid = (lo + hi) / 2
            if run(mid)[0] < 0:
                lo = mid
            else:
                hi = mid
        latency = round((lo + hi) / 2)
        after_log, after = run(latency)
        print(f"{a.kind} on {', '.join(a.preset)}: step_latency {shipped} -> {latency}us; over {rows} rows of "
              f"8 KiB-1 MiB mean log error of the time {before_log:+.3f} -> {after_log:+.3f}, busbw MAPE "
              f"{before:.1f}% -> {after:.1f}% ({names})")
        if a.write:
            set_links_figures(a.configs, ["nic_kinds", a.kind], {
                "step_latency": f"{latency}us",
                "step_latency_source": f"fitted by tools/calibrate/fit_nic_latency.py (mean log error of the time zero) on "
                f"the {rows} rows of 8 KiB-1 MiB of the published nccl-tests cases run on presets {', '.join(a.preset)} "
                f"(configs/calibration/nccl_tests_published.json: {names}): busbw MAPE {after:.1f}%, against "
                f"{before:.1f}% with the figure before the fit ({shipped})"})


if __name__ == "__main__":
    main()
