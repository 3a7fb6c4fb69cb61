#!/usr/bin/env python3
"""Power and SM clock of one kernel kind at a time, by size, at the default clocks (issue Order 8:
which kernel classes draw how much power at which clock, and which ones the power limit governs).

Each config is a `step` of one kernel kind at one size (a GEMM in bf16 on the tensor cores, in
fp32 off them, in tf32; a device copy; a fused multiply-add on large tensors; tiny elementwise
kernels), repeated so that a step lasts a few milliseconds. For each config, in one process:
  1. warm-up (cuBLAS selection, allocator);
  2. the steps back to back for --seconds, ~30 ms of work queued ahead so the GPU never drains,
     while a second thread reads the NVML energy counter; the power comes from a window aligned to
     the counter's own updates (see measure()); the SM clock and the instantaneous power are read
     at each update;
After all configs are measured, each is traced with the PyTorch profiler (3 active steps,
ProfilerStep annotations, run-ahead like the measurement), so no profiler overhead touches the
measured windows.

Writes OUT/measured.json ({config: {avg_power_w, energy_per_iter_j, iter_s, sm_mhz_median,
sm_mhz_min, power_samples_w_median, steps, window_s, what}}) and OUT/<config>.json.gz.
`emo optimize OUT/<config>.json.gz --device h200 --step-time <iter_s*1e3>` gives the model's
energy per step to compare (bench/model_energy_h200.sh does it for every config).

NVML getters only (energy, power, clocks): never sets clocks, power limits or modes.
  /opt/torch/.venv/bin/python bench/gpu/kernel_power.py OUT [--seconds 1.5] [--only REGEX] [--record-shapes]
"""
import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from energy_check import for_torch_device  # noqa: E402

DEV = torch.device("cuda", 0)
IN_FLIGHT_S = 0.03  # work queued ahead of the GPU while the host polls NVML


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


def matmul(m, k, n, dtype, tf32=False):
    a = torch.randn(m, k, device=DEV, dtype=dtype)
    b = torch.randn(k, n, device=DEV, dtype=dtype)

    def one():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.matmul(a, b)
    return one


def op(fn, *shape, dtype=torch.float32):
    x = torch.randn(*shape, device=DEV, dtype=dtype)
    return lambda: fn(x)


def tiny(numel):
    x = torch.randn(numel, device=DEV)
    return lambda: x.mul_(1.0001)


def configs():
    """name -> (factory of a one-kernel callable, what it is)."""
    out = {}
    for n in (256, 512, 1024, 2048, 4096, 8192):
        out[f"gemm_bf16_{n}"] = (lambda n=n: gemm(n, torch.bfloat16), f"bf16 GEMM {n}^3 (tensor cores)")
        out[f"gemm_fp32_{n}"] = (lambda n=n: gemm(n, torch.float32), f"fp32 GEMM {n}^3, TF32 off (no tensor cores)")
    for n in (1024, 4096):
        out[f"gemm_tf32_{n}"] = (lambda n=n: gemm(n, torch.float32, tf32=True), f"tf32 GEMM {n}^3")
    out["gemm_fp32_128x1024x1024"] = (lambda: matmul(128, 1024, 1024, torch.float32), "fp32 GEMM 128x1024 @ 1024x1024, TF32 off")
    out["gemm_bf16_64x4096x4096"] = (lambda: matmul(64, 4096, 4096, torch.bfloat16), "bf16 GEMM 64x4096 @ 4096x4096 (decode-like)")
    out["bmm_bf16_512x64"] = (lambda: op(lambda x: torch.bmm(x, x), 512, 64, 64, dtype=torch.bfloat16), "bf16 bmm of 512 64x64")
    for p in (14, 17, 20, 23, 26, 28):
        n = 1 << p
        out[f"copy_2e{p}"] = (lambda n=n: copy(n), f"device copy of {n} fp32")
    for p in (20, 26):
        n = 1 << p
        out[f"fma_2e{p}"] = (lambda n=n: fma(n), f"x.addcmul_(y, z) on {n} fp32")
    out["rowsum_8x2e22"] = (lambda: op(lambda x: x.sum(dim=1), 8, 1 << 22), "sum over rows of 8 x 2^22 fp32")
    out["softmax_4096x4096"] = (lambda: op(lambda x: torch.softmax(x, dim=-1), 4096, 4096), "softmax of 4096 x 4096 fp32")
    out["layernorm_8192x1024"] = (lambda: op(lambda x: torch.nn.functional.layer_norm(x, (1024,)), 8192, 1024),
                                  "layer_norm of 8192 x 1024 fp32")
    out["tiny_2e10"] = (lambda: tiny(1 << 10), "x.mul_ on 1024 fp32 (launch-bound)")
    return out


def kernel_time(kernel):
    """Seconds per call, timed with CUDA events over 20 calls after 3 untimed ones."""
    for _ in range(3):
        kernel()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(20):
        kernel()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3 / 20


def repeats(est_s):
    """Kernels per step so a step lasts about 3 ms (at least one, at most 400)."""
    return max(1, min(400, round(3e-3 / max(est_s, 1e-6))))


def measure(step, nvml, seconds, est_s):
    """Steps back to back with about IN_FLIGHT_S of work queued ahead of the GPU (an event per
    step; the host waits for the event `ahead` steps back), so the GPU never drains. A second
    thread polls the NVML energy counter (ctypes releases the GIL during the call; a poll takes
    milliseconds, so polling between launches would make the loop host-bound) and notes the time
    of each update; the power is taken from the first to the last update of the window, so the
    counter's ~100 ms granularity does not blur it. The step time is the whole run's (first launch
    to the final synchronize) over its steps. Returns the record."""
    ahead = max(2, min(200, round(IN_FLIGHT_S / max(est_s, 1e-6))))
    updates, clocks, powers, stop = [], [], [], threading.Event()

    def poll():
        last = nvml.energy_mj()
        while not stop.is_set():
            e = nvml.energy_mj()
            if e != last:
                updates.append((time.perf_counter(), e))
                last = e
                clocks.append(nvml.sm_mhz())
                powers.append(nvml.power_mw() / 1000.0)

    n, events = 0, []
    t_start = time.perf_counter()
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    while time.perf_counter() - t_start < seconds or len(updates) < 4:
        step()
        ev = torch.cuda.Event()
        ev.record()
        events.append(ev)
        n += 1
        if len(events) > ahead:
            events.pop(0).synchronize()
    torch.cuda.synchronize()
    t_end = time.perf_counter()
    stop.set()
    poller.join()
    (t0, e0), (t1, e1) = updates[1], updates[-1]  # the first update can fall in the ramp
    power = (e1 - e0) / 1000.0 / (t1 - t0)
    iter_s = (t_end - t_start) / n
    return {"avg_power_w": power, "energy_per_iter_j": power * iter_s, "iter_s": iter_s, "steps": n,
            "window_s": t1 - t0, "counter_updates": len(updates) - 2, "in_flight_steps": ahead,
            "sm_mhz_median": statistics.median(clocks), "sm_mhz_min": min(clocks),
            "power_samples_w_median": statistics.median(powers)}


def trace(step, path, record_shapes=False):
    from torch.profiler import ProfilerActivity, profile, schedule
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=record_shapes,
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(5):  # run-ahead, as measured: no synchronize between steps
            step()
            prof.step()
        torch.cuda.synchronize()
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
    ap.add_argument("--record-shapes", action="store_true",
                    help="trace with the profiler's record_shapes (each operator's input dims and types, from "
                         "which emo reads its FLOPs); the measured windows are untouched either way")
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
    for name, (make, what) in configs().items():
        if not re.search(args.only, name):
            continue
        kernel = make()
        est = kernel_time(kernel)
        r = repeats(est)

        def step(kernel=kernel, r=r):
            for _ in range(r):
                kernel()
        t = time.perf_counter()
        while time.perf_counter() - t < args.warmup_s:
            step()
        torch.cuda.synchronize()
        rec = measure(step, nvml, args.seconds, est * r)
        rec.update({"what": what, "repeats": r})
        result["configs"][name] = rec
        steps[name] = step
        print(f"{name}: {rec['avg_power_w']:.1f} W, {rec['sm_mhz_median']:.0f} MHz (min {rec['sm_mhz_min']}), "
              f"{rec['iter_s'] * 1e3:.3f} ms/step x{r}", file=sys.stderr, flush=True)
        with open(os.path.join(args.out, "measured.json"), "w") as f:
            json.dump(result, f, indent=1)
    for name, step in steps.items():
        trace(step, os.path.join(args.out, f"{name}.json.gz"), args.record_shapes)
    print(json.dumps({"configs": len(steps), "out": args.out}))


if __name__ == "__main__":
    main()
