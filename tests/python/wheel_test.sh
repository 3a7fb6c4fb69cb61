#!/usr/bin/env bash
# The wheel: `pip wheel .` (offline: Debian's setuptools and wheel, no build isolation) from the
# repository, installed into a fresh venv with no index, imported there and run on the sample
# trace against the emo binary of the same build.
# Usage: wheel_test.sh PYTHON SOURCE_DIR BUILD_DIR EMO_BIN
set -euo pipefail
python=$1 source=$2 build=$3 emo=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$source"
EMO_BUILD_DIR="$build" "$python" -m pip wheel --no-build-isolation --no-deps --no-index -q -w "$work/dist" . \
  >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; echo "FAIL: pip wheel"; exit 1; }
wheels=("$work"/dist/emo-*.whl)
[[ -f "${wheels[0]}" ]] || { echo "FAIL: no wheel in $work/dist"; exit 1; }
echo "built ${wheels[0]##*/}"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --no-index --no-deps -q "${wheels[0]}"
"$emo" analyze "$source/examples/gpt_train_h200.json.gz" --json "$work/cli.json" >/dev/null 2>&1
cd "$work"  # not the source tree: the installed package must be the one imported
"$work/venv/bin/python" - "$work/cli.json" "$source/examples/gpt_train_h200.json.gz" <<'PY'
import json, sys
import emo
assert emo.__file__.startswith(sys.prefix), f"imported {emo.__file__}, not the venv's"
got = emo.analyze(sys.argv[2])
want = json.load(open(sys.argv[1]))
assert got == want, "the installed package's analyze differs from the emo binary's JSON"
print("installed emo", emo.__version__, "from", emo.__file__, "- analyze matches the binary:",
      got["iteration_time_us"]["corrected"], "us")
PY
echo "PASS"
