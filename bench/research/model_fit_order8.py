#!/usr/bin/env python3
"""Fits the H200 model's power per kernel (issue Order 8) to measured energy per iteration at the
default clock: the class activities (W/MHz at activity scale 1) of tensor-core compute and of
memory-bound kernels ("other", small data-movement kernels, shares memory's: alone they are too
few to fit), the CUDA-core GEMMs' share of the compute power, for each point of a grid of the
occupancy numbers (saturation warps per SM, kernel ramp; devices/h200.json, KernelShare in
include/emo/model/device.h). Fit set: data/h200_kernels (one kernel kind per loop), the workload
traces of ../shared/traces/h200 and EMO's own PyTorch traces in data/h200_emo; the held-out sets
data/h200_heldout{,2,3} are never read here (bench/model_energy_h200.sh scores them).

The baseline energy `emo optimize --step-time` predicts at the default clock with the cap lifted is
linear in each class's activity above the idle one: E = E_idle + sum_c (a_c - a_idle) R_c. a_idle
and every R_c are read from emo itself (variant device files), so the fit uses emo's own
classification, kernel shares and busy times. Least squares on relative error: linear over the samples whose
measured power is below 97 % of the cap power, then refined over all with the cap applied.
  python3 bench/research/model_fit_order8.py [emo] [shared] [--base FILE] [--sweep DIR] [--sweep-only]
                                            [--warps 0,4,8] [--ramps 0,3,6,10,15] [--floors F,...]
                                            [--probe LOOP] [--hold-other] [--write-each DIR]
                                            [--write devices/h200.json]
(--base: the device file fitted, default devices/h200.json; --sweep: the kernel sweep, default
data/h200_kernels; --sweep-only: the sweep alone, for another GPU than ../shared's H200 traces;
--warps, --ramps, --floors: the grid of saturation_warps, kernel_ramp_us and kernel_floor_us, no
floor by default; --probe: the loop whose energy gives the idle activity, by default gpt_train or
gemm_bf16_1024, whose GEMMs a base with work_power curves prices by work: take a loop of memory
kernels then, e.g. copy_2e26; --hold-other: the class "other" keeps the base file's power instead
of being fitted with memory's) prints the grid, the fit and its errors; --write puts the best grid
point (least rms error) and its fit into that device file (a copy of devices/h200.json when it
does not exist; the numbers it does not fit are devices/derive_h200.py's); --write-each writes
one device file per grid point into DIR (ramp<R>_floor<F>_warps<W>.json), to score each with
bench/model_energy_h200.sh.
"""
import copy, json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lsq import solve  # noqa: E402
from h200_loops import option  # noqa: E402
from concurrent.futures import ThreadPoolExecutor

POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 2)

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))
ORIGINAL_ARGS = sys.argv[1:]
write_to = option("--write")
write_each = option("--write-each")
probe_name = option("--probe")
hold_other = "--hold-other" in sys.argv


def numbers(flag, default):
    value = option(flag)
    return default if value is None else tuple(float(x) for x in value.split(","))


grid_warps = numbers("--warps", (0, 4, 8))
grid_ramps = numbers("--ramps", (0, 3, 6, 10, 15))
grid_floors = numbers("--floors", None)
base_path = option("--base", f"{repo}/devices/h200.json")
sweep = option("--sweep", f"{repo}/data/h200_kernels")
sweep_only = "--sweep-only" in sys.argv
args = [a for a in sys.argv[1:] if not a.startswith("--")]
emo = args[0] if len(args) > 0 else f"{repo}/build/release/tools/emo/emo"
shared = args[1] if len(args) > 1 else f"{repo}/../shared"
A_HI = 0.3  # an activity above the idle one (W/MHz), for the responses

dev = json.load(open(base_path))
idle_act = None  # a_idle: the activity at which a class draws idle power (from emo's variant run)

samples = []  # (name, trace, step_ms or None, measured J, measured W)
kp = json.load(open(f"{sweep}/measured.json"))
for n, c in sorted(kp["configs"].items()):
    samples.append((n, f"{sweep}/{n}.json.gz", 1e3 * c["iter_s"], c["energy_per_iter_j"], c["avg_power_w"]))
m = {} if sweep_only else json.load(open(f"{shared}/traces/h200/measured.json"))
for n, t in list(m.get("workloads", {}).items()) + list(m.get("multi_gpu", {}).items()):
    samples.append((n, f"{shared}/traces/h200/{n}.json.gz", 1e3 * t["energy_per_iter_j"] / t["avg_power_w"],
                    t["energy_per_iter_j"], t["avg_power_w"]))
for n in [] if sweep_only else ["train_loop", "train_loop_nvtx", "decode_loop"]:
    a = json.loads(subprocess.run([emo, "analyze", f"{repo}/data/h200_emo/{n}.emotrace", "--json", "-"],
                                  capture_output=True, text=True, check=True).stdout)
    g = a["measured_energy"]["gpus"][0]
    samples.append((n, f"{repo}/data/h200_emo/{n}.emotrace", None, g["energy_per_iteration_j"], None))

tmp = tempfile.mkdtemp()
classes = list(dev["classes"])
base_acts = {c: dev["classes"][c]["activity_w_per_mhz"]["value"] for c in classes}
cap = dev["cap_power_w"]["value"]
_count = [0]


def variant(acts, occ, cuda_share=1.0):
    d = copy.deepcopy(dev)
    d["activity_scale"] = {"value": 1.0, "source": "fit probe"}
    d["cap_power_w"]["value"] = 1e6
    d["power_limit_w"]["value"] = 1e6
    for k in ("sm_count", "saturation_warps", "kernel_ramp_us", "kernel_floor_us"):  # the file's own, from an earlier fit
        d.pop(k, None)
    for k, v in {**occ, "cuda_core_gemm_share": cuda_share}.items():
        d[k] = {"value": v, "source": "fit grid point"}
    for c in classes:
        d["classes"][c]["activity_w_per_mhz"]["value"] = acts.get(c, base_acts[c] if c == "other" and hold_other else 0.0)
    _count[0] += 1
    p = f"{tmp}/v{_count[0]}.json"
    json.dump(d, open(p, "w"))
    return p


def energy(devfile, s):
    extra = ["--step-time", f"{s[2]:.6f}"] if s[2] else []
    j = json.loads(subprocess.run([emo, "optimize", s[1], "--device", devfile, "--json", "-", *extra],
                                  capture_output=True, text=True, check=True).stdout)
    return j["baseline"]["energy_j"], j["baseline"]["time_us"] / 1e6


# a_idle: the activity at which the probe draws idle power; two activities above it give the slope.
probe = next(s for s in samples if (s[0] == probe_name if probe_name else s[0] in ("gpt_train", "gemm_bf16_1024")))
_, t_probe = energy(variant({}, {}), probe)
e_a, _ = energy(variant({c: 0.2 for c in classes}, {}), probe)
e_b, _ = energy(variant({c: A_HI for c in classes}, {}), probe)
if abs(e_b - e_a) < 1e-6 * max(abs(e_a), 1e-12):
    sys.exit(f"model_fit_order8: the class powers of the base file do not move {probe[0]}'s energy "
             f"({e_a:.6f} J at 0.2 and at {A_HI} W/MHz): a base whose work_power curves price its kernels "
             "cannot be fitted here; use a base file without work_power (e.g. the file before them, from git)")
a_idle = 0.2 - (e_a - dev["idle_power_w"]["value"] * t_probe) / ((e_b - e_a) / (A_HI - 0.2))


def fit_at(occ):
    rows = []
    for s in samples:
        files = [variant({}, occ), variant({"compute": A_HI}, occ, 0.0), variant({"compute": A_HI}, occ, 1.0),
                 variant({"memory": A_HI} if hold_other else {"memory": A_HI, "other": A_HI}, occ),
                 variant({"communication": base_acts["communication"]}, occ)]
        (e0, t), (e_tc, _), (e_all, _), (e_mem, _), (e_comm, _) = POOL.map(lambda f: energy(f, s), files)
        k = A_HI - a_idle
        rows.append((s, e0 + (e_comm - e0), t, (e_tc - e0) / k, (e_all - e_tc) / k, (e_mem - e0) / k))
    A, b = [], []
    for s, e0, t, r_tc, r_cc, r_mem in rows:
        if s[4] is not None and s[4] >= 0.97 * cap:
            continue  # capped: left to the refinement below
        A.append([r_tc / s[3], r_cc / s[3], r_mem / s[3]])
        b.append((s[3] - e0) / s[3])

    def errors(x):
        return [100 * (min(e0 + x[0] * r_tc + x[1] * r_cc + x[2] * r_mem, cap * t) / s[3] - 1)
                for s, e0, t, r_tc, r_cc, r_mem in rows]

    def sse(x):
        return sum(e * e for e in errors(x))

    # Linear least squares on the uncapped samples, then every sample with the cap applied (a
    # capped run says its demand is at least the cap): coordinate descent from there.
    x = solve(A, b)
    step = [0.05 * abs(v) + 1e-3 for v in x]
    for _ in range(200):
        improved = False
        for i in range(3):
            for d in (+1, -1):
                y = list(x)
                y[i] += d * step[i]
                if sse(y) < sse(x):
                    x, improved = y, True
        if not improved:
            step = [v / 2 for v in step]
            if max(step) < 1e-6:
                break
    x_tc, y_cc, x_mem = x
    errs = errors(x)
    fit = {"compute": a_idle + x_tc, "cuda_core_gemm_share": y_cc / x_tc, "memory_and_other": a_idle + x_mem}
    return fit, rows, errs, (sum(x * x for x in errs) / len(errs)) ** 0.5


# saturation_warps 4: one warp per sub-partition of a Hopper SM (devices/h200.json, added after the
# fit that wrote the file's class powers, which tried 0 and 8 only).
if grid_floors is None:
    grid = [{}] + [{"sm_count": 132, "saturation_warps": w, "kernel_ramp_us": r} for w in grid_warps for r in grid_ramps]
else:
    grid = [{"sm_count": 132, "saturation_warps": w, "kernel_ramp_us": r, "kernel_floor_us": f}
            for w in grid_warps for r in grid_ramps for f in grid_floors]
print(f"idle activity {a_idle:.4f} W/MHz; {len(samples)} samples\n")
print("| saturation_warps | kernel_ramp_us | kernel_floor_us | compute W/MHz | CUDA-core GEMM share | "
      f"{'memory' if hold_other else 'memory, other'} W/MHz | rms error % | max error % |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")


def write_device(path, occ, fit, rms, n_loops):
    """The base file (or `path`'s, when it exists) with a grid point's occupancy and its fit."""
    rel = os.path.relpath
    cmd = ["python3 bench/research/model_fit_order8.py EMO SHARED"]
    tokens = iter(ORIGINAL_ARGS)
    for tok in tokens:  # the options as given, paths relative to the repository; EMO, SHARED by name
        if tok.startswith("--"):
            cmd.append(tok)
            if tok not in ("--sweep-only", "--hold-other"):
                value = next(tokens, "")
                cmd.append(rel(value, repo) if os.path.exists(value) or "/" in value else value)
    cmd = " ".join(cmd)
    sets = rel(sweep, repo) + ("" if sweep_only else ", ../shared/traces/h200, data/h200_emo")
    src = (f"least-squares fit of the predicted to the measured energy per iteration at the default clock, "
           f"{n_loops} loops ({sets}; rms error {rms:.1f} %), on {rel(base_path, repo)}: `{cmd}`")
    d = json.load(open(path)) if os.path.exists(path) else copy.deepcopy(dev)
    fitted = [("compute", fit["compute"]), ("memory", fit["memory_and_other"])]
    if not hold_other:
        fitted.append(("other", fit["memory_and_other"]))
    for c, v in fitted:
        d["classes"][c]["activity_w_per_mhz"] = {"value": round(v, 5), "source": src + (
            "; the power of tensor-core kernels filling the GPU" if c == "compute" else
            "" if hold_other else "; shared by memory and other (too few other kernels to fit alone)")}
    d["activity_scale"] = {"value": 1.0, "source": "1: the class activities are fitted on measured energies "
                                                   "directly (classes.*.activity_w_per_mhz)"}
    d["cuda_core_gemm_share"] = {"value": round(fit["cuda_core_gemm_share"], 3), "source": src}
    d["sm_count"] = {"value": 132, "source": f"the {dev['gpu']} traces' Kineto kernel field \"blocks per SM\" = "
                                            "grid blocks / 132 (e.g. 128 blocks -> 0.969697): 132 SMs"}
    d["kernel_ramp_us"] = {"value": occ["kernel_ramp_us"], "assumption": True,
                           "reasoning": "a form, not a measurement: the grid point "
                                        f"({', '.join(f'{r:g}' for r in grid_ramps)} us) with the "
                                        "least rms error; kernels of a few us (launch-bound loops) draw far less "
                                        "than their class",
                           "source": src}
    if occ.get("kernel_floor_us"):
        d["kernel_floor_us"] = {"value": occ["kernel_floor_us"], "assumption": True,
                                "reasoning": "a form, not a measurement: a grid point of "
                                             f"({', '.join(f'{f:g}' for f in grid_floors)} us)",
                                "source": src}
    else:
        d.pop("kernel_floor_us", None)
    if occ.get("saturation_warps"):
        d["saturation_warps"] = {"value": occ["saturation_warps"], "source": src}
    else:
        d.pop("saturation_warps", None)
    with open(path, "w") as f:
        json.dump(d, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {path}")


best = None
for occ in grid:
    fit, rows, errs, rms = fit_at(occ)
    print(f"| {occ.get('saturation_warps', 'no occupancy')} | {occ.get('kernel_ramp_us', '-')} | "
          f"{occ.get('kernel_floor_us', '-')} | {fit['compute']:.4f} | "
          f"{fit['cuda_core_gemm_share']:.3f} | {fit['memory_and_other']:.4f} | {rms:.1f} | {max(map(abs, errs)):.1f} |",
          flush=True)
    if write_each and occ:
        os.makedirs(write_each, exist_ok=True)
        write_device(f"{write_each}/ramp{occ['kernel_ramp_us']:g}_floor{occ.get('kernel_floor_us', 0):g}_"
                     f"warps{occ['saturation_warps']:g}.json", occ, fit, rms, len(rows))
    if best is None or rms < best[3]:
        best = (occ, fit, rows, rms, errs)
occ, fit, rows, rms, errs = best
print("\n" + json.dumps({"best": occ, "fit": fit, "rms_pct": rms}, indent=1))
print("| sample | measured J | fitted J (cap applied) | error |\n|---|---:|---:|---:|")
for row, e in zip(rows, errs):
    s = row[0]
    print(f"| {s[0]} | {s[3]:.3f} | {s[3] * (1 + e / 100):.3f} | {e:+.1f} % |")

if write_to:
    if not occ:
        sys.exit("model_fit_order8: the best grid point has no occupancy numbers; nothing written")
    write_device(write_to, occ, fit, rms, len(rows))
