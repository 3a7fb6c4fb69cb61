#!/usr/bin/env bash
# Installs the Debian 12 packages EMO builds and tests with (needs root; apt-get only).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git python3
  libsimdjson-dev nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev libdeflate-dev libsqlite3-dev
  coinor-libcbc-dev libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev pybind11-dev
  libopenmpi-dev openmpi-bin
  python3-dev python3-pytest python3-venv python3-pip python3-setuptools python3-wheel
  chromium
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
