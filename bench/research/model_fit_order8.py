#!/usr/bin/env python3
"""Fits the H200 model's class activities (W/MHz, activity scale 1) to measured energy per
iteration at the default clock, with the model's forms as they are (issue Order 8: how far class
powers alone can go). Fit set: data/h200_kernels (one kernel kind per loop), the workload
traces of ../shared/traces/h200 and EMO's own PyTorch traces in data/h200_emo; the held-out sets
data/h200_heldout{,2,3} are never read here (bench/model_energy_h200.sh scores them).

The baseline energy `emo optimize --step-time` predicts at the default clock with the cap lifted is
linear in the class activities: E = E_idle + sum_c (a_c - a_idle) R_c. R_c is read from emo itself
(one run per class with that class's activity raised by DELTA), so the fit uses emo's own
classification, SM shares and busy times. Least squares on relative error over the samples whose
measured power is below 97 % of the cap power (the capped ones say only that demand >= cap).
  python3 bench/research/model_fit_order8.py [emo] [shared]   -> prints the fit and the errors
"""
import copy, json, os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))
emo = sys.argv[1] if len(sys.argv) > 1 else f"{repo}/build/release/tools/emo/emo"
shared = sys.argv[2] if len(sys.argv) > 2 else f"{repo}/../shared"
FIT = ["compute", "memory", "other"]
DELTA = 0.1

dev = json.load(open(f"{repo}/devices/h200.json"))
idle_act = None  # a_idle: the activity at which a class draws idle power (from emo's variant run)

samples = []  # (name, trace, step_ms or None, measured J, measured W)
kp = json.load(open(f"{repo}/data/h200_kernels/measured.json"))
for n, c in sorted(kp["configs"].items()):
    samples.append((n, f"{repo}/data/h200_kernels/{n}.json.gz", 1e3 * c["iter_s"], c["energy_per_iter_j"], c["avg_power_w"]))
m = json.load(open(f"{shared}/traces/h200/measured.json"))
for n, t in list(m["workloads"].items()) + list(m.get("multi_gpu", {}).items()):
    samples.append((n, f"{shared}/traces/h200/{n}.json.gz", 1e3 * t["energy_per_iter_j"] / t["avg_power_w"],
                    t["energy_per_iter_j"], t["avg_power_w"]))
for n in ["train_loop", "train_loop_nvtx", "decode_loop"]:
    a = json.loads(subprocess.run([emo, "analyze", f"{repo}/data/h200_emo/{n}.emotrace", "--json", "-"],
                                  capture_output=True, text=True, check=True).stdout)
    g = a["measured_energy"]["gpus"][0]
    samples.append((n, f"{repo}/data/h200_emo/{n}.emotrace", None, g["energy_per_iteration_j"], None))

tmp = tempfile.mkdtemp()
def variant(name, acts):
    d = copy.deepcopy(dev)
    d["activity_scale"]["value"] = 1.0
    d["cap_power_w"]["value"] = 1e6
    d["power_limit_w"]["value"] = 1e6
    for c, v in acts.items():
        d["classes"][c]["activity_w_per_mhz"]["value"] = v
    p = f"{tmp}/{name}.json"
    json.dump(d, open(p, "w"))
    return p

def energy(devfile, s):
    extra = ["--step-time", f"{s[2]:.6f}"] if s[2] else []
    j = json.loads(subprocess.run([emo, "optimize", s[1], "--device", devfile, "--json", "-", *extra],
                                  capture_output=True, text=True, check=True).stdout)
    return j["baseline"]["energy_j"], j["baseline"]["time_us"] / 1e6

# a_idle: solve for the activity at which one class's energy equals the idle energy, from two runs.
classes = list(dev["classes"])
base_acts = {c: dev["classes"][c]["activity_w_per_mhz"]["value"] for c in classes}
probe = samples[0]
e_lo, _ = energy(variant("lo", {c: 0.0 for c in classes}), probe)
e_hi, _ = energy(variant("hi", {c: DELTA for c in classes}), probe)
# E(a) = E_idle + (a - a_idle) * R with R = (e_hi - e_lo) / DELTA; a_idle from the idle-only run
rows = []
for s in samples:
    e0, t = energy(variant("zero", {c: 0.0 for c in classes}), s)
    r = {}
    for c in classes:
        e1, _ = energy(variant("one_" + c, {**{k: 0.0 for k in classes}, c: DELTA}), s)
        r[c] = (e1 - e0) / DELTA
    rows.append((s, e0, t, r))

# E(a) = e0 + sum_c a_c R_c (activities measured from 0: e0 is the energy with every class at 0,
# which the clamp at idle makes the idle energy when a_c < a_idle; fitted values land above it).
fixed = [c for c in classes if c not in FIT]
A, b, used = [], [], []
for s, e0, t, r in rows:
    if s[4] is not None and s[4] >= 0.97 * dev["cap_power_w"]["value"]:
        continue
    rhs = s[3] - e0 - sum(base_acts[c] * r[c] for c in fixed)
    A.append([r[c] / s[3] for c in FIT])
    b.append(rhs / s[3])
    used.append(s[0])
n = len(FIT)
ata = [[sum(A[k][i] * A[k][j] for k in range(len(A))) for j in range(n)] for i in range(n)]
atb = [sum(A[k][i] * b[k] for k in range(len(A))) for i in range(n)]
for i in range(n):  # Gaussian elimination
    p = max(range(i, n), key=lambda r_: abs(ata[r_][i]))
    ata[i], ata[p], atb[i], atb[p] = ata[p], ata[i], atb[p], atb[i]
    for r_ in range(i + 1, n):
        f = ata[r_][i] / ata[i][i]
        ata[r_] = [x - f * y for x, y in zip(ata[r_], ata[i])]
        atb[r_] -= f * atb[i]
x = [0.0] * n
for i in reversed(range(n)):
    x[i] = (atb[i] - sum(ata[i][j] * x[j] for j in range(i + 1, n))) / ata[i][i]
fit = dict(zip(FIT, x))
print(json.dumps({"fitted_activity_w_per_mhz": fit, "fixed": {c: base_acts[c] for c in fixed},
                  "samples_used": len(used), "samples_capped_left_out": len(rows) - len(used)}, indent=1))
cap = dev["cap_power_w"]["value"]
print("| sample | measured J | fitted J (cap applied) | error |\n|---|---:|---:|---:|")
for s, e0, t, r in rows:
    e = e0 + sum((fit.get(c, base_acts[c])) * r[c] for c in classes)
    e = min(e, cap * t)
    print(f"| {s[0]} | {s[3]:.3f} | {e:.3f} | {100 * (e / s[3] - 1):+.1f} % |")
