#!/usr/bin/env python3
"""The power a matrix-multiply kernel draws when the trace does not give its work (docs/model.md
6a): what kernels of the same kind draw by their work, where traces recorded it, against what
their launch configuration alone gives them.

For every trace given, `emo optimize TRACE --device DEVICE --json -` reports per matrix-multiply
share kind (`model.matmul_work.kinds`) the kernel time with known work and the time-weighted
share those kernels draw by their work (the device file's work_power curves, WorkShare) and by
their launch (KernelShare: grid cover, ramp, CUDA-core factor). Their ratio is what a kernel of
that kind whose work is unknown should be given on top of its launch share. Traces of one
workload (the same name up to _sync/_async, _light/_shapes and _rankN) pool into one ratio.

A kind gets a power share only when at least MIN_WORKLOADS workloads give a ratio and every one
lies within SPREAD of their median: then its kernels draw alike whatever the program, and the
median stands for the ones whose work is unknown. A kind whose workloads disagree keeps 1 (its
launch share): its power follows work that the launch does not carry (docs/model.md 6a, "Without
shapes, no stand-in for the work"). No energy measurement is read: the ratios come from the
work curves and the traces' shapes alone.

  python3 bench/research/unknown_work_share.py EMO DEVICE TRACE... [--spread 0.15]
      [--min-workloads 3] [--write devices/FILE.json]
--write sets kinds.<kind>.power_share in the file for every kind the rule admits (and removes
it from the kinds it does not), with the command as its source."""
import json, os, re, statistics, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h200_loops import option  # noqa: E402  (the command line's option parsing, shared)


write = option("--write", None)
spread = float(option("--spread", "0.15"))
min_workloads = int(option("--min-workloads", "3"))
if len(sys.argv) < 4:
    sys.exit(__doc__)
emo, device, traces = sys.argv[1], sys.argv[2], sys.argv[3:]


def workload(path):
    name = os.path.basename(path)
    name = re.sub(r"\.(json(\.gz)?|emotrace)$", "", name)
    name = re.sub(r"_rank\d+$", "", name)
    return re.sub(r"(_(sync|async))?(_(light|shapes))?$", "", name)


pooled = {}  # kind -> workload -> [work share x known ms, launch share x known ms, known ms]
for i, t in enumerate(traces, 1):
    print(f"[{i}/{len(traces)}] {t}", file=sys.stderr)
    out = subprocess.run([emo, "optimize", t, "--device", device, "--json", "-"], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        sys.exit(f"emo optimize {t} failed: {out.stderr.strip()}")
    for k in json.loads(out.stdout)["model"]["matmul_work"].get("kinds", []):
        if not k["known_ms"] or k["work_share"] is None:
            continue
        acc = pooled.setdefault(k["kind"], {}).setdefault(workload(t), [0.0, 0.0, 0.0])
        acc[0] += k["work_share"] * k["known_ms"]
        acc[1] += k["launch_share"] * k["known_ms"]
        acc[2] += k["known_ms"]

folders = {}
for t in traces:
    d = os.path.dirname(os.path.relpath(t)) or "."
    folders[d] = folders.get(d, 0) + 1
cmd = " ".join(["python3", "bench/research/unknown_work_share.py", "EMO", device] +
               [f"--spread {spread}", f"--min-workloads {min_workloads}"])
read = ", ".join(f"{d} ({n})" for d, n in sorted(folders.items()))
print(f"Device {device}, {len(traces)} traces; a kind is admitted with >= {min_workloads} workloads "
      f"all within {100 * spread:.0f} % of their median ratio.\n")
print("| kind | workload | known ms | work share | launch share | ratio |")
print("|---|---|---:|---:|---:|---:|")
admitted = {}
for kind in sorted(pooled):
    ratios = {}
    for w, (ws, ls, ms) in sorted(pooled[kind].items()):
        if ls <= 0:
            continue
        ratios[w] = ws / ls
        print(f"| {kind} | {w} | {ms:.2f} | {ws / ms:.3f} | {ls / ms:.3f} | {ws / ls:.3f} |")
    if not ratios:
        continue
    median = statistics.median(ratios.values())
    worst = max(abs(r / median - 1) for r in ratios.values())
    ok = len(ratios) >= min_workloads and worst <= spread
    verdict = "admitted" if ok else ("too few workloads" if len(ratios) < min_workloads else "workloads disagree")
    print(f"| **{kind}** | median of {len(ratios)} | | | | **{median:.3f}** (range {min(ratios.values()):.3f}"
          f"-{max(ratios.values()):.3f}, widest {100 * worst:.0f} % off: {verdict}) |")
    if ok:
        admitted[kind] = (median, sorted(ratios), min(ratios.values()), max(ratios.values()))

if write:
    with open(write) as f:
        doc = json.load(f)
    kinds = doc.setdefault("kinds", {})
    for kind in list(kinds):
        if kind not in admitted and "power_share" in kinds[kind]:
            del kinds[kind]["power_share"]
            if not kinds[kind]:
                del kinds[kind]
    for kind, (median, names, lo, hi) in admitted.items():
        kinds.setdefault(kind, {})["power_share"] = {
            "value": round(median, 3),
            "source": (f"median over {len(names)} workloads ({', '.join(names)}; ratios {lo:.3f}-{hi:.3f}) of what "
                       f"this kind's kernels of known work draw by their work (work_power) over what their launch "
                       f"gives them (KernelShare), from {len(traces)} traces with record_shapes: {read}; no energy "
                       f"measurement read: `{cmd} TRACES... --write FILE` (docs/model.md 6a)"),
        }
    with open(write, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"\nwrote {write}: " + (", ".join(f"{k} {v[0]:.3f}" for k, v in admitted.items()) or "no kind admitted"))
