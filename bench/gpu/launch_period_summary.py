#!/usr/bin/env python3
"""Summarizes bench/gpu/launch_period_check.sh: per loop, the program's own median step (its JSON
line; over its last half of steps too, which run after the traced window as emo's untraced
iterations do: before it, every launch pays the tracer's launch callback) beside the untraced
step `emo trace` measured on the iterations it found, the GPU ops (kernels and copies) per
traced iteration and how the iterations were found. Usage: launch_period_summary.py FOLDER (the unpacked
launch_period_check.tar.gz)."""
import glob
import json
import os
import re
import statistics
import sys


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    print("| loop | program's median step, all / last half (ms) | emo trace untraced step (ms) | against the last half "
          "| GPU ops per traced iteration | found by |")
    print("|---|---|---|---|---|---|")
    for run in sorted(glob.glob(os.path.join(folder, "*_run.json"))):
        name = os.path.basename(run)[: -len("_run.json")]
        text = open(os.path.join(folder, f"{name}.txt")).read().splitlines()
        line = next((l for l in text if l.startswith('{"workload"')), None)
        if line is None:
            print(f"| {name} | (no JSON line) | | | | |")
            continue
        program = json.loads(line)
        prog = program["median_step_ms"]
        steps = program.get("step_ms", [])
        late = statistics.median(steps[len(steps) // 2:]) if steps else prog
        its = json.load(open(run))["traces"][0]["iterations"]
        found = its.get("source", "?") + (f", timed by {its['anchor']}" if its.get("anchor") else "")
        recorded = next((l for l in text if l.strip().startswith("recorded")), "")
        ops = re.search(r"(\d+) GPU ops", recorded)
        analyze = json.load(open(os.path.join(folder, f"{name}_analyze.json")))
        untraced = analyze["iteration_time_us"].get("untraced", 0) / 1e3
        per = f"{int(ops.group(1)) / its['traced']:.0f}" if ops and its.get("traced") else "?"
        err = (untraced / late - 1) * 100 if late > 0 else float("nan")
        print(f"| {name} | {prog:.3f} / {late:.3f} | {untraced:.3f} | {err:+.1f} % | {per} | {found} |")


if __name__ == "__main__":
    main()
