#!/usr/bin/env python3
"""Summary of bench/gpu/overhead_concurrent.sh: two programs run at the same time, compared over
the same stretch of wall time.

  python3 overhead_concurrent_summary.py rounds.jsonl [more.jsonl ...] [--after 75] > summary.json

Several files (runs of the script) are pooled: their rounds are kept apart by file; `solo` is
the first file's solo run, and each file's own sizes its spins (scaled_by_spin).

Per round, each side's steps are those that start at or after the later of the two sides' first
counted steps (step `--after` for any side but a plain one, after emo's traced window as
overhead_summary.py takes it; a plain side's first timed step) and end by the earlier of the
two programs' last step end: the stretch both ran. The round's ratio is side A's median step
over side B's for A/A rounds, and the other mode's over plain's for the others (emo; other modes,
such as emo_noanchor, spin or run, summed apart under their own name). Across rounds: the geometric mean, median, the standard deviation of the log ratios and
a bootstrap 95 % interval of the geometric mean (fixed seed, so the same input gives the same
figures), for emo/plain and for A/A; the emo/plain rounds also split by the half emo ran on.
halves_balanced is the geometric mean of the two halves' geometric means (a speed difference
between the halves cancels in it). With spin rounds (a known host-side cost) and a solo run,
scaled_by_spin reads every other mode's ratio as a cost on the loop alone. Standard library
only.
"""
import argparse
import json
import math
import random
import statistics
import sys

MIN_OVERLAP_S = 5.0
MIN_STEPS = 100


def side_steps(program, first):
    starts, steps = program.get("step_start_s"), program.get("step_ms")
    if not isinstance(starts, list) or not isinstance(steps, list) or len(starts) != len(steps):
        return None
    return [(s, s + ms * 1e-3, ms) for i, (s, ms) in enumerate(zip(starts, steps)) if i >= first]


def round_ratio(a, b, after):
    """a, b: the rows of one round's two sides. Returns the round's record."""
    sides = {}
    for row in (a, b):
        prog = row.get("program")
        if row.get("rc") != 0 or not prog:
            return {"dropped": f"side {row.get('side')} ({row.get('mode')}) rc {row.get('rc')}, no result"}
        first = int(prog.get("warmup_steps", 0)) if row["mode"] == "plain" else after
        steps = side_steps(prog, first)
        if not steps:
            return {"dropped": f"side {row['side']} has no step_start_s (the loop's --step-starts)"}
        sides[row["side"]] = (row, steps)
    lo = max(steps[0][0] for _, steps in sides.values())
    hi = min(steps[-1][1] for _, steps in sides.values())
    rec = {"overlap_s": hi - lo}
    med = {}
    for name, (row, steps) in sides.items():
        inside = [ms for s, e, ms in steps if s >= lo and e <= hi]
        rec[f"{name}_mode"] = row["mode"]
        rec[f"{name}_steps"] = len(inside)
        if len(inside) < MIN_STEPS:
            rec["dropped"] = f"side {name}: {len(inside)} steps in the common stretch (< {MIN_STEPS})"
            return rec
        med[name] = statistics.median(inside)
        rec[f"{name}_median_step_ms"] = med[name]
    if hi - lo < MIN_OVERLAP_S:
        rec["dropped"] = f"the two ran together {hi - lo:.1f} s (< {MIN_OVERLAP_S} s)"
        return rec
    if a["mode"] == b["mode"]:
        rec["ratio"] = med["A"] / med["B"]  # A over B
    else:
        emo, plain = ("A", "B") if a["mode"] != "plain" else ("B", "A")
        rec["ratio"] = med[emo] / med[plain]  # the traced one over plain
        rec["emo_side"] = emo
        rec["emo_mode"] = sides[emo][0]["mode"]
    return rec


BOOTSTRAP_N = 20000


def solo_median_ms(program):
    """The median step of a program's timed steps (after its warm-up), or None."""
    steps = (program or {}).get("step_ms") or []
    timed = steps[int(program.get("warmup_steps", 0)):] if steps else []
    return statistics.median(timed) if timed else None


def describe(ratios, seed=1):
    if not ratios:
        return {"n": 0}
    logs = [math.log(r) for r in ratios]
    out = {"n": len(ratios), "geometric_mean": math.exp(statistics.fmean(logs)),
           "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    if len(ratios) >= 2:
        out["sd_log"] = statistics.stdev(logs)
        rng = random.Random(seed)
        means = sorted(statistics.fmean(rng.choices(logs, k=len(logs))) for _ in range(BOOTSTRAP_N))
        out["bootstrap95_geometric_mean"] = [math.exp(means[int(0.025 * len(means))]),
                                             math.exp(means[int(0.975 * len(means)) - 1])]
    return out


def summarize(rows, after):
    by_round, solo_by_file = {}, {}
    for row in rows:
        if row.get("kind") == "solo":  # a file's solo run (round 0, or 1000 k in the k-th file)
            solo_by_file[row["round"] // 1000] = solo_median_ms(row.get("program"))
            continue
        by_round.setdefault(row["round"], {})[row["side"]] = row
    out = {"after": after, "rounds": [], "solo": None}
    solo_row = next((row for row in rows if row.get("kind") == "solo" and row["round"] == 0), None)
    if solo_row and solo_row.get("program"):
        out["solo"] = {"median_step_ms": solo_median_ms(solo_row["program"]), "cores": solo_row.get("cores")}
    ab, aa, by_half, others = [], [], {"A": [], "B": []}, {}
    plain_meds = []
    for r in sorted(by_round):
        pair = by_round[r]
        if set(pair) != {"A", "B"}:
            out["rounds"].append({"round": r, "dropped": "a side is missing"})
            continue
        rec = round_ratio(pair["A"], pair["B"], after)
        rec = {"round": r, "kind": pair["A"]["kind"], **rec}
        out["rounds"].append(rec)
        if "ratio" not in rec or "dropped" in rec:
            continue
        for side in ("A", "B"):
            if rec.get(f"{side}_mode") == "plain":
                plain_meds.append(rec[f"{side}_median_step_ms"])
        if rec["kind"] == "aa":
            aa.append(rec["ratio"])
        elif rec["emo_mode"] != "emo":
            others.setdefault(rec["emo_mode"], []).append(rec["ratio"])
        else:
            ab.append(rec["ratio"])
            by_half[rec["emo_side"]].append(rec["ratio"])
    out["ab"] = {"emo_over_plain": describe(ab), "emo_on_A": describe(by_half["A"]), "emo_on_B": describe(by_half["B"])}
    # A speed difference between the halves enters the two kinds of round with opposite signs:
    # the geometric mean of the two halves' means cancels it whatever their numbers of rounds.
    if by_half["A"] and by_half["B"]:
        out["ab"]["halves_balanced"] = math.sqrt(out["ab"]["emo_on_A"]["geometric_mean"] *
                                                 out["ab"]["emo_on_B"]["geometric_mean"])
    out["aa"] = {"A_over_B": describe(aa)}
    for mode, ratios in sorted(others.items()):  # e.g. emo_noanchor over plain
        out[mode] = {f"{mode}_over_plain": describe(ratios)}
    if out["solo"] and out["solo"]["median_step_ms"] and plain_meds:
        out["solo"]["plain_together_over_alone"] = statistics.median(plain_meds) / out["solo"]["median_step_ms"]
    # Each spin run's cost as a share of its own file's solo step (the first file's where its own
    # has none): pooled files may have run at other paces or with other spins.
    first_solo = out["solo"]["median_step_ms"] if out["solo"] else None
    spins = []
    for row in rows:
        if row.get("mode") == "spin" and row.get("kind") != "solo" and row.get("program"):
            solo_ms = solo_by_file.get(row["round"] // 1000) or first_solo
            if solo_ms:
                spins.append((row["program"].get("host_spin_us") or 0, solo_ms))
    if spins and "spin" in others:
        alone = {"emo": ab, **{m: r for m, r in others.items() if m != "spin"}}
        out["scaled_by_spin"] = scaled_by_spin(alone, others["spin"], spins)
    return out


def scaled_by_spin(modes, spin_ratios, spins, seed=1):
    """The cost of each mode on the loop alone, read through the spin rounds of the same files.

    A spin round adds a host-side cost of known size: spin_us per step, a share `known` of the
    loop's step alone (spins: (spin_us, solo step ms) of each spin run; `known` is the median
    of their shares). The design shows a fraction k = (spin/plain - 1) / known
    of it; a mode whose ratio is r then costs (r - 1) / k of the loop alone, if its cost hides
    as the spin's does (both are host-side). The interval resamples the mode's and the spin's
    rounds apart (fixed seed); where a resample shows no spin at all (k <= 0) the cost is
    unbounded, counted in `unbounded_share`. Without the linear reading: `over_spin` is the
    mode's geometric mean over the spin's, and `share_below_spin` the share of resamples in
    which the mode shows less than the spin (a spin the size of a goal tests the goal)."""
    known = statistics.median(us / 1e3 / ms for us, ms in spins)
    spin_us = statistics.median(us for us, _ in spins)
    spin_logs = [math.log(r) for r in spin_ratios]
    k = (math.exp(statistics.fmean(spin_logs)) - 1) / known
    out = {"spin_us": spin_us, "known_share_of_solo_step": known, "sensitivity": k, "modes": {}}
    rng = random.Random(seed)
    for mode, ratios in sorted(modes.items()):
        if not ratios:
            continue
        logs = [math.log(r) for r in ratios]
        est = (math.exp(statistics.fmean(logs)) - 1) / k if k > 0 else None
        rec = {"n": len(ratios), "n_spin": len(spin_logs), "cost_alone": est}
        rec["over_spin"] = math.exp(statistics.fmean(logs) - statistics.fmean(spin_logs))
        if len(logs) >= 2 and len(spin_logs) >= 2:
            draws, unbounded, below = [], 0, 0
            for _ in range(BOOTSTRAP_N):
                lm = statistics.fmean(rng.choices(logs, k=len(logs)))
                ls = statistics.fmean(rng.choices(spin_logs, k=len(spin_logs)))
                below += lm < ls
                kk = (math.exp(ls) - 1) / known
                if kk <= 0:
                    unbounded += 1
                else:
                    draws.append((math.exp(lm) - 1) / kk)
            draws.sort()
            rec["unbounded_share"] = unbounded / BOOTSTRAP_N
            # How often the mode shows less than the known cost: with a spin of the size of a
            # goal (SPIN_PCT), the share of resamples in which the mode costs less than it.
            rec["share_below_spin"] = below / BOOTSTRAP_N
            if draws:
                # Unbounded draws sit above every bounded one: the upper end moves up with them.
                lo_i, hi_i = int(0.025 * BOOTSTRAP_N), int(0.975 * BOOTSTRAP_N) - 1
                rec["bootstrap95"] = [draws[lo_i] if lo_i < len(draws) else None,
                                      draws[hi_i] if hi_i < len(draws) else None]
        out["modes"][mode] = rec
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows", nargs="+", help="rounds.jsonl of overhead_concurrent.sh (several are pooled)")
    ap.add_argument("--after", type=int, default=75, help="emo's first step counted (default 75)")
    args = ap.parse_args()
    rows = []
    for k, path in enumerate(args.rows):
        for line in open(path):
            if line.strip():
                row = json.loads(line)
                row["round"] += 1000 * k  # the files' rounds apart (a file's solo run: 1000 k)
                rows.append(row)
    json.dump(summarize(rows, args.after), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
