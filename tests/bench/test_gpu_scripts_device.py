"""bench/gpu scripts' choice of device model and overhead_concurrent.sh's stop when no policy
can be made, with a stand-in emo (no GPU, no PyTorch: the script stops before any program runs)."""
import os
import stat
import subprocess

SRC = os.environ.get("EMO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
GPU = os.path.join(SRC, "bench", "gpu")


def fake_emo(tmp_path, optimize_rc):
    """An emo whose `trace` succeeds and whose `optimize` logs its --device and exits optimize_rc
    (writing the --policy file when it succeeds), as `emo optimize` refusing another GPU's trace."""
    path = tmp_path / "emo"
    log = tmp_path / "calls.txt"
    path.write_text(f"""#!/bin/bash
echo "$*" >>"{log}"
case $1 in
  trace) exit 0 ;;
  optimize)
    if [[ {optimize_rc} != 0 ]]; then
      echo "emo optimize: t.emotrace: recorded on NVIDIA H100 80GB HBM3, not the device model's GPU" >&2
      exit {optimize_rc}
    fi
    while [[ $# -gt 0 ]]; do [[ $1 == --policy ]] && echo '{{}}' >"$2"; shift; done
    exit 0 ;;
  run) exit 0 ;;
esac
""")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, log


def run_concurrent(tmp_path, emo, env_extra):
    env = dict(os.environ, EMO=str(emo), OUT=str(tmp_path / "out"), CYCLE="run:plain", ROUNDS="1", SOLO="0",
               CORES_A="0", CORES_B="0",  # any machine, one core or many
               PATH="/usr/bin:/bin", **env_extra)
    return subprocess.run(["bash", os.path.join(GPU, "overhead_concurrent.sh")], env=env, capture_output=True,
                          text=True, timeout=60)


def test_no_policy_stops_before_any_round_and_says_why(tmp_path):
    emo, log = fake_emo(tmp_path, optimize_rc=1)
    r = run_concurrent(tmp_path, emo, {"DEVICE": "h200"})
    assert r.returncode == 1, r.stderr
    assert "no policy to run" in r.stderr and "recorded on NVIDIA H100" in r.stderr, r.stderr
    calls = log.read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["trace", "optimize"]  # no `emo run` round followed
    assert (tmp_path / "out" / "concurrent" / "rounds.jsonl").read_text() == ""


def test_policy_is_made_with_the_device_model_asked_for(tmp_path):
    emo, log = fake_emo(tmp_path, optimize_rc=0)
    run_concurrent(tmp_path, emo, {"DEVICE": "h100-sxm", "PY": "/bin/false"})
    optimize = [c for c in log.read_text().splitlines() if c.startswith("optimize")]
    assert len(optimize) == 1 and "--device h100-sxm" in optimize[0], optimize
    assert (tmp_path / "out" / "concurrent" / "policy.json").read_text().strip() == "{}"


def test_device_model_follows_the_gpu_name(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    out = {}
    for name, want in (("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-80GB", "a100-sxm")):
        smi.write_text(f"#!/bin/bash\necho '{name}'\n")
        smi.chmod(0o755)
        env = dict(os.environ, PATH=f"{bindir}:/usr/bin:/bin")
        env.pop("DEVICE", None)
        got = subprocess.run(["bash", "-c", f"source '{GPU}/loops.sh'; device_model"], env=env, capture_output=True,
                             text=True, timeout=30).stdout.strip()
        out[name] = (got, want)
        # Every model the scripts name is a device file emo ships.
        assert os.path.exists(os.path.join(SRC, "devices", got + ".json")), got
    assert all(got == want for got, want in out.values()), out
    env = dict(os.environ, PATH=f"{bindir}:/usr/bin:/bin", DEVICE="a40")
    assert subprocess.run(["bash", "-c", f"source '{GPU}/loops.sh'; device_model"], env=env, capture_output=True,
                          text=True, timeout=30).stdout.strip() == "a40"
