#!/usr/bin/env python3
"""How much of ddp_gpt's joint-timeline excess is the contention of waiting NCCL kernels: a trial
on edited copies of the two Kineto traces, not a model in EMO.

Each collective kernel's wait is the part before its peer's matching kernel started (the
collectives matched in order; same host, so one clock). A compute kernel that overlapped the
wait (MODE=wait) or any part (MODE=all) of a collective kernel on its own GPU gets the duration
of the same kernel on the peer rank, when that one was shorter (kernels paired by aligning the
two ranks' kernel-name sequences). Writes the edited traces to OUT_DIR; then

    emo analyze OUT_DIR/ddp_gpt_rank0.json.gz OUT_DIR/ddp_gpt_rank1.json.gz --json j.json

and read job.joint_replay.job.timeline_joint_us (BENCHMARKS.md, Order 10, "The jobs on the
nine-workload calibration").

    python3 bench/research/ddp_wait_contention.py wait /tmp/ddp_wait [../shared/traces/h200]
"""
import difflib
import gzip
import json
import os
import sys


def main():
    mode, out_dir = sys.argv[1], sys.argv[2]
    src = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(__file__), "../../../shared/traces/h200")
    assert mode in ("wait", "all"), "MODE is wait or all"
    traces = {r: json.load(gzip.open(f"{src}/ddp_gpt_rank{r}.json.gz")) for r in (0, 1)}
    kernels = {r: sorted((e for e in t["traceEvents"] if e.get("cat") == "kernel"), key=lambda e: e["ts"])
               for r, t in traces.items()}
    nccl = {r: [e for e in k if "nccl" in e["name"].lower()] for r, k in kernels.items()}
    phases = {0: [], 1: []}  # (start, last arrival, end) per collective kernel
    for a, b in zip(nccl[0], nccl[1]):
        last = max(a["ts"], b["ts"])
        phases[0].append((a["ts"], last, a["ts"] + a["dur"]))
        phases[1].append((b["ts"], last, b["ts"] + b["dur"]))
    comp = {r: [e for e in k if "nccl" not in e["name"].lower()] for r, k in kernels.items()}
    blocks = difflib.SequenceMatcher(None, [e["name"] for e in comp[0]], [e["name"] for e in comp[1]],
                                     autojunk=False).get_matching_blocks()
    peer = {0: {}, 1: {}}
    for a, b, n in blocks:
        for k in range(n):
            peer[0][a + k] = b + k
            peer[1][b + k] = a + k
    for r in (0, 1):
        changed = saved = 0
        for i, e in enumerate(comp[r]):
            if i not in peer[r]:
                continue
            other = comp[1 - r][peer[r][i]]
            s, en = e["ts"], e["ts"] + e["dur"]
            in_wait = sum(max(0, min(en, last) - max(s, start)) for start, last, _ in phases[r])
            in_transfer = sum(max(0, min(en, end) - max(s, last)) for _, last, end in phases[r])
            hit = in_wait > 0 if mode == "wait" else in_wait + in_transfer > 0
            if hit and other["dur"] < e["dur"]:
                saved += e["dur"] - other["dur"]
                e["dur"] = other["dur"]
                changed += 1
        print(f"rank {r}: {changed} kernels shortened by {saved / 1000:.2f} ms in all (paired {len(peer[r])})")
    os.makedirs(out_dir, exist_ok=True)
    for r, t in traces.items():
        with gzip.open(f"{out_dir}/ddp_gpt_rank{r}.json.gz", "wt") as f:
            json.dump(t, f)


if __name__ == "__main__":
    main()
