#!/usr/bin/env bash
# GPU test (CTest label gpu; needs two NVIDIA GPUs, PyTorch with NCCL and a built emo with
# libemo_inject.so): a two-rank DistributedDataParallel job started by torchrun, traced unmodified
# by `emo trace`. torchrun's worker processes inherit the tracer; checks, on the files emo wrote:
#  - one trace per rank, named by RANK, each saying its rank, host and pid, with the GPU it used;
#  - both ranks found the iterations, traced the window asked for, dropped nothing, and have
#    NCCL kernels (the all-reduces of DDP);
#  - each rank's trace analyses with every stream wait exact and a replay error <= 1 %;
#  - each rank reports an untraced step time and energy per iteration of its own GPU.
# Exits 77 (skipped) when fewer than two GPUs are visible.
#
#   EMO=build/device/bin/emo PY=/opt/torch/.venv/bin/python bash tests/gpu/trace_ddp.sh [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
EMO="${EMO:-$root/build/ci/tools/emo/emo}"
PY="${PY:-/opt/torch/.venv/bin/python}"
out="${1:-$(mktemp -d /tmp/emo_gpu_ddp.XXXXXX)}"
mkdir -p "$out"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l || true)
if (( gpus < 2 )); then echo "SKIP: two GPUs needed, $gpus visible"; exit 77; fi
"$EMO" trace -o "$out/ddp_%r.emotrace" --warmup 20 --iterations 5 --json "$out/run.json" -- \
  "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 "$root/bench/gpu/train_loop.py" --ddp \
  --steps 120 --warmup 20 --no-step-list > "$out/trace.txt" 2>&1 || { cat "$out/trace.txt"; exit 1; }
for r in 0 1; do
  "$EMO" analyze "$out/ddp_$r.emotrace" --json "$out/analysis_$r.json" --perfetto "$out/ddp_$r.perfetto.json" \
    > "$out/analysis_$r.txt"
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
run = json.load(open(f"{out}/run.json"))
failures = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: failures.append(what)
traces = {t["rank"]: t for t in run["traces"]}
check(sorted(traces) == [0, 1], f"one trace per rank: ranks {sorted(traces)} from {[t['path'] for t in run['traces']]}")
for r in sorted(traces):
    t = traces[r]
    check(t["path"].endswith(f"ddp_{r}.emotrace"), f"rank {r}: file named by RANK ({t['path']})")
    check(bool(t["host"]) and t["pid"] > 0, f"rank {r}: host {t['host']!r}, pid {t['pid']}")
    check(t["iterations"]["found"] >= 80, f"rank {r}: iterations found {t['iterations']['found']} (of 120)")
    check(t["iterations"]["traced"] == 5, f"rank {r}: traced iterations {t['iterations']['traced']} (asked 5)")
    check(t["records"]["dropped"] == 0, f"rank {r}: dropped records {t['records']['dropped']}")
    check(t["step_time_ms"]["untraced"] is not None, f"rank {r}: untraced step {t['step_time_ms']['untraced']} ms")
    g = t["gpus"][0] if t["gpus"] else None
    check(g is not None and g["energy_per_iteration_j"] is not None,
          f"rank {r}: energy per iteration {g and g['energy_per_iteration_j']} J on GPU {g and g['device']}")
    a = json.load(open(f"{out}/analysis_{r}.json"))
    diag = {d["name"]: d["count"] for d in a.get("diagnostics", [])}
    fallback = sum(diag.get(k, 0) for k in ("wait_edge_record_pair", "wait_edge_last_launch", "wait_edge_none", "wait_edge_event_id"))
    check(fallback == 0, f"rank {r}: fallback (inferred) wait edges {fallback}")
    it = a["iteration_time_us"]
    check(abs(it["replayed"] - it["measured"]) <= 0.01 * it["measured"],
          f"rank {r}: replay {it['replayed']:.1f} us vs measured {it['measured']:.1f} us")
    names = [e.get("name", "") for e in json.load(open(f"{out}/ddp_{r}.perfetto.json"))["traceEvents"]]
    nccl = sum(n.startswith("ncclDevKernel") or n.startswith("ncclKernel") for n in names)
    check(nccl > 0, f"rank {r}: NCCL kernels in the traced window: {nccl}")
gpu_ids = {traces[r]["gpus"][0]["device"] for r in traces if traces[r]["gpus"]}
check(len(gpu_ids) == 2, f"the ranks measured different GPUs: {sorted(gpu_ids)}")
sys.exit(1 if failures else 0)
PY
