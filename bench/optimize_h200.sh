#!/usr/bin/env bash
# `emo optimize` on our H200 traces (issue Order 4): the table in BENCHMARKS.md, one row per
# trace. Six workload traces at 10 ms and 2 ms minimum pack length, the twelve
# profiler-overhead runs at the default. Energies are predictions of devices/h200.json.
# Usage: bench/optimize_h200.sh [path/to/emo] [path/to/shared]
set -euo pipefail
source "$(dirname "$0")/common.sh"
bench_setup "${1:-}" "${2:-}" traces/h200
python3 - "$emo" "$data" <<'PY'
import glob, json, os, subprocess, sys
emo, d = sys.argv[1:3]
WORK = ["gpt_train", "multistream", "ddp_gpt_rank0", "ddp_gpt_rank1", "pp_gpt_rank0", "pp_gpt_rank1"]
print("| trace | corrected ms | EMO % | slow % | pack graph % | static % @MHz | pass % (phases) | blind % / slow % "
      "| time windows % (packs) | dependency % (packs) | packs / sw | from | gap to bound % | vs CBC % | tight. | ms |")
print("|---|---:|---:|---:|---:|---|---|---|---|---|---|---|---:|---:|---:|---:|")
def row(path, extra):
    j = json.loads(subprocess.run([emo, "optimize", path, "--device", "h200", "--json", "-", *extra],
                                  capture_output=True, text=True, check=True).stdout)
    p, s, pg, b = j["plan"], j["solver"], j["pack_graph"], j["baselines"]
    pg_saving = 100 * (1 - pg["plan"]["energy_j"] / pg["baseline"]["energy_j"])
    blind = b["per_kernel_blind"]
    pk = lambda name: f"{j['packings'][name]['saving_pct']:.2f} ({j['packings'][name]['packs']})"
    print(f"| {os.path.basename(path).removesuffix('.json.gz')} | {j['baseline']['time_us']/1e3:.2f} | {p['saving_pct']:.2f} "
          f"| {p['slowdown_pct']:.2f} | {pg_saving:.2f} | {j['static_best']['saving_pct']:.2f} @{j['static_best']['clock_mhz']:.0f} "
          f"| {b['pass_level']['saving_pct']:.2f} ({b['pass_level']['phases']}) | {blind['saving_pct']:.2f} / {blind['slowdown_pct']:.2f} "
          f"| {pk('time-window')} | {pk('dependency')} "
          f"| {p['packs']} / {p['switches']} | {p['from']} | {s['gap_pct']:.3f} | {s.get('exact_gap_pct', float('nan')):+.3f} "
          f"| {pg['deadline_tightenings']} | {s['plan_ms']:.0f} |")
for m in ["10", "2"]:
    print(f"| *min pack {m} ms{' (default)' if m == '10' else ''}* | | | | | | | | | | | | | | | |")
    for w in WORK:
        row(f"{d}/{w}.json.gz", ["--min-pack-ms", m])
    if m == "10":
        for f in sorted(glob.glob(f"{d}/overhead/*.json.gz")):
            row(f, [])
PY
