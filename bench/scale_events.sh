#!/usr/bin/env bash
# Time and peak memory of `emo analyze` and `emo optimize --device h200` on one synthetic trace as
# its event count grows (bench/synthetic_trace.py: a GPT-like training loop shaped like our H200
# traces). Wall time, CPU time (user + system: the figure to read on a shared machine, where wall
# time also counts other jobs) and peak RSS from GNU time; one size at a time, each trace removed
# after it.
#
#   bash bench/scale_events.sh [EMO] [SIZES="1000000 2500000 5000000 10000000"] [FORMAT=json.gz]
#
# Needs no ../shared (the device model is the repository's devices/h200.json). Writes under a
# temporary folder (about 250 B per event as .json, ~15 % of that as .json.gz) removed at the end.
# Prints a markdown table; the analyze/optimize outputs' sanity (iterations found, identity error)
# is in the last columns.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
emo="${1:-$root/build/release/tools/emo/emo}"
sizes="${SIZES:-1000000 2500000 5000000 10000000}"
format="${FORMAT:-json.gz}"
[[ -x "$emo" ]] || { echo "scale_events.sh: no emo binary at $emo (cmake --preset release && cmake --build --preset release)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "scale_events.sh: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }
work="$(mktemp -d /tmp/emo_scale_events.XXXXXX)"
trap 'rm -rf "$work"' EXIT
echo "| events | trace MiB ($format) | analyze wall s | analyze CPU s | analyze peak RSS MiB | optimize wall s | optimize CPU s | optimize peak RSS MiB | analyze CPU s per M events | optimize CPU s per M events | iterations | identity error % | plan saving % |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for n in $sizes; do
  trace="$work/trace_$n.$format"
  events=$(python3 "$root/bench/synthetic_trace.py" --events "$n" "$trace" | sed -n 's/^synthetic_trace.py: \([0-9]*\) events.*/\1/p')
  mib=$(du -m --apparent-size "$trace" | cut -f1)
  /usr/bin/time -o "$work/ta" -f "%e %U %S %M" "$emo" analyze "$trace" --json "$work/a.json" > "$work/a.txt" 2> "$work/a.err" \
    || { echo "scale_events.sh: emo analyze failed on $n events:" >&2; tail -5 "$work/a.err" >&2; exit 1; }
  /usr/bin/time -o "$work/to" -f "%e %U %S %M" "$emo" optimize "$trace" --device h200 --devices-dir "$root/devices" \
    --json "$work/o.json" > "$work/o.txt" 2> "$work/o.err" \
    || { echo "scale_events.sh: emo optimize failed on $n events:" >&2; tail -5 "$work/o.err" >&2; exit 1; }
  python3 - "$events" "$mib" "$work/ta" "$work/to" "$work/a.json" "$work/o.json" <<'PY'
import json, sys
events, mib = int(sys.argv[1]), int(sys.argv[2])
def timed(path):  # wall s, CPU s, peak RSS MiB
    wall, user, system, rss = open(path).read().split()[-4:]
    return float(wall), float(user) + float(system), int(rss) / 1024
wa, ca, ra = timed(sys.argv[3])
wo, co, ro = timed(sys.argv[4])
a, o = json.load(open(sys.argv[5])), json.load(open(sys.argv[6]))
me = events / 1e6
print(f"| {events:,} | {mib} | {wa:.1f} | {ca:.1f} | {ra:.0f} | {wo:.1f} | {co:.1f} | {ro:.0f} | "
      f"{ca / me:.2f} | {co / me:.2f} | {a['iterations']} | {a['replay_error_pct']:.3f} | "
      f"{o['plan']['saving_pct']:.1f} |", flush=True)
PY
  rm -f "$trace"
done
