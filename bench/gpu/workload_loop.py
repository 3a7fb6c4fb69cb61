#!/usr/bin/env python3
"""One held-out workload of bench/h200/record_workloads.py (its `sync` loop: a synchronize after
every step) as a plain program, to trace under `emo trace`: the same step, without the PyTorch
profiler, so the trace carries its own untraced step time, NVML energy and SM clock.
See loop_common.py for the shared options (--steps, --warmup, --nvtx) and the JSON line.
  python bench/gpu/workload_loop.py WORKLOAD [--steps N] [--nvtx]
  emo trace -o w.emotrace --warmup 400 --iterations 5 -- python bench/gpu/workload_loop.py conv_infer --steps 4000 --nvtx
"""
import argparse
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "h200"))
import loop_common  # noqa: E402
import record_workloads  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("workload", choices=sorted(record_workloads.WORKLOADS))
    loop_common.add_args(ap, steps=1000, warmup=20)
    args = ap.parse_args()
    one = record_workloads.WORKLOADS[args.workload]()

    def step():
        one()
        torch.cuda.synchronize()

    loop_common.run(args.workload, args, step)


if __name__ == "__main__":
    main()
