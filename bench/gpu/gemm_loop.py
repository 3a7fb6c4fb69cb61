#!/usr/bin/env python3
"""A loop of square GEMMs, one host sync per step: a program the power limiter governs (bf16 on
the tensor cores at 8192, the default) or not (fp32 off them), for checking that `emo trace`
records the SM clock the kernels ran at (issue Order 8: the clock a trace ran at).

Each step runs `--gemms` matmuls of two N×N matrices into a third and reads one element back
(the step's own sync). See loop_common.py for the shared options (--steps, --warmup, --nvtx,
--nvml-energy) and the JSON line it prints.
  python bench/gpu/gemm_loop.py [--n 8192] [--dtype bf16|fp32|tf32] [--gemms 16] [--steps 400]
  emo trace -o gemm.emotrace --warmup 250 --iterations 5 -- python bench/gpu/gemm_loop.py
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loop_common  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "tf32": torch.float32}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    loop_common.add_args(ap, steps=400, warmup=20)
    ap.add_argument("--n", type=int, default=8192, help="matrix size (default 8192)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--gemms", type=int, default=16, help="matmuls per step (default 16)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    dev = torch.device("cuda", args.device)
    a = torch.randn(args.n, args.n, device=dev, dtype=DTYPES[args.dtype])
    b = torch.randn(args.n, args.n, device=dev, dtype=DTYPES[args.dtype])
    c = torch.empty(args.n, args.n, device=dev, dtype=DTYPES[args.dtype])

    def step():
        for _ in range(args.gemms):
            torch.matmul(a, b, out=c)
        c[0, 0].item()

    cfg = {"n": args.n, "dtype": args.dtype, "gemms": args.gemms}
    loop_common.run(f"gemm_loop_{args.dtype}_{args.n}", args, step, extra=lambda: {"config": cfg})


if __name__ == "__main__":
    main()
