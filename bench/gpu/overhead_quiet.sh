#!/usr/bin/env bash
# The tracer's overhead measured inside one run: `emo trace` with EMO_TRACE_QUIET_MS set, once its
# window is traced and the loop followed by its anchor call, alternates phases of PHASE_MS with
# the tracer as it always runs after the window ("engaged") and phases with CUPTI detached and its
# GPU thread paused ("quiet"; docs/runtime.md, "Quiet phases"). The training loop's own step
# times in neighbouring phases are compared (overhead_quiet_summary.py): the host's pace, which
# moves by ±20 % between fresh processes and in stretches of 30-100 steps within one
# (BENCHMARKS.md, Order 7), moves neighbouring phases alike, and the program has the GPU to
# itself, so nothing hides a host-side cost of the tracer the way the concurrent design's shared
# GPU did (overhead_concurrent.sh).
#
# Two controls run in the same call, interleaved with the emo runs:
#  - spin: the plain loop (no emo) with a known host-side cost (SPIN_PCT % of the first plain
#    run's median step, spun at each step's start) in alternate phases of PHASE_MS only
#    (train_loop.py --spin-phase-ms): what the design shows of a cost of known size;
#  - null: the plain loop cut into the same phases with nothing added: the design's own spread.
#
#   EMO=path/to/emo OUT=/some/folder bash bench/gpu/overhead_quiet.sh    (repository root)
#
# Settings (environment): ROUNDS=4 (each round runs CYCLE in order, rotated by one per round),
# CYCLE="emo spin emo null", PHASE_MS=1000, SPIN_PCT=2, BUDGET_S=540 (no round starts that would
# end past it), TRAIN_ARGS="--steps 1500 --warmup 30", EMO_WARMUP=50 EMO_ITERS=20 (emo trace's
# window), RUN_TIMEOUT=150. Never changes clocks or power limits.
# Writes $OUT/quiet/runs.jsonl (one line per run, with its phase marks), summary.json, quiet.log.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench_env.sh
source "$here/bench_env.sh"
ROUNDS="${ROUNDS:-4}"
BUDGET_S="${BUDGET_S:-540}"
PHASE_MS="${PHASE_MS:-1000}"
SPIN_PCT="${SPIN_PCT:-2}"
TRAIN_ARGS="${TRAIN_ARGS:---steps 1500 --warmup 30}"
EMO_WARMUP="${EMO_WARMUP:-50}"
EMO_ITERS="${EMO_ITERS:-20}"
RUN_TIMEOUT="${RUN_TIMEOUT:-150}"
read -r -a cycle <<<"${CYCLE:-emo spin emo null}"
bench_output quiet runs.jsonl
read -r -a targs <<<"$TRAIN_ARGS"
prog=("$PY" "$here/train_loop.py" "${targs[@]}" --step-starts)
say "phases of $PHASE_MS ms; ${prog[*]}"

# mode, tag: one run, its stdout/stderr and (emo) the quiet phases' marks under $work.
run_one() {
  local mode="$1" tag="$2" cmd
  case "$mode" in
    plain) cmd=("${prog[@]}") ;;
    null) cmd=("${prog[@]}" --spin-phase-ms "$PHASE_MS") ;;
    spin) cmd=("${prog[@]}" --host-spin-us "$SPIN_US" --spin-phase-ms "$PHASE_MS") ;;
    emo) cmd=(env EMO_TRACE_QUIET_MS="$PHASE_MS" EMO_TRACE_QUIET_LOG="$work/$tag.marks"
              "$EMO" trace -o "$work/$tag.emotrace" --warmup "$EMO_WARMUP" --iterations "$EMO_ITERS"
              --json "$work/$tag.json" -- "${prog[@]}") ;;
  esac
  timeout "$RUN_TIMEOUT" "${cmd[@]}" >"$work/$tag.out" 2>"$work/$tag.err"
  echo $? >"$work/$tag.rc"
}
# round, mode, tag: one line of runs.jsonl.
record() {
  "$SPY" - "$@" "$work" >>"$rows" <<'PY'
import json, os, sys
rnd, mode, tag, work = sys.argv[1:]
prog = None
for line in open(f"{work}/{tag}.out", errors="replace"):
    if line.startswith("{"):
        try:
            prog = json.loads(line)
        except ValueError:
            pass
marks = None
if os.path.exists(f"{work}/{tag}.marks"):
    marks = [[p, int(t)] for p, t in (line.split() for line in open(f"{work}/{tag}.marks") if line.strip())]
elif prog and "phase_marks" in prog:
    marks = prog["phase_marks"]
emo = None
if os.path.exists(f"{work}/{tag}.json"):
    try:
        d = json.load(open(f"{work}/{tag}.json"))
        emo = {k: d[k] for k in ("step_time_ms", "callbacks", "iterations") if k in d}
    except ValueError:
        pass
rc = int(open(f"{work}/{tag}.rc").read().strip() or -1)
err = open(f"{work}/{tag}.err", errors="replace").read()[-400:] if prog is None or marks is None else ""
print(json.dumps({"round": int(rnd), "mode": mode, "rc": rc, "program": prog, "marks": marks, "emo": emo,
                  "stderr_tail": err}))
PY
}

t0=$(date +%s)
run_one plain solo
record 0 plain solo
SPIN_US=$(spin_us_of_first_run "$rows" "$SPIN_PCT")
[[ -n "$SPIN_US" ]] || { say "the first plain run gave no steps: $(tail -c 400 "$work/solo.err")"; exit 1; }
say "solo plain: rc $(cat "$work/solo.rc"); spin ${SPIN_PCT} % of its median step = ${SPIN_US} us"
run_s=0
n=0
for r in $(seq 1 "$ROUNDS"); do
  for k in $(seq 0 $(( ${#cycle[@]} - 1 ))); do
    now=$(date +%s)
    if (( n > 0 && now - t0 + run_s > BUDGET_S )); then
      say "run $n would end past BUDGET_S=$BUDGET_S: stopping"
      break 2
    fi
    mode="${cycle[$(( (k + r - 1) % ${#cycle[@]} ))]}"
    s=$(date +%s)
    run_one "$mode" "r${r}_$k"
    record "$r" "$mode" "r${r}_$k"
    run_s=$(( $(date +%s) - s ))
    n=$(( n + 1 ))
    say "round $r, $mode: rc $(cat "$work/r${r}_$k.rc"), ${run_s} s"
  done
done
"$SPY" "$here/overhead_quiet_summary.py" "$rows" >"$dest/summary.json" 2>>"$log"
say "summary: rc $?"
"$SPY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("runs", None); print(json.dumps(d, indent=1))' "$dest/summary.json" | tee -a "$log"
