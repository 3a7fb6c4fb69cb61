#!/usr/bin/env bash
# Leave-one-workload-out score of the profiler-overhead correction (issue Order 2).
# For each workload W of ../shared/traces/h200/overhead: `emo calibrate-overhead` on the other
# two workloads' eight traces (sync + async, light + shapes; the gauge's reference table from
# all eight, one ratio per profiler configuration, the gauge exponent shared), then `emo
# analyze` of W's four traces with that calibration, against truth.json's unprofiled medians.
# Then the workloads of data/h200_heldout and data/h200_heldout2, recorded the same way: (a)
# with the shipped calibration, which is fitted on all nine workloads (in-sample); (b) scored
# leave-one-workload-out over all nine workloads (calibration from the other eight): the
# shipped calibration's score on loops it has not seen. Then that calibration itself, the
# workload traces of ../shared/traces/h200, and the 2-GPU jobs read together.
# Usage: bench/overhead_lowo.sh [path/to/emo] [path/to/shared]
set -euo pipefail
source "$(dirname "$0")/common.sh"
bench_setup "${1:-}" "${2:-}" traces/h200/overhead
H="$(cd "$(dirname "$0")/.." && pwd)/data/h200_heldout"
python3 - "$emo" "$data" "$H" "$tmp" <<'PY'
import json, subprocess, sys
emo, o, h, tmp = sys.argv[1:5]
h2 = h + "2"  # data/h200_heldout2: recorded after the method and its calibration were fixed
truth = {**json.load(open(f"{o}/truth.json")), **json.load(open(f"{h}/truth.json")), **json.load(open(f"{h2}/truth.json"))}
TRAIN = ["gpt_train", "resnet_train", "multistream"]
HELD = ["mlp_small_train", "bert_infer", "cnn_dataload_train"]
HELD2 = ["gpt_small_train", "resnet_small_train", "lstm_lm_train"]
MODES, CFGS = ["sync", "async"], ["light", "shapes"]
def folder(w): return o if w in TRAIN else h if w in HELD else h2
def path(w, m, c): return f"{folder(w)}/{w}_{m}_{c}.json.gz"
def true_ms(w, m): return truth[w][f"unprofiled_{m}"]["median_s"] * 1e3
def run(args): return subprocess.run([emo, *args], capture_output=True, text=True, check=True).stdout
def calibrate(works, name):
    traces = [path(w, m, c) for w in works for m in MODES for c in CFGS]
    steps = [str(true_ms(w, m)) for w in works for m in MODES for c in CFGS]
    out = f"{tmp}/{name}.json"
    run(["calibrate-overhead", *traces, "--step-time", *steps, "--out", out, "--json", f"{tmp}/{name}.fit.json"])
    c = json.load(open(out))
    return out, {k: (v, c.get("gauge_exponent", 1.0)) for k, v in c["ratio"].items()}
def score(works, cal, label):
    worst = 0
    for w in works:
        for c in CFGS:
            for m in MODES:
                args = ["analyze", path(w, m, c), "--json", "-"] + (["--overhead-calibration", cal] if cal else [])
                j = json.loads(run(args))
                it, ov, t = j["iteration_time_us"], j["overhead"], true_ms(w, m)
                err = 100 * (it["corrected"] / 1e3 / t - 1)
                worst = max(worst, abs(err))
                lo, hi = (x / 1e3 for x in it["corrected_range"])
                inside = lo * 0.999 <= t <= hi * 1.001
                COVER[0] += inside; COVER[1] += 1
                print(f"{w + '_' + m + '_' + c:<34} {it['replayed']/1e3:>9.2f} {t:>8.2f} {it['corrected']/1e3:>9.2f} {err:>+8.1f} "
                      f"{lo:>7.2f}-{hi:<7.2f}{'  ' if inside else ' !'} {ov['confidence']:<6} {ov['speed_gauge']['cpu_slowdown']:>8.3f} "
                      f"{ov['cpu_scale']:>6.3f}   {label(c, ov)}")
    return worst
COVER = [0, 0]
def coverage():
    s = f"true time inside the corrected range: {COVER[0]} of {COVER[1]}"
    COVER[0] = COVER[1] = 0
    return s
HEAD = (f"{'trace':<34} {'traced ms':>9} {'true ms':>8} {'corrected':>9} {'error %':>8} {'range ms':^17} "
        f"{'conf.':<6} {'slowdown':>8} {'scale':>6}   calibration")

def lowo(works, name, label):
    """Each workload scored with a calibration fitted on the others of `works`."""
    worst = 0
    for held in works:
        train = [w for w in works if w != held]
        cal, ratio = calibrate(train, f"{name}_{held}")
        worst = max(worst, score([held], cal, lambda c, ov: f"{label(train)} (ratio {ratio[c][0]:.4f}, exponent {ratio[c][1]:.2f})"))
    return worst


print("leave-one-workload-out on ../shared/traces/h200/overhead:\n" + HEAD)
worst = lowo(TRAIN, "lowo", lambda train: "+".join(train))
print(f"worst |error|: {worst:.1f} %; {coverage()}")

# The shipped calibration is fitted on all nine workloads below, so on these two sets it is
# in-sample; the leave-one-workload-out over the nine is its score on loops it has not seen.
print(f"\nworkloads of {h}, shipped calibration (fitted on all nine workloads, these among them):\n" + HEAD)
worst = score(HELD, None, lambda c, ov: f"shipped (ratio {ov['speed_gauge']['ratio']:.4f})")
print(f"worst |error| ({h}, shipped, in-sample): {worst:.1f} %; {coverage()}")

print(f"\nworkloads of {h2}, shipped calibration (fitted on all nine workloads, these among them):\n" + HEAD)
worst = score(HELD2, None, lambda c, ov: f"shipped (ratio {ov['speed_gauge']['ratio']:.4f})")
print(f"worst |error| ({h2}, shipped, in-sample): {worst:.1f} %; {coverage()}")

ALL = TRAIN + HELD + HELD2
print(f"\nall {len(ALL)} workloads, leave-one-workload-out (calibration from the other {len(ALL) - 1}):\n" + HEAD)
worst = lowo(ALL, "lowo_all", lambda train: f"the other {len(train)}")
print(f"worst |error| (all workloads): {worst:.1f} %; {coverage()}")

# The shipped calibration (src/analysis/overhead.cc, ShippedCalibration) is this fit.
cal, _ = calibrate(ALL, "all")
print(f"\nthe calibration fitted on all {len(ALL)} workloads (the shipped one):")
print(json.dumps(json.load(open(cal)), sort_keys=True))

# The workload traces beside overhead/ (run-ahead loop, record_shapes on) against measured.json's
# unprofiled step times (a synchronized loop, so only roughly the same loop), shipped calibration.
print("\nworkload traces (../shared/traces/h200) vs measured.json's unprofiled sync-loop step, shipped calibration:")
print(f"{'trace':<18} {'traced ms':>9} {'measured':>9} {'corrected':>9} {'error %':>8} {'range ms':^17} conf.")
m = json.load(open(f"{o}/../measured.json"))
steps = {**{w: v["iter_median_s"] for w, v in m["workloads"].items()}, **{w: v["iter_median_s"] for w, v in m["multi_gpu"].items()}}
for w in ["gpt_train", "multistream", "ddp_gpt_rank0", "ddp_gpt_rank1", "pp_gpt_rank0", "pp_gpt_rank1"]:
    j = json.loads(run(["analyze", f"{o}/../{w}.json.gz", "--json", "-"]))
    it, t = j["iteration_time_us"], steps[w] * 1e3
    lo, hi = (x / 1e3 for x in it["corrected_range"])
    print(f"{w:<18} {it['replayed']/1e3:>9.2f} {t:>9.2f} {it['corrected']/1e3:>9.2f} {100 * (it['corrected'] / 1e3 / t - 1):>+8.1f} "
          f"{lo:>7.2f}-{hi:<7.2f}   {j['overhead']['confidence']}")

# The ranks of each 2-GPU job read together: the joint replay on the corrected timelines (each
# collective's transfer starts when its last member arrives), shipped calibration, against the
# job's measured unprofiled step (the ranks' medians; the slowest rank's for the job).
print("\njobs read together (emo analyze RANK0 RANK1), joint replay on the corrected timelines, shipped calibration:")
print(f"{'job':<10} {'traced ms':>9} {'measured':>9} {'alone ms':>9} {'joint ms':>9} {'error %':>8}")
for job in ["ddp_gpt", "pp_gpt"]:
    j = json.loads(run(["analyze", f"{o}/../{job}_rank0.json.gz", f"{o}/../{job}_rank1.json.gz", "--json", "-"]))
    jj = j["job"]["joint_replay"]["job"]
    t = max(steps[f"{job}_rank{r}"] for r in (0, 1)) * 1e3
    print(f"{job:<10} {jj['measured_us']/1e3:>9.2f} {t:>9.2f} {jj['timeline_alone_us']/1e3:>9.2f} "
          f"{jj['timeline_joint_us']/1e3:>9.2f} {100 * (jj['timeline_joint_us'] / 1e3 / t - 1):>+8.1f}")
PY
