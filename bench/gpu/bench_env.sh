# Sourced by the bench/gpu scripts (overhead.sh, overhead_concurrent.sh, detach_stress.sh and
# others), which set `here` first: EMO and OUT required, PY the PyTorch venv's python
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

# NAME ROWS: the bench's outputs in $OUT/NAME (dest), a scratch folder (work), the log NAME.log
# there (log, which say() appends to) and ROWS there, emptied (rows); stops unless EMO runs.
bench_output() {
  dest="$OUT/$1"
  work="$(mktemp -d "/tmp/emo_$1.XXXXXX")"
  mkdir -p "$dest"
  log="$dest/$1.log"
  rows="$dest/$2"
  : >"$rows"
  [[ -x "$EMO" ]] || { say "EMO=$EMO is not an executable"; exit 1; }
}
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$log" >&2; }
