#!/usr/bin/env bash
# GPU test (CTest label gpu; needs an NVIDIA GPU, nvcc and a built emo with libemo_inject.so):
# `emo run --actuator dry-run` follows a policy made from the program's own trace. Never changes
# a clock: dry-run only writes the switches it would make. Checks:
#  - emo trace + emo optimize --policy give a version-3 policy anchored in launch calls;
#  - under emo run (--guard 0: the plan from the first iteration on; the guard has its own
#    tests), the program's process finds the loop, follows the plan (no fallback, no
#    failed switch), its first lock is logged with a planned clock and its pack, the last line
#    is the reset at exit, and the program's exit code comes back;
#  - `--actuator emulate` (--guard 50: 5 iterations at the default clock first, then the plan)
#    follows the same policy with spin kernels behind the policy's launch calls: spins launched,
#    none failed, none skipped for an unknown stream, no fallback, and the measured slowdown is
#    reported beside the predicted one;
#  - a policy for another GPU model is refused before the program starts (exit 2).
#
#   EMO=build/device/bin/emo bash tests/gpu/run_dry.sh [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
EMO="${EMO:-$root/build/ci/tools/emo/emo}"
out="${1:-$(mktemp -d /tmp/emo_gpu_run.XXXXXX)}"
mkdir -p "$out"
bash "$root/bench/gpu/build_streams_graph.sh" "$out/streams_graph"
"$EMO" trace -o "$out/sg_%r.emotrace" --warmup 30 --iterations 4 -- "$out/streams_graph" --iters 300 --warmup 10 \
  --no-step-list > "$out/trace.out" 2>&1
trace="$(ls "$out"/sg_*.emotrace | head -1)"
# The device model of the GPU this runs on (device_model: $DEVICE, else from nvidia-smi's name).
# shellcheck source=../../bench/gpu/loops.sh
source "$root/bench/gpu/loops.sh"
"$EMO" optimize "$trace" --device "$(device_model)" --policy "$out/policy.json" > "$out/optimize.txt"
set +e
"$EMO" run --policy "$out/policy.json" --guard 0 --switch-log "$out/switches.jsonl" --json "$out/run.json" -- \
  "$out/streams_graph" --iters 1500 --warmup 10 --no-step-list > "$out/run.out" 2>&1
echo $? > "$out/run.rc"
"$EMO" run --policy "$out/policy.json" --actuator emulate --guard 50 --switch-log "$out/emulate.jsonl" \
  --json "$out/emulate.json" -- "$out/streams_graph" --iters 1500 --warmup 10 --no-step-list > "$out/emulate.out" 2>&1
echo $? > "$out/emulate.rc"
python3 - "$out/policy.json" "$out/other_gpu.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for g in p["gpus"]:
    g["device_check"]["trace_gpu"] = "NVIDIA A100-SXM4-80GB"
json.dump(p, open(sys.argv[2], "w"))
PY
"$EMO" run --policy "$out/other_gpu.json" -- "$out/streams_graph" --iters 50 > "$out/other_gpu.out" 2>&1
echo $? > "$out/other_gpu.rc"
set -e
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
failures = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: failures.append(what)
policy = json.load(open(f"{out}/policy.json"))
g = policy["gpus"][0]
check(policy["emo_policy_version"] == 3, f"policy version {policy['emo_policy_version']}")
check(g["launch_calls_per_iteration"] > 0, f"launch calls per iteration: {g['launch_calls_per_iteration']}")
def followed(name, actuator):
    """The run's exit code and report; its process followed the plan without a fallback."""
    rc = int(open(f"{out}/{name}.rc").read())
    check(rc == 0, f"emo run --actuator {actuator} exit code {rc}")
    run = json.load(open(f"{out}/{name}.json"))
    t = run["traces"][0] if run.get("traces") else {}
    pr = t.get("policy_run", {})
    print(f"{actuator} policy_run:", json.dumps(pr))
    check(pr.get("followed") == "1", f"{actuator} followed: {pr.get('followed')} {pr.get('not_followed_because', '')}")
    check(pr.get("switches_failed") == "0", f"{actuator} failed switches: {pr.get('switches_failed')}")
    check(pr.get("fallbacks") == "0", f"{actuator} fallbacks: {pr.get('fallbacks')}")
    check(pr.get("clock_at_exit") == "default", f"{actuator} clock at exit: {pr.get('clock_at_exit')}")
    return t, pr
t, pr = followed("run", "dry-run")
check(int(pr.get("iterations_followed", "0")) >= 1000, f"iterations followed: {pr.get('iterations_followed')} (of 1500)")
lines = [json.loads(x) for x in open(f"{out}/switches.jsonl") if x.strip()]
locks = [x for x in lines if x["action"] == "lock"]
planned = {round(p["clock_mhz"]) for p in g["packs"]}
check(len(locks) >= 1 and all(x["requested_mhz"] in planned for x in locks),
      f"locks logged: {len(locks)}, clocks {sorted({x['requested_mhz'] for x in locks})} (planned {sorted(planned)})")
check(bool(lines) and lines[-1]["action"] == "reset", f"last log line: {lines[-1] if lines else None}")
check(all(x["actuator"] == "dry-run" for x in lines), "every line from the dry-run actuator")
et, epr = followed("emulate", "emulate")
check(int(epr.get("emulate_spins", "0")) >= 500, f"spins launched: {epr.get('emulate_spins')}")
check(epr.get("emulate_failed") == "0" and epr.get("emulate_unknown_stream") == "0",
      f"spins failed {epr.get('emulate_failed')}, skipped for an unknown stream {epr.get('emulate_unknown_stream')}")
emu = et.get("policy_effect", {}).get("emulated")
print("emulated:", json.dumps(emu))
check(emu is not None and emu["predicted_slowdown_pct"] > 0, f"measured slowdown reported beside the predicted one")
orc = int(open(f"{out}/other_gpu.rc").read())
other = open(f"{out}/other_gpu.out").read()
check(orc == 2 and "was made for NVIDIA A100-SXM4-80GB" in other, f"another GPU's policy refused: rc {orc}")
sys.exit(1 if failures else 0)
PY
