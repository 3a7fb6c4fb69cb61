#!/usr/bin/env bash
# Why decode_loop.py's first pass over its cache lengths ran ~18x slower than its later steps:
# 450 steps (no warm-up) of each attention/backend variant, each step's time from the loop's own
# step_ms, printed as the median of every 50 steps. With `--attention grow` the key length is new
# on each of the first --max-len minus --prompt (384) steps. Never changes a clock.
#
#   OUT=o bash bench/gpu/decode_sdpa_probe.sh      (writes $OUT/dec_ATTENTION_SDPA.json and .err)
set -uo pipefail
: "${OUT:?set OUT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PY:-/opt/torch/.venv/bin/python}"
mkdir -p "$OUT"
for v in "grow default" "grow cudnn" "grow flash" "grow efficient" "static default"; do
  read -r attention sdpa <<<"$v"
  json="$OUT/dec_${attention}_${sdpa}.json"
  "$PY" "$here/decode_loop.py" --steps 450 --warmup 0 --attention "$attention" --sdpa "$sdpa" >"$json" 2>"${json%.json}.err"
  python3 - "$json" "$v" <<'PY'
import json, statistics, sys
try:
    ms = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["step_ms"]
except Exception as e:
    sys.exit(f"{sys.argv[2]}: no result ({e})")
print(f"{sys.argv[2]:16s}", [round(statistics.median(ms[i:i + 50]), 2) for i in range(0, len(ms), 50)])
PY
done
