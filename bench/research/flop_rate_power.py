#!/usr/bin/env python3
"""Does a kernel's work per µs explain its power on the H200? (issue Order 8's missing input)

The per-kernel form of power_form_limits.py (class power x SMs covered x d / (d + ramp)) cannot
tell a 5.7 µs bmm of 64³ matrices (47 TFLOP/s, 156 W above idle) from a 5.4 µs 1024³ GEMM
(401 TFLOP/s, 487 W): same class, grid cover and length. Here each matrix-multiply kernel whose
work is known gets the share of its dtype's peak it reaches, u = FLOPs / (d x peak), and draws
    A0 x w + A1 x w x u^gamma     above idle (w: the candidate's coverage and ramp weight,
                                  "weighted", or 1),
with one (A0, A1) for every such kernel ("one curve") or one for the tensor-core kernels and one
for those on the CUDA cores (fp32 peak; "two curves"); every other op draws the class powers of
power_form_limits.py (tensor-core, CUDA-core GEMM, memory and other). FLOPs come from the CPU op
that launched the kernel (External id) where the trace has `record_shapes` (mm, addmm, bmm,
baddbmm, convolutions forward and backward, attention forward and backward), and from the
config's name on the kernel sweep; spread over the op's matrix-multiply kernels by duration.
Peaks: the H200 SXM's dense figures (bf16/fp16 989.4, tf32 494.7, fp32 66.9 TFLOP/s; NVIDIA's
data sheet), tf32 where the kernel's name says so, fp32 for float inputs otherwise.

Fitted by linear least squares on relative error (loops at the cap left out): first the class
powers without the work term, then A0, A1 with the class powers kept, so a loop whose work is
unknown is predicted as without the term. Fit set: the sweep and ../shared/traces/h200 (both
carry the work); scored on the held-out sets, which the fit never reads: their `_shapes` traces
carry the work, their `_light` traces and h200_heldout3 do not. Raw traces as in
power_form_limits.py: no replay, overlapping ops not bounded.
Leave-one-out within the fit set (--show): each group of fit loops (a ../shared workload, its
ranks together; a kind of the sweep) fitted without it and scored, at the fit set's best row.
  python3 bench/research/flop_rate_power.py build/ci/tools/emo/emo ../shared [--show]
With --proxy it prints only proxy_check's table (a stand-in for the work where shapes are absent)
and stops.
"""
import math, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h200_loops  # noqa: E402
from lsq import solve  # noqa: E402
from matmul_flops import PEAK, annotate, is_matmul, peak_name  # noqa: E402,F401

repo, emo, shared = h200_loops.command_line()
IDLE, CAP = h200_loops.device(repo)
SM, FIXED = h200_loops.SM, h200_loops.FIXED
loops, kinds = h200_loops.load(repo, shared, emo)


for l in loops:
    annotate(l, kinds)


def proxy_check():
    """--proxy: can a kernel's launch and length stand in for its work where a trace has no shapes?
    Candidate: u ~ u_sat x max(0, d - floor) / d (a fixed latency floor of a few µs, then the
    mainloop at the sustained share of the sweep's largest GEMMs, u_sat per peak). Printed per loop
    with known work: the time-weighted u against the candidate's, by peak."""
    sat = {}
    for l in loops:  # u_sat: the sweep's longest GEMM of each peak
        if l["set"] == "kernels" and (l["config"] or "").startswith("gemm_"):
            for o in l["ops"]:
                if o.get("u") is not None:
                    p = peak_name(o)
                    if o["dur"] > sat.get(p, (0, 0))[0]:
                        sat[p] = (o["dur"], o["u"])
    print("u_sat (the sweep's longest GEMM per peak): " +
          ", ".join(f"{p} {u:.3f} ({d:.0f} µs)" for p, (d, u) in sorted(sat.items())))
    for floor in (2.0, 3.0, 4.0):
        print(f"\nfloor {floor} µs\n\n| set | loop | peak | kernel ms | u (shapes) | candidate |\n|---|---|---|---:|---:|---:|")
        for l in loops:
            if l["set"] == "kernels":
                continue
            acc = {}
            for o in l["ops"]:
                if o.get("u") is None:
                    continue
                p = peak_name(o)
                a = acc.setdefault(p, [0.0, 0.0, 0.0])
                a[0] += o["dur"]
                a[1] += o["u"] * o["dur"]
                a[2] += sat[p][1] * max(0.0, o["dur"] - floor)
            for p, (t, u, c) in sorted(acc.items()):
                print(f"| {l['set']} | {l['name']} | {p} | {t / 1e3:.1f} | {u / t:.3f} | {c / t:.3f} |")


if "--proxy" in sys.argv:
    proxy_check()
    sys.exit(0)


def group(op):
    return h200_loops.power_group(op, kinds)


def weight(op, ramp):
    w = op["dur"] / (op["dur"] + ramp) if ramp > 0 else 1.0
    b = op["blocks"]
    return w * min(1.0, b / SM) if op["cat"] == "kernel" and b else w


def sums(loop, ramp, gamma, use_work, work_weight):
    """Seconds above idle at full power per iteration, per power group (overlaps not bounded)."""
    s = dict.fromkeys(["tc", "cc", "mem", "F0", "F1", "S0", "S1", "comm", "memset"], 0.0)
    for op in loop["ops"]:
        w = weight(op, ramp)
        t = op["dur"] * 1e-6 / loop["steps"]
        if use_work and op.get("u") is not None:
            ww = w if work_weight else 1.0
            a, b = ("S0", "S1") if SPLIT and op["simt"] else ("F0", "F1")
            s[a] += ww * t
            s[b] += ww * t * op["u"] ** gamma
        else:
            s[group(op)] += w * t
    return s


def predict(loop, s, powers):
    e = IDLE * loop["step"] + sum(powers.get(g, FIXED.get(g, 0.0)) * v for g, v in s.items())
    return min(e, CAP * loop["step"])


FIT = {"kernels", "shared"}
SPLIT = False  # set per row: the CUDA-core (fp32 peak) kernels on a curve of their own


def fit(ramp, gamma, use_work, work_weight, leave_out=lambda l: False):
    """The class powers fitted without the work term; with it, A0 and A1 fitted next, the class
    powers kept (a loop whose work is unknown is predicted as without the term). Loops for which
    leave_out is true are not fitted on."""
    base = ["tc", "cc", "mem"]
    powers = {}
    for groups, work in ((base, False), (["F0", "F1"] + (["S0", "S1"] if SPLIT else []), True)):
        if work and not use_work:
            break
        ss = {id(l): sums(l, ramp, gamma, work, work_weight) for l in loops}
        rows, b = [], []
        for l in loops:
            s = ss[id(l)]
            if l["set"] not in FIT or l["J"] >= 0.97 * CAP * l["step"] or leave_out(l):
                continue
            known = sum(powers.get(g, FIXED.get(g, 0.0)) * s[g] for g in s if g not in groups)
            rows.append([s[g] / l["J"] for g in groups])
            b.append((l["J"] - IDLE * l["step"] - known) / l["J"])
        powers.update(zip(groups, solve(rows, b, ridge=1e-12)))
    return powers, {id(l): 100 * (predict(l, ss[id(l)], powers) / l["J"] - 1) for l in loops}


def score(errors, pick):
    e = [abs(errors[id(l)]) for l in loops if pick(l)]
    if not e:
        return "—"
    return f"{sum(x <= 10 for x in e)} of {len(e)}, rms {math.sqrt(sum(x * x for x in e) / len(e)):.1f} %, max {max(e):.1f} %"


fit_set = lambda l: l["set"] in FIT  # noqa: E731
held_work = lambda l: l["set"] not in FIT and bool(l["cpu"])  # noqa: E731
held_none = lambda l: l["set"] not in FIT and not l["cpu"]  # noqa: E731
print(f"{len(loops)} loops. Matrix-multiply kernel time with known work, per set of loops that carry it:")
for name, pick in (("fit set", fit_set), ("held out with shapes", held_work)):
    ops = [o for l in loops if pick(l) for o in l["ops"] if is_matmul(o, kinds)]
    t = sum(o["dur"] for o in ops)
    known = sum(o["dur"] for o in ops if o.get("u") is not None)
    print(f"- {name}: {100 * known / t:.0f} % of {t / 1e3:.0f} ms")
print("\n| work term | ramp µs | gamma | fitted W above idle | fit set | held out with shapes | held out without |")
print("|---|---:|---:|---|---|---|---|")
best = None
for ramp in (0, 4, 6, 8):
    for split, work_weight in ((None, None), (False, False), (True, False), (True, True)):
        for gamma in ((1.0,) if split is None else (0.5, 0.75, 1.0)):
            SPLIT = bool(split)
            p, e = fit(ramp, gamma, split is not None, bool(work_weight))
            label = "none" if split is None else (("two curves" if split else "one curve") +
                                                  (", weighted" if work_weight else ""))
            print(f"| {label} | {ramp} | {'–' if split is None else gamma} | " +
                  ", ".join(f"{g} {v:.0f}" for g, v in p.items()) +
                  f" | {score(e, fit_set)} | {score(e, held_work)} | {score(e, held_none)} |", flush=True)
            fit_rms = math.sqrt(sum(e[id(l)] ** 2 for l in loops if fit_set(l)) / sum(map(fit_set, loops)))
            if split is not None and (best is None or fit_rms < best[0]):
                best = (fit_rms, ramp, gamma, split, work_weight, e)
if "--show" in sys.argv:
    _, ramp, gamma, split, ww, e = best
    SPLIT = False
    _, e0 = fit(ramp, 1.0, False, True)
    print(f"\nPer loop, the lowest rms on the fit set ({'two curves' if split else 'one curve'}"
          f"{', weighted' if ww else ''}, ramp {ramp} µs, gamma {gamma}) against the same ramp without the work term:\n")
    print("| set | loop | without | with the work term |")
    print("|---|---|---:|---:|")
    for l in loops:
        print(f"| {l['set']} | {l['name']} | {e0[id(l)]:+.1f} % | {e[id(l)]:+.1f} % |")

    def fold(l):
        """A fit loop's leave-one-out group: a ../shared workload (ranks together) or a sweep kind."""
        if l["set"] == "shared":
            return l["name"].split("_rank")[0]
        return re.sub(r"_\d.*$", "", l["name"])  # gemm_bf16, gemm_fp32, copy, bmm_bf16, ...

    print("\nLeave one group of the fit set out (same row; the group's loops fitted without them):\n")
    print("| group left out | loops | without the work term | with it |")
    print("|---|---|---|---|")
    for f in sorted({fold(l) for l in loops if fit_set(l)}):
        out = lambda l, f=f: fit_set(l) and fold(l) == f  # noqa: E731
        SPLIT = False
        _, w0 = fit(ramp, 1.0, False, True, out)
        SPLIT = split
        _, w1 = fit(ramp, gamma, True, ww, out)
        mine = [l for l in loops if out(l)]
        print(f"| {f} | {len(mine)} | " + ", ".join(f"{w0[id(l)]:+.1f}" for l in mine) + " % | " +
              ", ".join(f"{w1[id(l)]:+.1f}" for l in mine) + " % |")
