#!/usr/bin/env bash
# Regenerates the golden outputs (tests/golden/expected/*.json) from the current code: builds
# `emo` and the golden test in the ci preset, then runs the test with EMO_REGENERATE_GOLDEN=1,
# which writes every expected file instead of comparing. Review `git diff tests/golden` and
# commit it with the change of behaviour that caused it.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset ci >/dev/null
cmake --build --preset ci -j "${EMO_JOBS:-2}" --target emo golden_test
EMO_REGENERATE_GOLDEN=1 build/ci/tests/golden/golden_test --gtest_filter='Traces/GoldenOutput.*'
git status --short tests/golden/expected
