#!/usr/bin/env bash
# Packs emo for a machine that has none of EMO's Debian packages (the GPU machine: Ubuntu 24.04,
# CUDA 13.0): bin/emo (debug info stripped), bin/libemo_inject.so (the CUPTI tracer, found beside
# emo), and lib/ with every shared library emo needs that is not part of the C/C++ runtime.
# emo finds lib/ through its RPATH ($ORIGIN/../lib), so nothing needs LD_LIBRARY_PATH (which the
# traced programs would inherit).
#
# With the Python module built (EMO_HAVE_PYTHON): lib/libemo_py_core.so, include/pybind11 (Debian's
# headers, a build input) and python/emo/ (the package without its native module, which
# python/build_module.sh compiles there for that machine's Python).
#
# Also DEST.tar.gz, the same folder compressed (13 MB against 31): the device tool carries at
# most 64 MiB a call with the repo, so carry it and unpack it there first,
#   run(carry=["build/device.tar.gz"], command="tar xzf build/device.tar.gz -C build && ...").
#
#   bash scripts/device_bundle.sh [BUILD_DIR] [DEST]     (defaults: build/ci, build/device)
set -euo pipefail
build="${1:-build/ci}"
dest="${2:-build/device}"
cmake --build "$build" --target emo emo_inject
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
objcopy --strip-debug "$build/tools/emo/emo" "$dest/bin/emo"
inject="$(find "$build/src/runtime" -name libemo_inject.so | head -1)"
[[ -n "$inject" ]] || { echo "device_bundle: no libemo_inject.so in $build (built without CUPTI?)" >&2; exit 1; }
objcopy --strip-debug "$inject" "$dest/bin/libemo_inject.so"
# The C/C++ runtime, CUDA's and the loader's libraries come from the target machine.
ldd "$build/tools/emo/emo" | awk '/=> \//{print $3}' |
  grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
if cmake --build "$build" --target emo_py_core 2>/dev/null; then
  core="$(find "$build/python" -name libemo_py_core.so | head -1)"
  objcopy --strip-debug "$core" "$dest/lib/libemo_py_core.so"
  ldd "$core" | awk '/=> \//{print $3}' |
    grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
    while read -r lib; do [[ -f "$dest/lib/${lib##*/}" ]] || cp -L "$lib" "$dest/lib/"; done
  mkdir -p "$dest/include" "$dest/python/emo"
  cp -r /usr/include/pybind11 "$dest/include/"
  cp python/emo/*.py "$dest/python/emo/"
fi
tar czf "$dest.tar.gz" -C "$(dirname "$dest")" "$(basename "$dest")"
du -sh "$dest" | awk '{print "device_bundle: " $1 " in '"$dest"'"}'
du -sh "$dest.tar.gz" | awk '{print "device_bundle: " $1 " in '"$dest"'.tar.gz"}'
