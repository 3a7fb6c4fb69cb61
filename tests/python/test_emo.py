"""The Python package against the emo binary of the same build: the same JSON for the same
arguments, errors as exceptions carrying emo's message."""
import json
import os
import subprocess
import sys
import tempfile

import pytest

import emo

SOURCE = os.environ.get("EMO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLE = os.path.join(SOURCE, "examples", "gpt_train_h200.json.gz")
EMO_TRACE = os.path.join(SOURCE, "examples", "streams_graph_h200.emotrace")


# Wall-clock times of the work itself, which differ between any two runs.
WALL_TIMES = {"solve_ms", "plan_ms"}


def binary(*args):
    """The emo binary run as `emo ARGS...`."""
    path = os.environ.get("EMO_BIN")
    if not path:
        pytest.fail("EMO_BIN is not set: run these tests through ctest (python_test)")
    return subprocess.run([path, *args], capture_output=True, text=True)


def binary_json(*args):
    """The emo binary's --json output for `emo ARGS...`."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "out.json")
        done = binary(*args, "--json", path)
        assert done.returncode == 0, done.stderr
        with open(path) as f:
            return json.load(f)


def without_wall_times(x):
    if isinstance(x, dict):
        return {k: without_wall_times(v) for k, v in x.items() if k not in WALL_TIMES}
    if isinstance(x, list):
        return [without_wall_times(v) for v in x]
    return x


def test_analyze_gives_the_binarys_json():
    got = emo.analyze(SAMPLE)
    assert got == binary_json("analyze", SAMPLE)
    assert got["iteration_time_us"]["corrected"] > 0


def test_options_become_flags_and_an_emo_trace_is_read_too():
    got = emo.analyze([EMO_TRACE], correct_overhead="off")
    assert got == binary_json("analyze", EMO_TRACE, "--correct-overhead", "off")
    assert got["iteration_time_us"]["replayed"] == pytest.approx(got["iteration_time_us"]["measured"], rel=0.01)


def test_whatif_gives_the_binarys_json():
    got = emo.whatif(SAMPLE, scale=[".*gemm.*=0.5"])
    assert got == binary_json("whatif", SAMPLE, "--scale", ".*gemm.*=0.5")


def test_optimize_gives_the_binarys_json():
    got = emo.optimize(SAMPLE, device="h200", max_slowdown=0.05)
    want = binary_json("optimize", SAMPLE, "--device", "h200", "--max-slowdown", "0.05")
    assert without_wall_times(got) == without_wall_times(want)
    assert got["plan"]["saving_pct"] > 0
    assert got["solver"]["solve_ms"] >= 0


def test_flags():
    assert emo.flags({"max_slowdown": 0.05, "quiet": True, "off": False, "none": None, "scale": ["a=1", "b=2"]}) == [
        "--max-slowdown=0.05", "--quiet", "--scale=a=1", "--scale=b=2"]


def test_a_missing_trace_raises_with_emos_message_naming_the_file(tmp_path):
    missing = tmp_path / "nope.json.gz"
    with pytest.raises(emo.EmoError) as e:
        emo.analyze(missing)
    assert "nope.json.gz" in str(e.value)
    assert e.value.exit_code == binary("analyze", str(missing)).returncode == 2  # a usage error, as in the CLI


def test_a_file_that_is_not_a_trace_raises(tmp_path):
    bad = tmp_path / "garbage.json"
    bad.write_bytes(b"\x00\x01 this is not json {")
    with pytest.raises(emo.EmoError) as e:
        emo.analyze(bad)
    assert "garbage.json" in str(e.value)
    assert e.value.exit_code == binary("analyze", str(bad)).returncode == 1


def test_an_unknown_option_is_a_usage_error():
    with pytest.raises(emo.EmoError) as e:
        emo.analyze(SAMPLE, no_such_option=3)
    assert e.value.exit_code == 2
    assert "--no-such-option" in str(e.value)


def test_commands_that_start_programs_are_refused_in_process():
    with pytest.raises(emo.EmoError) as e:
        emo.cli(["trace", "--", "true"])
    assert "not run inside Python" in str(e.value)


def test_cli_returns_what_the_command_printed():
    done = emo.cli(["analyze", SAMPLE])
    assert done.exit_code == 0
    assert "iteration time" in done.stdout
    assert done.stderr == ""  # no progress lines: the capture is not a terminal


def test_the_gil_is_released_while_emo_reads_and_analyzes(tmp_path):
    """emo.analyze reads its trace from a named pipe that this process's main thread fills only
    after the call has begun on another thread: with the GIL held through the call the main
    thread could never write, and the child would hang until the timeout."""
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    script = f"""
import json, sys, threading
import emo
result = {{}}
def work():
    result["analysis"] = emo.analyze({str(fifo)!r})
worker = threading.Thread(target=work)
worker.start()
with open({str(fifo)!r}, "wb") as pipe, open({SAMPLE!r}, "rb") as sample:
    pipe.write(sample.read())
worker.join()
json.dump(result["analysis"], sys.stdout)
"""
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120, env=os.environ.copy())
    except subprocess.TimeoutExpired:
        pytest.fail("emo.analyze held the GIL: the main thread never got to write the trace into the pipe")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    want = emo.analyze(SAMPLE)
    for d in (got, want):
        d.pop("trace", None)
    assert without_wall_times(got) == without_wall_times(want)
