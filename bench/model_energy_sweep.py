#!/usr/bin/env python3
"""A device file's energy per iteration at the default clock against a kernel sweep's NVML
measurement (bench/gpu/kernel_power.py output: DIR/measured.json and one trace per config), on
the timeline fitted to the measured step (`emo optimize --step-time`), as bench/model_energy_h200.sh
does for the H200's sets. Any GPU: the H100 sweep (data/h100_kernels) with devices/h100-sxm.json.
  python3 bench/model_energy_sweep.py EMO SWEEP_DIR DEVICE [DEVICE ...]
Prints one error column per device file (name or path) and, per file, how many loops are within 10 %."""
import json, subprocess, sys

emo, sweep, devices = sys.argv[1], sys.argv[2], sys.argv[3:]
if not devices:
    sys.exit(__doc__)
configs = json.load(open(f"{sweep}/measured.json"))["configs"]


def predicted(trace, step_ms, device):
    out = subprocess.run([emo, "optimize", trace, "--device", device, "--step-time", f"{step_ms:.6f}", "--json", "-"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"emo optimize {trace} --device {device} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)["baseline"]["energy_j"]


errors = {d: [] for d in devices}
print("| loop | measured J | " + " | ".join(f"{d}: J, error" for d in devices) + " |")
print("|---|---:|" + "---:|" * len(devices))
for name, c in sorted(configs.items()):
    cells = []
    for d in devices:
        p = predicted(f"{sweep}/{name}.json.gz", 1e3 * c["iter_s"], d)
        e = 100 * (p / c["energy_per_iter_j"] - 1)
        errors[d].append(e)
        cells.append(f"{p:.3f}, {e:+.1f} %")
    print(f"| {name} | {c['energy_per_iter_j']:.3f} | " + " | ".join(cells) + " |")
for d, es in errors.items():
    print(f"{d}: {sum(abs(e) <= 10 for e in es)} of {len(es)} within 10 %, max |error| {max(map(abs, es)):.1f} %, "
          f"rms {(sum(e * e for e in es) / len(es)) ** 0.5:.1f} %")
