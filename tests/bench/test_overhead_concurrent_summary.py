"""bench/gpu/overhead_concurrent_summary.py on synthetic rounds whose answer is known."""
import json
import math
import os
import random
import subprocess
import sys

import pytest

SRC = os.environ.get("EMO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "bench", "gpu"))
import overhead_concurrent_summary as ocs  # noqa: E402


def program(rng, t0, base_ms, n, warmup, drift, slow_steps=()):
    """A program's JSON line: steps of base_ms x the host's drift at that moment x noise (x 1.5 in slow_steps)."""
    starts, steps = [], []
    t = t0
    for i in range(n):
        ms = base_ms * drift(t) * (1 + 0.03 * rng.gauss(0, 1)) * (1.5 if i in slow_steps else 1.0)
        starts.append(t)
        steps.append(ms)
        t += ms * 1e-3 + 1e-4
    return {"step_start_s": starts, "step_ms": steps, "warmup_steps": warmup, "median_step_ms": 0}


def rounds(cost, side_bias=1.0, cycle=(("emo", "plain"), ("plain", "emo"), ("plain", "plain")), n=12, seed=5,
           traced_window=range(50, 75)):
    """Rows of n rounds: a traced program costs `cost` (its window's steps 1.5x slower), side A
    runs `side_bias` slower than B, and the host's speed drifts by +-25 % over time alike for both."""
    rng = random.Random(seed)
    drift = lambda t: 1 + 0.25 * math.sin(t / 5)  # noqa: E731
    rows = [{"round": 0, "kind": "solo", "side": "A", "mode": "plain", "cores": "A", "rc": 0,
             "program": program(rng, 0, 10, 800, 30, lambda t: 1.0)}]
    for r in range(1, n + 1):
        ma, mb = cycle[(r - 1) % len(cycle)]
        kind = "aa" if ma == mb == "plain" else "ab"
        for side, mode in (("A", ma), ("B", mb)):
            base = 12 * (cost[mode] if mode != "plain" else 1.0) * (side_bias if side == "A" else 1.0)
            start = 100.0 * r + rng.random() + (1.0 if mode != "plain" else 0)
            slow = traced_window if mode != "plain" else ()
            prog = program(rng, start, base, 1500, 30, drift, slow)
            if mode == "spin":
                prog["host_spin_us"] = 300
            rows.append({"round": r, "kind": kind, "side": side, "mode": mode, "cores": side, "rc": 0,
                         "program": prog})
    return rows


def test_recovers_a_known_cost_despite_the_hosts_drift_and_a_slower_half():
    out = ocs.summarize(rounds({"emo": 1.03}, side_bias=1.02), after=75)
    ab = out["ab"]
    assert ab["emo_over_plain"]["n"] == 8
    # Each half alone carries the halves' difference, with opposite signs; balanced, it cancels.
    assert ab["emo_on_A"]["geometric_mean"] == pytest.approx(1.03 * 1.02, abs=0.006)
    assert ab["emo_on_B"]["geometric_mean"] == pytest.approx(1.03 / 1.02, abs=0.006)
    assert ab["halves_balanced"] == pytest.approx(1.03, abs=0.005)
    lo, hi = ab["emo_over_plain"]["bootstrap95_geometric_mean"]
    assert lo < ab["emo_over_plain"]["geometric_mean"] < hi
    assert out["aa"]["A_over_B"]["n"] == 4
    assert out["aa"]["A_over_B"]["geometric_mean"] == pytest.approx(1.02, abs=0.006)
    assert out["solo"]["median_step_ms"] == pytest.approx(10, rel=0.01)


def test_no_cost_reads_one_and_the_traced_window_is_left_out():
    # The window's steps are 1.5x slower; counted from step 30 they would move the median.
    out = ocs.summarize(rounds({"emo": 1.0}, traced_window=range(30, 300)), after=300)
    assert out["ab"]["halves_balanced"] == pytest.approx(1.0, abs=0.005)
    counted = ocs.summarize(rounds({"emo": 1.0}, traced_window=range(30, 300)), after=30)
    assert counted["ab"]["halves_balanced"] > 1.012


def test_other_tracer_modes_are_summed_apart_after_their_window_too():
    cycle = (("emo_noanchor", "plain"), ("plain", "emo_noanchor"), ("emo", "plain"), ("plain", "emo"))
    out = ocs.summarize(rounds({"emo": 1.0, "emo_noanchor": 1.05}, cycle=cycle, traced_window=range(30, 300)),
                        after=300)
    assert out["emo_noanchor"]["emo_noanchor_over_plain"]["n"] == 6
    assert out["emo_noanchor"]["emo_noanchor_over_plain"]["geometric_mean"] == pytest.approx(1.05, abs=0.006)
    assert out["ab"]["emo_over_plain"]["n"] == 6
    assert out["ab"]["emo_over_plain"]["geometric_mean"] == pytest.approx(1.0, abs=0.006)


def test_a_failed_side_or_a_short_overlap_drops_the_round_and_says_why():
    rows = rounds({"emo": 1.0}, n=3)
    rows[1]["rc"] = 1  # round 1, side A
    rows[1]["program"] = None
    for row in rows:
        if row["round"] == 2 and row["side"] == "B":
            row["program"]["step_start_s"] = [s + 1000 for s in row["program"]["step_start_s"]]
    out = ocs.summarize(rows, after=75)
    by = {r["round"]: r for r in out["rounds"]}
    assert "rc 1" in by[1]["dropped"]
    assert "dropped" in by[2]
    assert "ratio" in by[3] and "dropped" not in by[3]
    assert out["ab"]["emo_over_plain"]["n"] == 0 and out["aa"]["A_over_B"]["n"] == 1  # round 3: A/A


def test_files_are_pooled_with_their_rounds_apart(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in rounds({"emo": 1.02}, n=3, seed=1)))
    b.write_text("".join(json.dumps(r) + "\n" for r in rounds({"emo": 1.02}, n=3, seed=2)))
    script = os.path.join(SRC, "bench", "gpu", "overhead_concurrent_summary.py")
    res = subprocess.run([sys.executable, script, str(a), str(b), "--after", "75"], capture_output=True, text=True,
                         check=True)
    out = json.loads(res.stdout)
    assert out["ab"]["emo_over_plain"]["n"] == 4  # 2 emo rounds per file
    assert out["aa"]["A_over_B"]["n"] == 2
    assert out["ab"]["emo_over_plain"]["geometric_mean"] == pytest.approx(1.02, abs=0.01)


def test_a_cost_is_read_through_the_spin_of_known_size():
    # The spin adds 300 us to a 10 ms solo step (3 %), and the design shows a third of it
    # (x1.01): emo's x1.005 is then 1.5 % of the loop alone, and below the spin's showing.
    cycle = (("spin", "plain"), ("plain", "spin"), ("emo", "plain"), ("plain", "emo"))
    out = ocs.summarize(rounds({"emo": 1.005, "spin": 1.01}, cycle=cycle, n=16, traced_window=range(30, 300)),
                        after=300)
    sc = out["scaled_by_spin"]
    assert sc["known_share_of_solo_step"] == pytest.approx(0.03, rel=0.02)
    assert sc["sensitivity"] == pytest.approx(1 / 3, rel=0.25)
    emo = sc["modes"]["emo"]
    assert emo["n"] == 8 and emo["n_spin"] == 8
    assert emo["cost_alone"] == pytest.approx(0.015, abs=0.005)
    lo, hi = emo["bootstrap95"]
    assert lo < emo["cost_alone"] < hi
    assert emo["over_spin"] == pytest.approx(1.005 / 1.01, abs=0.003)
    assert emo["share_below_spin"] > 0.95
    # A mode that shows more than the spin is read as more than the spin's known cost.
    more = ocs.summarize(rounds({"emo": 1.02, "spin": 1.01}, cycle=cycle, n=16, traced_window=range(30, 300)),
                         after=300)["scaled_by_spin"]["modes"]["emo"]
    assert more["cost_alone"] > 0.03 and more["share_below_spin"] < 0.05


def test_without_spin_rounds_nothing_is_scaled():
    out = ocs.summarize(rounds({"emo": 1.01}), after=75)
    assert "scaled_by_spin" not in out


def test_pooled_files_read_each_spin_against_its_own_solo_run(tmp_path):
    # The same 300 us spin is 3 % of file a's 10 ms solo step and 1.5 % of file b's 20 ms one.
    cycle = (("spin", "plain"), ("plain", "spin"), ("emo", "plain"), ("plain", "emo"))
    a = rounds({"emo": 1.0, "spin": 1.01}, cycle=cycle, n=4, seed=1, traced_window=range(30, 300))
    b = rounds({"emo": 1.0, "spin": 1.01}, cycle=cycle, n=4, seed=2, traced_window=range(30, 300))
    b[0]["program"]["step_ms"] = [2 * ms for ms in b[0]["program"]["step_ms"]]
    paths = []
    for name, rows in (("a", a), ("b", b)):
        paths.append(tmp_path / f"{name}.jsonl")
        paths[-1].write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = os.path.join(SRC, "bench", "gpu", "overhead_concurrent_summary.py")
    res = subprocess.run([sys.executable, script, *map(str, paths), "--after", "300"], capture_output=True,
                         text=True, check=True)
    out = json.loads(res.stdout)
    assert out["solo"]["median_step_ms"] == pytest.approx(10, rel=0.01)  # the first file's
    assert out["scaled_by_spin"]["known_share_of_solo_step"] == pytest.approx(0.0225, rel=0.02)
    assert not any("dropped" in r for r in out["rounds"])  # the second file's solo is no round
