#!/usr/bin/env python3
"""Summarizes bench/gpu/launch_period_check.sh: per loop, the program's own median step (its JSON
line; over its last half of steps too, which run after the traced window as emo's untraced
iterations do: before it, every launch pays the tracer's launch callback) beside the untraced
step `emo trace` measured on the iterations it found, the GPU ops (kernels and copies) per
traced iteration and how the iterations were found. Usage: launch_period_summary.py FOLDER (the unpacked
launch_period_check.tar.gz).

A program whose step drifts (a noisy host, a warming allocator) makes "the last half" a different
set of steps from emo's, so the table also compares the same steps: emo's iterations after its
traced window (`iteration_times` in emo trace's JSON) beside the program's own step times
(`step_ms`) for those steps. The two lists are aligned at their ends (the finder locks a few steps
after the program starts; both end with the program's last step); the offset that fits the
per-step times best within 3 of it is printed too, and a "!" marks a disagreement."""
import glob
import json
import os
import re
import statistics
import sys


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    print("| loop | program's median step, all / last half (ms) | emo trace untraced step (ms) | against the last half "
          "| program's median over emo's untraced steps (ms) | against the same steps | steps aligned (end / best fit) "
          "| GPU ops per traced iteration | found by |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in sorted(glob.glob(os.path.join(folder, "*_run.json"))):
        name = os.path.basename(run)[: -len("_run.json")]
        text = open(os.path.join(folder, f"{name}.txt")).read().splitlines()
        line = next((l for l in text if l.startswith('{"workload"')), None)
        if line is None:
            print(f"| {name} | (no JSON line) | | | | | | | |")
            continue
        program = json.loads(line)
        prog = program["median_step_ms"]
        steps = program.get("step_ms", [])
        late = statistics.median(steps[len(steps) // 2:]) if steps else prog
        trace = json.load(open(run))["traces"][0]
        its = trace["iterations"]
        same, aligned = same_steps(steps, trace.get("iteration_times", []))
        found = its.get("source", "?") + (f", timed by {its['anchor']}" if its.get("anchor") else "")
        recorded = next((l for l in text if l.strip().startswith("recorded")), "")
        ops = re.search(r"(\d+) GPU ops", recorded)
        analyze = json.load(open(os.path.join(folder, f"{name}_analyze.json")))
        untraced = analyze["iteration_time_us"].get("untraced", 0) / 1e3
        per = f"{int(ops.group(1)) / its['traced']:.0f}" if ops and its.get("traced") else "?"
        err = (untraced / late - 1) * 100 if late > 0 else float("nan")
        same_cell = f"{same:.3f}" if same else "?"
        same_err_cell = f"{(untraced / same - 1) * 100:+.1f} %" if same else "?"
        print(f"| {name} | {prog:.3f} / {late:.3f} | {untraced:.3f} | {err:+.1f} % | {same_cell} | {same_err_cell} "
              f"| {aligned} | {per} | {found} |")


def same_steps(steps, iterations):
    """The program's median step over the steps emo reported untraced after its window, with the
    alignment used ("end offset / best-fit offset"); (None, "?") without per-step data. On a loop
    whose steps barely differ the best fit is a coin toss, and its "!" means little."""
    if not steps or not iterations:
        return None, "?"
    ms = [it["ms"] for it in iterations]
    traced = [i for i, it in enumerate(iterations) if it.get("traced")]
    after = range(traced[-1] + 1 if traced else 0, len(ms))
    end = len(steps) - len(ms)

    def misfit(offset):
        pairs = [(ms[i], steps[i + offset]) for i in after if 0 <= i + offset < len(steps)]
        return sum(abs(a - b) for a, b in pairs) / max(len(pairs), 1)

    best = min(range(end - 3, end + 4), key=misfit)
    program = [steps[i + end] for i in after if 0 <= i + end < len(steps)]
    if not program:
        return None, "?"
    return statistics.median(program), f"{end} / {best}" + ("" if best == end else " !")


if __name__ == "__main__":
    main()
