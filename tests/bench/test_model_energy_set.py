"""bench/model_energy_set.py: which measured step and energy each loop of a kernel sweep or a
held-out set is scored against, and the error it prints, with a stand-in emo whose prediction is
a known function of the step it is given (no GPU, no trace read)."""
import json
import os
import stat
import subprocess

import pytest

SRC = os.environ.get("EMO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SRC, "bench", "model_energy_set.py")


def fake_emo(tmp_path):
    """`emo optimize TRACE --device D --step-time MS --json -`: baseline energy = MS x 0.1 J per ms
    for device "a" and x 0.2 for device "b"; every call logged."""
    path = tmp_path / "emo"
    log = tmp_path / "calls.txt"
    path.write_text(f"""#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
open("{log}", "a").write(" ".join(a) + "\\n")
ms = float(a[a.index("--step-time") + 1])
k = {{"a": 0.1, "b": 0.2}}[a[a.index("--device") + 1]]
print(json.dumps({{"baseline": {{"energy_j": ms * k, "time_us": ms * 1e3}}}}))
""")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, log


def run(tmp_path, folder, *devices):
    emo, log = fake_emo(tmp_path)
    out = subprocess.run(["python3", SCRIPT, str(emo), str(folder), *devices], capture_output=True, text=True,
                         timeout=60)
    return out, log.read_text().splitlines() if log.exists() else []


def touch_traces(folder, names):
    for n in names:
        (folder / f"{n}.json.gz").write_bytes(b"")


def test_sweep_scores_each_config_at_its_own_step(tmp_path):
    d = tmp_path / "sweep"
    d.mkdir()
    # gemm: 2 ms, 0.2 J measured -> device a predicts 0.2 J (0 %), b 0.4 J (+100 %)
    # copy: 4 ms, 0.5 J -> a 0.4 J (-20 %), b 0.8 J (+60 %)
    (d / "measured.json").write_text(json.dumps({"device": "X", "configs": {
        "gemm": {"iter_s": 0.002, "energy_per_iter_j": 0.2},
        "copy": {"iter_s": 0.004, "energy_per_iter_j": 0.5}}}))
    touch_traces(d, ["gemm", "copy"])
    out, calls = run(tmp_path, d, "a", "b")
    assert out.returncode == 0, out.stderr
    assert "| copy | 4.00 | 0.500 | 0.400, -20.0 % | 0.800, +60.0 % |" in out.stdout
    assert "| gemm | 2.00 | 0.200 | 0.200, +0.0 % | 0.400, +100.0 % |" in out.stdout
    assert "a: 1 of 2 within 10 %, max |error| 20.0 %" in out.stdout
    assert "b: 0 of 2 within 10 %, max |error| 100.0 %" in out.stdout
    assert any("--step-time 2.000000" in c and c.endswith("gemm.json.gz --device a --step-time 2.000000 --json -")
               for c in calls)


def test_held_out_step_is_energy_over_power_of_the_traces_own_process(tmp_path):
    d = tmp_path / "held"
    d.mkdir()
    # truth.json: the trace's own process, 0.9 J at 250 W -> 3.6 ms; measured.json's pooled sync
    # figures (other numbers) must not be used for it.
    (d / "truth.json").write_text(json.dumps({"device": "X", "w": {"traces": {
        "sync_shapes": {"energy_per_iter_j": 0.9, "avg_power_w": 250.0}}}}))
    (d / "measured.json").write_text(json.dumps({"device": "X", "workloads": {"w": {
        "sync": {"energy_per_iter_j": 5.0, "avg_power_w": 100.0, "processes": 2}}}}))
    touch_traces(d, ["w_sync_shapes", "not_a_loop"])
    out, calls = run(tmp_path, d, "a")
    assert out.returncode == 0, out.stderr
    assert "| w_sync_shapes | 3.60 | 0.900 | 0.360, -60.0 % |" in out.stdout
    assert len(calls) == 1  # not_a_loop is not <workload>_<sync|async>_<config>


def test_held_out_without_truth_reads_one_process_loops_and_refuses_pooled_ones(tmp_path):
    d = tmp_path / "light"
    d.mkdir()
    (d / "measured.json").write_text(json.dumps({"device": "X", "workloads": {"w": {
        "async": {"energy_per_iter_j": 0.2, "avg_power_w": 400.0, "processes": 1}}}}))
    touch_traces(d, ["w_async_light"])
    out, _ = run(tmp_path, d, "a")
    assert out.returncode == 0, out.stderr
    assert "| w_async_light | 0.50 | 0.200 | 0.050, -75.0 % |" in out.stdout
    pooled = json.loads((d / "measured.json").read_text())
    pooled["workloads"]["w"]["async"]["processes"] = 2
    (d / "measured.json").write_text(json.dumps(pooled))
    out, _ = run(tmp_path, d, "a")
    assert out.returncode != 0
    assert "pools 2 processes and truth.json is missing" in out.stderr


def test_no_device_prints_usage(tmp_path):
    out, _ = run(tmp_path, tmp_path)
    assert out.returncode != 0
    assert "model_energy_set.py EMO DIR DEVICE" in out.stderr


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__]))
