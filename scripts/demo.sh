#!/usr/bin/env bash
# Installs the build dependencies, builds emo (release), and runs the main job (analyze, then
# optimize with the h200 device model) on the sample
# trace shipped in examples/ (a GPT training step recorded on an H200 with the PyTorch profiler).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target emo
mkdir -p out
build/release/tools/emo/emo analyze examples/gpt_train_h200.json.gz \
  --json out/gpt_train_analysis.json --perfetto out/gpt_train_perfetto.json
build/release/tools/emo/emo optimize examples/gpt_train_h200.json.gz --device h200 --max-slowdown 0.02 \
  --policy out/gpt_train_policy.json --json out/gpt_train_plan.json
echo "JSON: out/gpt_train_analysis.json, out/gpt_train_plan.json; policy: out/gpt_train_policy.json;"
echo "Perfetto trace: out/gpt_train_perfetto.json (open in ui.perfetto.dev)"
