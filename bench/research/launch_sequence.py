#!/usr/bin/env python3
"""Writes the kernel-launch sequence of a single-stream EMO trace, as LaunchPeriodFinder sees it, for
replaying a real program's launches through the finder in a unit test (tests/runtime,
data/h200_emo/launch_sequences). Input: the Perfetto export of a trace traced whole
(`emo trace --warmup 0 --iterations 100000`, then `emo analyze T.emotrace --perfetto P.json`).
The i-th launch call is matched with the i-th kernel in GPU order, which holds for a program that
launches on one stream only (the script refuses a trace with kernels on several).

Output, one line per launch: "<signature> <host ns since the previous launch>", the signature a
small integer per distinct kernel name, in order of first appearance; and before a launch, one
line "wait <call>" per host wait for the GPU made since the previous launch (the calls the tracer
reports to the finder as waits: synchronizes and synchronous copies).
  python3 bench/research/launch_sequence.py P.json [MAX_LAUNCHES] > sequence.txt
"""
import json
import sys

# The calls src/runtime/tracer.cc counts as host waits (kRuntimeWaits, kDriverWaits).
WAITS = {"cudaMemcpy", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize",
         "cuMemcpy", "cuMemcpyDtoH", "cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize"}


def main():
    events = json.load(open(sys.argv[1]))
    events = events["traceEvents"] if isinstance(events, dict) else events
    api = [e for e in events if str(e.get("cat", "")).startswith("cuda_api")]
    launches = sorted(e["ts"] for e in api if "Launch" in e["name"])
    waits = sorted((e["ts"], e["name"]) for e in api if e["name"].split("_v")[0].split("_pt")[0] in WAITS)
    kernels = [e for e in events if str(e.get("cat", "")).startswith("gpu_op")
               and not e["name"].startswith(("Memcpy", "Memset"))]
    streams = {(e["pid"], e["tid"]) for e in kernels}
    if len(streams) != 1:
        sys.exit(f"{sys.argv[1]}: kernels on {len(streams)} streams; launches cannot be matched in order")
    kernels.sort(key=lambda e: e["ts"])
    if len(kernels) != len(launches):
        sys.exit(f"{sys.argv[1]}: {len(launches)} launch calls but {len(kernels)} kernels")
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else len(launches)
    ids = {}
    previous = launches[0]
    w = 0
    for t, k in list(zip(launches, kernels))[:limit]:
        while w < len(waits) and waits[w][0] < t:
            print("wait", waits[w][1])
            w += 1
        sig = ids.setdefault(k["name"], len(ids) + 1)
        print(sig, round((t - previous) * 1000))
        previous = t


if __name__ == "__main__":
    main()
