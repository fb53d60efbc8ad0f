#!/usr/bin/env python3
"""Runs `stepsim calibrate network` on each published nccl-tests case, as if the case's own log
were at hand: issue 17's check that a cluster's own log brings its case within 5 % (>= 64 MiB)
and 10 % (8 KiB-1 MiB).

Each case of configs/calibration/nccl_tests_published.json (of at most 256 GPUs) is written back
as the log nccl-tests prints (src/common.cu): the "# Using devices" lines, one host per node and
one device per GPU, and the table's out-of-place columns (size, count, type, redop, root, time,
algbw, busbw). A row published without its time gets the time its bus bandwidth implies (nccl-tests'
busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for the others). `stepsim calibrate network`
then fits the case's machine (its preset, with the fields its "set" gives) to that log alone, and
this program prints, per case, the fitted link and the MAPE of the time before and after, in a
Markdown table. --cases names another file of cases (configs/calibration/nccl_tests_heldout.json).

    python3 tools/calibrate/published_logs.py [--cases FILE] [--case NAME] [--keep DIR]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# nccl-tests' binary name per stepsim op, and its bus bandwidth factor over n ranks.
BINARY = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
          "all_to_all": "alltoall"}


def busbw_factor(op, n):
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def log_text(case):
    n, nodes = case["gpus"], case["nodes"]
    per = n // nodes
    f = busbw_factor(case["op"], n)
    g = case.get("gpus_per_thread", 1)  # nccl-tests -g: one process (one Pid) per g GPUs
    lines = [f"# nThread 1 nGpus {g} minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 "
             "validation: 1", "#", "# Using devices"]
    for r in range(n):
        lines.append(f"#  Rank {r:2d} Group  0 Pid {1000 + r // g:6d} on node-{r // per:06d} device {r % per:2d} "
                     f"[0x{r % per:02x}] GPU")
    lines += ["#",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
              "   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
              "  (GB/s)       "]
    redop = "sum" if case["op"] in ("all_reduce", "reduce_scatter") else "none"
    rows = 0
    for r in case["rows"]:
        b = r["bytes"]
        t = r.get("time_us")
        if b < 1:
            continue
        if t is None:
            if not r["busbw_GBps"] > 0:
                continue
            t = b / (r["busbw_GBps"] / f) / 1e3
        algbw = b / t / 1e3
        lines.append(f"{int(b):12d} {int(b // 4):13d}     float {redop:>7s}      -1 {t:8.2f} {algbw:7.2f} "
                     f"{algbw * f:7.2f}      0 {t:8.2f} {algbw:7.2f} {algbw * f:7.2f}      0")
        rows += 1
    lines.append("# Out of bounds values : 0 OK")
    return "\n".join(lines) + "\n", rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=os.path.join(ROOT, "configs", "calibration", "nccl_tests_published.json"))
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--case", help="only the cases whose name contains this")
    ap.add_argument("--keep", help="write the logs and calibration files here (default: a temporary folder)")
    a = ap.parse_args()

    with open(a.cases) as f:
        cases = json.load(f)["cases"]
    work = a.keep or tempfile.mkdtemp(prefix="stepsim-published-logs-")
    os.makedirs(work, exist_ok=True)
    pattern = re.compile(r"MAPE of the time, before -> after: (\S+) -> (\S+) % \(>= 64 MiB, (\d+) rows\), "
                         r"(\S+) -> (\S+) % \(8 KiB-1 MiB, (\d+) rows\)")
    print("| case | preset | fitted | >= 64 MiB before -> after | 8 KiB-1 MiB before -> after |")
    print("| --- | --- | --- | --- | --- |")
    failed = 0
    try:
        for case in cases:
            if a.case and a.case not in case["name"]:
                continue
            if case["gpus"] > 256:
                continue
            text, rows = log_text(case)
            if rows == 0:
                continue
            log = os.path.join(work, f"{BINARY[case['op']]}_perf.{case['name']}.log")
            with open(log, "w") as f:
                f.write(text)
            # The case's machine: its preset with the fields its "set" gives, as --compare builds it.
            command = [a.stepsim, "calibrate", "network", log, "--preset", case["preset"], "-o",
                       os.path.join(work, case["name"] + ".json")]
            for field, value in case.get("set", {}).items():
                command += ["--set", f"{field}={json.dumps(value)}"]
            out = subprocess.run(command, capture_output=True, text=True)
            m = pattern.search(out.stdout)
            if out.returncode != 0 or m is None:
                failed += 1
                print(f"| {case['name']} | {case['preset']} | failed: {(out.stderr or out.stdout).strip()[-200:]} | | |")
                continue
            fitted = re.search(r'"fitted": "([^"]+)"', open(os.path.join(work, case["name"] + ".json")).read())

            def cell(before, after, n):
                return "-" if n == "0" else f"{before} -> {after} % ({n})"

            print(f"| {case['name']} | {case['preset']} | {fitted.group(1) if fitted else '-'} | "
                  f"{cell(m.group(1), m.group(2), m.group(3))} | {cell(m.group(4), m.group(5), m.group(6))} |",
                  flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
