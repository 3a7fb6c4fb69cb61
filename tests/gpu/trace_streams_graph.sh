#!/usr/bin/env bash
# GPU test (CTest label gpu; needs an NVIDIA GPU, nvcc and a built emo with libemo_inject.so):
# bench/gpu/streams_graph (three streams, cross-stream event waits, a captured CUDA graph, host
# syncs) traced unmodified by `emo trace`, then analysed. Checks, on the files emo wrote:
#  - the tracer found the iterations and traced exactly the window asked for;
#  - every kernel of the CUDA graph is in the trace, with its graph id, launched by cudaGraphLaunch;
#  - every stream wait is an exact edge (no fallback rule), and the replay error is <= 1 %;
#  - the run reports an untraced step time and, with NVML, energy per iteration.
#
#   EMO=build/device/bin/emo bash tests/gpu/trace_streams_graph.sh [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
EMO="${EMO:-$root/build/ci/tools/emo/emo}"
out="${1:-$(mktemp -d /tmp/emo_gpu_test.XXXXXX)}"
mkdir -p "$out"
bash "$root/bench/gpu/build_streams_graph.sh" "$out/streams_graph"
"$EMO" trace -o "$out/sg_%r.emotrace" --warmup 30 --iterations 4 --json "$out/run.json" -- \
  "$out/streams_graph" --iters 300 --warmup 10 --no-step-list
trace="$(ls "$out"/sg_*.emotrace | head -1)"
"$EMO" analyze "$trace" --json "$out/analysis.json" > "$out/analysis.txt"
"$EMO" analyze "$trace" --correct-overhead off --json "$out/analysis_traced.json" > /dev/null
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
run = json.load(open(f"{out}/run.json"))
a = json.load(open(f"{out}/analysis.json"))
failures = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: failures.append(what)
t = run["traces"][0]
check(t["iterations"]["found"] >= 250, f"iterations found: {t['iterations']['found']} (of 300)")
check(t["iterations"]["traced"] == 4, f"traced iterations: {t['iterations']['traced']} (asked 4)")
check(t["records"]["dropped"] == 0, f"dropped records: {t['records']['dropped']}")
check(t["step_time_ms"]["untraced"] is not None, f"untraced step time: {t['step_time_ms']['untraced']} ms")
diag = {d["name"]: d["count"] for d in a.get("diagnostics", [])}
check(diag.get("cuda_graph_kernels", 0) > 0, f"CUDA graph kernels: {diag.get('cuda_graph_kernels', 0)}")
fallback = sum(diag.get(k, 0) for k in ("wait_edge_record_pair", "wait_edge_last_launch", "wait_edge_none", "wait_edge_event_id"))
check(diag.get("wait_edge_exact", 0) > 0, f"exact wait edges: {diag.get('wait_edge_exact', 0)}")
check(fallback == 0, f"fallback (inferred) wait edges: {fallback}")
it = a["iteration_time_us"]
check(abs(it["replayed"] - it["measured"]) <= 0.01 * it["measured"], f"replay {it['replayed']:.1f} us vs measured {it['measured']:.1f} us")
g = t["gpus"][0] if t["gpus"] else None
check(g is not None and g["energy_per_iteration_j"] is not None, f"energy per iteration: {g and g['energy_per_iteration_j']} J")
sys.exit(1 if failures else 0)
PY
