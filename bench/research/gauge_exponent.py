#!/usr/bin/env python3
"""How strongly does a trace's own CPU scale follow its gauge? (docs/overhead.md, the gauge exponent)

For every trace of the nine H200 workloads with unprofiled truths (multistream left out: it is
GPU-bound, its own scale sits at the bound), `emo analyze --step-time` gives the CPU scale the
trace needs on its own (`overhead.cpu_scale`) and `emo analyze` its gauge slowdown
(`overhead.speed_gauge.cpu_slowdown`). The model says scale = ratio / slowdown^a, one ratio per
profiler configuration. For each exponent a, the ratios are set to the mean of
log(scale) + a log(slowdown) per configuration, and the root-mean-square log error is printed,
on the calibration's first eight traces (gpt_train, resnet_train), on the 24 others, and on all.

Usage: bench/research/gauge_exponent.py [path/to/emo] [path/to/shared]
"""
import json, math, os, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
emo = sys.argv[1] if len(sys.argv) > 1 else f"{root}/build/ci/tools/emo/emo"
shared = sys.argv[2] if len(sys.argv) > 2 else f"{root}/../shared"
o, h, h2 = f"{shared}/traces/h200/overhead", f"{root}/data/h200_heldout", f"{root}/data/h200_heldout2"
truth = {}
for d in (o, h, h2):
    truth.update(json.load(open(f"{d}/truth.json")))
WORK = {"gpt_train": o, "resnet_train": o, "mlp_small_train": h, "bert_infer": h, "cnn_dataload_train": h,
        "gpt_small_train": h2, "resnet_small_train": h2, "lstm_lm_train": h2}


def overhead(args):
    out = subprocess.run([emo, "analyze", *args, "--json", "-"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["overhead"]


rows = []  # (workload, config, slowdown, own scale)
for w, folder in WORK.items():
    for mode in ("sync", "async"):
        for cfg in ("light", "shapes"):
            path = f"{folder}/{w}_{mode}_{cfg}.json.gz"
            ms = truth[w][f"unprofiled_{mode}"]["median_s"] * 1e3
            slowdown = overhead([path])["speed_gauge"]["cpu_slowdown"]
            own = overhead([path, "--step-time", str(ms)])["cpu_scale"]
            rows.append((w, cfg, slowdown, own))
            print(f"{w}_{mode}_{cfg:<7} slowdown {slowdown:.3f}  own CPU scale {own:.3f}")


def rms(subset, a):
    err = []
    for cfg in ("light", "shapes"):
        v = [math.log(s) + a * math.log(g) for _, c, g, s in subset if c == cfg]
        m = sum(v) / len(v)
        err += [(x - m) ** 2 for x in v]
    return math.sqrt(sum(err) / len(err))


first = [r for r in rows if r[0] in ("gpt_train", "resnet_train")]
others = [r for r in rows if r[0] not in ("gpt_train", "resnet_train")]
print("\nexponent  rms log error: first calibration's 8 traces / the other 24 / all 32")
for a in (0, 0.25, 0.5, 0.6, 0.75, 1.0, 1.25):
    print(f"{a:8.2f}  {rms(first, a):.3f} / {rms(others, a):.3f} / {rms(rows, a):.3f}")
