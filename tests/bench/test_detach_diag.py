"""bench/gpu/detach_diag.sh end to end with a stand-in emo and a stand-in training loop, and
bench/gpu/crash_backtrace.c on a program that really crashes."""
import json
import os
import shutil
import subprocess

import pytest

SRC = os.environ.get("EMO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed to build crash_backtrace.c")
def test_each_case_runs_its_program_its_way_and_a_crash_prints_its_stack(tmp_path):
    """The stand-in emo (`trace ... --json F -- CMD`) runs CMD and writes a summary naming what the
    case set (PYTHONFAULTHANDLER, EMO_TRACE_ANCHOR); the stand-in loop (PY) crashes with SIGSEGV.
    Each case's exit status is kept, its stderr and summary copied, and the backtrace case's
    preloaded library prints the crashing thread's stack before the signal ends it."""
    emo = tmp_path / "emo"
    emo.write_text("""#!/bin/bash
json=""
while [[ $1 != -- ]]; do [[ $1 == --json ]] && json=$2; shift; done
shift
[[ $EMO_TRACE_QUIET_MS == 250 ]] || { echo "no quiet phases asked" >&2; exit 3; }
echo "{\\"faulthandler\\": \\"${PYTHONFAULTHANDLER:-}\\", \\"anchor\\": \\"${EMO_TRACE_ANCHOR:-}\\"}" >"$json"
"$@"
rc=$?
echo "stand-in emo: the program ended with $rc" >&2
exit $rc
""")
    emo.chmod(0o755)
    loop = tmp_path / "loop"
    loop.write_text("#!/bin/bash\nexec /usr/bin/python3 -c 'import ctypes; ctypes.string_at(0)'\n")
    loop.chmod(0o755)
    env = dict(os.environ, EMO=str(emo), OUT=str(tmp_path / "out"), PY=str(loop), SPY="/usr/bin/python3",
               CASES="faulthandler anchor0 backtrace", PATH="/usr/bin:/bin")
    r = subprocess.run(["bash", os.path.join(SRC, "bench", "gpu", "detach_diag.sh")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    diag = tmp_path / "out" / "diag"
    rows = [json.loads(line) for line in (diag / "runs.jsonl").read_text().splitlines()]
    assert [row["case"] for row in rows] == ["faulthandler", "anchor0", "backtrace"]
    assert all(row["rc"] == 139 for row in rows), rows
    assert json.loads((diag / "faulthandler.json").read_text())["faulthandler"] == "1"
    assert json.loads((diag / "anchor0.json").read_text())["anchor"] == "0"
    crashed = (diag / "backtrace.err").read_text()
    assert "crash_backtrace: signal 11" in crashed, crashed
    assert "libcrash_backtrace.so" in crashed and "stand-in emo: the program ended with 139" in crashed
    assert "crash_backtrace" not in (diag / "anchor0.err").read_text()
