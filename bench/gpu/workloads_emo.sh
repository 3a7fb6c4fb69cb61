#!/usr/bin/env bash
# The held-out workloads (bench/h200/record_workloads.py, data/h200_heldout*) traced by `emo trace`
# instead of the PyTorch profiler, each in its own process (bench/gpu/workload_loop.py, the sync
# loop, NVTX steps): about 9 s of loop, the 5 traced steps after about a third of it, so the trace
# carries the run's untraced step time, NVML energy per step and SM clock (issue Order 8). On the
# GPU machine, from the repository root, with the device bundle (scripts/device_bundle.sh) in
# build/device:
#   OUT=/some/folder bash bench/gpu/workloads_emo.sh [WORKLOAD ...]
# Plans each trace with `emo optimize --device h200` (its baseline beside the run's measured
# energy). Writes $OUT/workloads_emo.tar.gz (<workload>_run.json: emo trace's summary,
# <workload>_optimize.json/.txt, <workload>.txt: the program's JSON line) and
# $OUT/workloads_emo.log; the traces stay in a temporary folder. Reads clocks and power only; never sets them.
set -uo pipefail
: "${OUT:?set OUT}"
root="$(pwd)"
EMO="${EMO:-$root/build/device/bin/emo}"
PY="${PY:-/opt/torch/.venv/bin/python}"
W="$(mktemp -d /tmp/workloads_emo.XXXXXX)"
log="$OUT/workloads_emo.log"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$log"; }
export PYTHONUNBUFFERED=1

source "$root/bench/gpu/heldout_workloads.sh"
workloads=("$@")
[[ ${#workloads[@]} -gt 0 ]] || workloads=("${HELDOUT_WORKLOADS[@]}")

for w in "${workloads[@]}"; do
  steps=$(heldout_steps "$w" 9000)
  warmup=$((steps / 3))
  say "== $w: $steps steps, traced after $warmup"
  "$EMO" trace -o "$W/$w.emotrace" --warmup "$warmup" --iterations 5 --json "$W/${w}_run.json" \
    -- "$PY" "$root/bench/gpu/workload_loop.py" "$w" --steps "$steps" --warmup 20 --nvtx >"$W/$w.txt" 2>>"$log"
  say "rc $?"
  "$EMO" optimize "$W/$w.emotrace" --device h200 --json "$W/${w}_optimize.json" >"$W/${w}_optimize.txt" 2>&1
  say "optimize rc $?"
done
ls -la "$W" >>"$log"
# The traces stay behind (tens of MB); their runs' summaries and the plans come back.
tar -C "$W" -czf "$OUT/workloads_emo.tar.gz" --exclude '*.emotrace' .
