#!/usr/bin/env python3
"""Summarizes the runs of bench/gpu/overhead.sh into one JSON (standard library only).

Reads WORK/runs/<workload>_<mode>_r<round>.{out,err,rc,wall} (and, for `emo` runs,
.emo.json from `emo trace --json` and .analyze.json from `emo analyze --json` where they
exist) and WORK/meta.json; writes the summary (default WORK/summary.json). Tolerant: a field it
cannot find is null, and a run that failed is counted, not fatal. Usable here, too, on the
unpacked runs.tar.gz:  python3 bench/gpu/overhead_summary.py DIR [--out F]

Per workload (`monitor` runs, if any, keep emo monitor's JSON as written beside the program's own
NVML energy per step):
  plain.median_step_ms            median over rounds of each plain run's own median step time
  emo.median_step_ms              the same for the runs under `emo trace` (the program's timing)
  emo.window_median_step_ms       the program's steps inside the traced window, ASSUMED to be
                                  steps [emo_warmup, emo_warmup + emo_iterations) of the program
                                  (the tracer's iteration k == the program's step k)
  emo.outside_median_step_ms      the program's timed steps outside that window (the steps
                                  before it ran with the tracer's activities on: pretrace)
  after_median_step_ms (per run)  every mode's steps from emo_warmup + emo_iterations + 5 on (after
                                  the window, the same step indices in every mode, so a loop whose
                                  steps drift over the run is compared like with like);
                                  ratios.<mode>_after_over_plain_after_paired_median
  after_median_step_per_probe     the same steps, each divided by the CPU probe that ran right after
  (per run)                       it (the program's --cpu-probe): the step in units of the host's
                                  speed at that moment; ratios.<mode>_after_per_probe_over_plain_paired
                                  (_median). A gauge, not a correction: the probe scales with the
                                  host's speed, the GPU's share of a step does not.
  emo.reported_untraced_step_ms   emo's own untraced step time (iteration_time_us.untraced of
                                  its --json, or of `emo analyze --json` of its trace; else a
                                  number on a line of its output that says "untraced"); null if none
  emo.reported_traced_step_ms     iteration_time_us.measured, where present
  torchprof.unprofiled_median_step_ms / profiled_median_step_ms / after_profiler_median_step_ms
  energy_per_step_j per mode (from --nvml-energy), and emo's energy.measured_j_per_iteration
  <mode>.emo_threads_cpu_ms_per_step  CPU time of the tracer's threads (named emo-*) over the
                                  timed region, per step (the program's /proc/self/task reads);
                                  ratios.<mode>_threads_cpu_over_plain_step: that over plain's step
  after_median_step_instructions  the main thread's instructions retired per step (the program's
  (per run)                       --instructions), median over the same steps as after_median_step_ms;
                                  ratios.<mode>_after_instructions_over_plain_paired(_median), and
                                  <mode>_threads_instructions_over_plain_step: the tracer's threads'
                                  instructions per step over plain's main thread's. Counts do not
                                  move with the host's speed, so these show what the tracer adds.
  ratios: each of the above over plain, emo's untraced over the program's outside-window steps.
"""
import argparse
import glob
import json
import os
import re
import statistics

EMO_MODES = ("emo", "emo_noanchor")  # emo_noanchor: `emo trace` with EMO_TRACE_ANCHOR=0
RUN_MODES = ("run", "run1", "run1_noanchor")
RUN_RE = re.compile(r"^(?P<wl>.+)_(?P<mode>plain|emo_noanchor|emo|torchprof|monitor|run1_noanchor|run1|run)_r(?P<round>\d+)$")
# Steps after the traced window left out of the "after" medians: the tracer's iteration k is
# ASSUMED to be the program's step k, give or take a few.
AFTER_MARGIN = 5
UNIT_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3}


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def load_json(path):
    text = read(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def program_line(stdout):
    """The program's JSON line: the last stdout line that parses as an object with 'workload'."""
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{") and '"workload"' in line:
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def med(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def emo_fields(docs):
    """emo's untraced/traced step time (ms) and energy per iteration: `emo trace --json` fields
    traces[0].step_time_ms.{untraced,traced} and traces[0].gpus[0].energy_per_iteration_j, else
    `emo analyze --json`'s iteration_time_us.untraced."""
    found = {"reported_untraced_step_ms": None, "reported_traced_step_ms": None,
             "reported_energy_j_per_iteration": None, "reported_source": None}
    for name, doc in docs:
        if not isinstance(doc, dict):
            continue
        traces = doc.get("traces") or []
        if traces and isinstance(traces[0], dict):
            st = traces[0].get("step_time_ms") or {}
            if found["reported_untraced_step_ms"] is None and st.get("untraced") is not None:
                found["reported_untraced_step_ms"] = st["untraced"]
                found["reported_source"] = f"{name}:traces[0].step_time_ms.untraced"
            if found["reported_traced_step_ms"] is None and st.get("traced") is not None:
                found["reported_traced_step_ms"] = st["traced"]
            gpus = traces[0].get("gpus") or []
            if found["reported_energy_j_per_iteration"] is None and gpus and \
                    gpus[0].get("energy_per_iteration_j") is not None:
                found["reported_energy_j_per_iteration"] = gpus[0]["energy_per_iteration_j"]
        it = doc.get("iteration_time_us") or {}
        if found["reported_untraced_step_ms"] is None and it.get("untraced") is not None:
            found["reported_untraced_step_ms"] = it["untraced"] * 1e-3
            found["reported_source"] = f"{name}:iteration_time_us.untraced"
    return found


def emo_text_untraced(text):
    """A number with a time unit on a line of emo's output that mentions 'untraced'."""
    for line in (text or "").splitlines():
        if "untraced" in line.lower() and not line.lstrip().startswith("{"):
            m = re.search(r"untraced[^0-9\n]*([0-9]+(?:\.[0-9]+)?)\s*(ns|us|µs|ms|s)\b", line, re.I)
            if m:
                return float(m.group(1)) * UNIT_MS[m.group(2).lower()], line.strip()
    return None, None


def collect(work, emo_warmup, emo_iters):
    runs = {}
    for rc_path in sorted(glob.glob(os.path.join(work, "runs", "*.rc"))):
        name = os.path.basename(rc_path)[:-3]
        m = RUN_RE.match(name)
        if not m:
            continue
        base = rc_path[:-3]
        out, err = read(base + ".out"), read(base + ".err")
        rc_text = (read(rc_path) or "").strip()
        rec = {"name": name, "round": int(m["round"]), "rc": int(rc_text) if rc_text.lstrip("-").isdigit() else None,
               "wall_s": None}
        try:
            rec["wall_s"] = float((read(base + ".wall") or "").strip())
        except ValueError:
            pass
        line = program_line(out)
        rec["program"] = line
        steps = (line or {}).get("step_ms")
        warm = (line or {}).get("warmup_steps")
        if isinstance(steps, list) and isinstance(warm, int):
            first_after = max(warm, emo_warmup + emo_iters + AFTER_MARGIN)
            rec["after_median_step_ms"] = med([x for i, x in enumerate(steps) if i >= first_after])
            probe = (line or {}).get("probe_ms")
            if isinstance(probe, list) and len(probe) == len(steps):
                rec["after_median_step_per_probe"] = med([x / q for i, (x, q) in enumerate(zip(steps, probe))
                                                          if i >= first_after and q > 0])
            instr = (line or {}).get("step_instructions")
            if isinstance(instr, list) and len(instr) == len(steps):
                rec["after_median_step_instructions"] = med([n for i, n in enumerate(instr) if i >= first_after])
        if m["mode"] in EMO_MODES:
            docs = [(os.path.basename(p), load_json(p)) for p in (base + ".emo.json", base + ".analyze.json")]
            rec["emo"] = emo_fields(docs)
            if rec["emo"]["reported_untraced_step_ms"] is None:
                v, src = emo_text_untraced((out or "") + "\n" + (err or ""))
                rec["emo"]["reported_untraced_step_ms"] = v
                rec["emo"]["reported_source"] = f"text: {src}" if src else None
            if isinstance(steps, list) and isinstance(warm, int):
                lo, hi = emo_warmup, emo_warmup + emo_iters
                inside = [x for i, x in enumerate(steps) if lo <= i < hi and i >= warm]
                outside = [x for i, x in enumerate(steps) if i >= warm and not lo <= i < hi]
                rec["emo"]["window_median_step_ms"] = med(inside)
                rec["emo"]["window_steps"] = len(inside)
                rec["emo"]["outside_median_step_ms"] = med(outside)
        if m["mode"] == "monitor":
            rec["monitor_json"] = load_json(base + ".monitor.json")
        if m["mode"] in RUN_MODES:  # `emo run --actuator dry-run`: how the policy was followed, and its log
            j = load_json(base + ".run.json") or {}
            rec["policy_run"] = [t.get("policy_run") for t in j.get("traces", [])]
            rec["emo_untraced_step_ms"] = [(t.get("step_time_ms") or {}).get("untraced") for t in j.get("traces", [])]
            log = read(base + ".switches.jsonl") or ""
            lines = [json.loads(x) for x in log.splitlines() if x.strip().startswith("{")]
            rec["switch_log"] = {"locks": sum(1 for x in lines if x.get("action") == "lock"),
                                 "resets": sum(1 for x in lines if x.get("action") == "reset"),
                                 "packs": sorted({x.get("pack") for x in lines if x.get("action") == "lock"}),
                                 "last": lines[-1] if lines else None}
        if line and "step_ms" in line:
            line.pop("step_ms")  # keep the summary small; runs.tar.gz has them
        runs.setdefault(m["wl"], {}).setdefault(m["mode"], []).append(rec)
    return runs


def agg(recs, key, sub=None):
    vals = []
    for r in recs:
        src = r.get(sub) if sub else r.get("program")
        if isinstance(src, dict):
            vals.append(src.get(key))
    vals = [v for v in vals if isinstance(v, (int, float))]
    if not vals:
        return {"median": None, "min": None, "max": None, "runs": []}
    m = statistics.median(vals)
    return {"median": m, "min": min(vals), "max": max(vals), "spread_pct": 100.0 * (max(vals) - min(vals)) / m if m else None,
            "runs": vals}


def summarize(runs, meta):
    out = {"about": "bench/gpu/overhead.sh: the same program in fresh processes, interleaved rounds of plain, under "
                    "`emo trace`, and under torch.profiler (python workloads). Step times in ms, each run's own median "
                    "over its timed steps; per mode, the median (and min/max) over rounds. emo.window_* ASSUMES the "
                    "tracer's traced iterations are the program's steps [emo_warmup, emo_warmup+emo_iterations). "
                    "Energy from the program's own NVML reads (--nvml-energy) over its timed region; the counter "
                    "moves every ~100 ms, so short windows carry energy_bound_pct of uncertainty.",
           "meta": meta, "workloads": {}}
    for wl, modes in sorted(runs.items()):
        w = {}
        plain = modes.get("plain", [])
        tp = modes.get("torchprof", [])
        w["plain"] = {"median_step_ms": agg(plain, "median_step_ms"), "mean_step_ms": agg(plain, "mean_step_ms"),
                      "median_step_cpu_ms": agg(plain, "median_step_cpu_ms"),
                      "energy_per_step_j": agg(plain, "energy_per_step_j"), "window_s": agg(plain, "window_s"),
                      "failed_runs": sum(1 for r in plain if r["rc"] != 0 or not r["program"])}
        for key in EMO_MODES:
            emo = modes.get(key, [])
            if not emo:
                continue
            w[key] = {"median_step_ms": agg(emo, "median_step_ms"), "mean_step_ms": agg(emo, "mean_step_ms"),
                      "window_median_step_ms": agg(emo, "window_median_step_ms", "emo"),
                      "outside_median_step_ms": agg(emo, "outside_median_step_ms", "emo"),
                      "reported_untraced_step_ms": agg(emo, "reported_untraced_step_ms", "emo"),
                      "reported_traced_step_ms": agg(emo, "reported_traced_step_ms", "emo"),
                      "reported_energy_j_per_iteration": agg(emo, "reported_energy_j_per_iteration", "emo"),
                      "reported_source": next((r["emo"]["reported_source"] for r in emo
                                               if r.get("emo", {}).get("reported_source")), None),
                      "energy_per_step_j": agg(emo, "energy_per_step_j"),
                      "failed_runs": sum(1 for r in emo if r["rc"] != 0 or not r["program"]),
                      "rcs": [r["rc"] for r in emo]}
            # same-run comparison, per run, then the median over rounds
            per_run = [ratio(r["emo"].get("reported_untraced_step_ms"), r["emo"].get("outside_median_step_ms"))
                       for r in emo if r.get("emo")]
            w[key]["untraced_over_program_outside_per_run"] = per_run
            # paired with the plain run of the same round: the program's own steps outside the window
            plain_of = {r["round"]: (r.get("program") or {}).get("median_step_ms") for r in plain}
            w[key]["outside_over_plain_same_round"] = [
                ratio(r["emo"].get("outside_median_step_ms"), plain_of.get(r["round"])) for r in emo if r.get("emo")]
        if tp:
            w["torchprof"] = {k: agg(tp, k) for k in ("median_step_ms", "profiled_median_step_ms",
                                                      "after_profiler_median_step_ms", "before_profiler_median_step_ms",
                                                      "prof_warmup_median_step_ms", "energy_per_step_j")}
            w["torchprof"]["unprofiled_median_step_ms"] = w["torchprof"].pop("median_step_ms")
            w["torchprof"]["failed_runs"] = sum(1 for r in tp if r["rc"] != 0 or not r["program"])
            w["torchprof"]["trace_bytes"] = [((r["program"] or {}).get("profiler") or {}).get("trace_bytes") for r in tp]
            w["torchprof"]["export_s"] = [((r["program"] or {}).get("profiler") or {}).get("export_s") for r in tp]
        mon = modes.get("monitor", [])
        if mon:  # `emo monitor --json`: its JSON as written, beside the program's own NVML window
            w["monitor"] = {"median_step_ms": agg(mon, "median_step_ms"),
                            "energy_per_step_j": agg(mon, "energy_per_step_j"),
                            "monitor_json": [r.get("monitor_json") for r in mon],
                            "failed_runs": sum(1 for r in mon if r["rc"] != 0 or not r["program"])}
        p = w["plain"]["median_step_ms"]["median"]
        rat = {}
        # The tracer's own threads (named emo-*): their CPU time per step, and the program's
        # main thread's, per mode under EMO.
        for key in (*EMO_MODES, "monitor", *RUN_MODES):
            recs = modes.get(key, [])
            if key in w and recs:
                w[key].setdefault("median_step_cpu_ms", agg(recs, "median_step_cpu_ms"))
                w[key]["emo_threads_cpu_ms_per_step"] = agg(recs, "emo_threads_cpu_ms_per_step")
                rat[f"{key}_threads_cpu_over_plain_step"] = ratio(w[key]["emo_threads_cpu_ms_per_step"]["median"], p)
        # Instructions retired (the program's --instructions): the main thread's per step after the
        # window, paired by round, and the tracer's threads' per step over plain's main thread's.
        # Counts, not times: the host's speed does not move them.
        plain_instr = {r["round"]: r.get("after_median_step_instructions") for r in plain}
        p_instr = med(list(plain_instr.values()))
        if p_instr:
            w["plain"]["after_median_step_instructions"] = p_instr
        for key in (*EMO_MODES, "monitor", *RUN_MODES):
            recs = [r for r in modes.get(key, []) if r.get("after_median_step_instructions")]
            if key not in w or not recs or not p_instr:
                continue
            paired = [ratio(r["after_median_step_instructions"], plain_instr.get(r["round"])) for r in recs]
            w[key]["after_median_step_instructions"] = med([r["after_median_step_instructions"] for r in recs])
            w[key]["emo_threads_instructions_per_step"] = agg(recs, "emo_threads_instructions_per_step")
            rat[f"{key}_after_instructions_over_plain_paired"] = paired
            rat[f"{key}_after_instructions_over_plain_paired_median"] = med([x for x in paired if x is not None])
            rat[f"{key}_threads_instructions_over_plain_step"] = ratio(
                w[key]["emo_threads_instructions_per_step"]["median"], p_instr)
        for key in RUN_MODES:  # the actuator's own cost: emo run (dry-run) against plain and against emo monitor
            run = modes.get(key, [])
            if not run:
                continue
            w[key] = {"median_step_ms": agg(run, "median_step_ms"),
                      "median_step_cpu_ms": agg(run, "median_step_cpu_ms"),
                      "energy_per_step_j": agg(run, "energy_per_step_j"),
                      "policy_run": [r.get("policy_run") for r in run],
                      "emo_untraced_step_ms": [r.get("emo_untraced_step_ms") for r in run],
                      "switch_log": [r.get("switch_log") for r in run],
                      "failed_runs": sum(1 for r in run if r["rc"] != 0 or not r["program"])}
            rat[f"{key}_over_plain"] = ratio(w[key]["median_step_ms"]["median"], p)
            # paired: over the same round's run of the other mode, by wall time and by the main
            # thread's CPU time per step (the program's launching thread, where the callbacks run)
            for other, name in (("plain", "plain"), ("monitor", "monitor")):
                for metric, tag in (("median_step_ms", ""), ("median_step_cpu_ms", "_cpu")):
                    paired = {}
                    for r in run:
                        mate = [q for q in modes.get(other, [])
                                if q["round"] == r["round"] and q["program"] and r["program"]]
                        if mate and r["program"].get(metric) and mate[0]["program"].get(metric):
                            paired[r["round"]] = r["program"][metric] / mate[0]["program"][metric]
                    rat[f"{key}_over_{name}{tag}_paired_median"] = med(list(paired.values()))
                    rat[f"{key}_over_{name}{tag}_paired"] = paired
            if "monitor" in w:
                rat[f"{key}_over_monitor"] = ratio(w[key]["median_step_ms"]["median"], w["monitor"]["median_step_ms"]["median"])
        # After the window, paired by round, the same step indices: the tracer as the program
        # runs once its window is traced (emo trace) or throughout (emo monitor).
        plain_after = {r["round"]: r.get("after_median_step_ms") for r in plain}
        for key in (*EMO_MODES, "monitor"):
            recs = modes.get(key, [])
            if recs:
                paired = [ratio(r.get("after_median_step_ms"), plain_after.get(r["round"])) for r in recs]
                rat[f"{key}_after_over_plain_after_paired"] = paired
                rat[f"{key}_after_over_plain_after_paired_median"] = med([x for x in paired if x is not None])
        plain_probe = {r["round"]: r.get("after_median_step_per_probe") for r in plain}
        for key in (*EMO_MODES, *RUN_MODES, "monitor"):
            recs = [r for r in modes.get(key, []) if r.get("after_median_step_per_probe")]
            if recs and any(plain_probe.values()):
                paired = [ratio(r["after_median_step_per_probe"], plain_probe.get(r["round"])) for r in recs]
                rat[f"{key}_after_per_probe_over_plain_paired"] = paired
                rat[f"{key}_after_per_probe_over_plain_paired_median"] = med([x for x in paired if x is not None])
        for key in EMO_MODES:
            if key not in w:
                continue
            e = w[key]
            rat[f"{key}_over_plain"] = ratio(e["median_step_ms"]["median"], p)
            rat[f"{key}_window_over_plain"] = ratio(e["window_median_step_ms"]["median"], p)
            rat[f"{key}_outside_over_plain"] = ratio(e["outside_median_step_ms"]["median"], p)
            rat[f"{key}_outside_over_plain_paired_median"] = med(e["outside_over_plain_same_round"])
            rat[f"{key}_reported_untraced_over_plain"] = ratio(e["reported_untraced_step_ms"]["median"], p)
            rat[f"{key}_reported_untraced_over_program_outside"] = med(e["untraced_over_program_outside_per_run"])
            rat[f"{key}_energy_over_plain"] = ratio(e["energy_per_step_j"]["median"], w["plain"]["energy_per_step_j"]["median"])
        if tp:
            t = w["torchprof"]
            rat["torchprof_profiled_over_plain"] = ratio(t["profiled_median_step_ms"]["median"], p)
            rat["torchprof_unprofiled_over_plain"] = ratio(t["unprofiled_median_step_ms"]["median"], p)
            rat["torchprof_after_over_plain"] = ratio(t["after_profiler_median_step_ms"]["median"], p)
            rat["torchprof_profiled_over_unprofiled"] = ratio(t["profiled_median_step_ms"]["median"],
                                                              t["unprofiled_median_step_ms"]["median"])
        w["ratios"] = rat
        w["runs"] = {mode: [{k: v for k, v in r.items()} for r in recs] for mode, recs in modes.items()}
        out["workloads"][wl] = w
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("work", help="the work folder of overhead.sh (holds runs/ and meta.json)")
    ap.add_argument("--out", help="summary file (default WORK/summary.json)")
    args = ap.parse_args()
    meta = load_json(os.path.join(args.work, "meta.json")) or {}
    emo_warmup = int(meta.get("emo_warmup", 50))
    emo_iters = int(meta.get("emo_iterations", 20))
    s = summarize(collect(args.work, emo_warmup, emo_iters), meta)
    path = args.out or os.path.join(args.work, "summary.json")
    with open(path, "w") as f:
        json.dump(s, f, indent=1)
    for wl, w in s["workloads"].items():
        p = w["plain"]["median_step_ms"]["median"]
        r = w["ratios"]
        fmt = lambda x: "null" if x is None else f"{x:.3f}"  # noqa: E731
        print(f"{wl}: plain {fmt(p)} ms; emo/plain {fmt(r.get('emo_over_plain'))} "
              f"(window {fmt(r.get('emo_window_over_plain'))}, outside {fmt(r.get('emo_outside_over_plain'))}); "
              f"emo untraced/outside {fmt(r.get('emo_reported_untraced_over_program_outside'))}; "
              f"after the window, paired: emo {fmt(r.get('emo_after_over_plain_after_paired_median'))}, "
              f"monitor {fmt(r.get('monitor_after_over_plain_after_paired_median'))}; "
              f"in units of the CPU probe: emo {fmt(r.get('emo_after_per_probe_over_plain_paired_median'))}, "
              f"monitor {fmt(r.get('monitor_after_per_probe_over_plain_paired_median'))}; "
              f"tracer threads' CPU over plain's step: emo {fmt(r.get('emo_threads_cpu_over_plain_step'))}; "
              f"instructions after the window, paired: emo {fmt(r.get('emo_after_instructions_over_plain_paired_median'))}, "
              f"tracer threads' over plain's step {fmt(r.get('emo_threads_instructions_over_plain_step'))}; "
              f"torchprof profiled/plain {fmt(r.get('torchprof_profiled_over_plain'))}, "
              f"unprofiled/plain {fmt(r.get('torchprof_unprofiled_over_plain'))}")
    print(f"summary: {path}")


if __name__ == "__main__":
    main()
