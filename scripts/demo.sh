#!/usr/bin/env bash
# Installs the build dependencies, builds emo (release), and runs the main job on the sample
# trace shipped in examples/ (a GPT training step recorded on an H200 with the PyTorch profiler).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target emo
mkdir -p out
build/release/tools/emo/emo analyze examples/gpt_train_h200.json.gz \
  --json out/gpt_train_analysis.json --perfetto out/gpt_train_perfetto.json
echo "JSON: out/gpt_train_analysis.json; Perfetto trace: out/gpt_train_perfetto.json (open in ui.perfetto.dev)"
