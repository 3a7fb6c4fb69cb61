#!/usr/bin/env bash
# EMO's Python package on the GPU machine (docs/python.md): the native module compiled there for
# its Python (python/build_module.sh against the device bundle), then the PyTorch loops measured
# three ways in one run: emo.Monitor and the program's own NVML read (energy_check.py) over the
# same timed region, and `emo monitor` around the whole program; and emo.analyze against the
# emo binary on the example trace. Reads only: no clock or limit is set.
#
#   OUT=DIR [EMO=build/device/bin/emo] [PY=/opt/torch/.venv/bin/python] bash bench/gpu/python_api.sh
set -uo pipefail
OUT=${OUT:?set OUT to a folder for the results}
EMO=${EMO:-build/device/bin/emo}
PY=${PY:-/opt/torch/.venv/bin/python}
bundle=$(dirname "$(dirname "$EMO")")
mkdir -p "$OUT"
bash python/build_module.sh "$PY" "$bundle" >"$OUT/build_module.txt" 2>&1 || { cat "$OUT/build_module.txt"; exit 1; }
export PYTHONPATH="$bundle/python"
"$PY" - "$EMO" "$OUT" <<'PY' >"$OUT/analyze_check.txt" 2>&1
import json, subprocess, sys
import emo
binary, out = sys.argv[1], sys.argv[2]
sample = "examples/gpt_train_h200.json.gz"
got = emo.analyze(sample)
import tempfile, os
with tempfile.TemporaryDirectory() as d:
    subprocess.run([binary, "analyze", sample, "--json", d + "/a.json"], check=True, capture_output=True)
    want = json.load(open(d + "/a.json"))
print("emo", emo.__file__, "python", sys.version.split()[0])
print("emo.analyze == emo analyze --json:", got == want, got["iteration_time_us"]["corrected"])
PY
cat "$OUT/analyze_check.txt"
for loop in "train_loop.py --steps 600 --warmup 50" "decode_loop.py --steps 500 --warmup 40"; do
  name=${loop%%.py*}
  # shellcheck disable=SC2086
  "$EMO" monitor --json "$OUT/$name.monitor.json" -- "$PY" bench/gpu/$loop --nvml-energy --emo-monitor --no-step-list \
    >"$OUT/$name.out" 2>>"$OUT/log.txt"
  echo "$name: rc $?"
  # The program's JSON line apart; emo monitor's text after it goes to the log.
  grep '"workload"' "$OUT/$name.out" >"$OUT/$name.program.json"
  grep -v '"workload"' "$OUT/$name.out" >>"$OUT/log.txt"
  rm -f "$OUT/$name.out"
done

# emo.trace against `emo trace` on the same loop, one run each: the program traces its own timed
# region (`--emo-trace`: a block begun after its 50 or 40 warm-up steps, window at the block's
# iterations 10-14), and the whole program under `emo trace` (window at the program's iterations
# 60-64 or 50-54, about the same steps). Both traces through `emo analyze`; trace_compare.json holds
# both summaries, both analyses' headline numbers and the programs' own step times.
traces=$(mktemp -d)
for loop in "train_loop.py 50" "decode_loop.py 40"; do
  script=${loop%% *}
  warm=${loop##* }
  name=${script%.py}
  args=(bench/gpu/$script --steps 300 --warmup "$warm" --no-step-list)
  "$PY" "${args[@]}" --emo-trace "$traces/$name.block.emotrace" --emo-trace-warmup 10 --emo-trace-iterations 5 \
    >"$traces/$name.block.json" 2>>"$OUT/log.txt"
  echo "$name block: rc $?"
  "$EMO" trace -o "$traces/$name.cli_%r.emotrace" --warmup $((warm + 10)) --iterations 5 --json "$traces/$name.cli.json" \
    -- "$PY" "${args[@]}" >"$traces/$name.cli.out" 2>>"$OUT/log.txt"
  echo "$name emo trace: rc $?"
  grep '"workload"' "$traces/$name.cli.out" >"$traces/$name.cli.program.json"
  "$EMO" analyze "$traces/$name.block.emotrace" --json "$traces/$name.block.analyze.json" >>"$OUT/log.txt" 2>&1
  "$EMO" analyze "$traces"/$name.cli_*.emotrace --json "$traces/$name.cli.analyze.json" >>"$OUT/log.txt" 2>&1
done
python3 - "$traces" "$OUT/trace_compare.json" <<'PY'
import json, sys
d, out = sys.argv[1], sys.argv[2]
def load(p):
    try:
        return json.load(open(p))
    except Exception as e:
        return {"error": f"{p}: {e}"}
def headline(a):
    if "error" in a:
        return a
    it = a.get("iteration_time_us", {})
    return {k: a.get(k) for k in ("iterations", "replay_error_pct", "steady_iteration")} | {
        "iteration_time_us": it, "graph_nodes": a.get("graph", {}).get("nodes"),
        "busy_pct": [g.get("busy_pct") for g in a.get("gpus", [])],
        "energy_per_iteration_j": [g.get("energy_per_iteration_j") for g in a.get("measured_energy", {}).get("gpus", [])]}
result = {}
for name in ("train_loop", "decode_loop"):
    block, cli = load(f"{d}/{name}.block.json"), load(f"{d}/{name}.cli.json")
    cli_program = load(f"{d}/{name}.cli.program.json")
    result[name] = {
        "block": {"program_median_step_ms": block.get("median_step_ms"), "summary": block.get("emo_trace")},
        "emo_trace": {"program_median_step_ms": cli_program.get("median_step_ms"),
                      "summary": [{k: v for k, v in t.items() if k != "iteration_times"} for t in cli.get("traces", [])]},
        "analyze_block": headline(load(f"{d}/{name}.block.analyze.json")),
        "analyze_emo_trace": headline(load(f"{d}/{name}.cli.analyze.json")),
    }
json.dump(result, open(out, "w"), indent=1)
print(json.dumps(result, indent=1)[:6000])
PY
rm -rf "$traces"
