#!/usr/bin/env python3
"""A GEMM's work per µs from the tile its name states, where the trace has no shapes (issue
Order 8; docs/model.md 6a, "A GEMM's work from its tile").

EMO's own traces (CUPTI records carry no arguments) and PyTorch traces without `record_shapes`
give a GEMM kernel's name, grid and duration, not its FLOPs. cuBLAS, cuDNN and CUTLASS name the
output tile one thread block computes (`nvjet_sm90_tst_256x128_...`, `tilesize128x256x32`,
`cutlass_..._128x256_32x3_...`), and the tile's multiply-adds per byte it loads, M·N/(M+N) over
the element's bytes (4 in fp32 and TF32, else 2), bound how busy the block keeps its SM's tensor
cores, or its CUDA cores. The candidate, in emo as DeviceModel::TileWork:
    u = u_sat x min(1, intensity / knee) x (SMs the grid covers / SMs) x max(0, d - floor) / d
Fitted here on the duration-weighted rms of u (knee and floor on a grid, u_sat by least squares),
once to the tensor-core GEMM kernels (emo's share kind gemm), which emo prices so, and once to the
CUDA-core ones (cuda_core_gemm), which it does not (see --write below), whose u the traces' shapes
give (matmul_flops.py), none a convolution launched,
on every H200 loop with record_shapes except the kernel sweep; no energy measurement is read. The kernel sweep
(data/h200_kernels, FLOPs from its config names) is the check outside the fit.

  python3 bench/research/tile_work_fit.py [EMO] [SHARED] [--write devices/h200.json]
"""
import json, math, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h200_loops  # noqa: E402
from matmul_flops import annotate  # noqa: E402

write_to = h200_loops.option("--write")
repo, emo, shared = h200_loops.command_line()
SM = h200_loops.SM


def tile(name):
    """(M, N) as kernel_class.cc GemmTileOf reads it, or None."""
    lower = name.lower()
    side = lambda v: 8 <= v <= 512 and v % 8 == 0  # noqa: E731
    m = re.search(r"tilesize(\d{1,4})x(\d{1,4})(?!\d)", lower)
    if m and side(int(m[1])) and side(int(m[2])):
        return int(m[1]), int(m[2])
    for m in re.finditer(r"(?<!\d)(\d{1,4})x(\d{1,4})(?!\d)", lower):
        if side(int(m[1])) and side(int(m[2])):
            return int(m[1]), int(m[2])
    return None


def is_tf32(name):
    lower = name.lower()
    return "tf32" in lower or "tensorop_s1688" in lower


def points(loops, kinds, pick, kind):
    """(intensity MAC/B, SMs covered share, d µs, u from shapes, loop name) per GEMM kernel of share
    kind `kind` (gemm: the tensor cores, 4 bytes an element in TF32, else 2; cuda_core_gemm: fp32,
    4) with a tile, that no convolution operator launched (as emo skips them)."""
    out = []
    for l in loops:
        if not pick(l):
            continue
        conv = {e for e, c in l["cpu"].items() if "conv" in c["name"]}
        for o in l["ops"]:
            if o.get("u") is None or kinds[o["name"]]["share_kind"] != kind or o["ext"] in conv:
                continue
            t = tile(o["name"])
            if t is None:
                continue
            size = 4 if kind == "cuda_core_gemm" or is_tf32(o["name"]) else 2
            intensity = t[0] * t[1] / (t[0] + t[1]) / size
            cover = min(o["blocks"], SM) / SM if o["blocks"] else 1.0
            out.append((intensity, cover, o["dur"], o["u"], l["name"]))
    return out


def estimate(p, u_sat, knee, floor):
    intensity, cover, d = p[0], p[1], p[2]
    return u_sat * min(1.0, intensity / knee) * cover * max(0.0, d - floor) / d


def rms(pts, *params):
    w = sum(p[2] for p in pts)
    return math.sqrt(sum(p[2] * (estimate(p, *params) - p[3]) ** 2 for p in pts) / w)


def best_fit(pts, floors):
    """(rms, u_sat, knee, floor): knee (0.5 MAC/B steps) and floor on grids, u_sat by least squares
    at each (u is linear in it), rounded to 0.01."""
    best = None
    for f in floors:
        for k in [x / 2 for x in range(4, 129)]:
            g = [estimate(p, 1.0, k, f) for p in pts]
            den = sum(p[2] * x * x for p, x in zip(pts, g))
            if den <= 0:
                continue
            u = round(min(1.0, sum(p[2] * x * p[3] for p, x in zip(pts, g)) / den), 2)
            cand = (rms(pts, u, k, f), u, k, f)
            best = cand if best is None or cand < best else best
    return best


def table(pts, params, title):
    print(f"\n{title}\n\n| loop | GEMM ms | u (shapes) | u (tile) |\n|---|---:|---:|---:|")
    by = {}
    for p in pts:
        a = by.setdefault(p[4], [0.0, 0.0, 0.0])
        a[0] += p[2]
        a[1] += p[2] * p[3]
        a[2] += p[2] * estimate(p, *params)
    for name, (t, u, e) in sorted(by.items()):
        print(f"| {name} | {t / 1e3:.2f} | {u / t:.3f} | {e / t:.3f} |")


loops, kinds = h200_loops.load(repo, shared, emo)
for l in loops:
    annotate(l, kinds)
floors = [x / 2 for x in range(0, 9)]
fitted = {}
for key, kind, cores in (("tensor", "gemm", "tensor-core"), ("cuda_core", "cuda_core_gemm", "CUDA-core")):
    fit = points(loops, kinds, lambda l: l["set"] != "kernels" and bool(l["cpu"]), kind)
    sweep = points(loops, kinds, lambda l: l["set"] == "kernels", kind)
    print(f"\n## {cores} GEMMs\n\nfit: {len(fit)} kernels with a tile and known work, "
          f"{sum(p[2] for p in fit) / 1e3:.1f} ms, {len({p[4] for p in fit})} loops")
    err, u_sat, knee, floor = best_fit(fit, floors)
    print(f"best: u_sat {u_sat:.2f}, knee {knee:.1f} MAC/B, floor {floor:.1f} µs: rms {err:.4f}")
    print("\n| floor µs | u_sat | knee MAC/B | rms of u |\n|---:|---:|---:|---:|")
    spread = []
    for f in floors:
        e, u, k, _ = best_fit(fit, [f])
        spread.append(e)
        print(f"| {f:.1f} | {u:.2f} | {k:.1f} | {e:.4f} |")
    table(fit, (u_sat, knee, floor), "Per loop of the fit (duration-weighted):")
    table(sweep, (u_sat, knee, floor), "The kernel sweep, outside the fit (FLOPs from the config names):")
    fitted[key] = (fit, err, u_sat, knee, floor, spread, cores)

if write_to:
    # The tensor cores' numbers only: priced by their tiles, the CUDA-core GEMMs moved MLP loops
    # without shapes into 10 % but put two fp32 sweep loops 16-18 % under, where the CUDA-core
    # work curve under-prices SIMT GEMMs of u 0.3-0.5 (BENCHMARKS.md Order 8, "A GEMM's work from
    # its tile"); their fit is printed above for when that curve is refitted.
    fit, err, u_sat, knee, floor, spread, cores = fitted["tensor"]
    src = (f"grid-search fit of u = u_sat x min(1, tile intensity / knee) x SMs covered x max(0, d - floor) / d "
           f"to the work per µs that record_shapes gives {len(fit)} {cores} GEMM kernels of "
           f"{len({p[4] for p in fit})} H200 loops (../shared/traces/h200, data/h200_heldout*, kernel sweep "
           f"left out; duration-weighted rms {err:.3f}); no energy read: "
           f"`python3 bench/research/tile_work_fit.py EMO SHARED --write FILE` (docs/model.md 6a)")
    dev = json.load(open(write_to))
    dev["work_power"]["tile"] = {
        "u_sat": {"value": u_sat, "source": src},
        "knee_intensity": {"value": knee, "source": src + "; multiply-adds per byte of input loaded"},
        "floor_us": {"value": floor, "source": src, "assumption": True,
                     "reasoning": f"weakly set: the rms moves {min(spread):.3f}-{max(spread):.3f} over "
                                  f"floors 0-4 µs, and few of the fit's GEMMs are shorter than 10 µs"},
    }
    with open(write_to, "w") as f:
        json.dump(dev, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"\nwrote work_power.tile to {write_to}")
