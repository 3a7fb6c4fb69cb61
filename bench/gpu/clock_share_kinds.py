#!/usr/bin/env python3
"""The clock-bound share (comp_share) per kernel kind, from the per-probe fits of several clock
sweeps (clock_sweep_fit.py --json), for a device file's "kinds".

Per kind: the median over every (probe, run) of that kind whose fit holds enough runs (--min-runs;
a probe the limiter throttles inside the kernel passes the 1 % clock rule too rarely to fit).
A probe without a kind (the hand-written FMA chain and L2 read) is left out, and so are the
kinds of --leave-out (default "other": the kernels no name rule recognises, which one sort kernel
does not stand for). With --write, the
device file gets "kinds": {kind: {"comp_share": {value, source}}} for every kind measured, its
other fields untouched; kinds it held and the sweep did not measure are kept.

  python3 bench/gpu/clock_share_kinds.py FIT.json... [--min-runs 50] [--write devices/h200.json]
      [--source "text naming the data and commands"]
"""
import argparse
import collections
import json
import statistics
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fits", nargs="+", help="clock_sweep_fit.py --json outputs")
    ap.add_argument("--min-runs", type=int, default=50, help="runs a probe's fit needs to count")
    ap.add_argument("--leave-out", default="other", help="kinds not to measure (comma-separated)")
    ap.add_argument("--write", help="device file whose \"kinds\" to set")
    ap.add_argument("--source", default="", help="the source text each value gets (with --write)")
    args = ap.parse_args()

    shares = collections.defaultdict(list)  # kind -> [(share, probe, file)]
    left_out = []
    for path in args.fits:
        with open(path) as f:
            fit = json.load(f)
        for row in fit["probes"]:
            if not row.get("kind") or row["kind"] in args.leave_out.split(","):
                continue
            if row["runs"] < args.min_runs:
                left_out.append(f"{row['probe']} in {path} ({row['runs']} runs)")
                continue
            shares[row["kind"]].append((row["comp_share_measured"], row["probe"], path))
    if not shares:
        sys.exit("clock_share_kinds: no probe with a kind and enough runs")

    print(f"| kind | comp_share (median) | range | fits | probes |")
    print("|---|---:|---|---:|---|")
    result = {}
    for kind in sorted(shares):
        values = [s for s, _, _ in shares[kind]]
        median = min(1.0, max(0.0, statistics.median(values)))
        result[kind] = (median, min(values), max(values), sorted({p for _, p, _ in shares[kind]}))
        print(f"| {kind} | {median:.3f} | {min(values):.2f}-{max(values):.2f} | {len(values)} | "
              f"{', '.join(result[kind][3])} |")
    for x in left_out:
        print(f"left out (fewer than {args.min_runs} runs): {x}")

    if args.write:
        with open(args.write) as f:
            device = json.load(f)
        kinds = device.get("kinds", {})
        for kind, (median, lo, hi, probes) in result.items():
            kinds[kind] = {"comp_share": {
                "value": round(median, 3),
                "source": (f"median of {len(shares[kind])} fits of t = t_mem + t_comp f_max / f at the clocks the "
                           f"power limiter picked (1480-1980 MHz; range {lo:.2f}-{hi:.2f}; probes: "
                           f"{', '.join(probes)}) {args.source}").strip()}}
        device["kinds"] = dict(sorted(kinds.items()))
        with open(args.write, "w") as f:
            json.dump(device, f, indent=2, sort_keys=True)
            f.write("\n")
        print(f"wrote {len(result)} kinds into {args.write}")


if __name__ == "__main__":
    main()
