#!/usr/bin/env bash
# Builds bench/gpu/streams_graph (on the GPU machine, or here to compile-check).
# Usage: bash bench/gpu/build_streams_graph.sh [OUTPUT]   (default: bench/gpu/build/streams_graph)
# NVCC overrides the compiler (default /usr/local/cuda/bin/nvcc, else nvcc on PATH).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/build/streams_graph}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
[[ -x "$nvcc" ]] || nvcc="$(command -v nvcc)" || { echo "no nvcc (set NVCC)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
"$nvcc" -O2 -arch=sm_90a -std=c++17 -o "$out" "$here/streams_graph.cu" -ldl
echo "built $out" >&2
