#!/usr/bin/env bash
# Compiles the native module emo._emo for the Python given, against a device bundle's
# libemo_py_core.so (scripts/device_bundle.sh): for a machine whose Python is not the one EMO was
# built with. Needs a C++20 compiler and that Python's headers; pybind11's headers come in the
# bundle. Writes BUNDLE/python/emo/_emo<suffix>.so beside the package's __init__.py.
#
#   bash python/build_module.sh PYTHON BUNDLE        (from the repository root)
set -euo pipefail
python=$1 bundle=$(cd "$2" && pwd)
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
[[ -f "$include/Python.h" ]] || { echo "build_module: no Python.h in $include (install that Python's headers)" >&2; exit 1; }
g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -I"$include" -I"$bundle/include" -Iinclude -Itools/emo \
  python/module.cc -o "$bundle/python/emo/_emo$suffix" -L"$bundle/lib" -lemo_py_core -Wl,--disable-new-dtags,-rpath,"\$ORIGIN/../../lib"
echo "build_module: $bundle/python/emo/_emo$suffix"
