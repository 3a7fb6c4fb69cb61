# Sourced by the bench scripts: `bench_setup EMO SHARED DATA_SUBDIR` sets $emo (default: the
# release build), $shared (default: ../shared beside the repository), $data ($shared/DATA_SUBDIR)
# and a $tmp folder removed on exit; it stops with a clear message when either is missing.
bench_setup() {
  local here
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  emo="${1:-$here/../build/release/tools/emo/emo}"
  shared="${2:-$here/../../shared}"
  data="$shared/$3"
  [[ -x "$emo" ]] || { echo "no emo binary at $emo (cmake --preset release && cmake --build --preset release --target emo)" >&2; exit 1; }
  [[ -d "$data" ]] || { echo "no data at $data (../shared beside the repository)" >&2; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
}
