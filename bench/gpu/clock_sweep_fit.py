#!/usr/bin/env python3
"""Fits EMO's time form t(f) = t_mem + t_comp * f_max / f to the probes of a clock sweep
(bench/gpu/clock_sweep.cu or clock_sweep_torch.py) and sets the measured clock-bound share
(comp_share = t_comp / t(f_max)) beside the one the device file assumes for the probe's class.

A probe run counts when the SM clock just before and just after it agree within --agree (its
clock is their mean). Per probe: least squares of the time on x = f_max / f over those runs;
comp_share = slope / (intercept + slope); R^2 of the fit; the measured time ratio between the
lowest and the highest clock bins, against the ratio the device file's comp_share predicts.

Classes: a probe named in kernels.json (clock_sweep_torch.py writes it) gets EMO's class from
its kernels' names (`emo model classify`, when --emo is given); otherwise from --classes
(probe=class,...), the .cu probes' documented classes by default. Pure Python (no numpy).

  python3 bench/gpu/clock_sweep_fit.py SWEEP.csv[.gz] [--kernels kernels.json --emo build/ci/tools/emo/emo]
      [--device devices/h200.json] [--json out.json]
"""
import argparse
import collections
import csv
import gzip
import json
import statistics
import subprocess
import sys

CU_CLASSES = {"tc_gemm": "compute", "fp32_gemm": "compute", "fma": "compute", "copy": "memory",
              "triad": "memory", "l2_read": "other"}
# The device file's kind (its "kinds" keys, `emo model classify`'s kind) of the .cu probes that
# stand for one; the hand-written FMA chain and L2 read are no library kernel's kind.
CU_KINDS = {"tc_gemm": "gemm", "fp32_gemm": "cuda_core_gemm", "copy": "copy", "triad": "elementwise"}


def fit(points, f_max):
    """Least squares t = a + b x, x = f_max / f: (a, b, r2)."""
    xs = [f_max / f for f, _ in points]
    ts = [t for _, t in points]
    mx, mt = statistics.fmean(xs), statistics.fmean(ts)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    b = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sxx
    a = mt - b * mx
    ss_tot = sum((t - mt) ** 2 for t in ts)
    ss_res = sum((t - a - b * x) ** 2 for x, t in zip(xs, ts))
    return a, b, (1 - ss_res / ss_tot) if ss_tot > 0 else 1.0


def classes_from_kernels(path, emo):
    """Probe -> (the EMO class, the share kind) that hold most of its kernels' GPU time (`emo model
    classify` on their names; the share kind is the device file's "kinds" key: the kind, or
    cuda_core_gemm, activation_16bit); kernels.json from an older run without times (a list of
    names) counts each name once."""
    with open(path) as f:
        kernels = json.load(f)["kernels"]
    out = {}
    for probe, names in kernels.items():
        times = names if isinstance(names, dict) else {n: 1.0 for n in names}
        if not times:
            continue
        r = subprocess.run([emo, "model", "classify", "--json", "-", "-"], input="\n".join(times), capture_output=True,
                           text=True, check=True)
        by_class, by_kind = collections.Counter(), collections.Counter()
        for k in json.loads(r.stdout)["kernels"]:
            by_class[k["class"] + (" (CUDA cores)" if k["cuda_core_gemm"] else "")] += times[k["name"]]
            by_kind[k["share_kind"]] += times[k["name"]]
        out[probe] = (by_class.most_common(1)[0][0], by_kind.most_common(1)[0][0])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep")
    ap.add_argument("--device", default="devices/h200.json")
    ap.add_argument("--kernels", help="kernels.json from clock_sweep_torch.py")
    ap.add_argument("--emo", help="the emo binary, to classify the kernels' names")
    ap.add_argument("--classes", help="probe=class,... (default: the .cu probes' classes)")
    ap.add_argument("--agree", type=float, default=0.01, help="before/after clock agreement (fraction)")
    ap.add_argument("--json", help="write the table as JSON here")
    args = ap.parse_args()

    with open(args.device) as f:
        device = json.load(f)
    f_max = float(device["default_clock_mhz"]["value"] if isinstance(device["default_clock_mhz"], dict) else device["default_clock_mhz"])
    share_of = {c: v["comp_share"]["value"] for c, v in device["classes"].items()}
    kind_share_of = {k: v["comp_share"]["value"] for k, v in device.get("kinds", {}).items()}
    classes, kinds = dict(CU_CLASSES), dict(CU_KINDS)
    if args.classes:
        classes.update(dict(kv.split("=", 1) for kv in args.classes.split(",")))
    if args.kernels:
        if not args.emo:
            sys.exit("clock_sweep_fit: --kernels needs --emo to classify the kernels' names")
        for probe, (cls, kind) in classes_from_kernels(args.kernels, args.emo).items():
            classes[probe], kinds[probe] = cls, kind

    runs = collections.defaultdict(list)
    dropped = collections.Counter()
    with (gzip.open(args.sweep, "rt") if args.sweep.endswith(".gz") else open(args.sweep)) as f:
        for r in csv.DictReader(f):
            b, a, t = float(r["mhz_before"]), float(r["mhz_after"]), float(r["ms"])
            if b <= 0 or a <= 0 or abs(b - a) > args.agree * max(a, b):
                dropped[r["probe"]] += 1
                continue
            runs[r["probe"]].append(((a + b) / 2, t))

    rows = []
    for probe, pts in runs.items():
        fitted = fit(pts, f_max)
        if not fitted:
            continue
        a, b, r2 = fitted
        share = b / (a + b)
        pts.sort()
        lo = [t for f, t in pts if f <= pts[0][0] + 40]
        hi = [t for f, t in pts if f >= pts[-1][0] - 15]
        f_lo = statistics.median([f for f, _ in pts if f <= pts[0][0] + 40])
        f_hi = statistics.median([f for f, _ in pts if f >= pts[-1][0] - 15])
        measured_ratio = statistics.median(lo) / statistics.median(hi)
        cls = classes.get(probe, "?")
        assumed = share_of.get(cls.split(" ")[0])
        predicted_ratio = (1 - assumed) + assumed * f_hi / f_lo if assumed is not None else None
        # The share the model uses: the kind's own where the device file has one, else the class's.
        model_share = kind_share_of.get(kinds.get(probe), assumed)
        model_ratio = (1 - model_share) + model_share * f_hi / f_lo if model_share is not None else None
        rows.append({"probe": probe, "class": cls, "kind": kinds.get(probe), "runs": len(pts), "dropped": dropped[probe],
                     "mhz_low": round(f_lo), "mhz_high": round(f_hi), "ms_at_high": round(statistics.median(hi), 4),
                     "comp_share_measured": round(share, 3), "r2": round(r2, 3), "comp_share_assumed": assumed,
                     "time_ratio_measured": round(measured_ratio, 4),
                     "time_ratio_assumed": round(predicted_ratio, 4) if predicted_ratio else None,
                     "comp_share_model": model_share,
                     "time_ratio_model": round(model_ratio, 4) if model_ratio else None})

    print(f"f_max {f_max:.0f} MHz (device file {args.device}); runs whose clocks agree within {args.agree:.0%}")
    print("| probe | EMO class / kind | runs | clocks MHz | ms at high | comp_share measured (R^2) | class prior | "
          "model's (kind) | t(low)/t(high) measured | with the class prior | with the model's |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['probe']} | {r['class']} / {r['kind'] or '-'} | {r['runs']} | {r['mhz_low']}-{r['mhz_high']} | "
              f"{r['ms_at_high']} | {r['comp_share_measured']:.2f} ({r['r2']:.2f}) | {r['comp_share_assumed']} | "
              f"{r['comp_share_model']} | {r['time_ratio_measured']:.3f} | "
              f"{r['time_ratio_assumed'] if r['time_ratio_assumed'] else '-'} | "
              f"{r['time_ratio_model'] if r['time_ratio_model'] else '-'} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"f_max_mhz": f_max, "device": args.device, "probes": rows}, f, indent=1)


if __name__ == "__main__":
    main()
