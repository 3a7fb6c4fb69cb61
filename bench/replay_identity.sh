#!/usr/bin/env bash
# Replay identity error and critical-path split of every trace under ../shared/traces that
# EMO analyses (issue Order 1). Usage: bench/replay_identity.sh [path/to/emo]
set -euo pipefail
EMO=${1:-build/release/tools/emo/emo}
S=$(dirname "$0")/../../shared/traces
printf "%-58s %5s %12s %12s %9s %6s %6s %6s %6s\n" trace iters "measured us" "replayed us" "error %" gpu% comm% cpu% launch%
for f in $(find "$S" -name "*.json.gz" -o -name "*.json" | sort); do
  out=$("$EMO" analyze "$f" --correct-overhead off --json - 2>/dev/null) || { printf "%-58s refused: %s\n" "${f#$S/}" "$("$EMO" analyze "$f" 2>&1 >/dev/null | tail -1 | cut -c1-80)"; continue; }
  echo "$out" | python3 -c "
import json,sys
j=json.load(sys.stdin); it=j['iteration_time_us']; c=j['critical_path']
print('%-58s %5d %12.1f %12.1f %9.4f %6.1f %6.1f %6.1f %6.1f' % ('${f#$S/}', j['iterations'], it['measured'], it['replayed'], j['replay_error_pct'], c['gpu_pct'], c['comm_pct'], c['cpu_pct'], c['launch_pct']))"
done
