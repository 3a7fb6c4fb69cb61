# Sourced by the bench/gpu overhead scripts (overhead.sh, overhead_concurrent.sh,
# overhead_quiet.sh), which set `here` first: EMO and OUT required, PY the PyTorch venv's python
# (else python3) that runs the loops, SPY a python3 for the standard-library summaries.
: "${EMO:?set EMO to the emo binary}"
: "${OUT:?set OUT to the output folder}"
PY="${PY:-/opt/torch/.venv/bin/python}"
[[ -x "$PY" ]] || PY="$(command -v python3)"
SPY="${SPY:-$(command -v python3 || echo "$PY")}"

# ROWS PCT: PCT % of the median timed step (µs, rounded) of the first run in ROWS (JSON lines
# with a "program" of the loop's output) that has steps; nothing when none has.
spin_us_of_first_run() {
  "$SPY" - "$1" "$2" "$here" <<'PYEOF'
import json, sys
sys.path.insert(0, sys.argv[3])
from overhead_concurrent_summary import solo_median_ms
for line in open(sys.argv[1]):
    ms = solo_median_ms(json.loads(line).get("program"))
    if ms:
        print(round(float(sys.argv[2]) / 100 * 1e3 * ms))
        break
PYEOF
}
