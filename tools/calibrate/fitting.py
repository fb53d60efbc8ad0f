"""What the programs that fit figures on published runs share (fit_runs.py, fit_framework.py,
fit_link.py, fit_latency.py): a copy of the configuration folder whose calibration/ they may
rewrite, `stepsim accuracy` over a folder of cases with that copy, the golden-section search of
one figure, writing a calibration file, `stepsim collective --compare` over the published
nccl-tests cases of some presets (PublishedCompare) and setting figures in links.json."""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile


def config_copy(configs, work):
    """A configuration folder under `work`: every entry of `configs` linked as shipped but
    calibration/, which is copied so that a fit can rewrite its files."""
    config_dir = os.path.join(work, "configs")
    os.makedirs(config_dir)
    for entry in os.listdir(configs):
        if entry != "calibration":
            os.symlink(os.path.join(configs, entry), os.path.join(config_dir, entry))
    shutil.copytree(os.path.join(configs, "calibration"), os.path.join(config_dir, "calibration"))
    return config_dir


def accuracy(stepsim, config_dir, cases_dir):
    """`stepsim accuracy --json` over `cases_dir` with the configuration folder `config_dir`."""
    out = os.path.join(cases_dir, "..", "accuracy.json")
    env = dict(os.environ, STEPSIM_CONFIG_DIR=config_dir)
    subprocess.run([stepsim, "accuracy", cases_dir, "--quiet", "--json", out], check=True, env=env)
    with open(out) as f:
        return json.load(f)


def golden(f, lo, hi, tolerance):
    """The x in [lo, hi] that minimises a unimodal f, to within `tolerance`, rounded to three
    decimals (the golden-section search stepsim accuracy --leave-out runs too)."""
    g = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = f(x1), f(x2)
    while hi - lo > tolerance:
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = f(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = f(x2)
    return round((lo + hi) / 2, 3)


def write_calibration(path, figures):
    with open(path, "w") as f:
        json.dump(figures, f, indent=2)
        f.write("\n")
    print(f"wrote {path}")


def set_links_figures(configs, entry, figures):
    """Sets `figures` (a dict) in the entry of configs/calibration/links.json reached by the keys
    `entry` (["nvlink"], ["nic_kinds", "efa"]), keeping the file's layout."""
    path = os.path.join(configs, "calibration", "links.json")
    with open(path) as f:
        links = json.load(f)
    target = links
    for key in entry:
        target = target[key]
    target.update(figures)
    with open(path, "w") as f:
        json.dump(links, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {path}")


class PublishedCompare:
    """`stepsim collective --compare` over the published nccl-tests cases (`cases`, a file) run on
    `presets` (and named with one of the substrings `named`, where given) and having rows whose
    size `sized` accepts (`rows` of them), with a copy of the
    configuration folder in a temporary folder whose links.json (`links`, a dict) a fit changes
    between runs. A context manager: the folder is removed on leaving it. Exits, naming the rows,
    where no case has one."""

    def __init__(self, stepsim, configs, cases, presets, sized, rows_named, named=()):
        with open(cases) as f:
            published = json.load(f)
        self.chosen = [c for c in published["cases"]
                       if c["preset"] in presets and (not named or any(n in c["name"] for n in named))]
        self.names = ", ".join(c["name"] for c in self.chosen)
        self.rows = sum(1 for c in self.chosen for r in c["rows"] if sized(r["bytes"]))
        if self.rows == 0:
            sys.exit(f"no published case on presets {', '.join(presets)} has a row {rows_named} in {cases}")
        self.stepsim = stepsim
        self.work = tempfile.mkdtemp(prefix="stepsim-fit-")
        self.config_dir = config_copy(configs, self.work)
        self.links_file = os.path.join(self.config_dir, "calibration", "links.json")
        with open(self.links_file) as f:
            self.links = json.load(f)
        self.cases_file = os.path.join(self.work, "cases.json")
        with open(self.cases_file, "w") as f:
            json.dump(dict(published, cases=self.chosen), f)
        self.out = os.path.join(self.work, "compare.json")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.work)
        return False

    def run(self):
        """The comparison's JSON with the present `links`."""
        with open(self.links_file, "w") as f:
            json.dump(self.links, f)
        subprocess.run([self.stepsim, "collective", "--compare", self.cases_file, "--json", self.out, "-j", "2"],
                       check=True, env=dict(os.environ, STEPSIM_CONFIG_DIR=self.config_dir), stdout=subprocess.DEVNULL)
        with open(self.out) as f:
            return json.load(f)
