#!/usr/bin/env bash
# Issue Order 8: does a policy ever schedule a clock switch into a pack shorter than the switch
# latency (a switch the latency cannot honour)? Plans every H200 trace (../shared/traces/h200,
# its overhead runs, data/h200_heldout*) at 0.5 ms (the h200 file's) and 0.1 ms latency, writes
# the policy and counts the switches and those into a pack window shorter than the latency.
# Usage: bench/policy_switches.sh [path/to/emo] [path/to/shared]
set -euo pipefail
source "$(dirname "$0")/common.sh"
bench_setup "${1:-}" "${2:-}" traces/h200
repo="$(cd "$(dirname "$0")/.." && pwd)"
python3 - "$emo" "$data" "$repo" "$tmp" <<'PY'
import glob, json, subprocess, sys
emo, d, repo, tmp = sys.argv[1:5]
traces = sorted(glob.glob(f"{d}/*.json.gz")) + sorted(glob.glob(f"{d}/overhead/*.json.gz")) + \
         sorted(glob.glob(f"{repo}/data/h200_heldout*/*.json.gz"))
total = short = 0
for lat in (500, 100):
    for t in traces:
        subprocess.run([emo, "optimize", t, "--device", "h200", "--switch-latency-us", str(lat), "--policy",
                        f"{tmp}/p.json", "--json", "/dev/null"], capture_output=True, check=True)
        for g in json.load(open(f"{tmp}/p.json"))["gpus"]:
            packs = g["packs"]
            for i, p in enumerate(packs):
                if packs[i - 1]["clock_mhz"] != p["clock_mhz"]:  # cyclic: the first follows the last
                    total += 1
                    if p["window_us"] < lat:
                        short += 1
                        print(f"{t}: {lat} us latency, pack {i} lasts {p['window_us']:.0f} us")
print(f"{len(traces)} traces x 2 latencies: {total} switches, {short} into a pack shorter than the latency")
PY
