#!/usr/bin/env bash
# Where did a quiet-phase run abort? (bench/gpu/detach_stress.sh: before 5268a20 every run of the
# training loop with EMO_TRACE_QUIET_MS=250 ended with glibc's "corrupted double-linked list" on an
# H100; BENCHMARKS.md, "Where the quiet phases abort: CUPTI itself".)
# Runs the same `emo trace` a few ways and keeps each run's stderr:
#   faulthandler  the training loop with PYTHONFAULTHANDLER=1 (the Python stack of every thread
#                 at the abort)
#   gdb           the training loop under gdb (when the machine has one): the C stack of every
#                 thread at the abort
#   streams       the CUDA program on three streams (no PyTorch), the same quiet phases
#   anchor0       the training loop with EMO_TRACE_ANCHOR=0 (launch callbacks never go off)
#   backtrace     the training loop with bench/gpu/crash_backtrace.c preloaded: the C stack of the
#                 thread that crashed (frames in libemo_inject.so as offsets, for addr2line)
#   cycle         no EMO: bench/gpu/cupti_cycle_inject.cc (CUPTI's own detach and attach every
#                 PHASE_MS, as in its cupti_finalize sample) on the training loop and the CUDA
#                 program, without and with activity records first (cycle_*_act; on for a
#                 second (CYCLE_FOR_MS) from CYCLE_AT_MS, default 0, after CUDA starts;
#                 CYCLE_ACTS="0 1"; CYCLE_KINDS=emo: the kinds emo trace enables; CYCLE_PROGS="train streams";
#                 CYCLE_TOGGLE=1: launch callbacks off and on again in each attached stretch)
# and what the machine's CUPTI ships about detaching (its cupti_finalize sample, if present).
#
#   EMO=path/to/emo OUT=/some/folder [CASES="faulthandler gdb streams anchor0"] bash bench/gpu/detach_diag.sh
# Never changes clocks or power limits. Writes $OUT/diag/<case>.err and diag.log.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench_env.sh
source "$here/bench_env.sh"
PHASE_MS="${PHASE_MS:-250}"
CASES="${CASES:-faulthandler gdb streams anchor0 cycle}"
RUN_TIMEOUT="${RUN_TIMEOUT:-120}"
bench_output diag runs.jsonl
train=("$PY" "$here/train_loop.py" --steps 1500 --warmup 30)

run_case() {  # case, env assignments..., -- command...
  local name=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local s rc
  s=$(date +%s%N)
  timeout "$RUN_TIMEOUT" env "${envs[@]}" EMO_TRACE_QUIET_MS="$PHASE_MS" "$EMO" trace -o "$work/$name.emotrace" \
    --warmup 50 --iterations 20 --json "$work/$name.json" -- "$@" >"$work/$name.out" 2>"$dest/$name.err"
  rc=$?
  cp "$work/$name.json" "$dest/" 2>/dev/null
  say "$name: rc $rc, $(( ($(date +%s%N) - s) / 1000000 )) ms"
  echo "{\"case\": \"$name\", \"rc\": $rc}" >>"$rows"
}

for c in $CASES; do
  case $c in
    faulthandler) run_case faulthandler PYTHONFAULTHANDLER=1 -- "${train[@]}" ;;
    gdb)
      if command -v gdb >/dev/null; then
        run_case gdb X=1 -- gdb -q -batch -ex "set pagination off" -ex "handle SIGPIPE nostop noprint" \
          -ex run -ex "info threads" -ex "thread apply all bt 40" --args "${train[@]}"
      else
        say "gdb: not on this machine"
      fi
      ;;
    streams)
      bash "$here/build_streams_graph.sh" "$work/streams_graph" >"$work/build.log" 2>&1 || { cat "$work/build.log"; continue; }
      run_case streams X=1 -- "$work/streams_graph" --iters 8000 --warmup 50 --no-step-list
      ;;
    anchor0) run_case anchor0 EMO_TRACE_ANCHOR=0 -- "${train[@]}" ;;
    backtrace)
      gcc -O1 -shared -fPIC "$here/crash_backtrace.c" -o "$work/libcrash_backtrace.so" || continue
      run_case backtrace LD_PRELOAD="$work/libcrash_backtrace.so" -- "${train[@]}"
      ;;
    cycle)
      cuda="${CUDA_HOME:-/usr/local/cuda}"
      g++ -O2 -std=c++17 -shared -fPIC -I"$cuda/include" "$here/cupti_cycle_inject.cc" -L"$cuda/lib64" -lcupti \
        -lpthread -o "$work/libcycle.so" || continue
      [[ -x "$work/streams_graph" ]] || bash "$here/build_streams_graph.sh" "$work/streams_graph" >"$work/build.log" 2>&1
      for act in ${CYCLE_ACTS:-0 1}; do
        sfx=""; [[ $act == 1 ]] && sfx=_act
        for prog in ${CYCLE_PROGS:-train streams}; do
          if [[ $prog == train ]]; then cmd=("${train[@]}"); else cmd=("$work/streams_graph" --iters 8000 --warmup 50 --no-step-list); fi
          s=$(date +%s%N)
          timeout "$RUN_TIMEOUT" env LD_LIBRARY_PATH="$cuda/lib64" CUDA_INJECTION64_PATH="$work/libcycle.so" \
            CYCLE_MS="$PHASE_MS" CYCLE_ACTIVITY=$act CYCLE_ACTIVITY_AT_MS="${CYCLE_AT_MS:-0}" \
            CYCLE_ACTIVITY_MS="${CYCLE_FOR_MS:-1000}" CYCLE_KINDS="${CYCLE_KINDS:-kernel}" \
            CYCLE_TOGGLE="${CYCLE_TOGGLE:-0}" "${cmd[@]}" >"$work/cycle.out" 2>"$dest/cycle_$prog$sfx.err"
          rc=$?
          say "cycle_$prog$sfx: rc $rc, $(( ($(date +%s%N) - s) / 1000000 )) ms, $(grep -h 'cupti_cycle:' "$dest/cycle_$prog$sfx.err" | tail -1)"
          echo "{\"case\": \"cycle_$prog$sfx\", \"rc\": $rc}" >>"$rows"
        done
      done
      ;;
  esac
done
cupti="$(ls -d /usr/local/cuda*/extras/CUPTI 2>/dev/null | head -1)"
if [[ -n "$cupti" ]]; then
  find "$cupti" -iname '*finalize*' >"$dest/cupti_files.txt" 2>&1
  f="$(grep -m1 -E '\.(cpp|cu|c)$' "$dest/cupti_files.txt")"
  [[ -n "$f" ]] && cp "$f" "$dest/cupti_finalize_sample.txt"
fi
