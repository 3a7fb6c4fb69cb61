"""bench/gpu/overhead_quiet_summary.py on synthetic runs whose answer is known."""
import json
import math
import os
import random
import subprocess
import sys

import pytest

SRC = os.environ.get("EMO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "bench", "gpu"))
import overhead_quiet_summary as oqs  # noqa: E402

PHASE_S = 1.0


def run(mode, cost, seed, relearn_s=0.0, spin_us=None, n=1500, base_ms=13.0, rc=0):
    """One run: steps of base_ms x a host pace that drifts by +-25 % (a sine over ~60 s) x noise,
    x (1 + cost) in engaged phases; emo-style marks (engaged, detaching, quiet, relearn) with a
    relearn stretch after each quiet phase, or the loop's own marks (engaged, quiet)."""
    rng = random.Random(seed)
    t0 = 50.0 + seed
    marks, t, k = [], t0 + 0.5, 0
    while t < t0 + 30:
        marks.append(["engaged", round(t * 1e9)])
        if relearn_s:
            marks.append(["detaching", round((t + PHASE_S - 0.004) * 1e9)])
        marks.append(["quiet", round((t + PHASE_S) * 1e9)])
        if relearn_s:
            marks.append(["relearn", round((t + 2 * PHASE_S) * 1e9)])
        t += 2 * PHASE_S + relearn_s
        k += 1
    engaged_spans = [(marks[i][1], marks[i + (2 if relearn_s else 1)][1]) for i in range(len(marks))
                     if marks[i][0] == "engaged" and i + (2 if relearn_s else 1) < len(marks)]
    starts, steps, t = [], [], t0
    for _ in range(n):
        engaged = any(a <= t * 1e9 < b for a, b in engaged_spans)
        ms = base_ms * (1 + 0.25 * math.sin((t - t0) / 10)) * (1 + 0.03 * rng.gauss(0, 1)) * (1 + cost * engaged)
        ms += (spin_us or 0) * 1e-3 * engaged
        starts.append(t)
        steps.append(ms)
        t += ms * 1e-3
    prog = {"step_start_s": starts, "step_ms": steps, "warmup_steps": 30}
    if spin_us is not None:
        prog["host_spin_us"] = spin_us
    return {"round": 1 + seed % 4, "mode": mode, "rc": rc, "program": prog, "marks": marks}


def test_the_engaged_phases_cost_is_read_through_a_drifting_pace():
    rows = [run("emo", 0.02, s, relearn_s=0.3) for s in range(4)] + [run("null", 0.0, 10 + s) for s in range(3)]
    out = oqs.summarize(rows)
    emo, null = out["modes"]["emo"], out["modes"]["null"]
    assert emo["runs"] == 4 and null["runs"] == 3
    assert emo["segments"]["n"] >= 28
    lo, hi = emo["segments"]["bootstrap95_geometric_mean"]
    assert emo["segments"]["geometric_mean"] == pytest.approx(1.02, abs=0.003)
    assert lo < emo["segments"]["geometric_mean"] < hi and hi - lo < 0.01
    lo, hi = null["segments"]["bootstrap95_geometric_mean"]
    assert lo < 1.0 < hi
    # The pace drifts by +-25 % over the run: a comparison of the run's two halves would not hold.
    assert abs(emo["over_runs"]["geometric_mean"] - 1.02) < 0.005


def test_steps_with_a_mark_inside_and_relearn_steps_belong_to_no_phase():
    marks = [["engaged", 0], ["detaching", int(1.0e9)], ["quiet", int(2.0e9)], ["relearn", int(4.0e9)],
             ["engaged", int(5.0e9)]]
    steps = [99.0] * 60
    # Marks on step starts: 0-1.9 s engaged (the detaching mark at 1 s is no turn), 2-3.9 quiet,
    # 4-4.9 relearn (none), 5-5.9 engaged.
    segs = oqs.segments([i * 0.1 for i in range(60)], steps, marks, 0)
    assert [(k, len(ms)) for k, ms in segs] == [("engaged", 20), ("quiet", 20), (None, 10), ("engaged", 10)]
    # Marks inside steps take those steps out; a segment under MIN_STEPS steps is none.
    segs = oqs.segments([i * 0.1 + 0.05 for i in range(60)], steps, marks, 0)
    assert [(k, len(ms)) for k, ms in segs] == [("engaged", 19), (None, 1), ("quiet", 19), (None, 11),
                                                ("engaged", 10)]
    segs = oqs.segments([i * 0.1 + 0.05 for i in range(59)], steps, marks, 0)
    assert segs[-1] == (None, [99.0] * 9)


def test_a_spin_reports_what_the_design_shows_of_its_known_size():
    rows = [run("spin", 0.0, s, spin_us=260) for s in range(3)]
    out = oqs.summarize(rows)
    spin = out["modes"]["spin"]
    # 260 us of steps of 13 ms x the pace (+-25 %).
    assert 0.015 < spin["known"] < 0.025
    assert spin["shown_over_known"] == pytest.approx(1.0, abs=0.1)


def test_failed_runs_and_runs_without_marks_are_dropped_with_the_reason(tmp_path):
    bad = run("emo", 0.0, 1)
    bad["rc"] = 124
    nomarks = run("emo", 0.0, 2)
    nomarks["marks"] = None
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (bad, nomarks, run("emo", 0.01, 3))) + "\n")
    script = os.path.join(SRC, "bench", "gpu", "overhead_quiet_summary.py")
    out = json.loads(subprocess.run([sys.executable, script, str(path)], capture_output=True, text=True,
                                    check=True).stdout)
    dropped = [r["dropped"] for r in out["runs"] if "dropped" in r]
    assert dropped == ["rc 124, no steps with their starts", "no phase marks"]
    assert out["modes"]["emo"]["runs"] == 1


def test_the_script_runs_each_mode_and_summarizes_with_stand_ins(tmp_path):
    """overhead_quiet.sh end to end with a stand-in loop (PY: 300 steps of 10 ms, +2 % in the
    phases it is told to spin in or, under the stand-in emo, in emo's engaged phases) and a
    stand-in emo (`trace ... -- CMD`: runs CMD with phase marks of 300 ms it writes to
    EMO_TRACE_QUIET_LOG): the sizing run, every mode of CYCLE, and the summary's reading of each."""
    loop = tmp_path / "loop.py"
    loop.write_text('''import json, os, sys
a = sys.argv[1:]
spin = float(a[a.index("--host-spin-us") + 1]) if "--host-spin-us" in a else 0.0
phase = float(a[a.index("--spin-phase-ms") + 1]) if "--spin-phase-ms" in a else 0.0
quiet = os.environ.get("EMO_TRACE_QUIET_MS")
t0, starts, steps, marks = 100.0, [], [], []
for i in range(300):
    t = t0 + i * 0.0102
    k = int((t - t0) * 1e3 // 300)
    engaged = k % 2 == 0
    ms = 10.0 + (spin * 1e-3 if phase and engaged else 0) + (0.2 if quiet and engaged else 0)
    starts.append(t)
    steps.append(ms)
for k in range(11):
    marks.append(["engaged" if k % 2 == 0 else "quiet", round((t0 + k * 0.3) * 1e9)])
out = {"median_step_ms": 10.0, "warmup_steps": 0, "step_start_s": starts, "step_ms": steps, "host_spin_us": spin}
if phase:
    out["phase_marks"] = marks
if quiet:
    open(os.environ["EMO_TRACE_QUIET_LOG"], "w").write("".join(f"{p} {t}\\n" for p, t in marks))
print(json.dumps(out))
''')
    py = tmp_path / "py"
    py.write_text(f"#!/bin/bash\nexec /usr/bin/python3 {loop} \"$@\"\n")
    py.chmod(0o755)
    emo = tmp_path / "emo"
    emo.write_text("#!/bin/bash\nwhile [[ $1 != -- ]]; do shift; done\nshift\nexec \"$@\"\n")
    emo.chmod(0o755)
    env = dict(os.environ, EMO=str(emo), OUT=str(tmp_path / "out"), PY=str(py), SPY="/usr/bin/python3",
               ROUNDS="1", PATH="/usr/bin:/bin")
    r = subprocess.run(["bash", os.path.join(SRC, "bench", "gpu", "overhead_quiet.sh")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "spin 2 % of its median step = 200 us" in r.stderr, r.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "quiet" / "runs.jsonl").read_text().splitlines()]
    assert [row["mode"] for row in rows] == ["plain", "emo", "spin", "emo", "null"]
    modes = json.loads((tmp_path / "out" / "quiet" / "summary.json").read_text())["modes"]
    assert modes["emo"]["segments"]["geometric_mean"] == pytest.approx(1.02, abs=1e-6)
    assert modes["spin"]["shown_over_known"] == pytest.approx(1.0, abs=1e-6)
    assert modes["null"]["segments"]["geometric_mean"] == pytest.approx(1.0, abs=1e-9)
