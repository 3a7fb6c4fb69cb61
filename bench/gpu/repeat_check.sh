#!/usr/bin/env bash
# Runs streams_graph (streams, event waits, a CUDA graph) under `emo trace` N times in fresh
# processes and the train loop once, and checks every run: the program's exit code, the trace's
# completeness, exact wait edges only, whole graphs (tests/gpu/trace_streams_graph.sh's checks
# on the first run). From the repository root with the device bundle in build/device:
#   OUT=dir N=8 bash bench/gpu/repeat_check.sh
set -uo pipefail
: "${OUT:?set OUT}"
EMO="${EMO:-$(pwd)/build/device/bin/emo}"
PY="${PY:-/opt/torch/.venv/bin/python}"
N="${N:-8}"
W="$(mktemp -d /tmp/emo_repeat.XXXXXX)"
EMO="$EMO" bash tests/gpu/trace_streams_graph.sh "$W/first" > "$OUT/repeat.log" 2>&1
echo "gpu test rc $?" >> "$OUT/repeat.log"
for i in $(seq 1 "$N"); do
  "$EMO" trace -o "$W/sg_$i.emotrace" --warmup 30 --iterations 4 -- "$W/first/streams_graph" --iters 300 --warmup 10 --no-step-list > "$W/run_$i.txt" 2>&1
  rc=$?
  "$EMO" analyze "$W/sg_$i.emotrace" --correct-overhead off --json "$W/a_$i.json" > /dev/null 2>&1
  python3 - "$i" "$rc" "$W/a_$i.json" "$W/run_$i.txt" >> "$OUT/repeat.log" <<'PY'
import json, sys
i, rc, path, txt = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
try:
    a = json.load(open(path)); d = {x["name"]: x["count"] for x in a["diagnostics"]}
    fb = sum(d.get(k, 0) for k in ("wait_edge_record_pair", "wait_edge_last_launch", "wait_edge_none", "wait_edge_event_id"))
    print(f"run {i}: rc {rc}, iterations {a['iterations']}, exact waits {d.get('wait_edge_exact', 0)}, fallback {fb}, graph kernels {d.get('cuda_graph_kernels', 0)}, replay err {a['replay_error_pct']:.4f} %, complete {'incomplete' not in open(txt).read()}")
except Exception as e:
    print(f"run {i}: rc {rc}, no analysis ({e})")
PY
done
"$EMO" trace -o "$W/train.emotrace" --warmup 20 --iterations 5 -- "$PY" bench/gpu/train_loop.py --steps 150 --warmup 20 --no-step-list >> "$OUT/repeat.log" 2>&1
echo "train rc $?" >> "$OUT/repeat.log"
"$EMO" analyze "$W/train.emotrace" >> "$OUT/repeat.log" 2>&1
cat "$OUT/repeat.log"
