#!/usr/bin/env python3
"""Fits a device's sustained GEMM efficiency to the published training runs on that device.

The GEMM throughput a training run sustains (power-limited clocks of a full node, the framework's
library versions) is below the best shape of a kernel benchmark, and no kernel benchmark measures
it. Like the A100 figure (configs/calibration/A100-SXM4-80GB.json), it is fitted on the published
runs in configs/validation/ that ran on the device: this program searches the one figure
`gemm_efficiency` that minimises `stepsim accuracy`'s mean absolute percentage error over those
runs, everything else as shipped. The device file's own figure (the best shape of a benchmark) is
the upper bound of the search.

--half-k K (repeatable) also fits `gemm_half_k`, the K at which a GEMM tile reaches half its
large-shape efficiency (models/compute/kernel_model.cpp: the small-GEMM effect), over the values
given: for each, the efficiency is searched as above, and the pair with the lowest MAPE is kept.
Runs of one device with small and large hidden sizes tell the two figures apart.

--dtype-ratios-from FILE takes the other precisions from a kernel fit of the same silicon
(`stepsim calibrate fit`, e.g. configs/calibration/H200-SXM.json for the H100: the same GH100 SMs
and clocks): each precision's efficiency is the fitted one times that file's ratio of the
precision's figure to the runs' precision's (fp8 runs below bf16 on Hopper, fp32 on CUDA cores
near its own peak). Without it a precision the runs did not use takes the fitted figure.

--precision P fits instead the figure of one precision, `gemm_efficiency_by_dtype[P]`, on the
device's published runs in that precision (--cases, e.g. configs/validation/nemo for the FP8 runs
of NeMo's table on H100): an FP8 training run keeps its Tensor Cores busy for a shorter time per
GEMM than a bf16 one, so the bf16 runs' figure times a kernel benchmark's ratio is not what FP8
runs sustain. The device's other figures stay as shipped; the file records the runs under
`fitted_on_by_dtype` (what `stepsim accuracy DIR --leave-out` refits) and a later fit of the
common figure keeps the precision's own.

--attention-kernel K, with --precision, also fits the speed of the fused attention kernel K those
runs call (`attention_efficiency_by_kernel[K]`, e.g. cudnn for Megatron-Core's Transformer Engine on
Hopper) beside the precision's GEMM figure: for each attention figure tried (a golden-section search
bounded by the device file's figure for K, a kernel benchmark's), the GEMM figure that fits best, and
the pair with the lowest MAPE is kept. Runs over many sequence lengths tell the two apart: short
sequences are mostly GEMMs, long ones mostly attention (NeMo's table of Llama 2 7B from 8K to 1M
tokens beside its 2K-8K pre-training rows). Transformer Engine runs attention in bf16 in an FP8 run,
so the figure is a fraction of the bf16 peak.

--leave-out SOURCE (repeatable; part of a case's id or citation, as `stepsim accuracy --leave-out`
takes it) fits without that source's cases and then predicts them with the figure so fitted: the
leave-one-source-out check of issue 16.

    python3 tools/calibrate/fit_runs.py --device H100-SXM
    python3 tools/calibrate/fit_runs.py --device H100-SXM --leave-out megatron_core
    python3 tools/calibrate/fit_runs.py --device H100-SXM --half-k 384 --half-k 768 --half-k 1536
    python3 tools/calibrate/fit_runs.py --device H100-SXM --dtype-ratios-from configs/calibration/H200-SXM.json --write
    python3 tools/calibrate/fit_runs.py --device H100-SXM --precision fp8 --attention-kernel cudnn \\
        --cases configs/validation/nemo --write
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from fitting import accuracy, config_copy, golden, write_calibration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def case_device(case):
    return case["platform"]["node_groups"][0]["gpu"]


def from_source(path, case, source):
    name = source.lower()
    citation = case["validation"]["source"]["citation"].lower()
    return name in os.path.basename(path).lower() or name in citation


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", required=True)
    ap.add_argument("--leave-out", action="append", default=[])
    ap.add_argument("--half-k", action="append", type=float, default=[])
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "release", "stepsim"))
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    ap.add_argument("--write", action="store_true", help="write configs/calibration/DEVICE.json")
    ap.add_argument("--tolerance", type=float, default=0.002)
    ap.add_argument("--dtype-ratios-from", help="a kernel fit of the same silicon (configs/calibration/DEVICE.json)")
    ap.add_argument("--precision", help="fit this precision's figure (gemm_efficiency_by_dtype) on the runs in it")
    ap.add_argument("--cases", help="the folder of published runs (default CONFIGS/validation)")
    ap.add_argument("--attention-kernel", help="with --precision: also fit this fused attention kernel's figure")
    a = ap.parse_args()
    if a.attention_kernel and not a.precision:
        sys.exit("--attention-kernel fits the kernel beside one precision's GEMM figure: give --precision")
    if a.precision and (a.dtype_ratios_from or a.half_k):
        sys.exit("--precision fits one precision's figure alone: without --dtype-ratios-from and --half-k")
    sibling = None
    if a.dtype_ratios_from:
        with open(a.dtype_ratios_from) as f:
            sibling = json.load(f)
        if not isinstance(sibling.get("gemm_efficiency_by_dtype"), dict):
            sys.exit(f"{a.dtype_ratios_from}: no gemm_efficiency_by_dtype (expected a `stepsim calibrate fit` file)")

    with open(os.path.join(a.configs, "devices", a.device + ".json")) as f:
        device_file = json.load(f)
    if "calibration_of" in device_file:  # the same silicon as another device: fit that one
        sys.exit(f"{a.device} takes the calibration of {device_file['calibration_of']} (calibration_of); "
                 f"fit that device, whose figures {a.device} then uses")
    shipped = device_file["calibration"]
    upper = shipped["gemm_efficiency"]
    # The kernel's figure in the device file (a kernel benchmark's) bounds its search.
    attention_upper = (shipped.get("attention_efficiency_by_kernel", {}).get(a.attention_kernel,
                                                                             shipped["attention_efficiency"])
                       if a.attention_kernel else None)
    half_ks = a.half_k or [None]  # None: the device file's gemm_half_k

    work = tempfile.mkdtemp(prefix="stepsim-fit-")
    try:
        config_dir = config_copy(a.configs, work)  # everything as shipped but the device's calibration file
        fit_dir, held_dir = os.path.join(work, "fit", "cases"), os.path.join(work, "held", "cases")
        os.makedirs(fit_dir)
        os.makedirs(held_dir)
        fitted, held = [], []
        precisions = set()
        validation = a.cases or os.path.join(a.configs, "validation")
        shipped_file = os.path.join(a.configs, "calibration", a.device + ".json")
        shipped_calibration = {"device": a.device}
        if os.path.exists(shipped_file):
            with open(shipped_file) as f:
                shipped_calibration = json.load(f)
        for name in sorted(os.listdir(validation)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(validation, name)
            with open(path) as f:
                case = json.load(f)
            if "validation" not in case or case_device(case) != a.device:
                continue
            if a.precision and case["training"].get("precision", "bf16") != a.precision:
                continue
            # A run whose framework has a GEMM figure of its own on this device
            # (calibration/DEVICE.FRAMEWORK.json, tools/calibrate/fit_framework.py) does not use this
            # one; a framework file with other figures only (fit_step_overhead.py's) leaves it in use.
            framework = case["training"].get("framework", "")
            own = os.path.join(a.configs, "calibration", f"{a.device}.{framework}.json")
            if not a.precision and os.path.exists(own):
                with open(own) as f:
                    if "gemm_efficiency" in json.load(f):
                        continue
            out = held if any(from_source(path, case, s) for s in a.leave_out) else fitted
            precisions.add(case["training"].get("precision", "bf16"))
            out.append(name)
            shutil.copy(path, os.path.join(held_dir if out is held else fit_dir, name))
        if not fitted:
            sys.exit(f"no published run on {a.device} is left to fit")
        calibration = os.path.join(config_dir, "calibration", a.device + ".json")

        attention = {"figure": None}  # the attention kernel's figure tried (--attention-kernel)

        def figures(efficiency, half_k):
            if a.precision:  # the shipped figures, this precision's set to the one tried
                out = json.loads(json.dumps(shipped_calibration))
                out.setdefault("gemm_efficiency_by_dtype", {})[a.precision] = efficiency
                if attention["figure"] is not None:
                    out.setdefault("attention_efficiency_by_kernel", {})[a.attention_kernel] = attention["figure"]
                return out
            out = {"device": a.device, "gemm_efficiency": efficiency}
            # An attention kernel's figure fitted on runs (--attention-kernel) holds while the GEMM
            # figure is searched: the runs call that kernel.
            for k in shipped_calibration.get("fitted_on_by_kernel", {}):
                out.setdefault("attention_efficiency_by_kernel", {})[k] = \
                    shipped_calibration["attention_efficiency_by_kernel"][k]
            if half_k is not None:
                out["gemm_half_k"] = half_k
            return out

        def mape(efficiency, half_k, cases_dir=fit_dir):
            with open(calibration, "w") as f:
                json.dump(figures(efficiency, half_k), f)
            return accuracy(a.stepsim, config_dir, cases_dir)

        def fit_efficiency(half_k):
            # Golden-section search: the MAPE over the runs is unimodal in the one figure.
            efficiency = golden(lambda x: mape(x, half_k)["mape_pct"], 0.4, upper, a.tolerance)
            return efficiency, mape(efficiency, half_k)

        if a.attention_kernel:
            best_gemm = {}

            def mape_at_attention(figure):
                # For each attention figure, the GEMM figure that fits best; the MAPE at that pair.
                attention["figure"] = figure
                best_gemm[figure] = fit_efficiency(None)
                return best_gemm[figure][1]["mape_pct"]

            attention["figure"] = golden(mape_at_attention, 0.1, attention_upper, a.tolerance)
            if attention["figure"] not in best_gemm:
                best_gemm[attention["figure"]] = fit_efficiency(None)
            print(f"  attention_efficiency_by_kernel.{a.attention_kernel} {attention['figure']} "
                  f"(upper bound {attention_upper})")
        fits = []
        for half_k in half_ks:
            efficiency, report = fit_efficiency(half_k) if not a.attention_kernel else best_gemm[attention["figure"]]
            if len(half_ks) > 1:
                print(f"  gemm_half_k {half_k:g}: gemm_efficiency {efficiency}, MAPE {report['mape_pct']:.1f}%")
            fits.append((report["mape_pct"], half_k, efficiency, report))
        _, half_k, best, report = min(fits, key=lambda f: f[0])
        shown_k = f", gemm_half_k {half_k:g}" if half_k is not None else ""
        what_fitted = f"gemm_efficiency_by_dtype.{a.precision}" if a.precision else "gemm_efficiency"
        print(f"{a.device}: {what_fitted} {best}{shown_k} (upper bound {upper}), fitted on {len(fitted)} runs: "
              f"MAPE {report['mape_pct']:.1f}%")
        for c in report["cases"]:
            print(f"  fitted    {c['case']:<46} {c['error_pct']:+6.1f}%")
        if held:
            predicted = mape(best, half_k, held_dir)
            print(f"left out {', '.join(a.leave_out)}: {len(held)} runs predicted with that figure: "
                  f"MAPE {predicted['mape_pct']:.1f}%")
            for c in predicted["cases"]:
                print(f"  predicted {c['case']:<46} {c['error_pct']:+6.1f}%")
        if a.write:
            if held:
                sys.exit("--write with --leave-out: the shipped figure is fitted on every run")
            out = os.path.join(a.configs, "calibration", a.device + ".json")
            if a.precision:
                written = figures(best, half_k)
                written.setdefault("fitted_on_by_dtype", {})[a.precision] = [n[:-5] for n in fitted]
                runs_text = (f"the {len(fitted)} published {a.precision} training runs of {a.device} in "
                             f"{os.path.relpath(validation, os.path.dirname(a.configs))}")
                command = (f"tools/calibrate/fit_runs.py --precision {a.precision}"
                           + (f" --attention-kernel {a.attention_kernel}" if a.attention_kernel else ""))
                beside = (f", fitted beside the {a.attention_kernel} attention figure (source_by_kernel)"
                          if a.attention_kernel else "")
                written.setdefault("source_by_dtype", {})[a.precision] = (
                    f"gemm_efficiency_by_dtype.{a.precision} fitted by {command} on {runs_text}: the {a.precision} "
                    f"GEMM throughput those runs sustain, {best} of the dense {a.precision} peak{beside}, MAPE "
                    f"{report['mape_pct']:.1f}% over them. Upper bound: the device file's {upper}.")
                if a.attention_kernel:
                    k = a.attention_kernel
                    written.setdefault("fitted_on_by_kernel", {})[k] = [n[:-5] for n in fitted]
                    written.setdefault("source_by_kernel", {})[k] = (
                        f"attention_efficiency_by_kernel.{k} fitted by {command} on {runs_text}, beside the "
                        f"{a.precision} GEMM figure: the speed of the {k} attention those runs sustain, "
                        f"{attention['figure']} of the dense bf16 peak (Transformer Engine runs attention in bf16 "
                        f"in an {a.precision} run), MAPE {report['mape_pct']:.1f}% over them. Upper bound: the "
                        f"device file's {attention_upper} (a kernel benchmark's).")
                write_calibration(out, written)
                return
            written = figures(best, half_k)
            written["fitted_on"] = [n[:-5] for n in fitted]  # what `stepsim accuracy --leave-out` refits on
            ratios = ""
            if sibling is not None:
                by_dtype = sibling["gemm_efficiency_by_dtype"]
                if len(precisions) != 1 or next(iter(precisions)) not in by_dtype:
                    sys.exit(f"--dtype-ratios-from: the runs' precisions {sorted(precisions)} are not one that "
                             f"{a.dtype_ratios_from} gives")
                run_precision = next(iter(precisions))
                # The runs' own precision stays the common figure, which a framework's figure on this
                # device (DEVICE.FRAMEWORK.json) replaces; a by-dtype entry for it would shadow that.
                written["gemm_efficiency_by_dtype"] = {
                    d: round(best * v / by_dtype[run_precision], 4) for d, v in sorted(by_dtype.items())
                    if d != run_precision}
                ratios = (f" The other precisions keep the ratios to {run_precision} that {a.dtype_ratios_from} "
                          f"measured on the same silicon ({sibling.get('fit', {}).get('gpu', 'its GPU')}, "
                          f"{sibling.get('fit', {}).get('date', 'undated')}): "
                          + ", ".join(f"{d} {v / by_dtype[run_precision]:.3f}" for d, v in sorted(by_dtype.items()))
                          + ".")
            # A precision fitted on runs of its own (--precision) keeps its figure.
            if shipped_calibration.get("fitted_on_by_dtype"):
                ratios += (" Except " + ", ".join(sorted(shipped_calibration["fitted_on_by_dtype"]))
                           + ", fitted on runs in that precision (source_by_dtype).")
            # So does an attention kernel fitted on runs (--attention-kernel).
            if shipped_calibration.get("fitted_on_by_kernel"):
                ratios += (" The " + ", ".join(sorted(shipped_calibration["fitted_on_by_kernel"]))
                           + " attention figure is fitted on runs too (source_by_kernel).")
            for k, runs in shipped_calibration.get("fitted_on_by_kernel", {}).items():
                written.setdefault("attention_efficiency_by_kernel", {})[k] = \
                    shipped_calibration["attention_efficiency_by_kernel"][k]
                written.setdefault("fitted_on_by_kernel", {})[k] = runs
                written.setdefault("source_by_kernel", {})[k] = shipped_calibration.get("source_by_kernel", {}).get(k, "")
            for d, runs in shipped_calibration.get("fitted_on_by_dtype", {}).items():
                written.setdefault("gemm_efficiency_by_dtype", {})[d] = shipped_calibration["gemm_efficiency_by_dtype"][d]
                written.setdefault("fitted_on_by_dtype", {})[d] = runs
                written.setdefault("source_by_dtype", {})[d] = shipped_calibration.get("source_by_dtype", {}).get(d, "")
            what = "gemm_efficiency" + (" and gemm_half_k" if half_k is not None else "")
            written["source"] = (
                f"{what} fitted by tools/calibrate/fit_runs.py on the published {a.device} "
                f"training runs in configs/validation/ ({', '.join(n[:-5] for n in fitted)}): the "
                f"GEMM throughput those runs sustain, {best} of the dense peak"
                + (f", reached at half by a tile at K = {half_k:g} (searched over "
                   f"{', '.join(f'{k:g}' for k in half_ks)})" if half_k is not None else "")
                + f", MAPE {report['mape_pct']:.1f}% over them. Upper bound: the device file's {upper} "
                "(the best shape of a benchmark sweep)." + ratios + " The other fields keep the device file's values.")
            write_calibration(out, written)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
