"""bench/research/unknown_work_share.py: how traces pool into workloads, which kinds the rule
admits, and what --write puts in a device file, with a stand-in emo that reports given per-kind
shares for each trace (no GPU, no trace read)."""
import json
import os
import stat
import subprocess

SRC = os.environ.get("EMO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SRC, "bench", "research", "unknown_work_share.py")


def fake_emo(tmp_path, kinds_by_trace):
    """`emo optimize TRACE --device D --json -`: model.matmul_work.kinds of the trace's base name."""
    table = tmp_path / "kinds.json"
    table.write_text(json.dumps(kinds_by_trace))
    path = tmp_path / "emo"
    path.write_text(f"""#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
assert a[0] == "optimize" and a[a.index("--device") + 1] == "dev", a
kinds = json.load(open("{table}"))[os.path.basename(a[1])]
print(json.dumps({{"model": {{"matmul_work": {{"kinds": kinds}}}}}}))
""")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def kind(name, known_ms, work, launch):
    return {"kind": name, "matmul_ms": known_ms, "known_ms": known_ms, "work_share": work, "launch_share": launch,
            "power_share": 1.0}


def run(tmp_path, kinds_by_trace, *extra):
    emo = fake_emo(tmp_path, kinds_by_trace)
    traces = [str(tmp_path / t) for t in kinds_by_trace]
    return subprocess.run(["python3", SCRIPT, str(emo), "dev", *traces, *extra], capture_output=True, text=True,
                          timeout=60)


TRACES = {
    # Two traces of one workload pool by known time: (0.6*1 + 0.8*3) / (1*1 + 1*3) = 0.75.
    "cnn_async_light.json.gz": [kind("conv", 1.0, 0.6, 1.0)],
    "cnn_sync_shapes.json.gz": [kind("conv", 3.0, 0.8, 1.0), kind("gemm", 2.0, 1.0, 1.0)],
    "resnet_rank0.json.gz": [kind("conv", 2.0, 0.35, 0.5)],  # 0.70
    "resnet_rank1.json.gz": [kind("conv", 2.0, 0.35, 0.5)],
    "unet.emotrace": [kind("conv", 1.0, 0.8, 1.0), kind("gemm", 2.0, 0.5, 1.0)],  # conv 0.80, gemm 0.5
    "bert.json.gz": [kind("gemm", 4.0, 1.3, 1.0), kind("attention", 1.0, None, None)],  # gemm 1.3
}


def test_kinds_whose_workloads_agree_are_admitted_at_their_median(tmp_path):
    out = run(tmp_path, TRACES)
    assert out.returncode == 0, out.stderr
    rows = out.stdout
    assert "| conv | cnn | 4.00 | 0.750 | 1.000 | 0.750 |" in rows
    assert "| conv | resnet | 4.00 | 0.350 | 0.500 | 0.700 |" in rows
    assert "| conv | unet | 1.00 | 0.800 | 1.000 | 0.800 |" in rows
    assert "**0.750** (range 0.700-0.800, widest 7 % off: admitted)" in rows
    # GEMMs: 1.0, 0.5 and 1.3 disagree; attention has no kernel of known work.
    assert "**1.000** (range 0.500-1.300, widest 50 % off: workloads disagree)" in rows
    assert "| attention |" not in rows


def test_too_few_workloads_or_a_tighter_spread_admit_nothing(tmp_path):
    out = run(tmp_path, TRACES, "--min-workloads", "4")
    assert out.returncode == 0, out.stderr
    assert "too few workloads" in out.stdout and ": admitted)" not in out.stdout
    out = run(tmp_path, TRACES, "--spread", "0.05")
    assert "widest 7 % off: workloads disagree" in out.stdout


def test_write_sets_admitted_kinds_and_drops_the_others(tmp_path):
    device = tmp_path / "dev.json"
    device.write_text(json.dumps({
        "name": "dev",
        "kinds": {
            "conv": {"comp_share": {"value": 0.8, "source": "s"}},
            "gemm": {"comp_share": {"value": 0.7, "source": "s"}, "power_share": {"value": 1.2, "source": "old"}},
            "attention": {"power_share": {"value": 0.9, "source": "old"}},
        }}))
    out = run(tmp_path, TRACES, "--write", str(device))
    assert out.returncode == 0, out.stderr
    kinds = json.loads(device.read_text())["kinds"]
    assert kinds["conv"]["comp_share"]["value"] == 0.8  # kept
    assert kinds["conv"]["power_share"]["value"] == 0.75
    assert "median over 3 workloads (cnn, resnet, unet" in kinds["conv"]["power_share"]["source"]
    assert "no energy measurement read" in kinds["conv"]["power_share"]["source"]
    assert "power_share" not in kinds["gemm"] and kinds["gemm"]["comp_share"]["value"] == 0.7
    assert "attention" not in kinds  # it held only a power share


def test_a_failing_emo_is_named(tmp_path):
    out = run(tmp_path, {"plain.json.gz": []})
    assert out.returncode == 0, out.stderr  # no matrix multiplies: nothing admitted, nothing to fail on
    assert ": admitted)" not in out.stdout and "| conv |" not in out.stdout
    emo = fake_emo(tmp_path, {})
    bad = subprocess.run(["python3", SCRIPT, str(emo), "dev", str(tmp_path / "x.json.gz")], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and "emo optimize" in bad.stderr and "x.json.gz" in bad.stderr
