#!/usr/bin/env python3
"""A GPT-like training loop: plain PyTorch user code for tracing with `emo trace`.

Model: token + position embeddings, `--layers` pre-norm transformer blocks (causal
scaled_dot_product_attention, GELU MLP), final LayerNorm, head tied to the token embedding.
Each step: a batch copied host->device from pinned memory (non_blocking), forward and loss
under torch.autocast(bf16), backward, gradient clipping, AdamW (PyTorch's default foreach
implementation), and `loss.item()`: the per-step host sync of a loop that logs its loss.
Defaults (6 layers, d 768, 12 heads, batch 16 x 256 tokens, vocab 8192, ~49 M parameters) aim
at a step of roughly 5-30 ms on one H200 (not yet measured there).

Prints one JSON line on stdout: {"workload": "train_loop", "median_step_ms", "steps", ...};
see loop_common.py for every option (--steps, --warmup, --nvtx, --torch-profiler OUT.json,
--nvml-energy) and field.

  python bench/gpu/train_loop.py [--steps 300] [--warmup 30] [--nvtx] [--nvml-energy]
  emo trace -o t.emo -- python bench/gpu/train_loop.py
  emo trace -o ddp_%r.emotrace -- torchrun --standalone --nproc-per-node 2 bench/gpu/train_loop.py --ddp
"""
import argparse
import math
import os

import loop_common


def build(args):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self, vocab, seq, d, heads, layers):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)
            self.register_buffer("positions", torch.arange(seq), persistent=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(self.positions[: idx.shape[1]])
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))

    torch.manual_seed(args.seed)
    if args.ddp:  # one rank of a torchrun job: its GPU is LOCAL_RANK
        import torch.distributed as dist
        args.device = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    model = GPT(args.vocab, args.seq, args.d_model, args.heads, args.layers).to(dev)
    if args.ddp:
        dist.init_process_group("nccl", device_id=dev)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.device])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    # a small pool of pinned host batches, as a data loader would hand over; seq+1 tokens each
    gen = torch.Generator().manual_seed(args.seed)
    pool = [torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen).pin_memory() for _ in range(8)]
    state = {"i": 0}

    def step():
        batch = pool[state["i"] % len(pool)].to(dev, non_blocking=True)
        state["i"] += 1
        x, y = batch[:, :-1], batch[:, 1:]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["loss"] = loss.item()  # the loop's own per-step sync (logging the loss)

    params = sum(p.numel() for p in model.parameters())
    return step, params, state


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    loop_common.add_args(ap, steps=300, warmup=30)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--ddp", action="store_true",
                    help="run as one rank of a torchrun job: NCCL, GPU = LOCAL_RANK, DistributedDataParallel")
    args = ap.parse_args()
    if args.d_model % args.heads:
        ap.error("--d-model must be a multiple of --heads")
    step, params, state = build(args)
    loop_common.log(f"train_loop: {params / 1e6:.1f} M parameters, {args.steps} steps ({args.warmup} warm-up)")
    cfg = {"layers": args.layers, "d_model": args.d_model, "heads": args.heads, "batch": args.batch,
           "seq": args.seq, "vocab": args.vocab, "params": params, "dtype": "bf16 autocast", "optimizer": "AdamW",
           "ddp_world_size": int(os.environ.get("WORLD_SIZE", "1")) if args.ddp else None}
    loop_common.run("train_loop", args, step, extra=lambda: {"config": cfg, "final_loss": state.get("loss")})
    if args.ddp:
        import torch.distributed as dist
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
