#!/usr/bin/env python3
"""Writes a synthetic N-rank job from one rank's Kineto trace (a template), for the job-scale
benchmark (bench/job_scale.sh): N copies of the template, each made rank r of N (distributedInfo
and every collective's rank, group size and group ranks rewritten), so that every collective
matches across all N ranks. Standard library only.

    python3 bench/synthetic_job.py TEMPLATE.json[.gz] N OUT_DIR

Writes OUT_DIR/rank_<r>.json.gz (gzip level 1). The copies are the template's timeline: the
benchmark measures reading, matching and the joint replay at N ranks, not a realistic straggler.
"""
import gzip
import json
import os
import sys

RANK = "@@EMO_RANK@@"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    template, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if n < 2:
        sys.exit("synthetic_job.py: N must be >= 2")
    opener = gzip.open if template.endswith(".gz") else open
    with opener(template, "rt") as f:
        trace = json.load(f)
    info = trace.get("distributedInfo")
    if not isinstance(info, dict):
        sys.exit(f"synthetic_job.py: {template} has no distributedInfo: not a rank of a job")
    ranks = list(range(n))
    info["rank"] = RANK
    info["world_size"] = n
    for pg in info.get("pg_config", []):
        pg["pg_size"] = n
        pg["ranks"] = ranks
    collectives = 0
    for e in trace.get("traceEvents", []):
        a = e.get("args")
        if not isinstance(a, dict) or "Collective name" not in a:
            continue
        collectives += 1
        if "Rank" in a:
            a["Rank"] = RANK
        if "Group size" in a:
            a["Group size"] = n
        if "Process Group Ranks" in a:
            a["Process Group Ranks"] = str(ranks)
    if collectives == 0:
        sys.exit(f"synthetic_job.py: {template} has no collective with its metadata")
    text = json.dumps(trace, separators=(",", ":"))
    # The placeholder stands for an integer: its quotes go with it.
    if ("\"" + RANK + "\"") not in text:
        sys.exit("synthetic_job.py: internal error: the rank placeholder was not written")
    os.makedirs(out, exist_ok=True)
    for r in range(n):
        with gzip.open(os.path.join(out, f"rank_{r}.json.gz"), "wt", compresslevel=1) as f:
            f.write(text.replace('"' + RANK + '"', str(r)))
    print(f"synthetic_job.py: {n} ranks of {template} ({collectives} collective records each) in {out}")


if __name__ == "__main__":
    main()
