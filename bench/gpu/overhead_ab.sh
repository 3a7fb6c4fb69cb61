#!/usr/bin/env bash
# Where the tracer's cost on a CPU-bound PyTorch training loop comes from: interleaved fresh
# runs of train_loop.py plainly, under `emo monitor` (launch callbacks, NVML sampling), under
# `emo monitor` with NVML off (EMO_TRACE_NVML=0: launch callbacks only) and under `emo trace`.
#   OUT=dir ROUNDS=3 bash bench/gpu/overhead_ab.sh     (repository root; device bundle in build/device)
# Writes $OUT/ab.jsonl: one line per run {mode, round, median_step_ms}.
set -uo pipefail
: "${OUT:?set OUT}"
EMO="${EMO:-$(pwd)/build/device/bin/emo}"
PY="${PY:-/opt/torch/.venv/bin/python}"
ROUNDS="${ROUNDS:-3}"
ARGS=(bench/gpu/train_loop.py --steps 250 --warmup 30 --no-step-list)
W="$(mktemp -d /tmp/emo_ab.XXXXXX)"
one() {  # mode, round
  local out
  case "$1" in
    plain) out=$("$PY" "${ARGS[@]}" 2>/dev/null | tail -1) ;;
    monitor) out=$("$EMO" monitor -- "$PY" "${ARGS[@]}" 2>/dev/null | grep '^{' | tail -1) ;;
    monitor_no_nvml) out=$(EMO_TRACE_NVML=0 "$EMO" monitor -- "$PY" "${ARGS[@]}" 2>/dev/null | grep '^{' | tail -1) ;;
    trace) out=$("$EMO" trace -o "$W/t_%p.emotrace" --warmup 50 --iterations 20 -- "$PY" "${ARGS[@]}" 2>/dev/null | grep '^{' | tail -1) ;;
  esac
  python3 -c 'import json,sys; d=json.loads(sys.argv[3]); print(json.dumps({"mode": sys.argv[1], "round": int(sys.argv[2]), "median_step_ms": d["median_step_ms"]}))' "$1" "$2" "$out" >>"$OUT/ab.jsonl"
}
modes=(plain monitor monitor_no_nvml trace)
for r in $(seq 1 "$ROUNDS"); do
  for k in 0 1 2 3; do one "${modes[$(( (k + r) % 4 ))]}" "$r"; done
done
python3 - "$OUT/ab.jsonl" <<'PY'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
plain = st.median(r["median_step_ms"] for r in rows if r["mode"] == "plain")
for m in ["plain", "monitor", "monitor_no_nvml", "trace"]:
    v = [r["median_step_ms"] for r in rows if r["mode"] == m]
    print(f"{m:16s} median {st.median(v):7.3f} ms  runs {[round(x, 3) for x in v]}  x{st.median(v) / plain:.3f} of plain")
PY
