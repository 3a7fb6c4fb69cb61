#!/usr/bin/env python3
"""Derives the fitted numbers of devices/h200.json from our own H200 measurements.

Reads (read-only) ../shared/data/h200_nvml_probe/{probe1.json,probe1_samples.csv} and
../shared/traces/h200/measured.json and prints every derived number with how it was obtained.
Standard library only. Run from the repository root:

    python3 devices/derive_h200.py [--shared ../shared]

The numbers printed are the ones written into devices/h200.json; rerun after changing the
method and copy them over (the device test checks the file against the same measurements).
"""
import argparse
import collections
import csv
import json
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    ap.add_argument("--write", metavar="DEVICE_JSON",
                    help="write the derived numbers into this device file (keeps its other fields)")
    args = ap.parse_args()
    probe_dir = os.path.join(args.shared, "data", "h200_nvml_probe")
    probe = json.load(open(os.path.join(probe_dir, "probe1.json")))
    measured = json.load(open(os.path.join(args.shared, "traces", "h200", "measured.json")))

    clocks = sorted(measured["supported_sm_mhz"]["3201"])
    assert clocks == sorted(measured["supported_sm_mhz"]["2201"]), "clock tables differ by memory clock"
    print(f"clocks: {len(clocks)} values, {clocks[0]}-{clocks[-1]} MHz")

    idle_ctx = probe["phases"]["idle0"]["avg_power_W_from_energy"]  # context resident, SM 1980 MHz
    idle_min = measured["idle"]["power_mw"] / 1000.0                # no context, SM 345 MHz
    gemm_avg = probe["phases"]["gemm"]["avg_power_W_from_energy"]   # 5 s bf16 8192^3 GEMM, capped
    copy_avg = probe["phases"]["copy"]["avg_power_W_from_energy"]   # 5 s 4 GiB D2D copy, 1980 MHz
    print(f"idle (context, 1980 MHz) {idle_ctx:.1f} W; idle (no context, {measured['idle']['sm_mhz']} MHz)"
          f" {idle_min:.1f} W; GEMM average under the cap {gemm_avg:.1f} W; copy {copy_avg:.1f} W")

    # GEMM-phase samples: the limiter moved the clock between 1140 and 1665 MHz while the same
    # GEMM ran, so (clock, instantaneous power) pairs trace the GEMM's power curve. Readings repeat
    # until NVML updates them (~100 ms); keep each new (clock, power) pair once.
    pts = collections.defaultdict(list)
    last = None
    for r in csv.DictReader(open(os.path.join(probe_dir, "probe1_samples.csv"))):
        if r["phase"] != "gemm" or r["event_reasons"] == "0":
            continue  # only samples taken while the SW power cap held (event reason 0x4)
        key = (r["sm_MHz"], r["power_instant_mW"])
        if key == last:
            continue
        last = key
        pts[int(r["sm_MHz"])].append(int(r["power_instant_mW"]) / 1000.0)
    samples = [(f, sum(v) / len(v), len(v)) for f, v in sorted(pts.items())]
    print("GEMM (clock MHz, mean instantaneous power W, readings):",
          ", ".join(f"({f}, {p:.0f}, {n})" for f, p, n in samples))

    # Fit P = P_static + c * f * V(f)^2, V = 1 + k * max(0, f - ridge), relative least squares
    # weighted by readings. P_static and the idle activity come from the two idle points for
    # each candidate voltage curve: P_static + c_idle * g(f) = idle power at f.
    best = None
    f_lo_idle = measured["idle"]["sm_mhz"]
    for ridge in range(clocks[0], clocks[-1] + 1, 15):
        for step in range(0, 301):
            k = step * 1e-5

            def g(f):
                v = 1.0 + k * max(0.0, f - ridge)
                return f * v * v

            c_idle = (idle_ctx - idle_min) / (g(1980) - g(f_lo_idle))
            p_static = idle_min - c_idle * g(f_lo_idle)
            num = sum(n * g(f) * (p - p_static) / p ** 2 for f, p, n in samples)
            den = sum(n * g(f) ** 2 / p ** 2 for f, p, n in samples)
            c = num / den
            sse = sum(n * ((p_static + c * g(f)) / p - 1.0) ** 2 for f, p, n in samples)
            if best is None or sse < best[0] - 1e-12:
                best = (sse, ridge, k, p_static, c_idle, c)
    sse, ridge, k, p_static, c_idle, c_gemm = best
    n = sum(n for _, _, n in samples)

    def g(f):
        v = 1.0 + k * max(0.0, f - ridge)
        return f * v * v

    # Which ridges fit about as well: the data only bound it from above.
    ok = []
    for r in range(clocks[0], clocks[-1] + 1, 15):
        e = None
        for step in range(0, 301):
            kk = step * 1e-5

            def gg(f, kk=kk, r=r):
                v = 1.0 + kk * max(0.0, f - r)
                return f * v * v

            ci = (idle_ctx - idle_min) / (gg(1980) - gg(f_lo_idle))
            ps = idle_min - ci * gg(f_lo_idle)
            cc = sum(m * gg(f) * (p - ps) / p ** 2 for f, p, m in samples) / sum(
                m * gg(f) ** 2 / p ** 2 for f, p, m in samples)
            s = sum(m * ((ps + cc * gg(f)) / p - 1.0) ** 2 for f, p, m in samples)
            e = s if e is None else min(e, s)
        if e <= sse * 1.02:
            ok.append(r)
    c_copy = (copy_avg - p_static) / g(1980)
    # Where the GEMM's power meets the limit.
    f_cap = None
    for f10 in range(clocks[0] * 10, clocks[-1] * 10 + 1):
        f = f10 / 10.0
        if p_static + c_gemm * g(f) >= measured["power_limit_mw"] / 1000.0:
            f_cap = f
            break
    out = {
        "voltage_ridge_mhz": ridge,
        "voltage_slope_per_mhz": k,
        "v_at_1980": 1.0 + k * (1980 - ridge),
        "ridges_within_2pct_of_best_sse": [min(ok), max(ok)],
        "rms_rel_gemm_fit": (sse / n) ** 0.5,
        "gemm_sample_clocks": len(samples),
        "static_power_w": p_static,
        "idle_activity_w_per_mhz": c_idle,
        "gemm_activity_w_per_mhz": c_gemm,
        "gemm_power_demand_at_1980_w": p_static + c_gemm * g(1980),
        "gemm_cap_clock_mhz": f_cap,
        "copy_activity_w_per_mhz": c_copy,
        "idle_power_w": idle_ctx,
        "idle_power_min_clock_w": idle_min,
        "cap_power_w": gemm_avg,
    }
    print(json.dumps(out, indent=1))
    if args.write:
        write(args.write, out, clocks)


def write(path, out, clocks):
    dev = json.load(open(path))
    cmd = "python3 devices/derive_h200.py --write " + path
    gemm_src = ("fit of P = P_static + c f V(f)^2 to the GEMM-phase (clock, instantaneous power) "
                "samples of h200_nvml_probe/probe1_samples.csv under the SW power cap, with "
                "P_static and the idle activity tied to the two idle measurements (`" + cmd + "`)")
    dev["clocks_mhz"]["values"] = clocks
    dev["idle_power_w"]["value"] = round(out["idle_power_w"], 2)
    dev["idle_power_min_clock_w"]["value"] = round(out["idle_power_min_clock_w"], 2)
    dev["cap_power_w"]["value"] = round(out["cap_power_w"], 2)
    dev["static_power_w"]["value"] = round(out["static_power_w"], 2)
    dev["static_power_w"]["source"] = gemm_src
    dev["voltage"]["ridge_mhz"]["value"] = out["voltage_ridge_mhz"]
    dev["voltage"]["ridge_mhz"]["reasoning"] = (
        "The GEMM samples span 1140-1665 MHz and bound the ridge only from above: every ridge "
        f"from {out['ridges_within_2pct_of_best_sse'][0]} to "
        f"{out['ridges_within_2pct_of_best_sse'][1]} MHz fits within 2% of the best error; "
        f"{out['voltage_ridge_mhz']} MHz is the best grid point. Below the lowest sample the curve "
        "is not measured. For comparison the fitted A100 and A40 ridges sit at 0.78 and 0.65 of "
        "their top clocks (1545 and 1290 MHz scaled to H200).")
    dev["voltage"]["ridge_mhz"]["source"] = gemm_src
    dev["voltage"]["slope_per_mhz"]["value"] = out["voltage_slope_per_mhz"]
    dev["voltage"]["slope_per_mhz"]["source"] = gemm_src + \
        f"; rms error {100 * out['rms_rel_gemm_fit']:.1f}% over {out['gemm_sample_clocks']} clocks"
    dev["classes"]["compute"]["activity_w_per_mhz"]["value"] = round(out["gemm_activity_w_per_mhz"], 5)
    dev["classes"]["compute"]["activity_w_per_mhz"]["source"] = gemm_src + (
        f"; predicts the GEMM's cap clock at {out['gemm_cap_clock_mhz']:.0f} MHz "
        "(measured median 1485 MHz)")
    c_mem = out["copy_activity_w_per_mhz"]
    c_idle = out["idle_activity_w_per_mhz"]
    dev["classes"]["memory"]["activity_w_per_mhz"]["value"] = round(c_mem, 5)
    dev["classes"]["communication"]["activity_w_per_mhz"]["value"] = round(c_idle + 0.25 * (c_mem - c_idle), 5)
    dev["classes"]["other"]["activity_w_per_mhz"]["value"] = round(c_mem, 5)
    with open(path, "w") as f:
        json.dump(dev, f, indent=2)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
