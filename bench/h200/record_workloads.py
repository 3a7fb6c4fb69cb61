#!/usr/bin/env python3
"""Records held-out H200 workloads the way ../shared/traces/h200 was recorded.

For each workload (three that EMO's calibrations never saw: a CPU-bound small-MLP training
loop, a transformer inference loop, a CNN training loop fed by a DataLoader):
  - unprofiled timing: `sync` (torch.cuda.synchronize() after every step, per-step median) and
    `async` (one sync per 10 steps, median of chunk time / 10), as truth.json has them;
  - energy per iteration at the default clocks over >= 8 s of sync steps, from NVML's total
    energy counter (read only), as measured.json has it;
  - four PyTorch-profiler traces: sync/async loop x light (record_shapes off) / shapes
    (record_shapes on), CUDA sync events on, schedule wait=1 warmup=2 active=5;
  - unprofiled timing again after the profiled runs.
Writes OUT/heldout/{truth.json, measured.json, <workload>_<mode>_<config>.json.gz}.
A second argument picks workloads (comma-separated): the second held-out set (data/h200_heldout2)
is `gpt_small_train,resnet_small_train,lstm_lm_train`.

Reads NVML only (energy, clocks, power): it never sets clocks, power limits or modes.
Usage: python3 bench/h200/record_workloads.py OUT_DIR [WORKLOAD,...]
"""
import ctypes
import gzip
import json
import os
import shutil
import statistics
import sys
import time

import torch
import torch.nn as nn

DEV = torch.device("cuda", 0)


# ---------------------------------------------------------------- NVML, getters only
class Nvml:
    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        self._check(self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.handle)), "GetHandleByIndex")

    @staticmethod
    def _check(rc, what):
        if rc != 0:
            raise RuntimeError(f"NVML {what} failed: {rc}")

    def energy_mj(self):
        v = ctypes.c_ulonglong()
        self._check(self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(v)), "GetTotalEnergy")
        return v.value

    def sm_mhz(self):
        v = ctypes.c_uint()
        self._check(self.lib.nvmlDeviceGetClockInfo(self.handle, 1, ctypes.byref(v)), "GetClockInfo(SM)")
        return v.value

    def power_mw(self):
        v = ctypes.c_uint()
        self._check(self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(v)), "GetPowerUsage")
        return v.value


# ---------------------------------------------------------------- workloads
def classifier_step(model, opt, batch):
    """One training step of a classifier: cross-entropy on `batch()` -> (x, y), backward, optimizer."""
    loss_fn = nn.CrossEntropyLoss()

    def step():
        x, y = batch()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    return step


def mlp_small_train():
    """Many tiny layers: launch- and CPU-bound, where the profiler's overhead dominates."""
    layers = []
    for _ in range(24):
        layers += [nn.Linear(512, 512), nn.LayerNorm(512), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(512, 10)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(256, 512, device=DEV)
    y = torch.randint(0, 10, (256,), device=DEV)
    return classifier_step(model, opt, lambda: (x, y))


def bert_infer():
    """Transformer encoder inference, bf16, no autograd: GPU-bound, few CPU ops per kernel."""
    layer = nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False).to(DEV, torch.bfloat16).eval()
    x = torch.randn(16, 256, 1024, device=DEV, dtype=torch.bfloat16)

    def step():
        with torch.no_grad():
            model(x)

    return step


def cnn_dataload_train():
    """A small CNN trained on batches from a DataLoader with worker processes (pinned memory,
    non-blocking copies): the data-loading loop."""
    n = 4096
    data = torch.utils.data.TensorDataset(torch.randn(n, 3, 64, 64), torch.randint(0, 10, (n,)))
    loader = torch.utils.data.DataLoader(data, batch_size=128, shuffle=True, num_workers=4, pin_memory=True,
                                         persistent_workers=True, drop_last=True)

    def blocks():
        c, out = 3, []
        for w in (64, 128, 256, 256):
            out += [nn.Conv2d(c, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2)]
            c = w
        return out

    model = nn.Sequential(*blocks(), nn.Flatten(), nn.Linear(256 * 4 * 4, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    state = {"it": iter(loader)}

    def batch():
        try:
            xb, yb = next(state["it"])
        except StopIteration:
            state["it"] = iter(loader)
            xb, yb = next(state["it"])
        return xb.to(DEV, non_blocking=True), yb.to(DEV, non_blocking=True)

    return classifier_step(model, opt, batch)


def gpt_small_train():
    """A small decoder-only transformer (6 layers, d 512, causal mask), bf16 autocast, AdamW."""
    vocab, seq, d = 8192, 256, 512
    emb = nn.Embedding(vocab, d)
    layer = nn.TransformerEncoderLayer(d_model=d, nhead=8, dim_feedforward=4 * d, batch_first=True, norm_first=True)
    body = nn.TransformerEncoder(layer, num_layers=6, enable_nested_tensor=False)
    head = nn.Linear(d, vocab)
    model = nn.ModuleList([emb, body, head]).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, vocab, (16, seq), device=DEV)
    mask = nn.Transformer.generate_square_subsequent_mask(seq, device=DEV)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = body(emb(x), mask=mask, is_causal=True)
            loss = loss_fn(head(h).flatten(0, 1).float(), x.flatten())
        loss.backward()
        opt.step()

    return step


def resnet_small_train():
    """A ResNet-18-shaped network (basic blocks) on 3x128x128 images, batch 32, fp32, SGD."""
    class Block(nn.Module):
        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.c1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(c_out)
            self.c2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(c_out)
            self.skip = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                         if stride != 1 or c_in != c_out else nn.Identity())

        def forward(self, x):
            return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + self.skip(x))

    layers, c = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for w, s in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(c, w, s), Block(w, w, 1)]
        c = w
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 100)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(32, 3, 128, 128, device=DEV)
    y = torch.randint(0, 100, (32,), device=DEV)
    return classifier_step(model, opt, lambda: (x, y))


def lstm_lm_train():
    """An LSTM language model (2 cuDNN layers, hidden 1024, 64 steps, batch 32), Adam."""
    vocab = 10000
    emb, lstm, head = nn.Embedding(vocab, 512), nn.LSTM(512, 1024, num_layers=2, batch_first=True), nn.Linear(1024, vocab)
    model = nn.ModuleList([emb, lstm, head]).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randint(0, vocab, (32, 65), device=DEV)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        h, _ = lstm(emb(x[:, :-1]))
        loss = loss_fn(head(h).flatten(0, 1), x[:, 1:].flatten())
        loss.backward()
        opt.step()

    return step


WORKLOADS = {"mlp_small_train": mlp_small_train, "bert_infer": bert_infer, "cnn_dataload_train": cnn_dataload_train,
             # a second held-out set (data/h200_heldout2), recorded 2026-11-30
             "gpt_small_train": gpt_small_train, "resnet_small_train": resnet_small_train,
             "lstm_lm_train": lstm_lm_train}


# ---------------------------------------------------------------- measurement
def time_sync(step, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def time_async(step, chunks, per_chunk=10):
    times = []
    torch.cuda.synchronize()
    for _ in range(chunks):
        t0 = time.perf_counter()
        for _ in range(per_chunk):
            step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / per_chunk)
    return times


def summary(times):
    q = statistics.quantiles(times, n=10)
    return {"median_s": statistics.median(times), "p10_s": q[0], "p90_s": q[-1], "n": len(times)}


def energy_run(step, nvml, seconds=8.0):
    torch.cuda.synchronize()
    e0, t0 = nvml.energy_mj(), time.perf_counter()
    iters, times = 0, []
    while time.perf_counter() - t0 < seconds:
        s = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - s)
        iters += 1
    wall = time.perf_counter() - t0
    energy_j = (nvml.energy_mj() - e0) / 1000.0
    return {"iters": iters, "wall_s": wall, "iter_median_s": statistics.median(times), "energy_j": energy_j,
            "energy_per_iter_j": energy_j / iters, "avg_power_w": energy_j / wall,
            "end_state": {"power_mw": nvml.power_mw(), "sm_mhz": nvml.sm_mhz()}}


def traced(step, path, mode, shapes):
    from torch.profiler import ProfilerActivity, profile, schedule
    cfg = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=shapes,
                 schedule=schedule(wait=1, warmup=2, active=5, repeat=1), experimental_config=cfg) as prof:
        for _ in range(8):
            step()
            if mode == "sync":
                torch.cuda.synchronize()
            prof.step()
        torch.cuda.synchronize()
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    size = os.path.getsize(raw)
    os.remove(raw)
    return size


def main():
    out = os.path.join(sys.argv[1], "heldout")
    os.makedirs(out, exist_ok=True)
    nvml = Nvml()
    truth = {"about": "Held-out workloads recorded by bench/h200/record_workloads.py, same protocol as "
                      "../shared/traces/h200/overhead/truth.json: unprofiled_sync = per-step median with "
                      "torch.cuda.synchronize() after every step; unprofiled_async = median of (10-step chunk "
                      "time / 10); traces with the PyTorch profiler (light: record_shapes off; shapes: on; "
                      "cuda sync events on); *_after_profiling measured after the profiled runs. Seconds.",
             "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    measured = {"about": "Energy per iteration at the default clocks over >= 8 s of sync steps, NVML total "
                         "energy counter (read only); same fields as ../shared/traces/h200/measured.json.",
                "torch": torch.__version__, "device": torch.cuda.get_device_name(0), "workloads": {}}
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else list(WORKLOADS)
    for name in only:
        t_start = time.perf_counter()
        step = WORKLOADS[name]()
        time_sync(step, 30)  # warm up (autotuning, allocator, loader workers)
        rec = {"unprofiled_sync": summary(time_sync(step, 150)),
               "unprofiled_async": summary(time_async(step, 15))}
        measured["workloads"][name] = energy_run(step, nvml)
        for mode in ("sync", "async"):
            for cfg in ("light", "shapes"):
                path = os.path.join(out, f"{name}_{mode}_{cfg}.json.gz")
                rec[f"trace_{mode}_{cfg}_bytes"] = traced(step, path, mode, cfg == "shapes")
        rec["unprofiled_sync_after_profiling"] = summary(time_sync(step, 150))
        rec["unprofiled_async_after_profiling"] = summary(time_async(step, 15))
        truth[name] = rec
        print(f"{name}: sync {rec['unprofiled_sync']['median_s'] * 1e3:.2f} ms, async "
              f"{rec['unprofiled_async']['median_s'] * 1e3:.2f} ms, "
              f"{measured['workloads'][name]['energy_per_iter_j']:.2f} J/iter, "
              f"{time.perf_counter() - t_start:.0f} s", flush=True)
        del step
        torch.cuda.empty_cache()
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    with open(os.path.join(out, "measured.json"), "w") as f:
        json.dump(measured, f, indent=1)


if __name__ == "__main__":
    main()
