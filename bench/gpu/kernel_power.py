#!/usr/bin/env python3
"""Power and SM clock of one kernel kind at a time, by size, at the default clocks (issue Order 8:
which kernel classes draw how much power at which clock, and which ones the power limit governs).

Each config is a `step` of one kernel kind at one size (a GEMM in bf16 on the tensor cores, in
fp32 off them, in tf32; a device copy; a fused multiply-add on large tensors; tiny elementwise
kernels), repeated so that a step lasts a few milliseconds. For each config, in one process:
  1. warm-up (cuBLAS selection, allocator);
  2. the steps back to back for --seconds, with the window aligned to the NVML energy counter's
     own updates (see measure()); the SM clock and the instantaneous power are read at each
     update;
After all configs are measured, each is traced with the PyTorch profiler (3 active steps,
ProfilerStep annotations), so no profiler overhead touches the measured windows.

Writes OUT/measured.json ({config: {avg_power_w, energy_per_iter_j, iter_s, sm_mhz_median,
sm_mhz_min, power_samples_w_median, steps, window_s, what}}) and OUT/<config>.json.gz.
`emo optimize OUT/<config>.json.gz --device h200 --step-time <iter_s*1e3>` gives the model's
energy per step to compare (bench/model_energy_h200.sh does it for every config).

NVML getters only (energy, power, clocks): never sets clocks, power limits or modes.
  /opt/torch/.venv/bin/python bench/gpu/kernel_power.py OUT [--seconds 1.5] [--only REGEX]
"""
import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from energy_check import for_torch_device  # noqa: E402

DEV = torch.device("cuda", 0)


def gemm(n, dtype, tf32=False):
    a = torch.randn(n, n, device=DEV, dtype=dtype)
    b = torch.randn(n, n, device=DEV, dtype=dtype)
    c = torch.empty(n, n, device=DEV, dtype=dtype)

    def one():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.matmul(a, b, out=c)
    return one


def copy(numel):
    x = torch.randn(numel, device=DEV)
    y = torch.empty_like(x)
    return lambda: y.copy_(x)


def fma(numel):
    x, y, z = (torch.randn(numel, device=DEV) for _ in range(3))
    return lambda: x.addcmul_(y, z)


def tiny(numel):
    x = torch.randn(numel, device=DEV)
    return lambda: x.mul_(1.0001)


def configs():
    out = {}
    for n in (256, 512, 1024, 2048, 4096, 8192):
        out[f"gemm_bf16_{n}"] = (lambda n=n: gemm(n, torch.bfloat16), f"bf16 GEMM {n}^3 (tensor cores)", 2 * n ** 3 / 400e12)
        out[f"gemm_fp32_{n}"] = (lambda n=n: gemm(n, torch.float32), f"fp32 GEMM {n}^3, TF32 off (no tensor cores)", 2 * n ** 3 / 40e12)
    for n in (1024, 4096):
        out[f"gemm_tf32_{n}"] = (lambda n=n: gemm(n, torch.float32, tf32=True), f"tf32 GEMM {n}^3", 2 * n ** 3 / 200e12)
    for p in (14, 17, 20, 23, 26, 28):
        n = 1 << p
        out[f"copy_2e{p}"] = (lambda n=n: copy(n), f"device copy of {n} fp32", 8 * n / 4e12)
    for p in (20, 26):
        n = 1 << p
        out[f"fma_2e{p}"] = (lambda n=n: fma(n), f"x.addcmul_(y, z) on {n} fp32", 16 * n / 4e12)
    out["tiny_2e10"] = (lambda: tiny(1 << 10), "x.mul_ on 1024 fp32 (launch-bound)", 4e-6)
    return out


def repeats(est_s):
    """Kernels per step so a step lasts about 3 ms (at least one, at most 400)."""
    return max(1, min(400, round(3e-3 / max(est_s, 1e-6))))


def measure(step, nvml, seconds):
    """Steps back to back, at most two in flight (each launched while the one before runs, so the
    GPU does not drain and the host never blocks on a full launch queue); while it waits, the host
    polls the energy counter and notes the time of each update. The window runs from the first
    update to the last one after `seconds`, so the counter's ~100 ms granularity does not blur
    the power. Returns the record."""
    updates, clocks, powers = [], [], []  # updates: (time, energy mJ, steps completed)
    last_e, n, prev = nvml.energy_mj(), 0, None
    t_start = time.perf_counter()
    while True:
        step()
        ev = torch.cuda.Event()
        ev.record()
        n += 1
        while True:  # at least one poll per step: a launch-bound step may never wait
            e = nvml.energy_mj()
            if e != last_e:
                updates.append((time.perf_counter(), e, n - 2))  # step n-1 may still run
                last_e = e
                clocks.append(nvml.sm_mhz())
                powers.append(nvml.power_mw() / 1000.0)
            if prev is None or prev.query():
                break
        prev = ev
        if time.perf_counter() - t_start >= seconds and len(updates) >= 3:
            break
    torch.cuda.synchronize()
    (t0, e0, n0), (t1, e1, n1) = updates[0], updates[-1]
    energy, window, steps = (e1 - e0) / 1000.0, t1 - t0, max(1, n1 - n0)
    return {"avg_power_w": energy / window, "energy_per_iter_j": energy / steps, "iter_s": window / steps,
            "steps": steps, "window_s": window, "counter_updates": len(updates) - 1,
            "sm_mhz_median": statistics.median(clocks), "sm_mhz_min": min(clocks),
            "power_samples_w_median": statistics.median(powers)}


def trace(step, path):
    from torch.profiler import ProfilerActivity, profile, schedule
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(5):
            step()
            torch.cuda.synchronize()
            prof.step()
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=1.5, help="measured window per config (s)")
    ap.add_argument("--warmup-s", type=float, default=0.4)
    ap.add_argument("--only", default=".", help="regex on config names")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.cuda.set_device(DEV)
    nvml = for_torch_device(0)
    result = {"about": __doc__.split("\n\n")[0] + " A step = `repeats` launches of the kernel; energy and "
                       "time per step over the counter-aligned window.", "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__, "idle": None, "configs": {}}
    # idle with a context, as the device file's idle_power_w
    torch.cuda.synchronize()
    e_a = nvml.energy_mj()
    while nvml.energy_mj() == e_a:
        time.sleep(0.001)
    e0, t0 = nvml.energy_mj(), time.perf_counter()
    time.sleep(1.0)
    e_b = nvml.energy_mj()
    while nvml.energy_mj() == e_b:
        time.sleep(0.001)
    e1, t1 = nvml.energy_mj(), time.perf_counter()
    result["idle"] = {"avg_power_w": (e1 - e0) / 1000.0 / (t1 - t0), "sm_mhz": nvml.sm_mhz()}
    print(f"idle {result['idle']['avg_power_w']:.1f} W", file=sys.stderr, flush=True)

    steps = {}
    for name, (make, what, est) in configs().items():
        if not re.search(args.only, name):
            continue
        kernel = make()
        r = repeats(est)

        def step(kernel=kernel, r=r):
            for _ in range(r):
                kernel()
        t = time.perf_counter()
        while time.perf_counter() - t < args.warmup_s:
            step()
        torch.cuda.synchronize()
        rec = measure(step, nvml, args.seconds)
        rec.update({"what": what, "repeats": r})
        result["configs"][name] = rec
        steps[name] = step
        print(f"{name}: {rec['avg_power_w']:.1f} W, {rec['sm_mhz_median']:.0f} MHz (min {rec['sm_mhz_min']}), "
              f"{rec['iter_s'] * 1e3:.3f} ms/step x{r}", file=sys.stderr, flush=True)
        with open(os.path.join(args.out, "measured.json"), "w") as f:
            json.dump(result, f, indent=1)
    for name, step in steps.items():
        trace(step, os.path.join(args.out, f"{name}.json.gz"))
    print(json.dumps({"configs": len(steps), "out": args.out}))


if __name__ == "__main__":
    main()
