#!/usr/bin/env bash
# The tracer's overhead measured with both programs running at the same time: in each round the
# training loop runs plainly on one half of the cores and under `emo trace` on the other half,
# started together on the same GPU, and the two are compared over the same stretch of wall time
# (each step's start on CLOCK_MONOTONIC, the loop's --step-starts). The host's speed, which moves
# by ±20 % between fresh processes and within one (BENCHMARKS.md, "The tracer's threads
# counted; long runs; the overhead still undecided"), then moves both alike. emo alternates
# between the halves from round to round, and by default every third round runs plain on both
# halves (A/A): the design's own spread, against which the emo/plain ratio is read.
#
#   EMO=path/to/emo OUT=/some/folder bash bench/gpu/overhead_concurrent.sh    (repository root)
#
# What the design costs: the two programs share the GPU (time-sliced between their contexts),
# so each step is slower than alone (a solo plain run first measures by how much:
# summary.json solo.plain_together_over_alone) and partly waits on the other's kernels, which
# hides some of any host-side cost; CYCLE with emo_noanchor (below) measures how much of a known
# one still shows. emo's threads share its half of the cores with the program, as they would on
# a machine whose other cores were busy. Never changes clocks or power limits.
#
# Settings (environment): ROUNDS=15, BUDGET_S=540 (no round starts that would end past it),
# CYCLE="emo:plain plain:emo plain:plain" (the rounds' modes on halves A:B, repeated; a mode is
# plain, emo, or emo_noanchor = `emo trace` with EMO_TRACE_ANCHOR=0, every launch followed to
# the end: a tracer whose cost earlier runs measured, to show the design can see one; or spin =
# plain with --host-spin-us $SPIN_US (default 150): a host-side cost of known size, which
# measures how much of one the design shows (SPIN_PCT=P instead sizes it to P % of the solo
# run's median step); or run = `emo run --actuator dry-run` under
# RUN_POLICY, made first from one `emo trace` and `emo optimize --device $DEVICE` when unset
# (DEVICE: by default the GPU's model, bench/gpu/loops.sh device_model):
# what following a plan costs the program),
# TRAIN_ARGS="--steps 1500 --warmup 30", EMO_WARMUP=50 EMO_ITERS=20 (emo trace's window),
# CORES_A / CORES_B (default: the first and second half of the cores this script may use),
# SOLO=1 (a plain run alone first), RUN_TIMEOUT=150, GPU_A / GPU_B (CUDA_VISIBLE_DEVICES of each
# half; default unset: both on the same GPU. On a machine of two GPUs, GPU_A=0 GPU_B=1 removes
# the sharing; the GPUs swap with the halves, so a difference between them cancels like the
# cores'.)
# Writes $OUT/concurrent/rounds.jsonl (one line per program run), summary.json (by
# overhead_concurrent_summary.py), concurrent.log, and emo's JSON of each traced run in emo.tar.gz.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench_env.sh
source "$here/bench_env.sh"
ROUNDS="${ROUNDS:-15}"
BUDGET_S="${BUDGET_S:-540}"
TRAIN_ARGS="${TRAIN_ARGS:---steps 1500 --warmup 30}"
EMO_WARMUP="${EMO_WARMUP:-50}"
EMO_ITERS="${EMO_ITERS:-20}"
SOLO="${SOLO:-1}"
read -r -a cycle <<<"${CYCLE:-emo:plain plain:emo plain:plain}"
RUN_TIMEOUT="${RUN_TIMEOUT:-150}"
mapfile -t cpus < <("$SPY" -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
half=$(( ${#cpus[@]} / 2 ))
join() { local IFS=,; echo "$*"; }
CORES_A="${CORES_A:-$(join "${cpus[@]:0:half}")}"
CORES_B="${CORES_B:-$(join "${cpus[@]:half}")}"
dest="$OUT/concurrent"
work="$(mktemp -d /tmp/emo_concurrent.XXXXXX)"
mkdir -p "$dest" "$work/emo"
log="$dest/concurrent.log"
rows="$dest/rounds.jsonl"
: >"$rows"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$log" >&2; }
[[ -x "$EMO" ]] || { say "EMO=$EMO is not an executable"; exit 1; }
[[ -n "$CORES_A" && -n "$CORES_B" ]] || { say "fewer than two cores to split (${#cpus[@]})"; exit 1; }
read -r -a targs <<<"$TRAIN_ARGS"
prog=("$PY" "$here/train_loop.py" "${targs[@]}" --step-starts)
say "cores A $CORES_A, B $CORES_B; GPUs A ${GPU_A:-shared}, B ${GPU_B:-shared}; ${prog[*]}"

# mode, cores, tag, gpu: runs one program pinned to the cores (and to the GPU when given), its
# stdout/stderr under $work.
run_one() {
  local mode="$1" cores="$2" tag="$3" gpu="${4:-}"
  local e=(env) cmd
  [[ -n "$gpu" ]] && e+=(CUDA_VISIBLE_DEVICES="$gpu")
  case "$mode" in
    plain) cmd=("${prog[@]}") ;;
    spin) cmd=("${prog[@]}" --host-spin-us "${SPIN_US:-150}") ;;
    run) cmd=("$EMO" run --policy "$RUN_POLICY" --actuator dry-run --switch-log "$work/emo/$tag.switches.jsonl"
              --json "$work/emo/$tag.json" -- "${prog[@]}") ;;
    emo|emo_noanchor)
      [[ $mode == emo_noanchor ]] && e+=(EMO_TRACE_ANCHOR=0)
      cmd=("$EMO" trace -o "$work/emo/$tag.emotrace" --warmup "$EMO_WARMUP" --iterations "$EMO_ITERS"
           --json "$work/emo/$tag.json" -- "${prog[@]}") ;;
    *) say "unknown mode $mode"; echo 2 >"$work/$tag.rc"; : >"$work/$tag.out"; : >"$work/$tag.err"; return ;;
  esac
  timeout "$RUN_TIMEOUT" taskset -c "$cores" "${e[@]}" "${cmd[@]}" >"$work/$tag.out" 2>"$work/$tag.err"
  echo $? >"$work/$tag.rc"
}
# round, kind, side, mode, cores, tag: one line of rounds.jsonl.
record() {
  "$SPY" - "$@" "$work" >>"$rows" <<'PY'
import json, sys
rnd, kind, side, mode, cores, tag, work = sys.argv[1:]
prog = None
for line in open(f"{work}/{tag}.out", errors="replace"):
    if line.startswith("{"):
        try:
            prog = json.loads(line)
        except ValueError:
            pass
rc = int(open(f"{work}/{tag}.rc").read().strip() or -1)
err = open(f"{work}/{tag}.err", errors="replace").read()[-400:] if prog is None else ""
print(json.dumps({"round": int(rnd), "kind": kind, "side": side, "mode": mode, "cores": cores, "rc": rc,
                  "program": prog, "stderr_tail": err}))
PY
}

t0=$(date +%s)
if [[ " ${cycle[*]} " == *run* && -z "${RUN_POLICY:-}" ]]; then  # dry-run: a plan, no clock changes
  RUN_POLICY="$work/policy.json"
  taskset -c "$CORES_A" "$EMO" trace -o "$work/policy.emotrace" --warmup 30 --iterations 5 -- "${prog[@]}" \
    >"$work/policy.trace.out" 2>&1
  # shellcheck source=loops.sh
  source "$here/loops.sh"
  device="$(device_model)"
  "$EMO" optimize "$work/policy.emotrace" --device "$device" --policy "$RUN_POLICY" >"$work/policy.optimize.out" 2>&1
  rc=$?
  say "policy $RUN_POLICY (device model $device): rc $rc"
  if [[ $rc != 0 || ! -s "$RUN_POLICY" ]]; then  # every run round would fail: say why and stop
    say "no policy to run: $(tail -q -n 3 "$work/policy.trace.out" "$work/policy.optimize.out" | tr '\n' ' ')"
    exit 1
  fi
  cp "$RUN_POLICY" "$dest/policy.json"
fi
if [[ "$SOLO" == 1 ]]; then
  run_one plain "$CORES_A" solo "${GPU_A:-}"
  record 0 solo A plain "$CORES_A" solo
  say "solo plain: rc $(cat "$work/solo.rc")"
fi
if [[ -n "${SPIN_PCT:-}" ]]; then  # the spin sized to a share of the solo step
  SPIN_US=$(spin_us_of_first_run "$rows" "$SPIN_PCT")  # the solo run is the first line
  [[ -n "$SPIN_US" ]] || { say "SPIN_PCT needs the solo run (SOLO=1), which gave no steps"; exit 1; }
  say "spin: ${SPIN_PCT} % of the solo step = ${SPIN_US} us per step"
fi
round_s=0
for r in $(seq 1 "$ROUNDS"); do
  now=$(date +%s)
  if (( r > 1 && now - t0 + round_s > BUDGET_S )); then
    say "round $r would end past BUDGET_S=$BUDGET_S: stopping"
    break
  fi
  # Rounds cycle through CYCLE (by default: emo on A, emo on B, plain on both: A/A).
  pair="${cycle[$(( (r - 1) % ${#cycle[@]} ))]}"
  ma="${pair%%:*}"
  mb="${pair##*:}"
  kind=ab
  [[ $ma == plain && $mb == plain ]] && kind=aa
  s=$(date +%s)
  run_one "$ma" "$CORES_A" "r${r}a" "${GPU_A:-}" &
  run_one "$mb" "$CORES_B" "r${r}b" "${GPU_B:-}" &
  wait
  record "$r" "$kind" A "$ma" "$CORES_A" "r${r}a"
  record "$r" "$kind" B "$mb" "$CORES_B" "r${r}b"
  round_s=$(( $(date +%s) - s ))
  say "round $r ($kind: A $ma, B $mb): rc $(cat "$work/r${r}a.rc")/$(cat "$work/r${r}b.rc"), ${round_s} s"
done
tar -czf "$dest/emo.tar.gz" -C "$work/emo" $(cd "$work/emo" && ls ./*.json 2>/dev/null) 2>/dev/null
"$SPY" "$here/overhead_concurrent_summary.py" "$rows" --after $(( EMO_WARMUP + EMO_ITERS + 5 )) >"$dest/summary.json" 2>>"$log"
say "summary: rc $?"
"$SPY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("rounds", None); print(json.dumps(d, indent=1))' "$dest/summary.json" | tee -a "$log"
