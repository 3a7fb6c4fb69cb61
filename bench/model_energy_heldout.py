#!/usr/bin/env python3
"""Device files' energy per iteration at the default clock against a held-out set's NVML
measurement (bench/h200/record_workloads.py output, any GPU), on the timeline fitted to the
measured step (`emo optimize --step-time`), as bench/model_energy_h200.sh does for the H200 sets.

Each trace <workload>_<sync|async>_<config>.json.gz of DIR is scored against its own process's
energy per iteration and average power (measured step = energy / power): from DIR/truth.json's
`traces` where it exists, else from DIR/measured.json's workloads[w][sync|async] (a run of one
profiler config has one process per loop, so its measured.json holds each trace's own process).
  python3 bench/model_energy_heldout.py EMO DIR DEVICE [DEVICE ...]
Prints one error column per device file (name or path) and, per file, how many loops are within 10 %."""
import glob, json, os, re, subprocess, sys

emo, folder, devices = sys.argv[1], sys.argv[2], sys.argv[3:]
if not devices:
    sys.exit(__doc__)
truth = json.load(open(f"{folder}/truth.json")) if os.path.exists(f"{folder}/truth.json") else {}
measured = json.load(open(f"{folder}/measured.json"))


def measurement(workload, mode, config):
    """(energy J per iteration, average W) of the trace's own process."""
    t = truth.get(workload, {}).get("traces", {}).get(f"{mode}_{config}")
    if t:
        return t["energy_per_iter_j"], t["avg_power_w"]
    m = measured["workloads"][workload][mode]
    if m.get("processes", 1) != 1:
        sys.exit(f"{folder}: {workload} {mode} pools {m['processes']} processes and truth.json is missing")
    return m["energy_per_iter_j"], m["avg_power_w"]


def predicted(trace, step_ms, device):
    out = subprocess.run([emo, "optimize", trace, "--device", device, "--step-time", f"{step_ms:.6f}", "--json", "-"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"emo optimize {trace} --device {device} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)["baseline"]["energy_j"]


errors = {d: [] for d in devices}
print(f"{folder} ({measured.get('device', '?')})\n")
print("| trace | step ms | measured J | " + " | ".join(f"{d}: J, error" for d in devices) + " |")
print("|---|---:|---:|" + "---:|" * len(devices))
for path in sorted(glob.glob(f"{folder}/*.json.gz")):
    name = os.path.basename(path)[: -len(".json.gz")]
    g = re.match(r"(.+)_(sync|async)_(\w+)$", name)
    if not g:
        continue
    joules, watts = measurement(*g.groups())
    step_ms = 1e3 * joules / watts
    cells = []
    for d in devices:
        e = 100 * (predicted(path, step_ms, d) / joules - 1)
        errors[d].append(e)
        cells.append(f"{joules * (1 + e / 100):.3f}, {e:+.1f} %")
    print(f"| {name} | {step_ms:.2f} | {joules:.3f} | " + " | ".join(cells) + " |")
for d, es in errors.items():
    print(f"{d}: {sum(abs(e) <= 10 for e in es)} of {len(es)} within 10 %, max |error| {max(map(abs, es)):.1f} %")
