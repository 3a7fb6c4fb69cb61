"""bench/gpu/detach_stress.sh end to end with a stand-in emo whose answer is known."""
import json
import os
import subprocess

SRC = os.environ.get("EMO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def test_each_library_is_run_in_turn_and_its_failed_runs_counted(tmp_path):
    """A stand-in emo (`trace ... --json F -- CMD`): with EMO_INJECT_LIB set (the library named
    "old") it aborts (status 134, no summary) in round 2; otherwise it writes a summary of 6
    detaches and exits 0. Two rounds of "old" and "new" (the library beside emo) alternate, and
    the last lines count the runs per library that did not end cleanly."""
    emo = tmp_path / "emo"
    emo.write_text("""#!/bin/bash
json=""
while [[ $1 != -- ]]; do [[ $1 == --json ]] && json=$2; shift; done
[[ $EMO_TRACE_QUIET_MS == 250 ]] || { echo "no quiet phases asked" >&2; exit 3; }
if [[ -n ${EMO_INJECT_LIB:-} && $json == *r2_old.json ]]; then
  echo "malloc(): unsorted double linked list corrupted" >&2
  exit 134
fi
echo '{"exit_code": 0, "traces": [{"cupti_detaches": 6, "end_reason": "exit", "step_time_ms": {"untraced": 12.5}}]}' >"$json"
""")
    emo.chmod(0o755)
    env = dict(os.environ, EMO=str(emo), OUT=str(tmp_path / "out"), PY="/bin/true", SPY="/usr/bin/python3",
               ROUNDS="2", LIBS="old=/some/libemo_inject.so new=", PATH="/usr/bin:/bin")
    r = subprocess.run(["bash", os.path.join(SRC, "bench", "gpu", "detach_stress.sh")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "detach" / "runs.jsonl").read_text().splitlines()]
    assert [(row["round"], row["lib"], row["rc"]) for row in rows] == [(1, "old", 0), (1, "new", 0), (2, "old", 134),
                                                                       (2, "new", 0)]
    assert rows[2]["aborted"] and "malloc()" in rows[2]["stderr_tail"] and rows[2]["detaches"] is None
    assert rows[3]["detaches"] == 6 and rows[3]["untraced_step_ms"] == 12.5 and rows[3]["stderr_tail"] == ""
    assert "old: 2 runs, 1 ended with a non-zero status, 6 detaches in the traces" in r.stdout
    assert "new: 2 runs, 0 ended with a non-zero status, 12 detaches in the traces" in r.stdout
    assert "round 2, old: rc 134" in r.stderr and "detaches None" in r.stderr, r.stderr
    assert "round 2, new: rc 0" in r.stderr and "detaches 6" in r.stderr, r.stderr
