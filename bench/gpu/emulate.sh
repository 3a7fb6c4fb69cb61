#!/usr/bin/env bash
# `emo run --actuator emulate` on the H200: does a plan's measured slowdown match the predicted
# one? For each loop (bench/gpu/train_loop.py, decode_loop.py, streams_graph): one `emo trace`,
# `emo optimize` with the GPU's device model (loops.sh device_model: h200 on the H200) at two
# latency targets (--max-slowdown 0.02 and 0.10) into policies, then rounds of `emo run
# --actuator emulate` (spin kernels add the model's extra time per op on the op's stream), and for
# the loops in AB_LOOPS `emo run --actuator dry-run` beside it (the same callbacks, nothing
# added), order alternating. Never changes a clock.
#
# Two measures of the slowdown:
#  - within one emulate run: iterations with the plan in force against the same run's
#    iterations at the default clock between them (--guard 50: the plan starts after 5
#    iterations timed without it and the default clock is timed again every 50 iterations; 50 %
#    so that the guard never trips): both spread over the same stretch of the run;
#  - across runs (AB_LOOPS), paired by round: emulate's iterations under the plan against
#    dry-run's. Between processes the CPU-bound PyTorch loops differ by up to 28 % (BENCHMARKS.md,
#    "Order 7"), so only the GPU-bound loop is paired by default.
#
# Loops: train, decode, streams, bigtrain (bench/gpu/loops.sh). MARGINS="0 0.25" also plans each
# target with `--time-margin 0.25` (policies and summary keys S and Sm0.25): does a plan made to
# hold with 25 % more extra time than the model gives stay within its prediction where the
# plain one (flagged fragile: `fragile_time` in the summary) does not? A margin of `auto` plans
# with `--time-margin auto` (the smallest margin whose plan is not fragile; key Smauto).
#
# RUN_STEPS (400): the steps of each `emo run`; more steps give more of the guard's default-clock
# re-timings (one every 50 iterations) to read the plan against.
#
#   EMO=build/device/bin/emo OUT=o [ROUNDS=3] [LOOPS="train decode streams"] [AB_LOOPS=streams] \
#     [SLOWDOWNS="0.02 0.10"] [MARGINS=0] [RUN_STEPS=400] bash bench/gpu/emulate.sh
# Writes $OUT/emulate/summary.json and the runs' JSON reports.
set -uo pipefail
: "${EMO:?set EMO}" "${OUT:?set OUT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PY:-/opt/torch/.venv/bin/python}"
ROUNDS="${ROUNDS:-3}"
LOOPS="${LOOPS:-train decode streams}"
AB_LOOPS="${AB_LOOPS:-streams}"
SLOWDOWNS="${SLOWDOWNS:-0.02 0.10}"
MARGINS="${MARGINS:-0}"
RUN_STEPS="${RUN_STEPS:-400}"
# One plan per slowdown and margin, named S (margin 0) or SmM (`--time-margin M`).
plans=()
for s in $SLOWDOWNS; do
  for m in $MARGINS; do
    if [[ $m == 0 ]]; then plans+=("$s"); else plans+=("${s}m${m}"); fi
  done
done
dest="$OUT/emulate"
work="$(mktemp -d /tmp/emo_emulate.XXXXXX)"
mkdir -p "$dest"
# shellcheck source=loops.sh
source "$here/loops.sh"
prepare_loops "$LOOPS" || exit 1
device="$(device_model)"
for loop in $LOOPS; do
  read -ra cmd <<<"$(loop_command "$loop" 120)"
  "$EMO" trace -o "$work/${loop}.emotrace" --warmup 40 --iterations 4 -- "${cmd[@]}" >"$work/${loop}_trace.out" 2>&1
  for s in "${plans[@]}"; do
    m=0
    [[ $s == *m* ]] && m="${s#*m}"
    "$EMO" optimize "$work/${loop}.emotrace" --device "$device" --max-slowdown "${s%%m*}" --time-margin "$m" \
      --policy "$dest/${loop}_${s}_policy.json" >"$dest/${loop}_${s}_optimize.txt" 2>&1
  done
done
for ((r = 1; r <= ROUNDS; r++)); do
  for loop in $LOOPS; do
    read -ra cmd <<<"$(loop_command "$loop" "$RUN_STEPS")"
    for s in "${plans[@]}"; do
      order=(emulate)
      if [[ " $AB_LOOPS " == *" $loop "* ]]; then
        order=(emulate dry-run)
        ((r % 2 == 0)) && order=(dry-run emulate)
      fi
      for a in "${order[@]}"; do
        "$EMO" run --policy "$dest/${loop}_${s}_policy.json" --actuator "$a" --guard 50 \
          --switch-log "$work/${loop}_${s}_${a}_$r.jsonl" --json "$dest/${loop}_${s}_${a}_$r.json" -- "${cmd[@]}" \
          >"$work/${loop}_${s}_${a}_$r.out" 2>&1 || echo "run $loop $s $a $r: exit $?" >>"$dest/errors.txt"
      done
    done
  done
done
python3 - "$dest" "$ROUNDS" "$LOOPS" "${plans[*]}" <<'PY'
import json, os, statistics, sys
dest, rounds, loops, slowdowns = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
out = {"rounds": rounds, "loops": {}}
for loop in loops:
    for s in slowdowns:
        pol = load(f"{dest}/{loop}_{s}_policy.json")
        if pol is None:
            continue
        g = pol["gpus"][0]
        pred = g["predicted"]
        entry = {"predicted_slowdown_pct": 100 * (pred["iteration_time_us"] / pred["baseline_time_us"] - 1),
                 "model": pol["model"], "packs": len(g["packs"]),
                 "clocks_mhz": [p["clock_mhz"] for p in g["packs"]],
                 "spins_per_iteration": len(g["emulate"]["spins"]),
                 "extra_us_per_iteration": g["emulate"]["extra_us_per_iteration"],
                 "baseline_time_us": pred["baseline_time_us"],
                 "fragile_time": pred.get("fragile_time"), "runs": []}
        within, paired, across = [], [], []
        for r in range(1, rounds + 1):
            em = load(f"{dest}/{loop}_{s}_emulate_{r}.json")
            dr = load(f"{dest}/{loop}_{s}_dry-run_{r}.json")
            row = {"round": r}
            for name, j in (("emulate", em), ("dry_run", dr)):
                if not j or not j.get("traces"):
                    continue
                t = j["traces"][0]
                pe = t.get("policy_effect", {})
                pr = t.get("policy_run", {})
                row[name] = {"in_force_ms": pe.get("in_force", {}).get("step_ms"),
                             "in_force_n": pe.get("in_force", {}).get("iterations"),
                             "interleaved_default_ms": pe.get("interleaved_default", {}).get("step_ms"),
                             "interleaved_default_n": pe.get("interleaved_default", {}).get("iterations"),
                             "before_ms": pe.get("before_plan", {}).get("step_ms"),
                             "before_n": pe.get("before_plan", {}).get("iterations"),
                             "under_ms": pe.get("under_plan", {}).get("step_ms"),
                             "under_n": pe.get("under_plan", {}).get("iterations"),
                             "followed": pr.get("followed"), "fallbacks": pr.get("fallbacks"),
                             "iterations_followed": pr.get("iterations_followed"),
                             "guard_probes": pr.get("guard_probes"),
                             "spins": pr.get("emulate_spins"), "spin_ms": (int(pr["emulate_spin_ns"]) / 1e6) if "emulate_spin_ns" in pr else None,
                             "unknown_stream": pr.get("emulate_unknown_stream"), "failed": pr.get("emulate_failed"),
                             # The plan's baseline against this run's default clock (run_report.cc).
                             "plan_iteration_matches": pe.get("plan_iteration", {}).get("matches")}
                if name == "emulate" and "emulated" in pe:
                    row["within_run_pct"] = pe["emulated"]["measured_slowdown_pct"]
                    row["within_run_from"] = pe["emulated"]["measured_from"]
                    row["spin_launch_cost_pct"] = pe["emulated"].get("spin_launch_cost_pct")
                    within.append(row["within_run_pct"])
                    # Each guard re-timing against the plan's iterations next to it (run_report.cc).
                    row["paired_pct"] = pe["emulated"].get("paired_slowdown_pct")
                    row["paired_retimings"] = pe["emulated"].get("paired_retimings")
                    if row["paired_pct"] is not None:
                        paired.append(row["paired_pct"])
            e, d = row.get("emulate", {}), row.get("dry_run", {})
            if e.get("under_ms") and d.get("under_ms"):
                row["vs_dry_run_pct"] = 100 * (e["under_ms"] / d["under_ms"] - 1)
                across.append(row["vs_dry_run_pct"])
            entry["runs"].append(row)
        entry["within_run_median_pct"] = statistics.median(within) if within else None
        entry["vs_dry_run_median_pct"] = statistics.median(across) if across else None
        entry["paired_median_pct"] = statistics.median(paired) if paired else None
        for k in ("within_run", "paired", "vs_dry_run"):
            m = entry[f"{k}_median_pct"]
            entry[f"{k}_minus_predicted_points"] = None if m is None else m - entry["predicted_slowdown_pct"]
        out["loops"][f"{loop}@{s}"] = entry
json.dump(out, open(f"{dest}/summary.json", "w"), indent=1)
for k, e in out["loops"].items():
    print(f"{k:16s} predicted {e['predicted_slowdown_pct']:+.2f} %  within-run {e['within_run_median_pct']}  "
          f"paired {e['paired_median_pct']}  "
          f"vs dry-run {e['vs_dry_run_median_pct']}  spins/it {e['spins_per_iteration']} packs {e['packs']}")
PY
