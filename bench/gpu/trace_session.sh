#!/usr/bin/env bash
# One GPU-machine session of `emo trace` / `emo monitor` on the three bench/gpu programs, from the
# repository root, with the device bundle (scripts/device_bundle.sh) carried in build/device:
#   OUT=/some/folder bash bench/gpu/trace_session.sh
# Writes $OUT/session.log and $OUT/session.tar.gz (traces, emo's JSON, analyses, program output).
# Reads clocks and power only; never sets them.
set -uo pipefail
: "${OUT:?set OUT}"
root="$(pwd)"
EMO="${EMO:-$root/build/device/bin/emo}"
PY="${PY:-/opt/torch/.venv/bin/python}"
W="$(mktemp -d /tmp/emo_session.XXXXXX)"
log="$OUT/session.log"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$log"; }
run() { say "\$ $*"; "$@" >>"$log" 2>&1; local rc=$?; say "rc $rc"; return $rc; }
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv >>"$log" 2>&1

say "== GPU test: streams_graph (streams, events, CUDA graph) under emo trace"
EMO="$EMO" run bash tests/gpu/trace_streams_graph.sh "$W/streams"

trace_one() {  # name, emo trace flags..., --, program...
  local name=$1; shift
  run "$EMO" trace -o "$W/${name}_%r.emotrace" --json "$W/${name}_run.json" "$@" >"$W/${name}_trace.txt" 2>&1
  cat "$W/${name}_trace.txt" >>"$log"
  local t; t=$(ls "$W"/${name}_*.emotrace 2>/dev/null | head -1)
  [[ -n "$t" ]] || { say "no trace for $name"; return; }
  run "$EMO" analyze "$t" --json "$W/${name}_analysis.json"
  run "$EMO" analyze "$t" --correct-overhead off --json "$W/${name}_analysis_traced.json"
}
say "== train loop, iterations from the launch period"
trace_one train --warmup 20 --iterations 5 -- "$PY" bench/gpu/train_loop.py --steps 150 --warmup 20 --no-step-list
say "== train loop with NVTX step ranges"
trace_one train_nvtx --warmup 20 --iterations 5 -- "$PY" bench/gpu/train_loop.py --steps 150 --warmup 20 --nvtx --no-step-list
say "== decode loop"
trace_one decode --warmup 30 --iterations 5 -- "$PY" bench/gpu/decode_loop.py --steps 300 --warmup 30 --no-step-list
say "== emo monitor vs the program's own NVML energy over its timed region"
run "$EMO" monitor --json "$W/monitor_train.json" -- "$PY" bench/gpu/train_loop.py --steps 600 --warmup 50 --nvml-energy --no-step-list
run "$EMO" monitor --json "$W/monitor_streams.json" -- "$W/streams/streams_graph" --iters 4000 --warmup 100 --nvml-energy --no-step-list
(cd "$W" && tar czf "$OUT/session.tar.gz" --exclude=streams_graph .)
ls -la "$OUT" >>"$log"
