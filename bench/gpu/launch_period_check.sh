#!/usr/bin/env bash
# Does `emo trace` find a loop's steps without NVTX when the signatures alone cannot say where a
# step starts? (issue Order 7: iterations without the user's help.) On the GPU machine, from the
# repository root, with the device bundle (scripts/device_bundle.sh) in build/device:
#   OUT=/some/folder bash bench/gpu/launch_period_check.sh
# Runs plain loops (no --nvtx) under `emo trace`: N identical GEMMs and a read-back per step
# (N = 16, 5, 1) and the eleven held-out workloads (bench/h200/record_workloads.py), then `emo analyze` on each trace. Writes, per
# loop, <loop>.txt (the program's JSON line, its own per-step timing), <loop>_run.json (emo
# trace's summary) and <loop>_analyze.json into $OUT/launch_period_check.tar.gz, and a log.
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
declare -A step_ms=([mlp_small_train]=7.8 [bert_infer]=2.7 [cnn_dataload_train]=5.5 [gpt_small_train]=16.7
                    [resnet_small_train]=7.9 [lstm_lm_train]=9.9 [stream_chain]=0.84 [fp32_mlp_train]=4.4
                    [tiny_ops]=3.9 [conv_infer]=2.0 [llm_prefill_infer]=11.0)
# LOOPS="w1 w2 ..." picks some of them (default: all); REPEAT=N runs each N times (<w>, <w>_2, ...).
for w in ${LOOPS:-tiny_ops mlp_small_train stream_chain bert_infer cnn_dataload_train gpt_small_train resnet_small_train \
         lstm_lm_train fp32_mlp_train conv_infer llm_prefill_infer}; do
  steps=$(awk -v ms="${step_ms[$w]}" 'BEGIN { printf "%d", 4000 / ms }')
  for r in $(seq 1 "${REPEAT:-1}"); do
    name=$w; [[ $r -gt 1 ]] && name="${w}_$r"
    one "$name" $((steps / 3)) "$PY" "$root/bench/gpu/workload_loop.py" "$w" --steps "$steps" --warmup 20
  done
done
ls -la "$W" >>"$log"
tar -C "$W" -czf "$OUT/launch_period_check.tar.gz" --exclude '*.emotrace' .
