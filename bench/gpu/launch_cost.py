"""Host cost of one kernel launch: a loop of tiny in-place adds (launch-bound: the GPU waits on
the host), timed per block of launches. Run it plainly and under `emo monitor` / `emo trace`;
the difference of the medians is what the tracer adds to each launch.

    python bench/gpu/launch_cost.py [--launches 200] [--blocks 300]

Prints one JSON line: {"us_per_launch": median over blocks, "median_step_ms": median block}.
Each block is one host-synchronized iteration (a one-element copy to the host ends it), so the
tracer sees a loop with one sync per iteration."""
import argparse
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=200, help="kernel launches per block")
    ap.add_argument("--blocks", type=int, default=300, help="timed blocks")
    ap.add_argument("--warmup", type=int, default=30, help="untimed blocks first")
    a = ap.parse_args()
    x = torch.zeros(1, device="cuda")
    times = []
    for b in range(a.warmup + a.blocks):
        t0 = time.perf_counter()
        for _ in range(a.launches):
            x.add_(1.0)
        x.item()
        if b >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(json.dumps({"us_per_launch": med / a.launches * 1e6, "median_step_ms": med * 1e3,
                      "blocks": a.blocks, "launches": a.launches}))


if __name__ == "__main__":
    main()
