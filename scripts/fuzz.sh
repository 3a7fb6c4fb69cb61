#!/usr/bin/env bash
# Builds the libFuzzer targets (preset fuzz: clang, ASan+UBSan) and runs each for RUNS executions,
# two at a time, seeded from the test corpus (fuzz/make_seeds.py). Writes a summary table to
# build/fuzz/summary.md (appended) and exits non-zero when any target crashed, leaked, timed out or ran out
# of memory; the input that did lies in build/fuzz/artifacts/<target>/ (docs/fuzzing.md says how
# to keep it as a regression case).
#
#   scripts/fuzz.sh [target...]     targets: kineto_json kineto_json_piecewise emo_trace policy device stage_profile
#   RUNS=10000000 PARALLEL=2 MAX_LEN=4096 TIMEOUT=10 RSS_MB=2048 MAX_TIME=0 scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-10000000}
PARALLEL=${PARALLEL:-2}
MAX_LEN=${MAX_LEN:-}  # default per target: 8192 for .emotrace (chunks), 4096 for the others
TIMEOUT=${TIMEOUT:-10}
RSS_MB=${RSS_MB:-2048}
MAX_TIME=${MAX_TIME:-0}  # seconds per target, 0: no limit (a run stopped by it counts as short)
ALL=(kineto_json kineto_json_piecewise emo_trace policy device stage_profile)
TARGETS=("${@:-${ALL[@]}}")
if [[ $# -eq 0 ]]; then TARGETS=("${ALL[@]}"); fi

OUT=build/fuzz
if [[ -z "${NO_BUILD:-}" ]]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j"${PARALLEL}"
fi
# Fresh seeds for the targets run here only (another fuzz.sh may be running the others).
fresh=$(mktemp -d)
EMO_FUZZ_SEED_BYTES=8192 python3 fuzz/make_seeds.py "$fresh"
mkdir -p "$OUT/seeds"
for t in "${TARGETS[@]}"; do rm -rf "$OUT/seeds/$t"; mv "$fresh/$t" "$OUT/seeds/$t"; done
rm -rf "$fresh"

run_one() {
  local t=$1
  local corpus=$OUT/corpus/$t art=$OUT/artifacts/$t/ log=$OUT/logs/$t.log
  mkdir -p "$corpus" "$art" "$(dirname "$log")"
  local max_len=${MAX_LEN:-$([[ $t == emo_trace ]] && echo 8192 || echo 4096)}
  local dict=()
  [[ -f fuzz/$t.dict ]] && dict=(-dict="fuzz/$t.dict")
  local start end rc=0
  touch "$OUT/logs/$t.stamp"
  start=$(date +%s.%N)
  "$OUT/fuzz/fuzz_$t" -runs="$RUNS" -max_len="$max_len" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
    -malloc_limit_mb="$RSS_MB" -max_total_time="$MAX_TIME" -print_final_stats=1 -artifact_prefix="$art" "${dict[@]}" \
    "$corpus" "$OUT/seeds/$t" >"$log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  echo "$rc $start $end" >"$OUT/logs/$t.time"
}

running=0
for t in "${TARGETS[@]}"; do
  if (( running >= PARALLEL )); then wait -n || true; running=$((running - 1)); fi
  echo "fuzzing $t ($RUNS runs)"
  run_one "$t" &
  running=$((running + 1))
done
wait

status=0
summary=$OUT/summary.md
table=$(mktemp)
# The table goes to a file, not through a pipe, so that `status` is set in this shell.
{
  echo
  echo "$(date -u '+%F %T UTC'): RUNS=$RUNS MAX_TIME=$MAX_TIME PARALLEL=$PARALLEL"
  echo
  echo "| target | executions | seconds | exec/s | crashes | corpus units |"
  echo "|---|---:|---:|---:|---:|---:|"
  for t in "${TARGETS[@]}"; do
    read -r rc start end <"$OUT/logs/$t.time"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/logs/$t.log" | tail -1)
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
    rate=$(awk -v n="${execs:-0}" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
    # libFuzzer stops at the first failure and saves its input as crash-, leak-, timeout- or oom-.
    crashes=$(find "$OUT/artifacts/$t" -type f -newer "$OUT/logs/$t.stamp" \
                \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
    if [[ $rc -ne 0 && $crashes -eq 0 ]]; then crashes=1; fi
    # libFuzzer's own count of the corpus it kept (the folder also holds inputs since reduced).
    corpus=$(grep -oE 'corp: [0-9]+' "$OUT/logs/$t.log" | tail -1 | cut -d' ' -f2)
    echo "| $t | ${execs:-0} | $secs | $rate | $crashes | ${corpus:-0} |"
    if [[ $rc -ne 0 || $crashes -ne 0 || ${execs:-0} -lt $RUNS ]]; then status=1; fi
  done
} >"$table"
tee -a "$summary" <"$table"
rm -f "$table"
if [[ $status -ne 0 ]]; then
  echo "fuzz.sh: a target crashed or stopped short of $RUNS executions: see $OUT/logs/ and $OUT/artifacts/" >&2
fi
exit $status
