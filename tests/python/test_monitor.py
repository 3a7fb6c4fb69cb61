"""emo.Monitor against the stand-in NVML of the runtime tests (tests/runtime/fake_nvml.cc): two
H200s whose energy counters read FAKE_NVML_POWER_W watts times the seconds since their first
read. Each window's energy must be that power times its time; nothing may be set on a GPU."""
import os
import time

import pytest

import emo

GPUS = "0000:19:00.0=NVIDIA H200,0000:2a:00.0=NVIDIA H200"


@pytest.fixture
def fake_nvml(monkeypatch, tmp_path):
    path = os.environ.get("EMO_FAKE_NVML")
    if not path:
        pytest.fail("EMO_FAKE_NVML is not set: run these tests through ctest (python_test)")
    log = tmp_path / "nvml.log"
    monkeypatch.setenv("EMO_NVML_LIBRARY", path)
    monkeypatch.setenv("FAKE_NVML_GPUS", GPUS)
    monkeypatch.setenv("FAKE_NVML_POWER_W", "250")
    monkeypatch.setenv("FAKE_NVML_LOG", str(log))
    return log


def test_windows_give_each_gpus_energy_over_their_time(fake_nvml):
    monitor = emo.Monitor()
    assert monitor.gpu_indices == [0, 1]
    monitor.begin_window("outer")
    time.sleep(0.2)
    monitor.begin_window("inner")
    time.sleep(0.1)
    inner = monitor.end_window("inner")
    outer = monitor.end_window("outer")
    assert 0 < inner.time < outer.time
    for m in (inner, outer):
        assert sorted(m.energy) == [0, 1]
        for gpu in (0, 1):
            assert m.energy[gpu] == pytest.approx(250.0 * m.time, rel=0.02, abs=0.002)
            assert m.uncertainty[gpu] == pytest.approx(m.energy[gpu] * 2 * 0.1 / m.time)
            assert m.gpu_names[gpu] == "NVIDIA H200"
        assert m.total_energy == pytest.approx(m.energy[0] + m.energy[1])
        assert not m.measurable  # under 2 s: two counter periods are over 10 % of it
    log = fake_nvml.read_text()
    assert "Set" not in log and "Reset" not in log


def test_one_gpu_by_index(fake_nvml):
    m = emo.Monitor(gpu_indices=[1])
    assert m.gpu_indices == [1]
    m.begin_window("w")
    assert list(m.end_window("w").energy) == [1]


def test_misuse_and_missing_gpus_raise(fake_nvml, monkeypatch):
    monitor = emo.Monitor()
    with pytest.raises(emo.EmoError, match="window 'never' was not begun"):
        monitor.end_window("never")
    monitor.begin_window("twice")
    with pytest.raises(emo.EmoError, match="window 'twice' is open already"):
        monitor.begin_window("twice")
    with pytest.raises(emo.EmoError, match="GPU 7"):
        emo.Monitor(gpu_indices=[7])
    with pytest.raises(emo.EmoError, match="cannot be loaded"):
        emo.Monitor(nvml_library="/nonexistent/libnvidia-ml.so.1")
    monkeypatch.delenv("FAKE_NVML_POWER_W")
    with pytest.raises(emo.EmoError, match="no energy counter"):
        emo.Monitor()
