#!/usr/bin/env bash
# Tracer overhead on the GPU machine: each workload run in fresh processes, in interleaved rounds
# of {plain, under `emo trace`, under torch.profiler (python workloads only)}, each run timing
# its own loop (median step ms, one JSON line). Runs from the repository root:
#
#   EMO=path/to/emo OUT=/some/folder bash bench/gpu/overhead.sh
#
# The caller sets LD_LIBRARY_PATH for emo's libraries (the programs inherit the same environment
# in every mode, plain included). Never changes clocks or power limits: the programs only read
# NVML (--nvml-energy).
#
# Writes to $OUT/overhead/ (the device tool brings back at most 8 files, 2 folders down, so the
# raw files are packed):
#   summary.json        per workload: plain median, under-emo median (the program's own timing,
#                       also inside and outside the traced window), emo's own untraced step time
#                       (from `emo trace --json` if it has it, else `emo analyze --json` of the
#                       trace, else its printed summary; null if none), torch-profiler profiled
#                       and unprofiled medians, energy per step, ratios (overhead_summary.py)
#   runs.tar.gz         every run's command, stdout, stderr, exit code, wall time, emo's JSON
#   emo_traces.tar.gz   round 1's emo trace of each workload (if it fits in 15 MiB)
#   torchprof_traces.tar.gz  round 1's torch-profiler trace of each python workload (if it fits)
#   overhead.log        progress
#
# Settings (environment):
#   EMO (required)     the emo binary;  OUT (required) the output folder
#   PY                 python with torch (default /opt/torch/.venv/bin/python, else python3)
#   ROUNDS=5           rounds; BUDGET_S=330 stops starting rounds that would end past it
#   WORKLOADS="train decode streams"   MODES="plain emo torchprof"  (also: monitor = `emo monitor`,
#                      emo_noanchor = `emo trace` with EMO_TRACE_ANCHOR=0: launch callbacks to the end,
#                      run = `emo run --actuator dry-run` under a policy made before the rounds from one
#                      `emo trace` of the workload and `emo optimize` (the GPU's model); run1 = the same
#                      with that policy's packs all set to its first pack's clock: a plan of one clock,
#                      which `emo run` follows by the loop's anchor call with the launch callbacks off;
#                      run1_noanchor = run1 with EMO_TRACE_ANCHOR=0: every launch followed)
#   EMO_WARMUP=50 EMO_ITERS=20         passed as `emo trace --warmup/--iterations` if it has them
#   EMO_ANALYZE=1      also run `emo analyze TRACE --json` after each traced run (if the trace
#                      gave no JSON with an untraced time); 0 to skip
#   ENERGY=1           --nvml-energy in every run;  NVTX=0 (1: --nvtx in every run)
#   TRAIN_ARGS, DECODE_ARGS, STREAMS_ARGS   the programs' own options
#   RUN_TIMEOUT=150    seconds per run;  WORK  scratch folder (default a new one under /tmp)
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench_env.sh
source "$here/bench_env.sh"
ROUNDS="${ROUNDS:-5}"
BUDGET_S="${BUDGET_S:-330}"
WORKLOADS="${WORKLOADS:-train decode streams}"
MODES="${MODES:-plain emo torchprof}"
EMO_WARMUP="${EMO_WARMUP:-50}"
EMO_ITERS="${EMO_ITERS:-20}"
EMO_ANALYZE="${EMO_ANALYZE:-1}"
ENERGY="${ENERGY:-1}"
NVTX="${NVTX:-0}"
TRAIN_ARGS="${TRAIN_ARGS:---steps 250 --warmup 30}"
DECODE_ARGS="${DECODE_ARGS:---steps 400 --warmup 40}"
STREAMS_ARGS="${STREAMS_ARGS:---iters 1000 --warmup 50}"
RUN_TIMEOUT="${RUN_TIMEOUT:-150}"
WORK="${WORK:-$(mktemp -d /tmp/emo_overhead.XXXXXX)}"
dest="$OUT/overhead"
mkdir -p "$dest" "$WORK/runs" "$WORK/traces" "$WORK/torchprof"
log="$dest/overhead.log"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$log" >&2; }

[[ -x "$EMO" ]] || { say "EMO=$EMO is not an executable"; exit 1; }
[[ -x "$PY" ]] || { say "no python (PY=$PY)"; exit 1; }
t_start=$(date +%s)

# ---------------------------------------------------------------- what the tracer accepts
"$EMO" trace --help >"$WORK/emo_trace_help.txt" 2>&1
say "emo trace --help: rc $? ($(wc -l <"$WORK/emo_trace_help.txt") lines)"
has_opt() { grep -q -- "$1" "$WORK/emo_trace_help.txt"; }
emo_trace_opts=()
has_opt '--warmup' && emo_trace_opts+=(--warmup "$EMO_WARMUP")
has_opt '--iterations' && emo_trace_opts+=(--iterations "$EMO_ITERS")
emo_json=0
has_opt '--json' && emo_json=1
say "emo trace options: ${emo_trace_opts[*]:-(none)}; --json: $emo_json"

# ---------------------------------------------------------------- build the CUDA program
if [[ " $WORKLOADS " == *" streams "* ]]; then
  if ! bash "$here/build_streams_graph.sh" "$WORK/streams_graph" >"$WORK/build.log" 2>&1; then
    say "streams_graph build failed:"; tee -a "$log" <"$WORK/build.log" >&2
    WORKLOADS="${WORKLOADS//streams/}"
  fi
fi

extra=()
[[ "$ENERGY" == 1 ]] && extra+=(--nvml-energy)
[[ "$NVTX" == 1 ]] && extra+=(--nvtx)

# prog WORKLOAD: the program's command line (array `cmd`)
prog() {
  case "$1" in
    train) read -ra a <<<"$TRAIN_ARGS"; cmd=("$PY" "$here/train_loop.py" "${a[@]}" "${extra[@]}") ;;
    decode) read -ra a <<<"$DECODE_ARGS"; cmd=("$PY" "$here/decode_loop.py" "${a[@]}" "${extra[@]}") ;;
    streams) read -ra a <<<"$STREAMS_ARGS"; cmd=("$WORK/streams_graph" "${a[@]}" "${extra[@]}") ;;
    *) say "unknown workload $1"; return 1 ;;
  esac
}

# policies for mode run: one `emo trace` and `emo optimize` per workload (dry-run never changes
# clocks), with the GPU's device model (loops.sh device_model)
make_policies() {
  local wl device
  # shellcheck source=loops.sh
  source "$here/loops.sh"
  device="$(device_model)"
  for wl in $WORKLOADS; do
    prog "$wl" || continue
    timeout "$RUN_TIMEOUT" "$EMO" trace -o "$WORK/policy_$wl.emotrace" --warmup 30 --iterations 5 -- "${cmd[@]}" \
      >"$WORK/policy_$wl.trace.out" 2>&1
    timeout 120 "$EMO" optimize "$WORK/policy_$wl.emotrace" --device "$device" --policy "$WORK/policy_$wl.json" \
      --json "$WORK/policy_$wl.optimize.json" >"$WORK/policy_$wl.optimize.out" 2>&1
    say "policy for $wl: rc $? ($(grep -c first_call "$WORK/policy_$wl.json" 2>/dev/null || echo 0) packs)"
    "$SPY" - "$WORK/policy_$wl.json" "$WORK/policy_${wl}_one.json" <<'PYEOF' 2>&1 | tee -a "$log" >&2
import json, sys
p = json.load(open(sys.argv[1]))
for g in p["gpus"]:
    for pack in g["packs"]:
        pack["clock_mhz"] = g["packs"][0]["clock_mhz"]
json.dump(p, open(sys.argv[2], "w"), indent=1)
PYEOF
  done
}

# run_one WORKLOAD MODE ROUND
run_one() {
  local wl=$1 mode=$2 r=$3 name="$1_$2_r$3"
  local base="$WORK/runs/$name" trace="$WORK/traces/$1_$2_r$3.emo"
  prog "$wl" || return
  case "$mode" in
    plain) ;;
    emo|emo_noanchor)
      local j=() e=()
      [[ $emo_json == 1 ]] && j=(--json "$base.emo.json")
      [[ $mode == emo_noanchor ]] && e=(env EMO_TRACE_ANCHOR=0)
      cmd=("${e[@]}" "$EMO" trace -o "$trace" "${emo_trace_opts[@]}" "${j[@]}" -- "${cmd[@]}") ;;
    torchprof)
      [[ "$wl" == streams ]] && return 0  # python workloads only
      cmd+=(--torch-profiler "$WORK/torchprof/$name.json") ;;
    monitor)
      cmd=("$EMO" monitor --json "$base.monitor.json" -- "${cmd[@]}") ;;
    run|run1|run1_noanchor)
      local policy="$WORK/policy_$wl.json" e=()
      [[ $mode == run1* ]] && policy="$WORK/policy_${wl}_one.json"
      [[ $mode == run1_noanchor ]] && e=(env EMO_TRACE_ANCHOR=0)
      [[ -s "$policy" ]] || { say "$name: no policy"; return 0; }
      cmd=("${e[@]}" "$EMO" run --policy "$policy" --actuator dry-run --switch-log "$base.switches.jsonl"
           --json "$base.run.json" -- "${cmd[@]}") ;;
    *) say "unknown mode $mode"; return 1 ;;
  esac
  printf '%q ' "${cmd[@]}" >"$base.cmd"; echo >>"$base.cmd"
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout --kill-after=10 "$RUN_TIMEOUT" "${cmd[@]}" >"$base.out" 2>"$base.err" </dev/null
  rc=$?
  t1=$(date +%s.%N)
  echo "$rc" >"$base.rc"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }' >"$base.wall"
  local line
  line=$(grep '^{"workload"' "$base.out" | tail -n 1 | cut -c1-160)
  say "$name: rc $rc, $(cat "$base.wall") s: ${line:-no JSON line}"
  if [[ $mode == emo* && $EMO_ANALYZE == 1 && -s "$trace" ]] &&
     ! { [[ -s "$base.emo.json" ]] && grep -q untraced "$base.emo.json"; }; then
    timeout 60 "$EMO" analyze "$trace" --json "$base.analyze.json" >"$base.analyze.out" 2>&1
    say "$name: emo analyze rc $?"
  fi
  return 0
}

# ---------------------------------------------------------------- interleaved rounds
[[ " $MODES " == *" run"* ]] && make_policies
read -ra wls <<<"$WORKLOADS"
read -ra modes <<<"$MODES"
rounds_done=0
last_round_s=0
for ((r = 1; r <= ROUNDS; r++)); do
  now=$(date +%s)
  if ((r > 1 && now - t_start + last_round_s > BUDGET_S)); then
    say "stopping after $rounds_done rounds: another (~${last_round_s} s) would pass BUDGET_S=$BUDGET_S"
    break
  fi
  r0=$now
  for wl in "${wls[@]}"; do
    n=${#modes[@]}
    for ((k = 0; k < n; k++)); do  # rotate the order of the modes each round
      run_one "$wl" "${modes[$(((k + r - 1) % n))]}" "$r"
    done
  done
  rounds_done=$r
  last_round_s=$(($(date +%s) - r0))
  say "round $r done in ${last_round_s} s"
done

# ---------------------------------------------------------------- summary and packing
# shellcheck disable=SC2097,SC2098
ROUNDS_DONE=$rounds_done ELAPSED_S=$(($(date +%s) - t_start)) EMO_TRACE_OPTS="${emo_trace_opts[*]:-}" \
EMO_JSON=$emo_json ROUNDS=$ROUNDS WORKLOADS="$WORKLOADS" MODES="$MODES" EMO="$EMO" EMO_WARMUP="$EMO_WARMUP" \
EMO_ITERS="$EMO_ITERS" TRAIN_ARGS="$TRAIN_ARGS" DECODE_ARGS="$DECODE_ARGS" STREAMS_ARGS="$STREAMS_ARGS" \
ENERGY="$ENERGY" NVTX="$NVTX" PY="$PY" "$SPY" - "$WORK/meta.json" <<'EOF'
import json, os, sys
e = os.environ
json.dump({"rounds_requested": int(e["ROUNDS"]), "rounds_done": int(e["ROUNDS_DONE"]),
           "workloads": e["WORKLOADS"].split(), "modes": e["MODES"].split(), "emo": e["EMO"],
           "emo_trace_options": e["EMO_TRACE_OPTS"], "emo_trace_json": e["EMO_JSON"] == "1",
           "emo_warmup": int(e["EMO_WARMUP"]), "emo_iterations": int(e["EMO_ITERS"]),
           "train_args": e["TRAIN_ARGS"], "decode_args": e["DECODE_ARGS"], "streams_args": e["STREAMS_ARGS"],
           "energy": e["ENERGY"] == "1", "nvtx": e["NVTX"] == "1", "python": e["PY"],
           "elapsed_s": int(e["ELAPSED_S"])}, open(sys.argv[1], "w"), indent=1)
EOF
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv >"$WORK/nvidia_smi.csv" 2>&1
"$SPY" "$here/overhead_summary.py" "$WORK" --out "$dest/summary.json" 2>&1 | tee -a "$log" >&2

packed=(runs meta.json emo_trace_help.txt nvidia_smi.csv)
for f in "$WORK"/policy_*; do [[ -e "$f" && "$f" != *.emotrace ]] && packed+=("$(basename "$f")"); done
[[ -f "$WORK/build.log" ]] && packed+=(build.log)
tar czf "$dest/runs.tar.gz" -C "$WORK" "${packed[@]}" 2>>"$log"
limit=$((15 * 1024 * 1024))
pack_round1() {  # pack_round1 NAME.tar.gz FOLDER: round 1's files of FOLDER, if they fit
  local files
  files=$(cd "$WORK/$2" && ls -- *_r1.* 2>/dev/null)
  [[ -n "$files" ]] || return 0
  # shellcheck disable=SC2086
  tar czf "$dest/$1" -C "$WORK/$2" $files 2>>"$log"
  if (($(stat -c %s "$dest/$1") > limit)); then
    say "$1 is over 15 MiB: left out (the files stay in $WORK/$2 until the machine goes back)"
    rm -f "$dest/$1"
  fi
}
pack_round1 emo_traces.tar.gz traces
pack_round1 torchprof_traces.tar.gz torchprof
say "done in $(($(date +%s) - t_start)) s; $dest: $(ls "$dest" | tr '\n' ' ')"
