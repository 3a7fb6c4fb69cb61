#!/usr/bin/env bash
# Hold-out accuracy of EMO's clock model on the Perseus SOSP'24 stage profiles (GPT-3 175B and
# BLOOM 176B pipeline stages, forward and backward, on A100-SXM and A40). For K = 2, 3, 4 the
# model is fitted from K clocks spread over the measured range (the fixed rule of
# `emo model validate`: table indices round(i*(n-1)/(K-1))) and scored at every other clock.
# Prints a Markdown table of time and energy MAPE (and the largest single error) for two
# protocols:
#   self      P_static and the voltage curve fitted jointly over the file's 16 units from the
#             same K clocks (nothing else is used);
#   device    P_static and the voltage curve from a fit of every clock of the OTHER workload's
#             profile on the same GPU (a device calibration sweep), per-unit parameters from the
#             K clocks. The scored file's held-out clocks are never seen.
#   pinned    `--device a100-sxm|a40`: P_static pinned to the device file's idle power, its power
#             limit classes the file (power-limited / clock-ceiling), everything else from the
#             K clocks of the file itself (docs/model.md).
# Targets (BRIEF): K=3 time and energy MAPE <= 1.5% on A100, <= 3% on A40.
#
# Usage: bench/model_validate.sh [EMO_BINARY] [SHARED_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
bench_setup "${1:-}" "${2:-}" data/perseus_sosp24/stage_profile

other() {
  case "$1" in
    gpt3-175b+a100_sxm) echo bloom+a100_sxm ;;
    bloom+a100_sxm) echo gpt3-175b+a100_sxm ;;
    gpt3-175b+a40) echo bloom+a40 ;;
    bloom+a40) echo gpt3-175b+a40 ;;
  esac
}

echo "| profile | K | fit clocks (MHz) | self: time MAPE | self: energy MAPE | self: max err | device: time MAPE | device: energy MAPE | device: max err | pinned: time MAPE | pinned: energy MAPE | pinned: max err | target |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for k in 2 3 4; do
  for p in gpt3-175b+a100_sxm bloom+a100_sxm gpt3-175b+a40 bloom+a40; do
    csv="$data/${p}_bf16.csv"
    "$emo" model validate --profile "$csv" --clocks "$k" --json "$tmp/self.json" > /dev/null
    "$emo" model validate --profile "$csv" --clocks "$k" \
      --device-from "$data/$(other "$p")_bf16.csv" --json "$tmp/dev.json" > /dev/null
    "$emo" model validate --profile "$csv" --clocks "$k" \
      --device "$([[ "$p" == *a100* ]] && echo a100-sxm || echo a40)" --json "$tmp/pin.json" > /dev/null
    target=$([[ "$p" == *a100* ]] && echo "1.5%" || echo "3%")
    jq -r --arg p "$p" --arg t "$target" --slurpfile d "$tmp/dev.json" --slurpfile q "$tmp/pin.json" \
      '"| \($p) | \(.clocks) | \(.fit_clocks_mhz | map(tostring) | join(", ")) | " +
       "\(.time_mape_pct * 100 | round / 100)% | \(.energy_mape_pct * 100 | round / 100)% | " +
       "\(.max_error_pct * 100 | round / 100)% | " +
       "\($d[0].time_mape_pct * 100 | round / 100)% | \($d[0].energy_mape_pct * 100 | round / 100)% | " +
       "\($d[0].max_error_pct * 100 | round / 100)% | " +
       "\($q[0].time_mape_pct * 100 | round / 100)% | \($q[0].energy_mape_pct * 100 | round / 100)% | " +
       "\($q[0].max_error_pct * 100 | round / 100)% | \(if .clocks == 3 then $t else "" end) |"' \
      "$tmp/self.json"
  done
done
