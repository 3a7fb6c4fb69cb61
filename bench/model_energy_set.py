#!/usr/bin/env python3
"""Device files' energy per iteration at the default clock against a recorded set's NVML
measurement, on the timeline fitted to the measured step (`emo optimize --step-time`), as
bench/model_energy_h200.sh does for the H200's sets. Any GPU; two kinds of set:

- a kernel sweep (bench/gpu/kernel_power.py: DIR/measured.json with `configs`, one trace per
  config): each config's step and energy per iteration;
- a held-out set (bench/h200/record_workloads.py): each trace <workload>_<sync|async>_<config>
  against its own process's energy per iteration and average power (measured step = energy /
  power), from DIR/truth.json's `traces` where it exists, else from DIR/measured.json's
  workloads[w][sync|async] (a run of one profiler config has one process per loop).

  python3 bench/model_energy_set.py EMO DIR DEVICE [DEVICE ...]
Prints one error column per device file (name or path) and, per file, how many loops are within 10 %."""
import glob, json, os, re, subprocess, sys

emo, folder, devices = sys.argv[1], sys.argv[2], sys.argv[3:]
if not devices:
    sys.exit(__doc__)
measured = json.load(open(f"{folder}/measured.json"))
truth = json.load(open(f"{folder}/truth.json")) if os.path.exists(f"{folder}/truth.json") else {}


def held_out(workload, mode, config):
    """(energy J per iteration, step s) of a held-out trace's own process."""
    t = truth.get(workload, {}).get("traces", {}).get(f"{mode}_{config}")
    if not t:
        t = measured["workloads"][workload][mode]
        if t.get("processes", 1) != 1:
            sys.exit(f"{folder}: {workload} {mode} pools {t['processes']} processes and truth.json is missing")
    return t["energy_per_iter_j"], t["energy_per_iter_j"] / t["avg_power_w"]


def loops():
    """(name, trace, measured J per iteration, measured step s) of every loop of the set."""
    if "configs" in measured:
        for name, c in sorted(measured["configs"].items()):
            yield name, f"{folder}/{name}.json.gz", c["energy_per_iter_j"], c["iter_s"]
        return
    for path in sorted(glob.glob(f"{folder}/*.json.gz")):
        name = os.path.basename(path)[: -len(".json.gz")]
        g = re.match(r"(.+)_(sync|async)_(\w+)$", name)
        if g:
            yield (name, path, *held_out(*g.groups()))


def predicted(trace, step_s, device):
    out = subprocess.run([emo, "optimize", trace, "--device", device, "--step-time", f"{1e3 * step_s:.6f}",
                          "--json", "-"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"emo optimize {trace} --device {device} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)["baseline"]["energy_j"]


errors = {d: [] for d in devices}
print(f"{folder} ({measured.get('device', '?')})\n")
print("| loop | step ms | measured J | " + " | ".join(f"{d}: J, error" for d in devices) + " |")
print("|---|---:|---:|" + "---:|" * len(devices))
for name, trace, joules, step_s in loops():
    cells = []
    for d in devices:
        p = predicted(trace, step_s, d)
        errors[d].append(100 * (p / joules - 1))
        cells.append(f"{p:.3f}, {errors[d][-1]:+.1f} %")
    print(f"| {name} | {1e3 * step_s:.2f} | {joules:.3f} | " + " | ".join(cells) + " |")
for d, es in errors.items():
    print(f"{d}: {sum(abs(e) <= 10 for e in es)} of {len(es)} within 10 %, max |error| {max(map(abs, es)):.1f} %, "
          f"rms {(sum(e * e for e in es) / len(es)) ** 0.5:.1f} %")
