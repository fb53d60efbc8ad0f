#!/usr/bin/env python3
"""Fits what one link kind achieves (its `efficiency` in configs/calibration/links.json) on the
published nccl-tests cases whose machine has that link kind.

The rows of 64 MiB and more are bandwidth-bound: there a collective's time is its bytes over what
its links achieve, so they set the link's efficiency and nothing else. This program runs
`stepsim collective --compare` on the cases of one preset (configs/calibration/
nccl_tests_published.json by default) and searches, golden section, the efficiency that minimises
their bus-bandwidth MAPE over those rows. Everything else stays as shipped. With --write it sets
the entry's efficiency and source in links.json.

--field names another figure of the entry to fit the same way, searched in (0.05, 1] (--lowest
moves the lower end): `host_staged` of `pcie`, the fraction of the PCIe link's achieved bandwidth
that transfers staged through host memory reach (node type pcie_no_p2p); `switch_share` of
`protocols.nvls_tree` (a dotted --link names an entry inside another), the fraction of the
NVSwitch's reduction rate NVLS-tree's switch part reaches across nodes, searched from 0.5 (below
it `auto` leaves NVLS-tree and the rows' error is no longer unimodal).

    python3 tools/calibrate/fit_link.py --link nvlink --preset dgx1-v100 --write
    python3 tools/calibrate/fit_link.py --link pcie --field host_staged --preset pcie-2080ti-no-p2p --write
    python3 tools/calibrate/fit_link.py --link protocols.nvls_tree --field switch_share --preset dgx-h100 --lowest 0.5 --write
"""

import argparse
import json
import os
import sys

from fitting import PublishedCompare, golden, set_links_figures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--link", required=True, help="the links.json entry: nvswitch, nvlink, pcie or nic")
    ap.add_argument("--preset", required=True, help="fit on the published cases run on this platform preset")
    ap.add_argument("--cases", default=os.path.join(ROOT, "configs", "calibration", "nccl_tests_published.json"))
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    ap.add_argument("--field", default="efficiency", help="the entry's figure to fit: efficiency (default), or "
                    "host_staged for pcie")
    ap.add_argument("--lowest", type=float, help="the search's lower end (default 0.5 for efficiency, 0.05 for the "
                    "others); where the figure falls far enough for `auto` to change algorithms, the rows' error is "
                    "no longer unimodal in it")
    ap.add_argument("--tolerance", type=float, default=0.002)
    ap.add_argument("--write", action="store_true", help="set the entry's efficiency in links.json")
    a = ap.parse_args()

    with PublishedCompare(a.stepsim, a.configs, a.cases, [a.preset], lambda size: size >= 64 * 2**20,
                          "of 64 MiB or more") as compare:
        links, rows, names = compare.links, compare.rows, compare.names
        path = a.link.split(".")
        entry = links
        for key in path:
            if not isinstance(entry, dict) or key not in entry:
                sys.exit(f"links.json has no entry \"{a.link}\"")
            entry = entry[key]
        if a.field not in entry:
            sys.exit(f"links.json's \"{a.link}\" has no figure \"{a.field}\"")
        source_key = "source" if a.field == "efficiency" else a.field + "_source"

        def large_mape(efficiency):
            entry[a.field] = efficiency
            return 100 * compare.run()["large"]["mape"]

        shipped = entry[a.field]
        before = large_mape(shipped)
        efficiency = golden(large_mape, a.lowest or (0.5 if a.field == "efficiency" else 0.05), 1.0, a.tolerance)
        after = large_mape(efficiency)
        print(f"{a.link} on {a.preset}: {a.field} {shipped} -> {efficiency}; busbw MAPE over {rows} rows of "
              f"64 MiB and more {before:.1f}% -> {after:.1f}% ({names})")
        if a.write:
            set_links_figures(a.configs, path, {
                a.field: efficiency,
                source_key: f"fitted by tools/calibrate/fit_link.py on the {rows} rows of 64 MiB and more of the published "
                f"nccl-tests cases run on preset {a.preset} (configs/calibration/nccl_tests_published.json: "
                f"{names}): busbw MAPE {after:.1f}%, against {before:.1f}% with the figure before the fit ({shipped})"})


if __name__ == "__main__":
    main()
