#!/usr/bin/env python3
"""Fits a device file's work_power curves (issue Order 8; include/emo/model/device.h WorkPower)
through emo's own pipeline: the power above idle of a matrix-multiply kernel whose work the trace
knows, a0 + a1 u^gamma watts at the default clock, one curve for the tensor cores and one for the
CUDA cores (u: the share of its data type's dense peak, include/emo/model/kernel_work.h).

At a fixed gamma, the energy `emo optimize --step-time` predicts at the default clock with the cap
lifted is linear in the four powers: E = E0 + sum_p x_p R_p, where E0 is the energy with both
curves at zero (those kernels at idle) and each R_p the response to one power, all read from emo
(variant device files). Least squares on relative error over the fit loops below the cap (97 %
of the cap power, measured), for gamma 0.5, 0.75 and 1; the lowest rms wins. A curve's a0 that
comes out negative (less than idle at u = 0) is held at 0 and the others refitted. Every other number
of the base device file is kept.

Fit set: the kernel sweep (--sweep DIR, default data/h200_kernels: its measured.json and traces)
and ../shared/traces/h200. Only loops whose traces carry operator work inform the fit. The sweep
was traced without record_shapes; its GEMM and bmm configs name their sizes and data type
(bench/gpu/kernel_power.py configs()), so for the fit each such trace is copied to a temporary
file whose aten::mm / aten::bmm operators get the "Input Dims" and "Input type" the config
gives them (sweep_shapes below); the trace's timings are untouched and nothing is written back.
The held-out sets (data/h200_heldout*) are never read here (bench/model_energy_h200.sh scores
them).
  python3 bench/research/work_power_fit.py [emo] [shared] [--base FILE] [--sweep DIR] [--sweep-only] [--write FILE]
--sweep-only leaves ../shared/traces/h200 out: for another GPU's sweep (data/h100_kernels, traced
with shapes, so nothing is injected there).
"""
import copy, gzip, json, os, re, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lsq import solve  # noqa: E402
from h200_loops import option  # noqa: E402

repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
base_path = option("--base", f"{repo}/devices/h200.json")
write_to = option("--write")
sweep = option("--sweep", f"{repo}/data/h200_kernels")
sweep_only = "--sweep-only" in sys.argv  # the sweep alone (another GPU than ../shared's H200 traces)
args = [a for a in sys.argv[1:] if not a.startswith("--")]
emo = args[0] if args else f"{repo}/build/ci/tools/emo/emo"
shared = args[1] if len(args) > 1 else f"{repo}/../shared"

PEAKS = {  # TFLOP/s, dense
    "peak_tflops_16bit": 989.4, "peak_tflops_tf32": 494.7, "peak_tflops_fp32": 66.9}
PEAK_SOURCE = ("NVIDIA H100/H200 SXM data sheets (the same GH100 compute), dense figures (bf16/fp16 1,979 and "
               "tf32 989 TFLOP/s with sparsity, halved; fp32 67 TFLOP/s on the CUDA cores)")
K = 300.0  # W: the response probe of each power
POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 2)

base = json.load(open(base_path))
cap = base["cap_power_w"]["value"]

tmp = tempfile.mkdtemp()
TYPES = {"bf16": "c10::BFloat16", "fp32": "float", "tf32": "float"}


def sweep_shapes(config):
    """(operator, input dims, input type) of a sweep config's matrix multiply, or None."""
    g = re.match(r"(gemm|bmm)_(bf16|fp32|tf32)_(\d+)(?:x(\d+))?(?:x(\d+))?$", config)
    if not g:
        return None
    kind, dtype, a, b, c = g.groups()
    if kind == "bmm":  # bmm_<dtype>_<batch>x<side>: x @ x of batch side x side matrices
        side = [int(a), int(b), int(b)]
        return "aten::bmm", [side, side], TYPES[dtype]
    m, k, n = (int(a), int(b), int(c)) if c else (int(a),) * 3
    return "aten::mm", [[m, k], [k, n]], TYPES[dtype]


def with_shapes(trace, config):
    """The trace itself, or a temporary copy whose matrix-multiply operators carry the config's shapes."""
    shapes = sweep_shapes(config)
    if shapes is None:
        return trace
    op, dims, dtype = shapes
    d = json.load(gzip.open(trace))
    for e in d["traceEvents"]:
        if e.get("cat") == "cpu_op" and e.get("name") == op and "Input Dims" not in e.get("args", {}):
            e["args"]["Input Dims"] = dims
            e["args"]["Input type"] = [dtype] * len(dims)
            e["args"]["Concrete Inputs"] = [""] * len(dims)
    out = f"{tmp}/{config}.json.gz"
    with gzip.open(out, "wt") as f:
        json.dump(d, f)
    return out


samples = []  # (name, trace, step s, measured J, measured W)
kp = json.load(open(f"{sweep}/measured.json"))
for n, c in sorted(kp["configs"].items()):
    samples.append((n, with_shapes(f"{sweep}/{n}.json.gz", n), c["iter_s"], c["energy_per_iter_j"], c["avg_power_w"]))
m = {} if sweep_only else json.load(open(f"{shared}/traces/h200/measured.json"))
for n, t in list(m.get("workloads", {}).items()) + list(m.get("multi_gpu", {}).items()):
    samples.append((n, f"{shared}/traces/h200/{n}.json.gz", t["energy_per_iter_j"] / t["avg_power_w"],
                    t["energy_per_iter_j"], t["avg_power_w"]))

_count = [0]


def curve(a0, a1, gamma, src):
    return {k: {"value": v, "source": src} for k, v in (("a0_w", a0), ("a1_w", a1), ("gamma", gamma))}


def variant(tensor, cuda, gamma):
    d = copy.deepcopy(base)
    d["cap_power_w"]["value"] = 1e6
    d["power_limit_w"]["value"] = 1e6
    d["work_power"] = {k: {"value": v, "source": PEAK_SOURCE} for k, v in PEAKS.items()}
    d["work_power"]["tensor"] = curve(*tensor, gamma, "fit probe")
    d["work_power"]["cuda_core"] = curve(*cuda, gamma, "fit probe")
    _count[0] += 1
    p = f"{tmp}/v{_count[0]}.json"
    json.dump(d, open(p, "w"))
    return p


def energy(devfile, s):
    out = subprocess.run([emo, "optimize", s[1], "--device", devfile, "--json", "-", "--step-time",
                          f"{1e3 * s[2]:.6f}"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"emo optimize {s[1]} --device {devfile} failed: {out.stderr.strip()}")
    j = json.loads(out.stdout)
    return j["baseline"]["energy_j"], j["baseline"]["time_us"] / 1e6


rows_of = {}  # gamma -> the informed loops' responses


def fit_at(gamma):
    files = [variant((0, 0), (0, 0), gamma), variant((K, 0), (0, 0), gamma), variant((0, K), (0, 0), gamma),
             variant((0, 0), (K, 0), gamma), variant((0, 0), (0, K), gamma)]
    rows = []
    for s in samples:
        (e0, t), *probes = POOL.map(lambda f: energy(f, s), files)
        rows.append((s, e0, t, [(e - e0) / K for e, _ in probes]))
    informed = [r for r in rows if any(abs(x) > 1e-12 for x in r[3])]
    A, b = [], []
    for s, e0, t, r in informed:
        if s[4] >= 0.97 * cap:
            continue  # held by the limiter: its energy says the demand is at least the cap
        A.append([x / s[3] for x in r])
        b.append((s[3] - e0) / s[3])
    used = [i for i in range(4) if any(abs(row[i]) > 1e-12 for row in A)]
    while True:  # a curve may not draw less than idle: a negative a0 is held at 0 and the rest refitted
        x = [0.0] * 4
        for i, v in zip(used, solve([[row[i] for i in used] for row in A], b, ridge=1e-12)):
            x[i] = v
        negative = [i for i in (0, 2) if i in used and x[i] < 0]
        if not negative:
            break
        used.remove(negative[0])
    errs = {s[0]: 100 * (min(e0 + sum(a * w for a, w in zip(x, r)), cap * t) / s[3] - 1) for s, e0, t, r in rows}
    fit_errs = [errs[s[0]] for s, *_ in informed]
    rms = (sum(e * e for e in fit_errs) / max(1, len(fit_errs))) ** 0.5
    rows_of[gamma] = [r for *_, r in informed]
    return x, used, errs, [s[0] for s, *_ in informed], rms


print(f"{len(samples)} fit loops (sweep: {os.path.relpath(sweep, repo)}); base {os.path.relpath(base_path, repo)}\n")
print("| gamma | tensor a0, a1 (W) | CUDA-core a0, a1 (W) | loops with known work | rms error % | max error % |")
print("|---:|---|---|---:|---:|---:|")
best = None
for gamma in (0.5, 0.75, 1.0):
    x, used, errs, informed, rms = fit_at(gamma)
    worst = max(abs(errs[n]) for n in informed) if informed else float("nan")
    shown = [f"{v:.0f}" for v in x]
    print(f"| {gamma} | {shown[0]}, {shown[1]} | {shown[2]}, {shown[3]} | {len(informed)} | {rms:.1f} | {worst:.1f} |",
          flush=True)
    if informed and (best is None or rms < best[4]):
        best = (gamma, x, used, errs, rms, informed)
if best is None:
    sys.exit("no fit loop carries operator work (record_shapes): nothing to fit")
gamma, x, used, errs, rms, informed = best
print(f"\nbest gamma {gamma}: per loop (cap applied)\n\n| loop | error |\n|---|---:|")
for s in samples:
    print(f"| {s[0]}{'' if s[0] in informed else ' (no work known)'} | {errs[s[0]]:+.1f} % |")
if not all(any(abs(r[i]) > 1e-12 for r in rows_of[gamma]) for i in (1, 3)):
    sys.exit("not every curve was informed (a kind of kernel missing from the fit set): nothing written")

if write_to:
    cmd = (f"python3 bench/research/work_power_fit.py EMO SHARED --base {os.path.relpath(base_path, repo)} "
           f"--sweep {os.path.relpath(sweep, repo)}{' --sweep-only' if sweep_only else ''} --write FILE")
    src = (f"least-squares fit of the predicted to the measured energy per iteration at the default clock through "
           f"emo's pipeline, {len(informed)} loops whose operator work is known ({os.path.relpath(sweep, repo)} with "
           f"each GEMM/bmm config's shapes{'' if sweep_only else ', ../shared/traces/h200 with record_shapes'}; "
           f"rms error {rms:.1f} %), gamma "
           f"{gamma} the best of 0.5, 0.75, 1: `{cmd}`")
    d = copy.deepcopy(base)
    d["work_power"] = {k: {"value": v, "source": PEAK_SOURCE} for k, v in PEAKS.items()}
    for key, (a0, a1) in (("tensor", x[:2]), ("cuda_core", x[2:])):
        d["work_power"][key] = curve(round(a0, 1), round(a1, 1), gamma, src)
        d["work_power"][key]["gamma"] = {
            "value": gamma, "source": src, "assumption": True,
            "reasoning": "a form, not a measurement: the grid point with the least rms error"}
    with open(write_to, "w") as f:
        json.dump(d, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {write_to}")
