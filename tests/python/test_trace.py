"""emo.trace on the stand-in libcupti and libcuda of the runtime tests (tests/runtime/fake_cupti.cc,
fake_cuda.cc): a child Python process, whose "CUDA" is running before the block (a primary context
on device 1), plays a training loop of five kernels per iteration with `with emo.trace(...)`
around part of it. The trace must hold the block alone, name the GPU of the context made before
it, and say what `emo trace --json` says of a file."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import emo

CHILD = textwrap.dedent(r"""
    import ctypes, json, os, sys
    fake_cuda = ctypes.CDLL(os.environ["EMO_FAKE_CUDA"], mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)
    fake = ctypes.CDLL(os.environ["EMO_FAKE_CUPTI"], mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)
    fake.FakeCuptiSetTime.argtypes = [ctypes.c_int64]
    fake.FakeCuptiLaunch.argtypes = [ctypes.c_uint64]
    fake.FakeCuptiWaitActivity.argtypes = [ctypes.c_int, ctypes.c_int]
    import emo

    now = 2_000_000_000
    def launch(i):
        global now
        now += 5_000_000 if i == 0 else 20_000   # 5 ms of host work, then 20 us apart
        fake.FakeCuptiSetTime(now)
        fake.FakeCuptiLaunch(0xA000 + i)

    def iteration(first=0):
        for i in range(first, 5):
            launch(i)

    def play(block):
        for _ in range(block):
            iteration()
        launch(0)    # the next iteration's first launch ends the last one

    out = sys.argv[1]
    report = {}
    for _ in range(3):
        iteration()                       # before the block: not traced
    with emo.trace(out, warmup=2, iterations=2) as t:
        try:
            with emo.trace(out):
                pass
        except emo.EmoError as e:
            report["nested"] = str(e)
        for _ in range(4):
            iteration()
        launch(0)                         # iteration 4 begins: the window [2, 4) is over
        if not fake.FakeCuptiWaitActivity(0, 60000):
            report["window"] = "activities stayed on"
        iteration(first=1)
        play(1)
    report["path"] = t.path
    report["summary"] = t.summary()
    try:
        with emo.trace(out + ".second", monitor=True):
            play(3)
            raise KeyError("the user's own error")
    except KeyError:
        report["raised"] = "KeyError"
    print(json.dumps(report))
""")


@pytest.fixture
def stand_ins():
    cupti, cuda = os.environ.get("EMO_FAKE_CUPTI"), os.environ.get("EMO_FAKE_CUDA")
    if not cupti or not cuda:
        pytest.skip("built without CUPTI: no tracer library and no stand-in CUPTI (tests/runtime)")
    return cupti, cuda


def run_child(tmp_path, extra_env):
    env = dict(os.environ, RANK="7", FAKE_CUDA_PRIMARY="1", **extra_env)
    out = tmp_path / "block_%r.emotrace"
    p = subprocess.run([sys.executable, "-c", CHILD, str(out)], env=env, capture_output=True, text=True, timeout=120)
    return p


def test_a_block_is_traced_alone_with_the_gpu_of_its_running_context(stand_ins, tmp_path):
    p = run_child(tmp_path, {})
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert "window" not in report
    assert "already being traced" in report["nested"]
    path = str(tmp_path / "block_7.emotrace")
    assert report["path"] == path
    s = report["summary"]
    assert s["path"] == path
    # The same summary the emo binary's reader gives of the file.
    assert s == json.loads(emo._emo.trace_summary(path))
    text = json.dumps(s)
    assert s["session"] == "block" and s["end_reason"] == "block_end" and s["complete"], text
    # The block's 6 iterations (the 3 before it are not the tracer's); the window [2, 4) traced.
    assert s["iterations"]["found"] == 6 and s["iterations"]["source"] == "launch_period", text
    assert [i["traced"] for i in s["iteration_times"]] == [False, False, True, True, False, False], text
    assert all(i["ms"] == pytest.approx(5.08) for i in s["iteration_times"]), text
    # Kernels of the block only: at least the window's 2 iterations of 5, at most the block's
    # launches up to the one that ended the window (4 iterations and one); the 15 launched
    # before the block are not there (tests/runtime checks their correlation ids one by one).
    assert 10 <= s["records"]["gpu_ops"] <= 21, text
    # The GPU of the context made before the block began: device 1.
    assert [g["device"] for g in s["gpus"]] == [1], text
    # The second block (monitor) was ended by the user's exception, which went on; its file is complete.
    assert report["raised"] == "KeyError"
    second = json.loads(emo._emo.trace_summary(str(tmp_path / "block_7.emotrace.second")))
    assert second["mode"] == "monitor" and second["session"] == "block", second
    assert second["end_reason"] == "exception" and second["complete"], second
    assert second["iterations"]["found"] == 3, second


def test_a_tracer_library_that_cannot_load_raises(tmp_path):
    bogus = tmp_path / "libemo_inject.so"
    bogus.write_text("not a library")
    with pytest.raises(emo.EmoError, match="cannot load"):
        # A fresh class state: the library is loaded once per process.
        class Fresh(emo.trace):
            _library = None
        with Fresh(str(tmp_path / "x.emotrace"), library=str(bogus)):
            pass


def test_settings_must_be_one_line():
    with pytest.raises(emo.EmoError, match="one line"):
        emo.trace("a\nb.emotrace")
