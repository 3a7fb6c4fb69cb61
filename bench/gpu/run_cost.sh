#!/usr/bin/env bash
# Host cost per kernel launch of `emo run --actuator dry-run` (launch callbacks on, the clock
# trigger following every launch) against the plain program and `emo monitor` (anchored, launch
# callbacks off once the loop is found), on bench/gpu/launch_cost.py (200 tiny adds per
# synchronized block: launch-bound). Interleaved rounds, the order rotated each round; the
# policy comes from one `emo trace` of the same program and `emo optimize` with the GPU's device
# model (loops.sh device_model).
# Never changes a clock (dry-run).
#
#   EMO=build/device/bin/emo OUT=o [ROUNDS=5] bash bench/gpu/run_cost.sh
# Writes $OUT/run_cost/{summary.json,runs.txt}: per mode the median over rounds of the program's
# us_per_launch, and emo run's own report (policy_run) of each run.
set -uo pipefail
: "${EMO:?set EMO}" "${OUT:?set OUT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PY:-/opt/torch/.venv/bin/python}"
ROUNDS="${ROUNDS:-5}"
dest="$OUT/run_cost"
work="$(mktemp -d /tmp/emo_run_cost.XXXXXX)"
mkdir -p "$dest"
prog=("$PY" "$here/launch_cost.py" --launches 200 --blocks 300)
"$EMO" trace -o "$work/lc.emotrace" --warmup 30 --iterations 5 -- "${prog[@]}" >"$work/trace.out" 2>&1
# shellcheck source=loops.sh
source "$here/loops.sh"
"$EMO" optimize "$work/lc.emotrace" --device "$(device_model)" --policy "$work/policy.json" >"$work/optimize.out" 2>&1 ||
  { echo "run_cost: no policy: $(tail -n 3 "$work/optimize.out")" >&2; exit 1; }
modes=(plain monitor run)
for ((r = 1; r <= ROUNDS; r++)); do
  for ((k = 0; k < 3; k++)); do
    m=${modes[$(((k + r - 1) % 3))]}
    case $m in
      plain) cmd=("${prog[@]}") ;;
      monitor) cmd=("$EMO" monitor -- "${prog[@]}") ;;
      run) cmd=("$EMO" run --policy "$work/policy.json" --switch-log "$work/sw_$r.jsonl" --json "$work/run_$r.json" -- "${prog[@]}") ;;
    esac
    line=$("${cmd[@]}" 2>"$work/err_${m}_$r.txt" | grep '^{"us_per_launch"' | tail -1)
    echo "$r $m $line" >>"$dest/runs.txt"
  done
done
python3 - "$dest" "$work" "$ROUNDS" <<'PY'
import json, statistics, sys, os
dest, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
per = {}
for line in open(f"{dest}/runs.txt"):
    r, m, rest = line.split(" ", 2)
    try:
        per.setdefault(m, {})[int(r)] = json.loads(rest)["us_per_launch"]
    except Exception:
        pass
out = {"program": "launch_cost.py --launches 200 --blocks 300", "rounds": rounds,
       "us_per_launch": {m: {"median": statistics.median(v.values()), "runs": v} for m, v in per.items()}}
pl = per.get("plain", {})
for m in ("monitor", "run"):
    d = [per[m][r] - pl[r] for r in per.get(m, {}) if r in pl]
    out[f"{m}_minus_plain_us_paired_median"] = statistics.median(d) if d else None
d = [per["run"][r] - per["monitor"][r] for r in per.get("run", {}) if r in per.get("monitor", {})]
out["run_minus_monitor_us_paired_median"] = statistics.median(d) if d else None
runs = []
for r in range(1, rounds + 1):
    p = f"{work}/run_{r}.json"
    if os.path.exists(p):
        j = json.load(open(p))
        runs.append([t.get("policy_run") for t in j.get("traces", [])])
out["policy_run"] = runs
out["policy"] = json.load(open(f"{work}/policy.json"))["gpus"][0]["packs"] if os.path.exists(f"{work}/policy.json") else None
json.dump(out, open(f"{dest}/summary.json", "w"), indent=1)
print(json.dumps({k: v for k, v in out.items() if k not in ("policy_run",)}, indent=1))
PY
