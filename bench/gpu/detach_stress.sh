#!/usr/bin/env bash
# Does CUPTI's detach and attach mid-run abort the program? `emo trace` with quiet phases
# (EMO_TRACE_QUIET_MS=PHASE_MS; docs/runtime.md "Quiet phases") on the training loop detaches
# CUPTI (cuptiFinalize) PHASE_MS after its window is traced and attaches it again PHASE_MS later:
# once a run since 5268a20; libraries before it cycled to the end of the run, so short phases made
# many detaches a run. Each tracer library named in LIBS runs ROUNDS times,
# interleaved, and each run's exit status and CUPTI detaches (`emo trace --json`: cupti_detaches)
# are kept: an abort rate per library, e.g. a library built before a fix against one after it.
#
#   EMO=path/to/emo OUT=/some/folder LIBS="old=/path/libemo_inject.so new=" bash bench/gpu/detach_stress.sh
#
# LIBS: "tag=path" pairs; an empty path is the library beside emo. Settings (environment):
# ROUNDS=4, PHASE_MS=250, TRAIN_ARGS="--steps 1500 --warmup 30", EMO_WARMUP=50 EMO_ITERS=20,
# RUN_TIMEOUT=120. Never changes clocks or power limits.
# Writes $OUT/detach/runs.jsonl (one line per run), detach.log, and a line per library at the end.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench_env.sh
source "$here/bench_env.sh"
ROUNDS="${ROUNDS:-4}"
PHASE_MS="${PHASE_MS:-250}"
TRAIN_ARGS="${TRAIN_ARGS:---steps 1500 --warmup 30}"
EMO_WARMUP="${EMO_WARMUP:-50}"
EMO_ITERS="${EMO_ITERS:-20}"
RUN_TIMEOUT="${RUN_TIMEOUT:-120}"
read -r -a libs <<<"${LIBS:-new=}"
bench_output detach runs.jsonl
read -r -a targs <<<"$TRAIN_ARGS"

for r in $(seq 1 "$ROUNDS"); do
  for entry in "${libs[@]}"; do
    lib_tag="${entry%%=*}"
    lib="${entry#*=}"
    tag="r${r}_${lib_tag}"
    s=$(date +%s%N)
    timeout "$RUN_TIMEOUT" env ${lib:+EMO_INJECT_LIB="$lib"} EMO_TRACE_QUIET_MS="$PHASE_MS" \
      "$EMO" trace -o "$work/$tag.emotrace" --warmup "$EMO_WARMUP" --iterations "$EMO_ITERS" \
      --json "$work/$tag.json" -- "$PY" "$here/train_loop.py" "${targs[@]}" >"$work/$tag.out" 2>"$work/$tag.err"
    rc=$?
    secs=$(( ($(date +%s%N) - s) / 1000000 ))
    # The row, then the detaches for the progress line.
    { read -r row; read -r detaches; } < <("$SPY" - "$r" "$lib_tag" "$rc" "$secs" "$work/$tag" <<'PY'
import json, sys
rnd, lib, rc, ms, base = sys.argv[1:]
trace = {}
try:
    trace = (json.load(open(base + ".json")).get("traces") or [{}])[0]
except (OSError, ValueError):
    pass  # an aborted run writes no summary
err = open(base + ".err", errors="replace").read()
print(json.dumps({"round": int(rnd), "lib": lib, "rc": int(rc), "wall_ms": int(ms),
                  "detaches": trace.get("cupti_detaches"), "end_reason": trace.get("end_reason"),
                  "untraced_step_ms": (trace.get("step_time_ms") or {}).get("untraced"),
                  "aborted": int(rc) != 0, "stderr_tail": err[-600:] if int(rc) != 0 else ""}))
print(trace.get("cupti_detaches"))
PY
)
    echo "$row" >>"$rows"
    say "round $r, $lib_tag: rc $rc, ${secs} ms, detaches $detaches"
  done
done
"$SPY" - "$rows" <<'PY' | tee -a "$log"
import json, sys
by = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    b = by.setdefault(d["lib"], {"runs": 0, "aborted": 0, "detaches": 0})
    b["runs"] += 1
    b["aborted"] += d["aborted"]
    b["detaches"] += int(d["detaches"] or 0)
for lib, b in by.items():
    print(f"{lib}: {b['runs']} runs, {b['aborted']} ended with a non-zero status, {b['detaches']} detaches in the traces")
PY
