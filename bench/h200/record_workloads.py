#!/usr/bin/env python3
"""Records held-out H200 workloads: traces, and beside each trace the truth of its own loop.

Protocol: every trace is recorded in a fresh Python process
that has never started the profiler (the profiler leaves CPU overhead behind after it stops),
and that process first measures, on the same loop structure as its trace, without the profiler:
  - the step time: `sync` loop = torch.cuda.synchronize() after every step, per-step median;
    `async` (run-ahead) loop = one synchronize per 10 steps, median of (10-step chunk time / 10);
  - the energy per iteration: NVML total-energy counter (read only) over >= 6 s of that loop,
    divided by the steps run; the same window gives the step times above.
Then it records one PyTorch-profiler trace of that loop (light: record_shapes off, or shapes:
on; CUDA sync events on; schedule wait=1 warmup=2 active=5), and times the loop again after it.
So there is one process per (workload, loop, profiler config): four per workload.

The driver (this script without --one) spawns those processes one after another and merges
their results into OUT/heldout/{truth.json, measured.json} beside the traces
<workload>_<sync|async>_<light|shapes>.json.gz. truth.json keeps `unprofiled_sync` and
`unprofiled_async` (step times of the two processes of that loop, pooled) and adds each trace's
own truth under `traces`; measured.json keeps the sync loop's energy at the top of each workload
(as before) and adds `sync` and `async` beside it.

Reads NVML only (energy, clocks, power): it never sets clocks, power limits or modes.
Usage: python3 bench/h200/record_workloads.py OUT_DIR [WORKLOAD,...] [--seconds 6] [--configs light,shapes]
  The second held-out set (data/h200_heldout2) is `gpt_small_train,resnet_small_train,lstm_lm_train`;
  the third (data/h200_heldout3), `stream_chain,fp32_mlp_train,tiny_ops,conv_infer,llm_prefill_infer`
  with `--configs light`.
"""
import argparse
import ctypes
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn

DEV = torch.device("cuda", 0)
MODES, CONFIGS = ("sync", "async"), ("light", "shapes")
CHUNK = 10  # steps per synchronize in the run-ahead loop


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


def decoder_train_step(vocab, seq, d, heads, layers, batch):
    """One training step of a decoder-only transformer (pre-norm, causal mask, MLP 4d, untied
    head) under bf16 autocast, AdamW."""
    emb = nn.Embedding(vocab, d)
    layer = nn.TransformerEncoderLayer(d_model=d, nhead=heads, dim_feedforward=4 * d, batch_first=True,
                                       norm_first=True)
    body = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
    head = nn.Linear(d, vocab)
    model = nn.ModuleList([emb, body, head]).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, vocab, (batch, seq), device=DEV)
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


def gpt_small_train():
    """A small decoder-only transformer (6 layers, d 512, causal mask), bf16 autocast, AdamW."""
    return decoder_train_step(vocab=8192, seq=256, d=512, heads=8, layers=6, batch=16)


def _resnet18_shaped(classes):
    """A ResNet-18-shaped network (basic blocks)."""
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
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes))


def resnet_small_train():
    """A ResNet-18-shaped network (basic blocks) on 3x128x128 images, batch 32, fp32, SGD."""
    model = _resnet18_shaped(100).to(DEV)
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


def stream_chain():
    """Memory-bound streaming chain: elementwise ops over 256 MiB fp32 tensors (HBM-bound, full grids)."""
    x, y = torch.randn(1 << 26, device=DEV), torch.randn(1 << 26, device=DEV)
    z, w = torch.empty_like(x), torch.empty_like(x)

    def step():
        torch.mul(x, 1.0001, out=z)
        z.add_(y)
        z.relu_()
        torch.addcmul(y, z, x, value=1e-4, out=w)
        torch.mul(z, 0.5, out=x)

    return step


def fp32_mlp_train():
    """An MLP trained in fp32 with TF32 off: its GEMMs run on the CUDA cores, not the tensor cores."""
    torch.backends.cuda.matmul.allow_tf32 = False
    model = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(1024, 2048, device=DEV)
    y = torch.randint(0, 10, (1024,), device=DEV)
    return classifier_step(model, opt, lambda: (x, y))


def tiny_ops():
    """Launch-bound: 481 tiny kernels per step (elementwise and reductions on 4096 elements)."""
    x = torch.randn(4096, device=DEV)
    w = torch.randn(4096, device=DEV)

    def step():
        h = x
        for _ in range(60):
            h = torch.tanh(h * w + 0.1)
            h = h - h.mean()
            h = h / (h.norm() + 1.0)
        x.copy_(h)

    return step


def image_infer_step(model, batch, dtype):
    """Inference of `model` on `batch` x 3x224x224 images in `dtype`, channels_last, no autograd."""
    model = model.to(DEV, dtype, memory_format=torch.channels_last).eval()
    x = torch.randn(batch, 3, 224, 224, device=DEV, dtype=dtype).to(memory_format=torch.channels_last)

    def step():
        with torch.no_grad():
            model(x)

    return step


def conv_infer():
    """ResNet-18-shaped CNN inference, bf16, channels_last, batch 64 x 3x224x224."""
    return image_infer_step(_resnet18_shaped(1000), 64, torch.bfloat16)


def llm_prefill_infer():
    """Decoder transformer inference (prefill): 8 causal layers, d 2048, batch 4 x 1024 tokens, bf16."""
    layer = nn.TransformerEncoderLayer(d_model=2048, nhead=16, dim_feedforward=8192, batch_first=True, norm_first=True)
    model = nn.TransformerEncoder(layer, num_layers=8, enable_nested_tensor=False).to(DEV, torch.bfloat16).eval()
    x = torch.randn(4, 1024, 2048, device=DEV, dtype=torch.bfloat16)
    mask = nn.Transformer.generate_square_subsequent_mask(1024, device=DEV, dtype=torch.bfloat16)

    def step():
        with torch.no_grad():
            model(x, mask=mask, is_causal=True)

    return step


def bf16_classifier_step(model, opt, x, y):
    """One training step under bf16 autocast: cross-entropy (in fp32) of model(x) against y."""
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x).float(), y)
        loss.backward()
        opt.step()

    return step


def unet_seg_train():
    """A small U-Net (3 levels, 32-128 channels, transposed convolutions) trained for segmentation on
    3x128x128 images, batch 16, bf16 autocast, channels_last, AdamW."""
    def double(c_in, c_out):
        return nn.Sequential(nn.Conv2d(c_in, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
                             nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.d3 = double(3, 32), double(32, 64), double(64, 128)
            self.u2, self.c2 = nn.ConvTranspose2d(128, 64, 2, 2), double(128, 64)
            self.u1, self.c1 = nn.ConvTranspose2d(64, 32, 2, 2), double(64, 32)
            self.out = nn.Conv2d(32, 8, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(nn.functional.max_pool2d(a, 2))
            c = self.d3(nn.functional.max_pool2d(b, 2))
            b = self.c2(torch.cat([self.u2(c), b], 1))
            return self.out(self.c1(torch.cat([self.u1(b), a], 1)))

    model = UNet().to(DEV, memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 3, 128, 128, device=DEV).to(memory_format=torch.channels_last)
    y = torch.randint(0, 8, (16, 128, 128), device=DEV)
    return bf16_classifier_step(model, opt, x, y)


def _mobilenet_shaped(classes):
    """MobileNet-shaped layers: depthwise-separable convolutions (3x3 depthwise, then 1x1), 32-1024
    channels."""
    def separable(c_in, c_out, stride):
        return nn.Sequential(nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False), nn.BatchNorm2d(c_in),
                             nn.ReLU6(), nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU6())

    layers, c = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()], 32
    for w, s in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (1024, 2)):
        layers.append(separable(c, w, s))
        c = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1024, classes)]
    return nn.Sequential(*layers)


def mobilenet_infer():
    """MobileNet-shaped inference, fp16, channels_last, batch 128 x 3x224x224."""
    return image_infer_step(_mobilenet_shaped(1000), 128, torch.float16)


def mobilenet_train():
    """The MobileNet-shaped classifier trained on 3x160x160 images, batch 64, bf16 autocast,
    channels_last, SGD with momentum."""
    model = _mobilenet_shaped(100).to(DEV, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    x = torch.randn(64, 3, 160, 160, device=DEV).to(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (64,), device=DEV)
    return bf16_classifier_step(model, opt, x, y)


def convnext_train():
    """A ConvNeXt-shaped classifier (depthwise 7x7 convolutions, LayerNorm, 4x MLP, GELU; 4 stages
    of 48-384 channels) trained on 3x128x128 images, batch 32, bf16 autocast, AdamW."""
    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, 1, 3, groups=c)
            self.norm = nn.LayerNorm(c)
            self.mlp = nn.Sequential(nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c))

        def forward(self, x):
            h = self.dw(x).permute(0, 2, 3, 1)
            return x + self.mlp(self.norm(h)).permute(0, 3, 1, 2)

    layers, c = [nn.Conv2d(3, 48, 4, 4)], 48
    for i, (w, n) in enumerate(((48, 2), (96, 2), (192, 4), (384, 2))):
        if i:
            layers.append(nn.Conv2d(c, w, 2, 2))
        layers += [Block(w) for _ in range(n)]
        c = w
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 100))
    model = model.to(DEV, memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(32, 3, 128, 128, device=DEV).to(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (32,), device=DEV)
    return bf16_classifier_step(model, opt, x, y)


def vit_infer():
    """ViT-B/16-shaped image inference in fp16 (weights and activations, no autocast): 16x16 patch
    embedding, 12 pre-norm blocks of d 768, 12 heads, MLP 3072, on 32 images of 3x224x224."""
    layer = nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072, batch_first=True,
                                       norm_first=True, activation="gelu")
    body = nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)
    patch = nn.Conv2d(3, 768, 16, 16)
    head = nn.Linear(768, 1000)
    model = nn.ModuleList([patch, body, head]).to(DEV, torch.float16).eval()
    cls = torch.zeros(32, 1, 768, device=DEV, dtype=torch.float16)
    x = torch.randn(32, 3, 224, 224, device=DEV, dtype=torch.float16)

    def step():
        with torch.no_grad():
            h = torch.cat([cls, patch(x).flatten(2).transpose(1, 2)], 1)
            head(body(h)[:, 0])

    return step


def gpt_wide_train():
    """A wide, shallow decoder (4 layers, d 1536, 12 heads, causal), sequence 512, batch 8, bf16
    autocast, AdamW: GEMMs 1536-6144 deep."""
    return decoder_train_step(vocab=16384, seq=512, d=1536, heads=12, layers=4, batch=8)


def mlp_narrow_infer():
    """Narrow fp32 MLP inference (TF32 off): 16 layers of 256 -> 256 with ReLU on a batch of 64,
    no_grad: small CUDA-core GEMMs whose blocks hold few warps."""
    torch.backends.cuda.matmul.allow_tf32 = False
    layers = []
    for _ in range(16):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    model = nn.Sequential(*layers).to(DEV).eval()
    x = torch.randn(64, 256, device=DEV)

    def step():
        with torch.no_grad():
            model(x)

    return step


def dlrm_small_train():
    """A DLRM-shaped recommender trained in fp32 (TF32 off), batch 2048: 8 embedding bags of
    100,000 x 64 (sum of 4 lookups each), a bottom MLP 13-256-64 on the dense features, a top MLP
    576-256-64-1 on their concatenation, binary cross-entropy, SGD."""
    torch.backends.cuda.matmul.allow_tf32 = False
    tables = nn.ModuleList(nn.EmbeddingBag(100_000, 64, mode="sum") for _ in range(8)).to(DEV)
    bottom = nn.Sequential(nn.Linear(13, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU()).to(DEV)
    top = nn.Sequential(nn.Linear(64 * 9, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 1)).to(DEV)
    params = list(tables.parameters()) + list(bottom.parameters()) + list(top.parameters())
    opt = torch.optim.SGD(params, lr=1e-2)
    loss_fn = nn.BCEWithLogitsLoss()
    batch = 2048
    dense = torch.randn(batch, 13, device=DEV)
    ids = [torch.randint(0, 100_000, (batch * 4,), device=DEV) for _ in tables]
    offsets = torch.arange(0, batch * 4, 4, device=DEV)
    y = torch.randint(0, 2, (batch, 1), device=DEV).float()

    def step():
        opt.zero_grad(set_to_none=True)
        h = torch.cat([bottom(dense)] + [t(i, offsets) for t, i in zip(tables, ids)], 1)
        loss_fn(top(h), y).backward()
        opt.step()

    return step


WORKLOADS = {"mlp_small_train": mlp_small_train, "bert_infer": bert_infer, "cnn_dataload_train": cnn_dataload_train,
             # the second held-out set (data/h200_heldout2)
             "gpt_small_train": gpt_small_train, "resnet_small_train": resnet_small_train,
             "lstm_lm_train": lstm_lm_train,
             # the third set (data/h200_heldout3): kinds of loop the model had not met
             "stream_chain": stream_chain, "fp32_mlp_train": fp32_mlp_train, "tiny_ops": tiny_ops,
             "conv_infer": conv_infer, "llm_prefill_infer": llm_prefill_infer,
             # recorded to check a convolution's power without its work (devices/*.json kinds.conv)
             "unet_seg_train": unet_seg_train, "mobilenet_infer": mobilenet_infer,
             # recorded to check depthwise convolutions as memory kernels (src/model/kernel_class.cc)
             "convnext_train": convnext_train,
             # recorded to check a GEMM's work from its tile (devices/*.json work_power.tile)
             "vit_infer": vit_infer, "gpt_wide_train": gpt_wide_train,
             # recorded to check four warps per SM (devices/*.json saturation_warps)
             "mlp_narrow_infer": mlp_narrow_infer, "dlrm_small_train": dlrm_small_train,
             # recorded to check a GEMM kernel a convolution launched as a convolution (kernel_work.h)
             "mobilenet_train": mobilenet_train}


# ---------------------------------------------------------------- one process: one loop, one trace
def run_loop(step, mode, seconds, nvml=None):
    """Runs the `mode` loop for >= `seconds` (whole units: a step in `sync`, CHUNK steps in `async`,
    each ended by a synchronize). Returns the step times (s) and, with nvml, the energy window."""
    per_unit = 1 if mode == "sync" else CHUNK
    torch.cuda.synchronize()
    e0 = nvml.energy_mj() if nvml else 0
    t0 = time.perf_counter()
    times = []
    while time.perf_counter() - t0 < seconds or len(times) < 3:
        s = time.perf_counter()
        for _ in range(per_unit):
            step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - s) / per_unit)
    wall = time.perf_counter() - t0
    if not nvml:
        return times, None
    energy_j = (nvml.energy_mj() - e0) / 1000.0
    iters = len(times) * per_unit
    return times, {"loop": mode, "iters": iters, "wall_s": wall, "iter_median_s": statistics.median(times),
                   "energy_j": energy_j, "energy_per_iter_j": energy_j / iters, "avg_power_w": energy_j / wall,
                   "end_state": {"power_mw": nvml.power_mw(), "sm_mhz": nvml.sm_mhz()}}


def summary(times):
    q = statistics.quantiles(times, n=10)
    return {"median_s": statistics.median(times), "p10_s": q[0], "p90_s": q[-1], "n": len(times)}


def trace(step, path, mode, shapes):
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


def record_one(args):
    """Child process: truth and energy of one loop without the profiler, then its trace, then the
    loop again. Writes its result (with the raw step times, for pooling) to args.part."""
    nvml = Nvml()
    step = WORKLOADS[args.workload]()
    run_loop(step, args.mode, args.warmup_s)  # warm up: autotuning, allocator, loader workers
    times, energy = run_loop(step, args.mode, args.seconds, nvml)
    path = os.path.join(args.out, f"{args.workload}_{args.mode}_{args.config}.json.gz")
    size = trace(step, path, args.mode, args.config == "shapes")
    after, _ = run_loop(step, args.mode, args.after_s)
    with open(args.part, "w") as f:
        json.dump({"times": times, "after": after, "energy": energy, "trace_bytes": size,
                   "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}, f)


# ---------------------------------------------------------------- driver: spawn, merge
def pooled_energy(parts):
    """Energy of several processes' windows of one loop: sums over the windows."""
    e = sum(p["energy"]["energy_j"] for p in parts)
    n = sum(p["energy"]["iters"] for p in parts)
    wall = sum(p["energy"]["wall_s"] for p in parts)
    return {"loop": parts[0]["energy"]["loop"], "iters": n, "wall_s": wall,
            "iter_median_s": statistics.median([t for p in parts for t in p["times"]]), "energy_j": e,
            "energy_per_iter_j": e / n, "avg_power_w": e / wall, "end_state": parts[-1]["energy"]["end_state"],
            "processes": len(parts)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output folder (files go to OUT/heldout)")
    ap.add_argument("workloads", nargs="?", default=",".join(WORKLOADS), help="comma-separated")
    ap.add_argument("--seconds", type=float, default=6.0, help="unprofiled measured window per process")
    ap.add_argument("--warmup-s", type=float, default=1.0, help="warm-up of the loop before it")
    ap.add_argument("--after-s", type=float, default=1.5, help="unprofiled timing after the trace")
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help="profiler configs to record per loop, of light,shapes (default both)")
    ap.add_argument("--one", nargs=3, metavar=("WORKLOAD", "MODE", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--part", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = os.path.join(args.out, "heldout")
    os.makedirs(out, exist_ok=True)
    if args.one:
        args.workload, args.mode, args.config = args.one
        args.out = out
        return record_one(args)

    protocol = (f"one fresh process per trace (never started the profiler before): warm-up {args.warmup_s} s, "
                f"then >= {args.seconds} s of the same loop as the trace without the profiler (step times and "
                f"NVML energy from this window), then the trace, then {args.after_s} s of the loop again")
    truth = {"about": "Held-out workloads recorded by bench/h200/record_workloads.py. " + protocol + ". "
                      "unprofiled_sync = per-step median, torch.cuda.synchronize() after every step; "
                      "unprofiled_async = median of (10-step chunk time / 10), one synchronize per 10 steps "
                      "(run-ahead); both pooled over the processes of that loop (one per profiler config: light, shapes). "
                      "traces.<loop>_<config>: the truth of that trace's own process. *_after_profiling: the "
                      "same loop timed after the trace, in the same process. Traces: PyTorch profiler, light = "
                      "record_shapes off, shapes = on, cuda sync events on. Seconds.",
             "torch": torch.__version__, "device": None}
    measured = {"about": "Energy per iteration at the default clocks, NVML total energy counter (read only), "
                         "over >= %g s of the unprofiled loop in each trace's own process, before its trace "
                         "(energy / iterations; includes the idle time inside the loop). Top-level fields of a "
                         "workload: the sync loop (synchronize after every step), pooled over its two processes, "
                         "same fields as ../shared/traces/h200/measured.json; `sync` repeats them, `async` is the "
                         "run-ahead loop (one synchronize per 10 steps); `loop` names the loop." % args.seconds,
                "torch": torch.__version__, "device": None, "workloads": {}}
    for name in args.workloads.split(","):
        t_start = time.perf_counter()
        parts = {}
        configs = [c for c in args.configs.split(",") if c in CONFIGS]
        for mode in MODES:
            for cfg in configs:
                part = os.path.join(args.out, f".part_{name}_{mode}_{cfg}.json")
                subprocess.run([sys.executable, os.path.abspath(__file__), args.out, "--one", name, mode, cfg,
                                "--part", part, "--seconds", str(args.seconds), "--warmup-s", str(args.warmup_s),
                                "--after-s", str(args.after_s)], check=True)
                with open(part) as f:
                    parts[mode, cfg] = json.load(f)
                os.remove(part)
        rec, energy = {}, {}
        for mode in MODES:
            both = [parts[mode, cfg] for cfg in configs]
            rec[f"unprofiled_{mode}"] = summary([t for p in both for t in p["times"]])
            rec[f"unprofiled_{mode}_after_profiling"] = summary([t for p in both for t in p["after"]])
            energy[mode] = pooled_energy(both)
        rec["traces"] = {f"{mode}_{cfg}": {"unprofiled": summary(p["times"]), "after_profiling": summary(p["after"]),
                                            "energy_per_iter_j": p["energy"]["energy_per_iter_j"],
                                            "avg_power_w": p["energy"]["avg_power_w"], "trace_bytes": p["trace_bytes"]}
                         for (mode, cfg), p in parts.items()}
        truth[name] = rec
        # the driver stays off the GPU: the device is the first part's (any config the run recorded)
        truth["device"] = measured["device"] = next(iter(parts.values()))["device"]
        measured["workloads"][name] = {**energy["sync"], **energy}
        print(f"{name}: sync {rec['unprofiled_sync']['median_s'] * 1e3:.2f} ms "
              f"{energy['sync']['energy_per_iter_j']:.3f} J/iter, async {rec['unprofiled_async']['median_s'] * 1e3:.2f} ms "
              f"{energy['async']['energy_per_iter_j']:.3f} J/iter; per trace " +
              ", ".join(f"{k} {v['unprofiled']['median_s'] * 1e3:.2f}->{v['after_profiling']['median_s'] * 1e3:.2f} ms"
                        for k, v in rec["traces"].items()) + f"; {time.perf_counter() - t_start:.0f} s", flush=True)
        # written after every workload, so a cut-off run keeps what it finished
        with open(os.path.join(out, "truth.json"), "w") as f:
            json.dump(truth, f, indent=1)
        with open(os.path.join(out, "measured.json"), "w") as f:
            json.dump(measured, f, indent=1)


if __name__ == "__main__":
    main()
