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
