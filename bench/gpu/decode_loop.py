#!/usr/bin/env python3
"""An LLM decode loop: greedy, one token per step, KV cache; plain PyTorch user code.

Model: a small decoder-only transformer in bf16 (`--layers` pre-norm blocks, d `--d-model`,
learned positions, head tied to the token embedding), random weights. A prompt of
`--prompt` tokens per sequence is prefilled once (before the loop), then every step decodes one
token for each of `--batch` sequences: per layer LayerNorm, QKV projection, the new K and V
written into a preallocated cache, attention of the one query over the whole cache with the
positions not yet written masked (scaled_dot_product_attention; one shape every step, as a static
KV cache; `--attention grow` attends over the filled part instead), output projection, MLP; then
the head and argmax. The tokens are copied to the host every step (`.tolist()`, as a server
streaming tokens does): the loop's own per-step sync. When the cache is full (`--max-len`) the position goes back to just after the
prompt, so every step stays a one-token decode over at most max-len cached positions.
Mostly small, launch-bound kernels: roughly 15 per layer per step. Defaults (8 layers, d 1024,
batch 8): 3.3-4.4 ms a step on an H100 (BENCHMARKS.md, "The decode loop's two regimes"), host-bound.
Before 2026-12-07 the loop attended over the filled part only (`--attention grow`): with
PyTorch's default backend (cuDNN attention) each new key length cost ~50 ms the first time, so
the first 384 steps ran ~18x slower than the rest.

Prints one JSON line on stdout: {"workload": "decode_loop", "median_step_ms", "steps", ...};
see loop_common.py for every option (--steps, --warmup, --nvtx, --torch-profiler OUT.json,
--nvml-energy) and field.

  python bench/gpu/decode_loop.py [--steps 400] [--warmup 40] [--nvtx] [--nvml-energy]
  emo trace -o d.emo -- python bench/gpu/decode_loop.py
"""
import argparse
import contextlib

import loop_common


def build(args):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(args.seed)
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    dt = torch.bfloat16
    d, h, L = args.d_model, args.heads, args.layers
    hd = d // h

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    tok = nn.Embedding(args.vocab, d)
    pos = nn.Embedding(args.max_len, d)
    blocks = nn.ModuleList(Block() for _ in range(L))
    ln_f = nn.LayerNorm(d)
    model = nn.ModuleDict({"tok": tok, "pos": pos, "blocks": blocks, "ln_f": ln_f})
    for p in model.parameters():
        if p.dim() >= 2:
            nn.init.normal_(p, 0.0, 0.02)
    model = model.to(dev, dt).eval()
    B = args.batch
    with torch.inference_mode():  # written only inside inference mode
        k_cache = torch.zeros(L, B, h, args.max_len, hd, device=dev, dtype=dt)
        v_cache = torch.zeros_like(k_cache)

    positions = torch.arange(args.max_len, device=dev)
    if args.sdpa == "default":
        sdpa_backend = contextlib.nullcontext
    else:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        chosen = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                  "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[args.sdpa]
        sdpa_backend = lambda: sdpa_kernel(chosen)  # noqa: E731

    def forward(ids, start):
        """ids: (B, T) tokens at positions start..start+T-1; fills the cache there; returns the
        next token of each sequence (greedy), on the GPU."""
        T = ids.shape[1]
        x = tok(ids) + pos.weight[start:start + T]
        mask = (positions < start + T)[None, None, None, :] if T == 1 and args.attention == "static" else None
        for i, blk in enumerate(blocks):
            q, k, v = blk.qkv(blk.ln1(x)).split(d, dim=2)
            q = q.view(B, T, h, hd).transpose(1, 2)
            k_cache[i, :, :, start:start + T] = k.view(B, T, h, hd).transpose(1, 2)
            v_cache[i, :, :, start:start + T] = v.view(B, T, h, hd).transpose(1, 2)
            with sdpa_backend():
                if T > 1:  # prefill from position 0: plain causal attention
                    k_all, v_all = k_cache[i, :, :, :start + T], v_cache[i, :, :, :start + T]
                    y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=True)
                elif args.attention == "static":  # the whole cache, the positions not yet written masked
                    y = F.scaled_dot_product_attention(q, k_cache[i], v_cache[i], attn_mask=mask)
                else:  # the filled part of the cache: a key length one longer every step
                    k_all, v_all = k_cache[i, :, :, :start + T], v_cache[i, :, :, :start + T]
                    y = F.scaled_dot_product_attention(q, k_all, v_all)
            x = x + blk.proj(y.transpose(1, 2).reshape(B, T, d))
            x = x + blk.out(F.gelu(blk.fc(blk.ln2(x)), approximate="tanh"))
        logits = F.linear(ln_f(x[:, -1]), tok.weight)  # head tied to the token embedding
        return logits.argmax(dim=-1)

    gen = torch.Generator().manual_seed(args.seed)
    prompt = torch.randint(0, args.vocab, (B, args.prompt), generator=gen).to(dev)
    state = {"pos": args.prompt, "generated": 0, "wraps": 0, "last": None}
    with torch.inference_mode():
        state["next"] = forward(prompt, 0)
    torch.cuda.synchronize()

    def step():
        with torch.inference_mode():
            nxt = forward(state["next"][:, None], state["pos"])
        state["last"] = nxt.tolist()  # the tokens go to the host: the loop's own per-step sync
        state["next"] = nxt
        state["generated"] += 1
        state["pos"] += 1
        if state["pos"] == args.max_len:
            state["pos"] = args.prompt
            state["wraps"] += 1

    params = sum(p.numel() for p in model.parameters())
    return step, params, state


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    loop_common.add_args(ap, steps=400, warmup=40)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=128, help="prompt tokens per sequence (prefilled once)")
    ap.add_argument("--max-len", type=int, default=512, help="KV cache length")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--attention", choices=("grow", "static"), default="static",
                    help="decode attention over the whole cache with the unwritten positions masked (static, the "
                         "default: one shape every step), or over the cache's filled part, a key length one longer "
                         "every step (grow: with PyTorch's default backend, cuDNN attention, each new length costs "
                         "~50 ms the first time it comes, so the first --max-len minus --prompt steps run ~18x "
                         "slower; the loop before 2026-12-07)")
    ap.add_argument("--sdpa", choices=("default", "flash", "efficient", "cudnn", "math"), default="default",
                    help="scaled_dot_product_attention's backend (default: PyTorch's choice)")
    args = ap.parse_args()
    if args.d_model % args.heads:
        ap.error("--d-model must be a multiple of --heads")
    if not 0 < args.prompt < args.max_len:
        ap.error("need 0 < --prompt < --max-len")
    step, params, state = build(args)
    loop_common.log(f"decode_loop: {params / 1e6:.1f} M parameters, batch {args.batch}, {args.steps} steps "
                    f"({args.warmup} warm-up)")
    cfg = {"layers": args.layers, "d_model": args.d_model, "heads": args.heads, "batch": args.batch,
           "prompt": args.prompt, "max_len": args.max_len, "vocab": args.vocab, "params": params, "dtype": "bf16",
           "attention": args.attention, "sdpa": args.sdpa}
    loop_common.run("decode_loop", args, step,
                    extra=lambda: {"config": cfg, "cache_wraps": state["wraps"], "last_tokens": state["last"][:4]})


if __name__ == "__main__":
    main()
