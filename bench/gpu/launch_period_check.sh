#!/usr/bin/env bash
# Does `emo trace` find a loop's steps without NVTX when the signatures alone cannot say where a
# step starts? (docs/runtime.md, "A step of identical launches".) On the GPU machine, from the
# repository root, with the device bundle (scripts/device_bundle.sh) in build/device:
#   OUT=/some/folder bash bench/gpu/launch_period_check.sh
# Runs plain loops (no --nvtx) under `emo trace`: N identical GEMMs and a read-back per step
# (N = 16, 5, 1; GEMMS="..." picks others) and the eleven held-out workloads
# (bench/gpu/heldout_workloads.sh), then `emo analyze` on each trace. Writes, per loop,
# <loop>.txt (the program's JSON line, its own per-step timing), <loop>_run.json (emo trace's
# summary) and <loop>_analyze.json into $OUT/launch_period_check.tar.gz, and a log.
# With OLD_INJECT=<libemo_inject.so of another commit>, each gemm loop runs under that tracer too
# (<loop>_old), for a before/after in one session. Reads clocks and power only; never sets them.
set -uo pipefail
: "${OUT:?set OUT}"
root="$(pwd)"
EMO="${EMO:-$root/build/device/bin/emo}"
PY="${PY:-/opt/torch/.venv/bin/python}"
W="$(mktemp -d /tmp/launch_period_check.XXXXXX)"
log="$OUT/launch_period_check.log"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$log"; }
export PYTHONUNBUFFERED=1

one() {  # name, warmup, program...
  local name=$1 warmup=$2; shift 2
  say "== $name: $*"
  "$EMO" trace -o "$W/$name.emotrace" --warmup "$warmup" --iterations 5 --json "$W/${name}_run.json" \
    -- "$@" >"$W/$name.txt" 2>>"$log"
  say "trace rc $?"
  "$EMO" analyze "$W/$name.emotrace" --json "$W/${name}_analyze.json" >/dev/null 2>>"$log"
  say "analyze rc $?"
}

gemm="$root/bench/gpu/gemm_loop.py"
for g in ${GEMMS-16 5 1}; do
  one "gemm$g" 40 "$PY" "$gemm" --n 2048 --dtype fp32 --gemms "$g" --steps 300
  if [[ -n "${OLD_INJECT:-}" ]]; then
    EMO_INJECT_LIB="$OLD_INJECT" one "gemm${g}_old" 40 "$PY" "$gemm" --n 2048 --dtype fp32 --gemms "$g" --steps 300
  fi
done
# The held-out workloads, without --nvtx: about 4 s of loop each, traced after a third of it.
# LOOPS="w1 w2 ..." picks some of them (default: all); REPEAT=N runs each N times (<w>, <w>_2, ...).
source "$root/bench/gpu/heldout_workloads.sh"
for w in ${LOOPS:-${HELDOUT_WORKLOADS[*]}}; do
  steps=$(heldout_steps "$w" 4000)
  for r in $(seq 1 "${REPEAT:-1}"); do
    name=$w; [[ $r -gt 1 ]] && name="${w}_$r"
    one "$name" $((steps / 3)) "$PY" "$root/bench/gpu/workload_loop.py" "$w" --steps "$steps" --warmup 20
  done
done
ls -la "$W" >>"$log"
tar -C "$W" -czf "$OUT/launch_period_check.tar.gz" --exclude '*.emotrace' .
