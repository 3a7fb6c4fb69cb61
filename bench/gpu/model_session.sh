#!/usr/bin/env bash
# One GPU-machine session for issue Order 8's evidence, from the repository root, with the
# device bundle (scripts/device_bundle.sh) carried in build/device:
#   OUT=/some/folder bash bench/gpu/model_session.sh
#  - tests/gpu/trace_ddp.sh (two GPUs: a torchrun DDP job under `emo trace`, one file per rank);
#  - bench/gpu/kernel_power.py: power and SM clock per kernel kind and size, with a trace of each;
#  - bench/h200/record_workloads.py: the third held-out set (kinds of loop the model had not met).
# Writes $OUT/*.log and $OUT/results.tar.gz. Reads clocks and power only; never sets them.
set -u
: "${OUT:?set OUT}"
W="$(mktemp -d /tmp/emo_model_session.XXXXXX)"
export PYTHONUNBUFFERED=1 PY="${PY:-/opt/torch/.venv/bin/python}"
nvidia-smi --query-gpu=index,name,clocks.sm,power.draw,power.limit --format=csv > "$OUT/smi.txt" 2>&1
(EMO=build/device/bin/emo timeout 120 bash tests/gpu/trace_ddp.sh "$W/ddp"; echo "ddp rc $?") > "$OUT/ddp.log" 2>&1
(timeout 150 "$PY" bench/gpu/kernel_power.py "$W/kernels"; echo "kernel_power rc $?") > "$OUT/kernels.log" 2>&1
(timeout 300 "$PY" -W ignore::UserWarning bench/h200/record_workloads.py "$W/rec" \
  stream_chain,fp32_mlp_train,tiny_ops,conv_infer,llm_prefill_infer --configs light
 echo "record rc $?") > "$OUT/record.log" 2>&1
rm -f "$W"/ddp/*.perfetto.json
tar czf "$OUT/results.tar.gz" -C "$W" .
tail -n 4 "$OUT"/*.log
