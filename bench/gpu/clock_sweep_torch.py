#!/usr/bin/env python3
"""How PyTorch's own kernels follow the SM clock, without setting a clock (docs/model.md 6a: how
time follows the clock). The same method as bench/gpu/clock_sweep.cu, with the library kernels real
traces are made of: the power limiter lowers the SM clock on its own under big bf16 GEMMs ("hogs"),
and a probe launched right after them runs at the lowered clock.

The clock is measured on the GPU just before and just after each probe, by a one-thread kernel
(PTX, JIT-compiled by the driver, launched on PyTorch's stream through libcuda) that counts SM
cycles (%clock64) against %globaltimer for 20 us: the same measure as clock_sweep.cu, free of
launch gaps. The probe's own time is the CUDA-event time around it alone; each cycle starts with
a 2 ms torch.cuda._sleep so the host is ahead of the GPU and no launch gap falls inside it.

Per cycle: HOGS bf16 8192^3 matmuls, then every probe once (rotating order); hog counts per level
from --levels; each level runs --warm seconds unmeasured, then --measure seconds.

Writes OUT/sweep.csv (level,hogs,probe,ms,mhz_before,mhz_after) and OUT/kernels.json (per probe,
the CUDA kernels it launches with their GPU time in us, from one profiled run at the end, so
bench/gpu/clock_sweep_fit.py can name EMO's class for each). Reads no NVML and sets nothing: clocks, limits and modes are
untouched. Device memory: about 4 GiB.

  /opt/torch/.venv/bin/python bench/gpu/clock_sweep_torch.py OUT [--levels 0,1,2,4,8,16] [--set fit|heldout|extra]
"""
import argparse
import ctypes
import csv
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

DEV = torch.device("cuda", 0)
HEAD_START_CYCLES = 4_000_000  # about 2 ms at 1980 MHz

CLOCK_PTX = b""".version 7.0
.target sm_70
.address_size 64
.visible .entry clock_probe(.param .u64 out)
{
  .reg .u64 %rd<8>;
  .reg .pred %p;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u64 %rd2, %globaltimer;
  mov.u64 %rd3, %clock64;
LOOP:
  mov.u64 %rd4, %globaltimer;
  sub.u64 %rd5, %rd4, %rd2;
  setp.lt.u64 %p, %rd5, 20000;
  @%p bra LOOP;
  mov.u64 %rd6, %clock64;
  sub.u64 %rd7, %rd6, %rd3;
  st.global.u64 [%rd1], %rd7;
  st.global.u64 [%rd1+8], %rd5;
  ret;
}
"""


class ClockProbe:
    """Launches the PTX clock probe on PyTorch's current stream; slot k gets (cycles, ns)."""

    def __init__(self, slots):
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.out = torch.zeros(slots, 2, dtype=torch.int64, device=DEV)
        self.module, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.cuda.cuModuleLoadData(ctypes.byref(self.module), ctypes.c_char_p(CLOCK_PTX)), "cuModuleLoadData")
        self.check(self.cuda.cuModuleGetFunction(ctypes.byref(self.fn), self.module, b"clock_probe"),
                   "cuModuleGetFunction")

    def check(self, rc, what):
        if rc != 0:
            name = ctypes.c_char_p()
            self.cuda.cuGetErrorName(rc, ctypes.byref(name))
            sys.exit(f"clock_sweep_torch: {what} failed: {name.value.decode() if name.value else rc}")

    def launch(self, slot):
        arg = ctypes.c_uint64(self.out[slot].data_ptr())
        params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(arg), ctypes.c_void_p))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.check(self.cuda.cuLaunchKernel(self.fn, 1, 1, 1, 1, 1, 1, 0, stream, params, None), "cuLaunchKernel")

    def mhz(self):
        """Per slot, the SM clock in MHz."""
        return [c * 1000.0 / ns if ns > 0 else -1.0 for c, ns in self.out.cpu().tolist()]


def probes():
    """Name -> callable; each runs 0.05-2 ms of GPU work on the current stream."""
    g = torch.Generator(device=DEV).manual_seed(0)

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=DEV, dtype=dtype, generator=g)

    a1k, b1k = rand(1024, 1024, dtype=torch.bfloat16), rand(1024, 1024, dtype=torch.bfloat16)
    a4k, b4k = rand(4096, 4096, dtype=torch.bfloat16), rand(4096, 4096, dtype=torch.bfloat16)
    f4a, f4b = rand(2048, 2048), rand(2048, 2048)
    conv_x = rand(32, 256, 56, 56, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    conv_w = rand(256, 256, 3, 3, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    q, k, v = (rand(8, 16, 2048, 128, dtype=torch.bfloat16) for _ in range(3))
    ln_x = rand(8192, 8192, dtype=torch.bfloat16)
    ln_w, ln_b = rand(8192, dtype=torch.bfloat16), rand(8192, dtype=torch.bfloat16)
    sm_x = rand(8192, 8192)
    ew_x, ew_y = rand(64 << 20), rand(64 << 20)
    red_x = rand(256 << 20)
    emb = rand(262144, 1024, dtype=torch.bfloat16)
    idx = torch.randint(0, 262144, (65536,), device=DEV, generator=g)
    sort_x = rand(16 << 20)

    def fp32_matmul():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.matmul(f4a, f4b)

    def tf32_matmul():
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.matmul(f4a, f4b)
        torch.backends.cuda.matmul.allow_tf32 = False

    return {
        "gemm_bf16_1024x8": lambda: [torch.matmul(a1k, b1k) for _ in range(8)],
        "gemm_bf16_4096": lambda: torch.matmul(a4k, b4k),
        "gemm_fp32_2048": fp32_matmul,
        "gemm_tf32_2048": tf32_matmul,
        "conv_bf16": lambda: F.conv2d(conv_x, conv_w, padding=1),
        "sdpa_bf16": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "layer_norm_bf16": lambda: F.layer_norm(ln_x, (8192,), ln_w, ln_b),
        "softmax_fp32": lambda: torch.softmax(sm_x, dim=-1),
        "add_fp32": lambda: torch.add(ew_x, ew_y),
        "sum_fp32": lambda: red_x.sum(),
        "embedding_bf16": lambda: F.embedding(idx, emb),
        "sort_fp32": lambda: torch.sort(sort_x),
    }


def heldout_probes():
    """Name -> callable: kernels and shapes the per-kind shares were not fitted on (other shapes,
    data types and operations of each kind), to check those shares on kernels they have not seen."""
    g = torch.Generator(device=DEV).manual_seed(1)

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=DEV, dtype=dtype, generator=g)

    lin_x, lin_w = rand(8192, 2048, dtype=torch.float16), rand(2048, 8192, dtype=torch.float16)
    odd_a, odd_b = rand(3072, 768, dtype=torch.bfloat16), rand(768, 3072, dtype=torch.bfloat16)
    bmm_a, bmm_b = rand(64, 512, 512, dtype=torch.bfloat16), rand(64, 512, 512, dtype=torch.bfloat16)
    f32a, f32b = rand(4096, 1024), rand(1024, 4096)
    c1_x = rand(32, 512, 28, 28, dtype=torch.float16).to(memory_format=torch.channels_last)
    c1_w = rand(512, 512, 1, 1, dtype=torch.float16).to(memory_format=torch.channels_last)
    stem_x = rand(32, 3, 224, 224, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    stem_w = rand(64, 3, 7, 7, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    q, k, v = (rand(4, 32, 1024, 64, dtype=torch.bfloat16) for _ in range(3))
    logits = rand(4096, 32000, dtype=torch.bfloat16)
    targets = torch.randint(0, 32000, (4096,), device=DEV, generator=g)
    rms_x, rms_w = rand(16384, 4096, dtype=torch.bfloat16), rand(4096, dtype=torch.bfloat16)
    gn_x = rand(32, 256, 56, 56, dtype=torch.bfloat16)
    bn_x = rand(64, 256, 28, 28)
    bn_w, bn_b = rand(256), rand(256)
    bn_m, bn_v = torch.zeros(256, device=DEV), torch.ones(256, device=DEV)
    act_x = rand(64 << 20, dtype=torch.bfloat16)
    mul_x, mul_y = rand(32 << 20, dtype=torch.float16), rand(32 << 20, dtype=torch.float16)
    max_x = rand(8192, 16384)
    mean_x = rand(128 << 20, dtype=torch.bfloat16)
    pool_x = rand(32, 256, 112, 112, dtype=torch.bfloat16)
    tr_x = rand(8192, 8192, dtype=torch.bfloat16)
    cat_a, cat_b = rand(4096, 8192, dtype=torch.bfloat16), rand(4096, 8192, dtype=torch.bfloat16)
    sel_x = rand(131072, 512)
    sel_i = torch.randint(0, 131072, (131072,), device=DEV, generator=g)

    def fp32_matmul():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.matmul(f32a, f32b)

    return {
        "gemm_fp16_8192x2048x8192": lambda: torch.matmul(lin_x, lin_w),
        "gemm_bf16_3072x768x3072": lambda: torch.matmul(odd_a, odd_b),
        "bmm_bf16_64x512": lambda: torch.bmm(bmm_a, bmm_b),
        "gemm_fp32_4096x1024x4096": fp32_matmul,
        "conv_fp16_1x1": lambda: F.conv2d(c1_x, c1_w),
        "conv_bf16_7x7_stem": lambda: F.conv2d(stem_x, stem_w, stride=2, padding=3),
        "sdpa_bf16_d64": lambda: F.scaled_dot_product_attention(q, k, v),
        "softmax_bf16_logits": lambda: torch.softmax(logits, dim=-1),
        "cross_entropy_bf16": lambda: F.cross_entropy(logits, targets),
        "rms_norm_bf16": lambda: F.rms_norm(rms_x, (4096,), rms_w),
        "group_norm_bf16": lambda: F.group_norm(gn_x, 32),
        "batch_norm_fp32": lambda: F.batch_norm(bn_x, bn_m, bn_v, bn_w, bn_b, training=True),
        "gelu_bf16": lambda: F.gelu(act_x),
        "mul_fp16": lambda: torch.mul(mul_x, mul_y),
        "max_fp32_rows": lambda: max_x.amax(dim=-1),
        "mean_bf16": lambda: mean_x.mean(),
        "max_pool_bf16": lambda: F.max_pool2d(pool_x, 3, stride=2, padding=1),
        "transpose_bf16": lambda: tr_x.t().contiguous(),
        "cat_bf16": lambda: torch.cat([cat_a, cat_b]),
        "index_select_fp32": lambda: sel_x.index_select(0, sel_i),
    }


def extra_probes():
    """Name -> callable: pointwise activations with transcendental math (SiLU, tanh, sigmoid, GELU's
    tanh form) and pooling, the fit set of the `activation` and `pooling` kinds."""
    g = torch.Generator(device=DEV).manual_seed(2)

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=DEV, dtype=dtype, generator=g)

    silu_x = rand(64 << 20, dtype=torch.bfloat16)
    tanh_x = rand(32 << 20)
    sig_x = rand(64 << 20, dtype=torch.float16)
    gt_x = rand(32 << 20)
    avg_x = rand(32, 256, 112, 112, dtype=torch.bfloat16)
    ada_x = rand(64, 512, 14, 14)
    mp_x = rand(32, 128, 112, 112)
    return {
        "silu_bf16": lambda: F.silu(silu_x),
        "tanh_fp32": lambda: torch.tanh(tanh_x),
        "sigmoid_fp16": lambda: torch.sigmoid(sig_x),
        "gelu_tanh_fp32": lambda: F.gelu(gt_x, approximate="tanh"),
        "avg_pool_bf16_2x2": lambda: F.avg_pool2d(avg_x, 2),
        "adaptive_avg_pool_fp32": lambda: F.adaptive_avg_pool2d(ada_x, 1),
        "max_pool_fp32_2x2": lambda: F.max_pool2d(mp_x, 2),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--set", choices=["fit", "heldout", "extra"], default="fit",
                    help="probes: the ones the per-kind shares were fitted on, held-out kernels, or the\n"
                         "activation and pooling kinds' fit set")
    ap.add_argument("--levels", default="0,1,2,4,8,16", help="hog GEMMs per cycle, one level each")
    ap.add_argument("--warm", type=float, default=0.5, help="seconds per level before measuring")
    ap.add_argument("--measure", type=float, default=1.5, help="seconds measured per level")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    os.makedirs(args.out, exist_ok=True)
    torch.cuda.set_device(DEV)
    torch.backends.cuda.matmul.allow_tf32 = False

    ha = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    hb = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    hc = torch.empty(8192, 8192, device=DEV, dtype=torch.bfloat16)
    ps = {"fit": probes, "heldout": heldout_probes, "extra": extra_probes}[args.set]()
    names = list(ps)
    for _ in range(3):  # warm-up: library kernel selection, allocator
        torch.matmul(ha, hb, out=hc)
        for p in ps.values():
            p()
    torch.cuda.synchronize()

    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(2)] for _ in names]
    clock = ClockProbe(2 * len(names))
    rows, rotation = [], 0
    for level, hogs in enumerate(levels):
        for measured in (False, True):
            t0, cycles = time.monotonic(), 0
            while time.monotonic() - t0 < (args.measure if measured else args.warm):
                torch.cuda._sleep(HEAD_START_CYCLES)
                for _ in range(hogs):
                    torch.matmul(ha, hb, out=hc)
                order = [(i + rotation) % len(names) for i in range(len(names))]
                rotation += 1
                for k, i in enumerate(order):
                    e = ev[i]
                    clock.launch(2 * k)
                    e[0].record()
                    ps[names[i]]()
                    e[1].record()
                    clock.launch(2 * k + 1)
                torch.cuda.synchronize()
                cycles += 1
                if not measured:
                    continue
                mhz = clock.mhz()
                for k, i in enumerate(order):
                    e = ev[i]
                    rows.append((level, hogs, names[i], round(e[0].elapsed_time(e[1]), 5), round(mhz[2 * k], 1),
                                 round(mhz[2 * k + 1], 1)))
            print(f"clock_sweep_torch: level {level} ({hogs} hogs) {'measured' if measured else 'warm-up'}: "
                  f"{cycles} cycles", file=sys.stderr)

    with open(os.path.join(args.out, "sweep.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["level", "hogs", "probe", "ms", "mhz_before", "mhz_after"])
        w.writerows(rows)

    kernels = {}
    for name in names:
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            ps[name]()
            torch.cuda.synchronize()
        us = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                t = getattr(e, "device_time_total", None)
                us[e.name] = us.get(e.name, 0.0) + (t if t is not None else e.cuda_time_total)
        kernels[name] = us
    with open(os.path.join(args.out, "kernels.json"), "w") as f:
        json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(DEV), "kernels": kernels}, f, indent=1)


if __name__ == "__main__":
    main()
