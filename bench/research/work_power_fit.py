#!/usr/bin/env python3
"""Fits a device file's work_power curves (issue Order 8; include/emo/model/device.h WorkPower)
through emo's own pipeline: the power above idle of a matrix-multiply kernel whose work the trace
knows, a0 + a1 u^gamma watts at the default clock, one curve for the tensor cores and one for the
CUDA cores (u: the share of its data type's dense peak, include/emo/model/kernel_work.h).

At fixed gammas, the energy `emo optimize --step-time` predicts at the default clock with the cap
lifted is linear in the four powers: E = E0 + sum_p x_p R_p, where E0 is the energy with both
curves at zero (those kernels at idle) and each R_p the response to one power, all read from emo
(variant device files; a curve's responses depend on its own gamma only). Least squares on
relative error over the fit loops below the cap (97 % of the cap power, measured), for one gamma
shared by both curves, 0.5, 0.75 or 1, or with --gamma-per-curve for each pair of gammas from 0.5
to 1 in steps of 0.125; the lowest rms wins. A curve's a0 that
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
  python3 bench/research/work_power_fit.py [emo] [shared] [--base FILE] [--sweep DIR] [--sweep-only]
      [--gamma-per-curve] [--write FILE]
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
per_curve = "--gamma-per-curve" in sys.argv
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
    """A work_power curve section: a0 + a1 u^gamma watts above idle."""
    return {k: {"value": v, "source": src} for k, v in (("a0_w", a0), ("a1_w", a1), ("gamma", gamma))}


GAMMAS = (0.5, 0.625, 0.75, 0.875, 1.0) if per_curve else (0.5, 0.75, 1.0)
PAIRS = [(gt, gc) for gt in GAMMAS for gc in GAMMAS] if per_curve else [(g, g) for g in GAMMAS]


def work_power(tensor, cuda, src):
    """The base file's work_power section (its tile estimate kept) with these two curves, each
    (a0, a1, gamma)."""
    w = {k: {"value": v, "source": PEAK_SOURCE} for k, v in PEAKS.items()}
    if "tile" in base.get("work_power", {}):
        w["tile"] = copy.deepcopy(base["work_power"]["tile"])
    w["tensor"] = curve(*tensor, src)
    w["cuda_core"] = curve(*cuda, src)
    return w


def variant(tensor, cuda):
    d = copy.deepcopy(base)
    d["cap_power_w"]["value"] = 1e6
    d["power_limit_w"]["value"] = 1e6
    d["work_power"] = work_power(tensor, cuda, "fit probe")
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


# Each loop's energy with both curves at zero, and its response to each curve's a0 and a1 at each
# gamma (the other curve at zero): (e0, t) and {(curve, gamma): [R_a0, R_a1]}.
def probes(probed, g):
    """The two device files that give one curve's responses at gamma g: its a0, then its a1, at K."""
    out = []
    for p in ((K, 0, g), (0, K, g)):
        out.append(variant(p, (0, 0, g)) if probed == "tensor" else variant((0, 0, g), p))
    return out


files = {(c, g): probes(c, g) for c in ("tensor", "cuda_core") for g in GAMMAS}
zero = variant((0, 0, 1.0), (0, 0, 1.0))
base_of, response = {}, {}
for s in samples:
    e0, t = energy(zero, s)
    base_of[s[0]] = (e0, t)
    for key, pair in files.items():
        response[(s[0], key)] = [(e - e0) / K for e, _ in POOL.map(lambda f: energy(f, s), pair)]
rows_of = {}  # (gamma tensor, gamma CUDA-core) -> the informed loops' responses


def fit_at(gammas):
    rows = [(s, *base_of[s[0]], response[(s[0], ("tensor", gammas[0]))] + response[(s[0], ("cuda_core", gammas[1]))])
            for s in samples]
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
    rows_of[gammas] = [r for *_, r in informed]
    return x, used, errs, [s[0] for s, *_ in informed], rms


print(f"{len(samples)} fit loops (sweep: {os.path.relpath(sweep, repo)}); base {os.path.relpath(base_path, repo)}\n")
print("| gamma tensor | gamma CUDA-core | tensor a0, a1 (W) | CUDA-core a0, a1 (W) | loops with known work "
      "| rms error % | max error % |")
print("|---:|---:|---|---|---:|---:|---:|")
best = None
for gammas in PAIRS:
    x, used, errs, informed, rms = fit_at(gammas)
    worst = max(abs(errs[n]) for n in informed) if informed else float("nan")
    shown = [f"{v:.0f}" for v in x]
    print(f"| {gammas[0]} | {gammas[1]} | {shown[0]}, {shown[1]} | {shown[2]}, {shown[3]} | {len(informed)} "
          f"| {rms:.1f} | {worst:.1f} |", flush=True)
    if informed and (best is None or rms < best[4]):
        best = (gammas, x, used, errs, rms, informed)
if best is None:
    sys.exit("no fit loop carries operator work (record_shapes): nothing to fit")
gammas, x, used, errs, rms, informed = best
print(f"\nbest gammas {gammas[0]} (tensor), {gammas[1]} (CUDA-core): per loop (cap applied)\n\n| loop | error |\n|---|---:|")
for s in samples:
    print(f"| {s[0]}{'' if s[0] in informed else ' (no work known)'} | {errs[s[0]]:+.1f} % |")
if not all(any(abs(r[i]) > 1e-12 for r in rows_of[gammas]) for i in (1, 3)):
    sys.exit("not every curve was informed (a kind of kernel missing from the fit set): nothing written")

if write_to:
    cmd = (f"python3 bench/research/work_power_fit.py EMO SHARED --base {os.path.relpath(base_path, repo)} "
           f"--sweep {os.path.relpath(sweep, repo)}{' --sweep-only' if sweep_only else ''}"
           f"{' --gamma-per-curve' if per_curve else ''} --write FILE")
    src = (f"least-squares fit of the predicted to the measured energy per iteration at the default clock through "
           f"emo's pipeline, {len(informed)} loops whose operator work is known ({os.path.relpath(sweep, repo)} with "
           f"each GEMM/bmm config's shapes{'' if sweep_only else ', ../shared/traces/h200 with record_shapes'}; "
           f"rms error {rms:.1f} %), "
           + (f"gammas {gammas[0]} (tensor) and {gammas[1]} (CUDA-core) the best pair of "
              f"{', '.join(str(g) for g in GAMMAS)}" if per_curve else
              f"gamma {gammas[0]} the best of {', '.join(str(g) for g in GAMMAS)}") + f": `{cmd}`")
    d = copy.deepcopy(base)
    d["work_power"] = work_power((round(x[0], 1), round(x[1], 1), gammas[0]),
                                 (round(x[2], 1), round(x[3], 1), gammas[1]), src)
    for key, gamma in (("tensor", gammas[0]), ("cuda_core", gammas[1])):
        d["work_power"][key]["gamma"] = {
            "value": gamma, "source": src, "assumption": True,
            "reasoning": "a form, not a measurement: the grid point with the least rms error"}
    with open(write_to, "w") as f:
        json.dump(d, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {write_to}")
