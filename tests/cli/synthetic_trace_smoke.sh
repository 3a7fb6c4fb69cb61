#!/usr/bin/env bash
# bench/synthetic_trace.py's trace through `emo analyze`: written as .json (10 MB: read piecewise)
# and as .json.gz (read whole), both accepted with every step found, a replay identity error
# under 1 %, and the same analysis apart from the file's name.
#   synthetic_trace_smoke.sh EMO SOURCE_DIR
set -euo pipefail
emo="$1"
src="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 "$src/bench/synthetic_trace.py" --events 40000 "$work/t.json" > /dev/null
python3 "$src/bench/synthetic_trace.py" --events 40000 "$work/t.json.gz" > /dev/null
"$emo" analyze "$work/t.json" --json "$work/plain.json" > /dev/null
"$emo" analyze "$work/t.json.gz" --json "$work/gz.json" > /dev/null
python3 - "$work/plain.json" "$work/gz.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["iterations"] >= 10, a["iterations"]
assert abs(a["replay_error_pct"]) < 1.0, a["replay_error_pct"]
strip = lambda j: json.dumps(j, sort_keys=True).replace(".json.gz", "").replace(".json", "")
assert strip(a) == strip(b), "the piecewise and whole reads differ"
print("ok:", a["iterations"], "iterations, identity error", a["replay_error_pct"], "%")
PY
