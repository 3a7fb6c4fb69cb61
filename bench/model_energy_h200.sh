#!/usr/bin/env bash
# The H200 model's energy per iteration at the default clock against NVML-measured energy on
# every H200 workload with a measurement (issue Order 8, "Done when"): the held-out sets in
# data/, the workload traces in ../shared/traces/h200 and EMO's own traces (their measurement
# comes from the same run). The prediction is `emo optimize`'s baseline (the pack model the
# plans are made with, devices/h200.json): once on the timeline fitted to the measured step time
# (`--step-time`, the model's own error) and once on the timeline the overhead correction
# estimates (what a user without a measurement gets). Measured step time = energy per iteration
# / average power, the mean iteration the energy was spread over.
# Usage: bench/model_energy_h200.sh [path/to/emo] [path/to/shared] [device]
set -euo pipefail
source "$(dirname "$0")/common.sh"
bench_setup "${1:-}" "${2:-}" traces/h200
repo="$(cd "$(dirname "$0")/.." && pwd)"
python3 - "$emo" "$data" "$repo" "${3:-h200}" <<'PY'
import json, os, subprocess, sys
emo, shared_h200, repo, device = sys.argv[1:5]

def run_json(args):
    out = subprocess.run([emo, *args, "--json", "-"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"emo {' '.join(args)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)

def predicted(trace, step_ms=None):
    extra = ["--step-time", f"{step_ms:.6f}"] if step_ms else []
    j = run_json(["optimize", trace, "--device", device, *extra])
    b = j["baseline"]
    return b["energy_j"], b["time_us"] / 1e3

rows = []  # (set, trace, step_ms, measured_j, trace path)
kp = json.load(open(f"{repo}/data/h200_kernels/measured.json"))
for name, c in sorted(kp["configs"].items()):
    rows.append(("h200_kernels", name, 1e3 * c["iter_s"], c["energy_per_iter_j"],
                 f"{repo}/data/h200_kernels/{name}.json.gz"))
for d in ["data/h200_heldout", "data/h200_heldout2", "data/h200_heldout3"]:
    truth = json.load(open(f"{repo}/{d}/truth.json"))
    for w, v in truth.items():
        if not isinstance(v, dict) or "traces" not in v:
            continue
        for cfg, t in sorted(v["traces"].items()):
            step_ms = 1e3 * t["energy_per_iter_j"] / t["avg_power_w"]
            rows.append((os.path.basename(d), f"{w}_{cfg}", step_ms, t["energy_per_iter_j"],
                         f"{repo}/{d}/{w}_{cfg}.json.gz"))
m = json.load(open(f"{shared_h200}/measured.json"))
for name, t in list(m["workloads"].items()) + list(m.get("multi_gpu", {}).items()):
    rows.append(("traces/h200", name, 1e3 * t["energy_per_iter_j"] / t["avg_power_w"],
                 t["energy_per_iter_j"], f"{shared_h200}/{name}.json.gz"))
# EMO traces: the energy their own run measured, or, where that window was too short to measure
# (uncertainty above 25 %), an `emo monitor` run of the same program (data/h200_emo/README.md).
MONITOR = {"streams_graph_h200.emotrace": "data/h200_emo/monitor_streams_graph.json"}
for f in ["data/h200_emo/train_loop.emotrace", "data/h200_emo/train_loop_nvtx.emotrace",
          "data/h200_emo/decode_loop.emotrace", "examples/streams_graph_h200.emotrace"]:
    name = os.path.basename(f)
    g = run_json(["analyze", f"{repo}/{f}"]).get("measured_energy", {}).get("gpus", [{}])[0]
    if g.get("energy_per_iteration_j") and g["uncertainty_per_iteration_j"] <= 0.25 * g["energy_per_iteration_j"]:
        rows.append(("emo trace", name, None, g["energy_per_iteration_j"], f"{repo}/{f}"))
    elif name in MONITOR:
        m = json.load(open(f"{repo}/{MONITOR[name]}"))["traces"][0]["gpus"][0]
        rows.append(("emo trace (energy: emo monitor)", name, None, m["energy_per_iteration_j"], f"{repo}/{f}"))

print("| set | trace | step ms (measured) | predicted J, measured step | error | "
      "step ms (estimated) | predicted J, estimated step | error | measured J |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
errs, errs_est = [], []
for s, name, step_ms, meas, path in rows:
    e_fit, t_fit = predicted(path, step_ms)
    err = 100 * (e_fit - meas) / meas
    errs.append(abs(err))
    if step_ms is None:  # EMO traces: the timeline is already fitted to the untraced step
        print(f"| {s} | {name} | {t_fit:.2f} | {e_fit:.3f} | {err:+.1f} % | – | – | – | {meas:.3f} |")
        continue
    e_est, t_est = predicted(path)
    err_est = 100 * (e_est - meas) / meas
    errs_est.append(abs(err_est))
    print(f"| {s} | {name} | {step_ms:.2f} | {e_fit:.3f} | {err:+.1f} % | {t_est:.2f} | {e_est:.3f} "
          f"| {err_est:+.1f} % | {meas:.3f} |")
print(f"\n{len(errs)} traces; measured step: max |error| {max(errs):.1f} %, within 10 %: "
      f"{sum(e <= 10 for e in errs)}; estimated step: max |error| {max(errs_est):.1f} %, within 10 %: "
      f"{sum(e <= 10 for e in errs_est)} of {len(errs_est)}")
PY
