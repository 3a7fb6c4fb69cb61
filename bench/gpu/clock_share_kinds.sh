#!/usr/bin/env bash
# The per-kind clock-bound shares of devices/h200.json ("kinds") from the clock sweeps in
# data/h200_clock_sweep: fits each of the six fit runs (clock_sweep_fit.py; the held-out runs are
# not read), then takes each kind's median (clock_share_kinds.py). Runs on the build machine (no
# GPU); `--write` sets the file.
#   bash bench/gpu/clock_share_kinds.sh build/ci/tools/emo/emo [--write devices/h200.json]
set -euo pipefail
emo=${1:?usage: clock_share_kinds.sh EMO_BINARY [--write DEVICE_FILE]}
shift
cd "$(dirname "$0")/../.."
data=data/h200_clock_sweep
fits=$(mktemp -d)
trap 'rm -rf "$fits"' EXIT
for run in cu_run1 cu_run2; do
  python3 bench/gpu/clock_sweep_fit.py "$data/$run.csv.gz" --json "$fits/$run.json" >/dev/null
done
for run in torch_run1 torch_run2 extra_run1 extra_run2; do
  python3 bench/gpu/clock_sweep_fit.py "$data/$run.csv.gz" --kernels "$data/${run}_kernels.json" --emo "$emo" \
    --json "$fits/$run.json" >/dev/null
done
python3 bench/gpu/clock_share_kinds.py "$fits"/cu_run1.json "$fits"/cu_run2.json "$fits"/torch_run1.json \
  "$fits"/torch_run2.json "$fits"/extra_run1.json "$fits"/extra_run2.json --source "(data/h200_clock_sweep: two runs each of bench/gpu/clock_sweep.cu, clock_sweep_torch.py and clock_sweep_torch.py --set extra, no clock set; \`bash bench/gpu/clock_share_kinds.sh build/ci/tools/emo/emo --write devices/h200.json\`; below ~1480 MHz extrapolated, docs/model.md section 6a)" "$@"
