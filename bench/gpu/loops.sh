# The loops the emo run scripts (emulate.sh, switch_timing.sh) run, and the device model every
# script that makes a policy plans with (device_model: those two, overhead.sh,
# overhead_concurrent.sh, run_cost.sh), sourced by them. The loops need $here (bench/gpu), $PY
# and $work (a scratch folder).
#   train     bench/gpu/train_loop.py as it ships (CPU-bound on the H200)
#   bigtrain  train_loop.py at batch 48, sequence 512, d_model 1024, 8 layers: GPU-bound, about
#             48 ms per step, a plan that can hold several clocks (half the steps asked for)
#   decode    bench/gpu/decode_loop.py
#   streams   bench/gpu/streams_graph (three streams, event waits, a CUDA graph; 8 iterations per
#             step asked for)

# The device model (devices/*.json) for the GPU these scripts run on: $DEVICE when set, else from
# the first GPU's name (nvidia-smi): H100 -> h100-sxm, H200 -> h200. `emo optimize` refuses a
# trace from another GPU than its model describes, so a fixed h200 made no policy on an H100.
device_model() {
  if [[ -n "${DEVICE:-}" ]]; then echo "$DEVICE"; return; fi
  local name
  name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  case "$name" in
    *H100*) echo h100-sxm ;;
    *A100*) echo a100-sxm ;;
    *A40*) echo a40 ;;
    *) echo h200 ;;
  esac
}

# Builds what LOOPS needs (streams_graph with nvcc).
prepare_loops() {  # loops
  if [[ " $1 " == *" streams "* ]]; then
    bash "$here/build_streams_graph.sh" "$work/streams_graph" >"$work/build.log" 2>&1 || { cat "$work/build.log"; return 1; }
  fi
}

loop_command() {  # loop, steps -> the command line
  case $1 in
    train) echo "$PY $here/train_loop.py --steps $2 --warmup 20" ;;
    bigtrain) echo "$PY $here/train_loop.py --steps $(($2 / 2)) --warmup 20 --batch 48 --seq 512 --d-model 1024 --heads 16 --layers 8" ;;
    decode) echo "$PY $here/decode_loop.py --steps $2 --warmup 20" ;;
    streams) echo "$work/streams_graph --iters $(($2 * 8)) --warmup 50 --no-step-list" ;;
  esac
}
