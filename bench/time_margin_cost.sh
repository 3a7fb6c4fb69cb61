#!/usr/bin/env bash
# What `--time-margin auto` (emo optimize's default) costs in predicted saving: every H200 trace
# with a plan (../shared/traces/h200, the repository's data/h200_heldout*, data/h200_emo,
# examples/) planned at --time-margin 0 and auto (2 % target); per trace the plan at 0 (saving,
# fragile or not), the margin auto kept, its saving and the difference in points. Energies are
# predictions of devices/h200.json, not measurements.
# Usage: bench/time_margin_cost.sh [path/to/emo] [path/to/shared]
set -euo pipefail
source "$(dirname "$0")/common.sh"
bench_setup "${1:-}" "${2:-}" traces/h200
root="$(cd "$(dirname "$0")/.." && pwd)"
traces=("$data"/gpt_train.json.gz "$data"/multistream.json.gz "$root"/examples/*.emotrace "$root"/data/h200_heldout*/*.json.gz
        "$root"/data/h200_emo/*_loop*.emotrace "$root"/data/h200_emo/gemm_*.emotrace "$root"/data/h200_emo/ddp_train_rank*.emotrace)
echo "| trace | plan at 0: saving % (fragile) | auto: margin, saving % | auto - 0 (points) |"
echo "|---|---|---|---|"
for t in "${traces[@]}"; do
  for m in 0 auto; do
    "$emo" optimize "$t" --device h200 --time-margin "$m" --json "$tmp/$m.json" >/dev/null 2>"$tmp/$m.err" ||
      { echo "time_margin_cost.sh: emo optimize $t --time-margin $m failed:" >&2; tail -3 "$tmp/$m.err" >&2; exit 1; }
  done
  python3 - "$t" "$tmp/0.json" "$tmp/auto.json" <<'PY'
import json, os, sys
name = os.path.relpath(sys.argv[1], os.path.dirname(os.path.dirname(sys.argv[1])))
at0, auto = (json.load(open(p))["plan"] for p in sys.argv[2:4])
print(f"| {name} | {at0['saving_pct']:.2f} ({'fragile' if at0.get('fragile_time') else 'not fragile'}) | "
      f"{auto['time_margin']:g}, {auto['saving_pct']:.2f} | {auto['saving_pct'] - at0['saving_pct']:+.2f} |")
PY
done
