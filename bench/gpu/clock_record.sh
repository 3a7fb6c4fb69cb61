#!/usr/bin/env bash
# Does `emo trace` record the SM clock the kernels ran at? (issue Order 8.) On the GPU machine,
# from the repository root, with the device bundle (scripts/device_bundle.sh) carried in
# build/device:
#   OUT=/some/folder bash bench/gpu/clock_record.sh
# Traces three loops under `emo trace`, each after enough steps for the power limiter to settle:
# bf16 8192³ GEMMs (held by the limiter on the H200), fp32 4096³ GEMMs off the tensor cores (not
# held) and the GPU-bound training loop. Writes $OUT/<loop>.emotrace, <loop>_run.json (emo's run
# summary), <loop>.txt (the program's JSON line) and clock_record.log with nvidia-smi's clock
# reads taken during each loop, all but the log packed in $OUT/clock_record.tar.gz. Reads clocks
# and power only; never sets them.
set -uo pipefail
: "${OUT:?set OUT}"
root="$(pwd)"
EMO="${EMO:-$root/build/device/bin/emo}"
PY="${PY:-/opt/torch/.venv/bin/python}"
here="$root/bench/gpu"
log="$OUT/clock_record.log"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$log"; }
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv >>"$log" 2>&1

one() {  # name, warmup, iterations, program...
  local name=$1 warmup=$2 iterations=$3; shift 3
  say "== $name: $*"
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader \
    -lms 500 >"$OUT/${name}_smi.csv" 2>&1 &
  local smi=$!
  "$EMO" trace -o "$OUT/$name.emotrace" --warmup "$warmup" --iterations "$iterations" --json "$OUT/${name}_run.json" \
    -- "$@" >"$OUT/$name.txt" 2>>"$log"
  say "rc $?"
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
}

# NVTX steps: a step's launches are one kernel repeated, whose launch period is a single GEMM.
one gemm_bf16_8192 250 5 "$PY" "$here/gemm_loop.py" --n 8192 --dtype bf16 --gemms 16 --steps 450 --nvtx
one gemm_fp32_4096 150 5 "$PY" "$here/gemm_loop.py" --n 4096 --dtype fp32 --gemms 16 --steps 300 --nvtx
one bigtrain 150 5 "$PY" "$here/train_loop.py" --steps 260 --warmup 20 --batch 48 --seq 512 --d-model 1024 --heads 16 --layers 8
ls -la "$OUT" >>"$log"
tar -C "$OUT" -czf /tmp/clock_record.tar.gz --exclude clock_record.log . && mv /tmp/clock_record.tar.gz "$OUT/" && \
  find "$OUT" -mindepth 1 ! -name clock_record.tar.gz ! -name clock_record.log -delete
