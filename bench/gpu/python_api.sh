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
