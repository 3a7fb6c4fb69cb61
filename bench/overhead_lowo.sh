#!/usr/bin/env bash
# Leave-one-workload-out score of the profiler-overhead correction (issue Order 2).
# For each profiler configuration (light, shapes) and each workload W of
# ../shared/traces/h200/overhead: fit the per-operator and per-API costs on the other two
# workloads (sync + async traces) with `emo calibrate-overhead`, then correct W's traces with
# them and compare with the unprofiled median in truth.json.
# Then the shipped calibration (`--correct-overhead auto`) on the held-out workloads recorded
# the same way (data/h200_heldout), which no calibration was fitted on.
# Usage: bench/overhead_lowo.sh [path/to/emo]
set -euo pipefail
EMO=${1:-build/release/tools/emo/emo}
O=$(dirname "$0")/../../shared/traces/h200/overhead
H=$(dirname "$0")/../data/h200_heldout
python3 - "$EMO" "$O" "$H" <<'PY'
import json, subprocess, sys
emo, o = sys.argv[1], sys.argv[2]
truth = json.load(open(f"{o}/truth.json"))
work = ["gpt_train", "resnet_train", "multistream"]
def t(w, mode): return truth[w][f"unprofiled_{mode}"]["median_s"] * 1e3
print(f"{'trace':<34} {'traced ms':>9} {'true ms':>8} {'corrected':>9} {'error %':>8}   fitted on (op ns, api ns)")
worst = 0
for cfg in ["light", "shapes"]:
    for held in work:
        train = [w for w in work if w != held]
        traces, steps = [], []
        for w in train:
            for mode in ["sync", "async"]:
                traces.append(f"{o}/{w}_{mode}_{cfg}.json.gz"); steps.append(str(t(w, mode)))
        fit = json.loads(subprocess.run([emo, "calibrate-overhead", *traces, "--step-time", *steps, "--json", "-"],
                                        capture_output=True, text=True, check=True).stdout)
        for mode in ["sync", "async"]:
            j = json.loads(subprocess.run([emo, "analyze", f"{o}/{held}_{mode}_{cfg}.json.gz", "--json", "-",
                                           "--overhead-ns", str(fit["per_event_ns"]), "--overhead-api-ns", str(fit["per_api_ns"])],
                                          capture_output=True, text=True, check=True).stdout)
            it = j["iteration_time_us"]
            err = 100 * (it["corrected"] / 1e3 / t(held, mode) - 1)
            worst = max(worst, abs(err))
            print(f"{held}_{mode}_{cfg:<14} {it['replayed']/1e3:>9.2f} {t(held, mode):>8.2f} {it['corrected']/1e3:>9.2f} {err:>+8.1f}   "
                  f"{'+'.join(train)} ({fit['per_event_ns']:.0f}, {fit['per_api_ns']:.0f})")
print(f"worst |error|: {worst:.1f} %")
h = sys.argv[3]
held_truth = json.load(open(f"{h}/truth.json"))
print(f"\nheld-out workloads ({h}), shipped calibration:")
print(f"{'trace':<34} {'traced ms':>9} {'true ms':>8} {'corrected':>9} {'error %':>8}   calibration")
worst = 0
for w in ["mlp_small_train", "bert_infer", "cnn_dataload_train"]:
    for mode in ["sync", "async"]:
        for cfg in ["light", "shapes"]:
            j = json.loads(subprocess.run([emo, "analyze", f"{h}/{w}_{mode}_{cfg}.json.gz", "--json", "-"],
                                          capture_output=True, text=True, check=True).stdout)
            it, true = j["iteration_time_us"], held_truth[w][f"unprofiled_{mode}"]["median_s"] * 1e3
            err = 100 * (it["corrected"] / 1e3 / true - 1)
            worst = max(worst, abs(err))
            print(f"{w}_{mode}_{cfg:<14} {it['replayed']/1e3:>9.2f} {true:>8.2f} {it['corrected']/1e3:>9.2f} {err:>+8.1f}   "
                  f"{j['overhead']['source']} ({j['overhead']['per_event_ns']:.0f} ns/event)")
print(f"worst |error| (held-out): {worst:.1f} %")
PY
