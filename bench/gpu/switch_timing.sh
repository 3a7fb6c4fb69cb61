#!/usr/bin/env bash
# When does each clock switch of `emo run` take effect, against the GPU start of the pack it is
# for? For each loop: `emo trace`, `emo optimize --device $(device_model) --policy`, then `emo run
# --actuator dry-run --guard 0 --trace F --warmup 40 --iterations 8`: the report's switch_timing
# sets every pack switch applied inside the traced window against the GPU start of its pack's
# first op in that trace (both on CUPTI's clock). Never changes a clock (dry-run: the switch
# takes effect when the actuator's call returns, as nvml's would after its own latency).
# ACTUATOR=emulate follows the plan with its spin kernels instead: the run's traced window then
# shows where the plan's extra time went, against the loop's own trace (kept beside it); with
# GUARD=50 (as bench/gpu/emulate.sh) the run also times the default clock every 50 iterations,
# so its report holds the plan's iterations against the default's of the same run.
#
# Each loop's policy is followed twice, in the same call: `--switch-on launch` (each switch made
# when the program makes the policy's switch_call) and `--switch-on gpu` (made once the op of the
# policy's gpu_switch_call has completed on the GPU).
#
#   EMO=build/device/bin/emo OUT=o [LOOPS="bigtrain train decode streams"] [SLOWDOWN=0.02] \
#     [SWITCH_ON="launch gpu"] [ACTUATOR=dry-run|emulate] [GUARD=0] bash bench/gpu/switch_timing.sh
# Writes $OUT/switch_timing/summary.json.
set -uo pipefail
: "${EMO:?set EMO}" "${OUT:?set OUT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PY:-/opt/torch/.venv/bin/python}"
LOOPS="${LOOPS:-bigtrain train decode streams}"
SLOWDOWN="${SLOWDOWN:-0.02}"
SWITCH_ON="${SWITCH_ON:-launch gpu}"
ACTUATOR="${ACTUATOR:-dry-run}"
GUARD="${GUARD:-0}"
dest="$OUT/switch_timing"
work="$(mktemp -d /tmp/emo_switch_timing.XXXXXX)"
mkdir -p "$dest"
# shellcheck source=loops.sh
source "$here/loops.sh"
prepare_loops "$LOOPS" || exit 1
device="$(device_model)"
for loop in $LOOPS; do
  read -ra cmd <<<"$(loop_command "$loop" 200)"
  "$EMO" trace -o "$dest/${loop}.emotrace" --warmup 40 --iterations 4 --json "$dest/${loop}_trace.json" \
    -- "${cmd[@]}" >"$work/${loop}_trace.out" 2>&1
  "$EMO" optimize "$dest/${loop}.emotrace" --device "$device" --max-slowdown "$SLOWDOWN" --policy "$dest/${loop}_policy.json" >"$dest/${loop}_optimize.txt" 2>&1
  for on in $SWITCH_ON; do
    run="${loop}_${on}"
    "$EMO" run --policy "$dest/${loop}_policy.json" --actuator "$ACTUATOR" --guard "$GUARD" --switch-on "$on" \
      --trace "$dest/${run}_run_%r.emotrace" --warmup 40 --iterations 8 --switch-log "$work/${run}.jsonl" \
      --json "$dest/${run}_run.json" -- "${cmd[@]}" >"$dest/${run}_run.out" 2>&1 || echo "run $run: exit $?" >>"$dest/errors.txt"
  done
done
python3 - "$dest" "$LOOPS" "$SWITCH_ON" <<'PY'
import json, sys
dest, loops, modes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
out = {}
for loop in loops:
    for on in modes:
        key = f"{loop}_{on}"
        try:
            pol = json.load(open(f"{dest}/{loop}_policy.json"))
            run = json.load(open(f"{dest}/{key}_run.json"))
        except Exception as e:
            out[key] = {"error": str(e)}
            continue
        g = pol["gpus"][0]
        t = run["traces"][0] if run.get("traces") else {}
        pr = t.get("policy_run", {})
        out[key] = {"packs": [[p["first_call"], p["switch_call"], p.get("gpu_switch_call"), p.get("gpu_switch_lead_us"),
                               p["clock_mhz"]] for p in g["packs"]],
                    "switch_lead_us": pol["switch_lead_us"],
                    "switch_timing": {k: v for k, v in t.get("switch_timing", {}).items() if k != "note"},
                    "policy_run": {k: v for k, v in pr.items() if k.startswith("switch")}}
json.dump(out, open(f"{dest}/summary.json", "w"), indent=1)
for k, v in out.items():
    print(k, json.dumps(v))
PY
