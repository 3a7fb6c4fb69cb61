#!/usr/bin/env python3
"""How far a per-kernel power model can go on the H200 loops with measured energy (docs/model.md):
each GPU op draws idle + A[group] x coverage x d / (d + ramp) above idle, where coverage is the
share of the 132 SMs its grid covers (1 for copies and memsets), d its duration and ramp the time
a kernel takes to reach full power; ops on several streams add up to at most the GPU full of the
hungriest; an iteration's average power never exceeds the cap (692.13 W). This is the form of
KernelShare (include/emo/model/device.h) and of the pack model's concurrency bound, evaluated
here on the raw traces (no replay, no fit of the timeline to the step: a loop whose trace shows
more GPU time than its measured step is not trimmed as `emo optimize --step-time` trims it).

Two questions, each answered by linear least squares on relative error (loops at the cap left out
of the fit), for each coverage form and ramp:
  fit:        the four powers of docs/model.md (tensor-core compute, CUDA-core GEMMs, memory and
              other tied) fitted on data/h200_kernels and ../shared/traces/h200; scored on the
              held-out sets data/h200_heldout{,2,3}, which the fit never reads.
  in-sample:  seven powers (GEMM, conv, attention, CUDA-core GEMM, reductions/norms/softmax/
              pooling, other memory-bound, other) fitted on every loop at once, held-out sets
              included: not a prediction, an upper bound on what these features can explain.
Kernel names are classified by `emo model classify` (the share kinds of devices/h200.json).
  python3 bench/research/power_form_limits.py build/ci/tools/emo/emo ../shared [--show RAMP]
"""
import collections, math, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h200_loops  # noqa: E402
from lsq import solve  # noqa: E402

repo, emo, shared = h200_loops.command_line()
show = float(sys.argv[sys.argv.index("--show") + 1]) if "--show" in sys.argv else None
IDLE, CAP = h200_loops.device(repo)
SM, COMM_W, FIXED = h200_loops.SM, h200_loops.COMM_W, h200_loops.FIXED
loops, kinds = h200_loops.load(repo, shared, emo)


def group4(op):
    return h200_loops.power_group(op, kinds)


def group7(op):
    g = group4(op)
    if g in ("memset", "comm", "cc") or op["cat"] != "kernel":
        return g
    k = kinds[op["name"]]
    sk = k["share_kind"]
    if sk in ("gemm", "conv", "attention"):
        return sk
    if sk in ("norm", "softmax", "reduction", "pooling"):
        return "reduce"
    return "mem" if k["class"] == "memory" else "other"


def weight(op, ramp, form):
    w = op["dur"] / (op["dur"] + ramp) if ramp > 0 else 1.0
    b = op["blocks"]
    if op["cat"] != "kernel" or not b or form == "none":
        return w
    return w * (min(1.0, b / SM) if form == "cov" else b / (SM * math.ceil(b / SM)))


def factors(loop, powers, ws, grp):
    """Per op, the mean over its lifetime of (hungriest full power / sum of the active ops' powers)."""
    ops, evs = loop["ops"], []
    for i, op in enumerate(ops):
        evs += [(op["ts"], 1, i), (op["ts"] + op["dur"], 0, i)]
    evs.sort(key=lambda e: (e[0], e[1]))
    scaled, active, last = [0.0] * len(ops), set(), 0.0
    full = lambda j: powers.get(grp[j], FIXED.get(grp[j], 0.0))
    for t, is_open, i in evs:
        if active and t > last:
            total = sum(ws[j] * full(j) for j in active)
            most = max(full(j) for j in active)
            f = most / total if total > most > 0 else 1.0
            for j in active:
                scaled[j] += f * (t - last)
        (active.add if is_open else active.discard)(i)
        last = t
    return [scaled[i] / op["dur"] for i, op in enumerate(ops)]


def sums(loop, ramp, form, grouping, powers):
    grp = [grouping(op) for op in loop["ops"]]
    ws = [weight(op, ramp, form) for op in loop["ops"]]
    fs = factors(loop, powers, ws, grp) if loop["multi"] else [1.0] * len(ws)
    s = collections.defaultdict(float)
    for op, g, w, f in zip(loop["ops"], grp, ws, fs):
        s[g] += w * f * op["dur"] * 1e-6 / loop["steps"]  # s above idle at full power, per iteration
    return s


def predict(loop, s, powers):
    e = IDLE * loop["step"] + sum(powers.get(g, FIXED.get(g, 0.0)) * v for g, v in s.items())
    return min(e, CAP * loop["step"])


def fit(ramp, form, grouping, groups, fit_sets):
    powers = {g: 450.0 for g in groups}
    for _ in range(3):  # the concurrency factors depend on the powers: refit twice
        ss = {id(l): sums(l, ramp, form, grouping, powers) for l in loops}
        rows, b = [], []
        for l in loops:
            s = ss[id(l)]
            if l["set"] not in fit_sets or l["J"] >= 0.97 * CAP * l["step"]:
                continue
            rows.append([s[g] / l["J"] for g in groups])
            b.append((l["J"] - IDLE * l["step"] - sum(FIXED[g] * s[g] for g in FIXED)) / l["J"])
        powers = dict(zip(groups, solve(rows, b, ridge=1e-12)))
    errors = {l["name"] + "/" + l["set"]: (l, 100 * (predict(l, ss[id(l)], powers) / l["J"] - 1)) for l in loops}
    return powers, errors


def score(errors, sets):
    e = [abs(x) for l, x in errors.values() if l["set"] in sets]
    return f"rms {math.sqrt(sum(x * x for x in e) / len(e)):5.1f} %, max {max(e):5.1f} %, within 10 %: {sum(x <= 10 for x in e):2d} of {len(e)}"


FIT, HELD = {"kernels", "shared"}, {"h200_heldout", "h200_heldout2", "h200_heldout3"}
print(f"{len(loops)} loops; idle {IDLE} W, cap {CAP} W, NCCL kernels {COMM_W} W above idle, memsets at idle\n")
print("| coverage | ramp us | fitted W above idle (tensor-core, CUDA-core GEMM, memory and other) | fit set | held out |")
print("|---|---:|---|---|---|")
for form in ("cov", "wave", "none"):
    for ramp in (0, 2, 4, 6, 8, 12):
        powers, errors = fit(ramp, form, group4, ["tc", "cc", "mem"], FIT)
        print(f"| {form} | {ramp} | {powers['tc']:.0f}, {powers['cc']:.0f}, {powers['mem']:.0f} | "
              f"{score(errors, FIT)} | {score(errors, HELD)} |", flush=True)
        if show is not None and ramp == show and form == "cov":
            for l, x in errors.values():
                print(f"|   | {l['set']} | {l['name']} | {x:+.1f} % | |")
print("\nIn-sample bound: seven powers fitted on every loop (held-out sets included)\n")
print("| ramp us | fitted W above idle | all loops | the held-out sets |")
print("|---:|---|---|---|")
seven = ["gemm", "conv", "attention", "cc", "reduce", "mem", "other"]
for ramp in (4, 6, 8):
    powers, errors = fit(ramp, "cov", group7, seven, FIT | HELD)
    print(f"| {ramp} | " + ", ".join(f"{g} {powers[g]:.0f}" for g in seven) +
          f" | {score(errors, FIT | HELD)} | {score(errors, HELD)} |", flush=True)
