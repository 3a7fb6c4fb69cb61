#!/usr/bin/env bash
# Installs the build dependencies, builds with warnings as errors, runs every test that needs
# no GPU (ctest -LE gpu|bench), then runs them all again under ASan+UBSan (Debug build), then the
# tests of the threaded parts (the tracer's control, writer and NVML threads on the stand-in CUPTI;
# the actuators; the CLI's parallel rank reading and progress painter) under ThreadSanitizer
# (presets tsan: only the targets those tests need are built).
# ../shared beside the repository is read by data tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset ci >/dev/null
cmake --build --preset ci -j "$(nproc)"
ctest --preset ci
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$(nproc)"
ctest --preset asan -j "$(nproc)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$(nproc)"
ctest --preset tsan -j "$(nproc)"
