#!/usr/bin/env python3
"""Summary of bench/gpu/overhead_quiet.sh: a program's steps in neighbouring phases of one run.

  python3 overhead_quiet_summary.py runs.jsonl [more.jsonl ...] > summary.json

Each run carries its steps (the loop's step_start_s and step_ms) and its phase marks
[[phase, CLOCK_MONOTONIC ns], ...]: emo's (EMO_TRACE_QUIET_LOG: engaged, detaching, quiet,
relearn) or the loop's own (--spin-phase-ms: engaged = spinning, quiet). A step belongs to the
phase it starts in; a step with a mark inside it (the detach, the attach, a phase's turn) belongs
to none. "detaching" counts as engaged (the tracer runs as always until the program's next wait
detaches it); "relearn" (the loop being found again after an attach) and "waiting" are left out.

A segment is one unbroken phase with at least MIN_STEPS steps; its figure is its median step.
Each engaged segment with a quiet segment on both sides gives the ratio of its median over the
geometric mean of its two neighbours' medians (a pace that drifts linearly cancels). Per mode:
the segments' ratios pooled (geometric mean, median, sd of the logs, a bootstrap 95 % interval
of the geometric mean over segments) and the runs' geometric means (the same over runs, whose
own pace can differ). For spin runs, `known` is the spin as a share of the step, averaged over
the engaged segments (each against its two quiet neighbours), and `shown_over_known` what the
design shows of it. Standard library only.
"""
import argparse
import json
import math
import statistics
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from overhead_concurrent_summary import describe  # noqa: E402

MIN_STEPS = 10
PHASE = {"engaged": "engaged", "quiet": "quiet"}


def segments(starts, steps_ms, marks, first):
    """[(phase or None, [step ms ...]), ...] in time order from step `first` on: unbroken runs of
    engaged or quiet steps, None between them (steps of no phase, segments under MIN_STEPS)."""
    # A detach is asked for at a "detaching" mark, but the tracer runs as before until the detach.
    marks = sorted((int(t), p) for p, t in marks if p != "detaching")
    out, k = [], 0
    for i in range(first, min(len(starts), len(steps_ms))):
        s = starts[i] * 1e9
        e = s + steps_ms[i] * 1e6
        while k < len(marks) and marks[k][0] <= s:
            k += 1
        inside = k < len(marks) and marks[k][0] < e
        key = None if k == 0 or inside else PHASE.get(marks[k - 1][1])
        if out and out[-1][0] == key:
            out[-1][1].append(steps_ms[i])
        else:
            out.append((key, [steps_ms[i]]))
    return [(key if len(ms) >= MIN_STEPS else None, ms) for key, ms in out]


def run_ratios(row):
    prog = row.get("program") or {}
    starts, steps = prog.get("step_start_s"), prog.get("step_ms")
    if row.get("rc") != 0 or not isinstance(starts, list) or not isinstance(steps, list):
        return None, f"rc {row.get('rc')}, no steps with their starts"
    if not row.get("marks"):
        return None, "no phase marks"
    # Neighbours are the nearest segments of a phase on each side (steps of none between them).
    segs = [(k, statistics.median(ms)) for k, ms in segments(starts, steps, row["marks"],
                                                            int(prog.get("warmup_steps", 0))) if k]
    ratios, around = [], []
    for j in range(1, len(segs) - 1):
        (kp, mp), (k, m), (kn, mn) = segs[j - 1], segs[j], segs[j + 1]
        if k == "engaged" and kp == "quiet" and kn == "quiet":
            ratios.append(m / math.sqrt(mp * mn))
            around.append(math.sqrt(mp * mn))
    return {"segments": len(segs), "ratios": ratios, "quiet_around_ms": around}, None


def summarize(rows):
    out = {"min_steps": MIN_STEPS, "runs": [], "modes": {}}
    by_mode = {}
    for row in rows:
        if row.get("round", 0) == 0 and row.get("mode") == "plain":
            continue  # the sizing run
        rec, why = run_ratios(row)
        entry = {"round": row.get("round"), "mode": row.get("mode")}
        if rec is None or not rec["ratios"]:
            entry["dropped"] = why or "no engaged phase between two quiet ones"
            out["runs"].append(entry)
            continue
        entry.update(rec)
        entry["geometric_mean"] = math.exp(statistics.fmean(math.log(r) for r in rec["ratios"]))
        out["runs"].append(entry)
        by_mode.setdefault(row["mode"], []).append(entry)
    for mode, entries in by_mode.items():
        pooled = [r for e in entries for r in e["ratios"]]
        m = {"runs": len(entries), "segments": describe(pooled),
             "over_runs": describe([e["geometric_mean"] for e in entries])}
        if mode == "spin":
            spins = [row["program"].get("host_spin_us") for row in rows
                     if row.get("mode") == "spin" and row.get("program")]
            around = [ms for e in entries for ms in e["quiet_around_ms"]]
            if spins and around:
                known = statistics.fmean(spins[0] * 1e-3 / ms for ms in around)
                m["spin_us"] = spins[0]
                m["known"] = known
                m["shown_over_known"] = (m["segments"]["geometric_mean"] - 1) / known
        out["modes"][mode] = m
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="runs.jsonl of overhead_quiet.sh (several are pooled)")
    args = ap.parse_args()
    rows = []
    for path in args.runs:
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    json.dump(summarize(rows), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
