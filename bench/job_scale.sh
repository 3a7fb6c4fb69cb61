#!/usr/bin/env bash
# Time and memory of `emo analyze` on a synthetic job as the ranks grow (bench/synthetic_job.py:
# N copies of one DDP rank's trace, every collective matched across all N): one process (ranks
# read and analysed on up to 8 threads) and, where Open MPI is installed, `mpirun -np P emo
# analyze --mpi` (each process's peak memory). Wall time and peak RSS from GNU time.
#
#   bash bench/job_scale.sh [EMO] [RANKS="16 64 256"] [PROCS=4]
#
# Reads the template from ../shared (traces/h200/ddp_gpt_rank0.json.gz); writes the jobs under a
# temporary folder (about 0.9 MiB per rank) and removes them at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
emo="${1:-$root/build/ci/tools/emo/emo}"
ranks="${RANKS:-16 64 256}"
procs="${PROCS:-4}"
template="$root/../shared/traces/h200/ddp_gpt_rank0.json.gz"
[[ -f "$template" ]] || { echo "job_scale.sh: $template is missing (../shared beside the repository)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "job_scale.sh: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }
work="$(mktemp -d /tmp/emo_job_scale.XXXXXX)"
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
echo "| ranks | mode | wall s (mpirun start included) | wall per rank ms | peak RSS MiB (largest process) | MiB per rank it holds | joint identity error % | passes |"
echo "|---|---|---|---|---|---|---|---|"
for n in $ranks; do
  python3 "$root/bench/synthetic_job.py" "$template" "$n" "$work/job$n" >&2
  row() {  # MODE WALL_S RSS_KB JSON PROCESSES
    python3 - "$n" "$1" "$2" "$3" "$4" "$5" <<'PY'
import json, sys
n, mode, wall, rss, path, p = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
j = json.load(open(path))["job"]["joint_replay"]
mib = rss / 1024
held = -(-n // p)  # the ranks the largest process holds
print(f"| {n} | {mode} | {wall:.2f} | {1e3 * wall / n:.1f} | {mib:.0f} | {mib / held:.2f} | "
      f"{j['job']['joint_error_pct']:.2f} | {j['passes']} |")
PY
  }
  /usr/bin/time -o "$work/t1" -f "%e %M" "$emo" analyze "$work/job$n" --json "$work/one$n.json" > /dev/null 2>&1
  read -r wall rss < "$work/t1"
  row "1 process" "$wall" "$rss" "$work/one$n.json" 1
  if command -v mpirun > /dev/null; then
    start=$(python3 -c "import time; print(time.time())")
    # Each process timed on its own (its peak memory): GNU time inside mpirun.
    mpirun --oversubscribe -np "$procs" sh -c '/usr/bin/time -o "$0.$OMPI_COMM_WORLD_RANK" -f "%M" "$@"' "$work/tm" \
      "$emo" analyze --mpi "$work/job$n" --json "$work/mpi$n.json" > /dev/null 2>&1
    wall=$(python3 -c "import sys, time; print(time.time() - float(sys.argv[1]))" "$start")
    rss=$(cat "$work"/tm* | sort -n | tail -1)
    rm -f "$work"/tm*
    cmp -s "$work/one$n.json" "$work/mpi$n.json" || echo "job_scale.sh: the --mpi result of $n ranks differs from one process's" >&2
    row "$procs MPI processes" "$wall" "$rss" "$work/mpi$n.json" "$procs"
  fi
  rm -rf "$work/job$n"
done
