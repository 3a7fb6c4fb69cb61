#!/usr/bin/env bash
# EMO's Python package on the GPU machine (docs/python.md): the native module compiled there for
# its Python (python/build_module.sh against the device bundle), then the PyTorch loops measured
# three ways in one run: emo.Monitor and the program's own NVML read (energy_check.py) over the
# same timed region, and `emo monitor` around the whole program; and emo.analyze against the
# emo binary on the example trace. Reads only: no clock or limit is set.
#
#   OUT=DIR [EMO=build/device/bin/emo] [PY=/opt/torch/.venv/bin/python] [PARTS="monitor trace ab stretch"] \
#     bash bench/gpu/python_api.sh
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
parts=" ${PARTS:-monitor trace ab} "   # PARTS="trace" runs the emo.trace comparison only
[[ "$parts" == *" monitor "* ]] &&
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

# emo.trace against `emo trace` on the same loop, ROUNDS rounds (default 3), the two ways
# interleaved: the program traces its own timed region (`--emo-trace`: a block begun after its
# 50 or 40 warm-up steps, window at the block's iterations 10-14), and the whole program runs
# under `emo trace` (window at the program's iterations 60-64 or 50-54, about the same steps).
# Both traces go through `emo analyze`. trace_compare.json: per loop, way and round, the
# program's own median step, the trace summary's untraced step time, energy and mean power per
# GPU, record counts, and the analysis' graph size, busy share and iteration times.
# What each way costs the program: the loops' own median step time plain, with emo.trace around
# the timed region, and under `emo trace`, in AB_ROUNDS rounds (default 4) whose order rotates
# (trace_ab.json: loop -> way -> the rounds' medians, ms). AB_LOOPS="train_loop.py:50" picks loops,
# AB_STEPS the steps per run (default 300; a block detaches CUPTI 2 s after its window, so runs
# much longer than 2 s show the steps after the detach in the median).
if [[ "$parts" == *" ab "* ]]; then
  ab=$(mktemp -d)
  ways=(plain block cli)
  for round in $(seq 0 $((${AB_ROUNDS:-4} - 1))); do
    for loop in ${AB_LOOPS:-train_loop.py:50 decode_loop.py:40}; do
      loop=${loop/:/ }
      script=${loop%% *}
      args=(bench/gpu/$script --steps "${AB_STEPS:-300}" --warmup "${loop##* }" --no-step-list)
      for k in 0 1 2; do
        way=${ways[$(((round + k) % 3))]}
        case $way in
          plain) "$PY" "${args[@]}" ;;
          block) "$PY" "${args[@]}" --emo-trace "$ab/b.emotrace" --emo-trace-warmup 10 ;;
          cli) "$EMO" -q trace -o "$ab/c_%r.emotrace" --warmup $((${loop##* } + 10)) -- "$PY" "${args[@]}" ;;
        esac 2>>"$OUT/log.txt" | grep '"workload"' | sed "s/^/${script%.py} $way /" >>"$ab/rows.txt"
        rm -f "$ab"/*.emotrace
      done
    done
  done
  python3 - "$ab/rows.txt" "$OUT/trace_ab.json" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    loop, way, j = line.split(" ", 2)
    rows.setdefault(loop, {}).setdefault(way, []).append(json.loads(j)["median_step_ms"])
json.dump(rows, open(sys.argv[2], "w"), indent=1)
print("| loop | way | median step ms per round | median of rounds | vs plain |")
print("|---|---|---|---|---|")
for loop, ways in rows.items():
    base = statistics.median(ways.get("plain", [float("nan")]))
    for way, v in ways.items():
        m = statistics.median(v)
        print(f"| {loop} | {way} | {', '.join(f'{x:.2f}' for x in v)} | {m:.2f} | {100 * (m / base - 1):+.1f} % |")
PY
  rm -rf "$ab"
fi
# Where in a block the cost lies: the train loop's step times by stretch of its timed region
# (1000 steps: the block's loop finding and window in the first ~30, the 2 s until CUPTI detaches
# after them, then the rest), plain and with the block (--emo-trace-warmup 10), STRETCH_ROUNDS
# rounds (default 2) alternating; trace_stretch.json: way -> round -> stretch -> median ms.
if [[ "$parts" == *" stretch "* ]]; then
  st=$(mktemp -d)
  for round in $(seq 1 "${STRETCH_ROUNDS:-2}"); do
    for way in plain block; do
      extra=()
      [[ $way == block ]] && extra=(--emo-trace "$st/b.emotrace" --emo-trace-warmup 10)
      "$PY" bench/gpu/train_loop.py --steps 1050 --warmup 50 "${extra[@]}" 2>>"$OUT/log.txt" |
        grep '"workload"' | sed "s/^/$way $round /" >>"$st/rows.txt"
      rm -f "$st"/*.emotrace
    done
  done
  python3 - "$st/rows.txt" "$OUT/trace_stretch.json" <<'PY'
import json, statistics, sys
stretches = [(0, 30), (30, 100), (100, 200), (200, 400), (400, 1000)]
result = {}
for line in open(sys.argv[1]):
    way, rnd, j = line.split(" ", 2)
    d = json.loads(j)
    timed = d["step_ms"][d["warmup_steps"]:]
    result.setdefault(way, {})[rnd] = {f"{a}-{b}": statistics.median(timed[a:b]) for a, b in stretches}
    if "emo_trace" in d:
        result[way][rnd]["summary"] = {k: d["emo_trace"].get(k) for k in ("step_time_ms", "iterations", "end_reason", "cupti_detaches", "records")}
json.dump(result, open(sys.argv[2], "w"), indent=1)
print("| way | round | " + " | ".join(f"steps {a}-{b}" for a, b in stretches) + " |")
print("|---|---|" + "---|" * len(stretches))
for way, rounds in result.items():
    for rnd, v in rounds.items():
        print(f"| {way} | {rnd} | " + " | ".join(f"{v[f'{a}-{b}']:.2f}" for a, b in stretches) + " |")
PY
  rm -rf "$st"
fi
[[ "$parts" == *" trace "* ]] || exit 0
traces=$(mktemp -d)
rounds=${ROUNDS:-3}
for round in $(seq 1 "$rounds"); do
  for loop in "train_loop.py 50" "decode_loop.py 40"; do
    script=${loop%% *}
    warm=${loop##* }
    name=${script%.py}.$round
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
done
python3 - "$traces" "$rounds" "$OUT/trace_compare.json" <<'PY'
import json, statistics, sys
d, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(p):
    try:
        return json.load(open(p))
    except Exception as e:
        return {"error": f"{p}: {e}"}
def row(program, summary, analysis):
    g = (summary.get("gpus") or [{}])[0]
    energy, window_s, n = g.get("energy_per_iteration_j"), g.get("window_s"), g.get("window_iterations")
    return {"program_median_step_ms": program.get("median_step_ms"),
            "untraced_step_ms": summary.get("step_time_ms", {}).get("untraced"),
            "traced_step_ms": summary.get("step_time_ms", {}).get("traced"),
            "iterations": summary.get("iterations"), "records": summary.get("records"),
            "session": summary.get("session"), "end_reason": summary.get("end_reason"),
            "cupti_detaches": summary.get("cupti_detaches"),
            "energy_per_iteration_j": energy,
            "mean_power_w": energy * n / window_s if energy and window_s else None,
            "analyze_iteration_time_us": analysis.get("iteration_time_us"),
            "analyze_graph_nodes": analysis.get("graph", {}).get("nodes"),
            "analyze_busy_pct": [x.get("busy_pct") for x in analysis.get("gpus", [])],
            "errors": [x["error"] for x in (program, summary, analysis) if "error" in x]}
result = {}
for loop in ("train_loop", "decode_loop"):
    result[loop] = {"block": [], "emo_trace": []}
    for r in range(1, rounds + 1):
        name = f"{d}/{loop}.{r}"
        block = load(f"{name}.block.json")
        result[loop]["block"].append(row(block, block.get("emo_trace", {}), load(f"{name}.block.analyze.json")))
        cli = load(f"{name}.cli.json")
        result[loop]["emo_trace"].append(row(load(f"{name}.cli.program.json"), (cli.get("traces") or [{}])[0],
                                             load(f"{name}.cli.analyze.json")))
json.dump(result, open(out, "w"), indent=1)
def med(rows, key):
    v = [x[key] for x in rows if x.get(key) is not None]
    return statistics.median(v) if v else None
print("| loop | way | program step ms (median of rounds) | untraced step ms | J per iteration | mean W | kernels+copies traced | graph nodes |")
print("|---|---|---|---|---|---|---|---|")
for loop, ways in result.items():
    for way, rows in ways.items():
        f = lambda x: "-" if x is None else f"{x:.2f}"
        ops = sorted({(x.get("records") or {}).get("gpu_ops") for x in rows}, key=str)
        nodes = sorted({x.get("analyze_graph_nodes") for x in rows}, key=str)
        print(f"| {loop} | {way} | {f(med(rows, 'program_median_step_ms'))} | {f(med(rows, 'untraced_step_ms'))} | "
              f"{f(med(rows, 'energy_per_iteration_j'))} | {f(med(rows, 'mean_power_w'))} | {ops} | {nodes} |")
PY
rm -rf "$traces"
