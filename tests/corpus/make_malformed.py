#!/usr/bin/env python3
"""Writes the malformed-input corpus (tests/corpus/malformed/): one small file per case of
cases.tsv. The cases too large to keep (deep nesting, an enormous line) are made by the test
itself. Run from the repository root:  python3 tests/corpus/make_malformed.py"""
import gzip
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "malformed")
os.makedirs(OUT, exist_ok=True)


def put(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def trace(events, **extra):
    d = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": events}
    d.update(extra)
    return json.dumps(d)


STEP = {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "ts": 0, "dur": 100, "pid": 1, "tid": 1}
LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 5, "pid": 1, "tid": 1,
          "args": {"correlation": 7}}
KERNEL = {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "ts": 20, "dur": 30, "pid": 0, "tid": 7,
          "args": {"correlation": 7, "stream": 7, "device": 0}}
GOOD = [STEP, LAUNCH, KERNEL]


def kernel(**change):
    k = dict(KERNEL)
    k.update(change)
    return k


put("empty.json", b"")
put("not_a_trace.json", '{"name": "a config file", "values": [1, 2, 3]}\n')
put("bare_array.json", json.dumps(GOOD))
put("truncated.json", trace(GOOD)[:150])
put("truncated.json.gz", gzip.compress(trace(GOOD * 40).encode(), mtime=0)[:300])
put("garbage.bin", bytes((i * 73 + 41) % 256 for i in range(4096)))
put("gzip_of_text.json.gz", gzip.compress(b"this is not json at all\n", mtime=0))
put("events_not_array.json", '{"traceEvents": 5}')
put("events_empty.json", trace([]))
put("cpu_only.json", trace([STEP, LAUNCH]))
put("ts_string.json", trace([STEP, LAUNCH, kernel(ts="abc")]))
put("ts_overflow.json", trace([STEP, LAUNCH, KERNEL]).replace('"ts": 20', '"ts": 1e400'))
put("ts_nan.json", trace([STEP, LAUNCH, kernel(ts=float("nan"))]))
put("ts_huge.json", trace([STEP, LAUNCH, kernel(ts=1e30)]))
put("dur_string.json", trace([STEP, LAUNCH, kernel(dur="long")]))
put("ts_missing.json", trace([STEP, LAUNCH, {k: v for k, v in KERNEL.items() if k != "ts"}]))
put("dur_negative.json", trace([STEP, LAUNCH, kernel(dur=-30)]))
put("kernel_no_correlation.json", trace([STEP, LAUNCH, kernel(args={"stream": 7, "device": 0})]))
put("correlation_string.json", trace([STEP, LAUNCH, kernel(args={"correlation": "seven", "stream": 7, "device": 0})]))
put("kernel_no_stream.json", trace([STEP, LAUNCH, kernel(args={"correlation": 7}), kernel(ts=60)]))
put("kernel_no_launch.json", trace([STEP, LAUNCH, kernel(args={"correlation": 99, "stream": 7, "device": 0})]))
put("duplicate_events.json", trace(GOOD + [LAUNCH, KERNEL]))
put("unsorted_events.json", trace(list(reversed(GOOD))))
put("events_not_objects.json", trace([1, "two", None, STEP, LAUNCH, KERNEL]))
put("rocm.json", trace(GOOD, roctracer_version=4, deviceProperties=[{"id": 0, "name": "AMD Instinct MI300X"}]))
put("device_not_json.json", "clocks: 1980\n")
put("device_no_clocks.json", json.dumps({"name": "broken", "gpu": "NVIDIA H200"}))
# A device file whose trace_gpu_regex repeats 20 digits' worth (libstdc++'s regex compiler
# overflows on it: found by fuzz_device).
h200 = json.load(open(os.path.join(os.path.dirname(OUT), "..", "..", "devices", "h200.json")))
h200["trace_gpu_regex"] = "H200{99999999999999999999}"
put("device_regex_huge_repeat.json", json.dumps(h200, indent=1))
put("profile_bad_header.csv", "a,b,c\n1,2,3\n")
put("profile_negative_time.csv", "stage,instruction,frequency,time,energy\n0,forward,1400,-0.01,1\n"
                                 "0,backward,1400,0.02,2\n1,forward,1400,0.01,1\n1,backward,1400,0.02,2\n")
put("profile_text_number.csv", "stage,instruction,frequency,time,energy\n0,forward,fast,0.01,1\n")
put("policy_not_json.json", "policy: all clocks low\n")
put("policy_bad_version.json", json.dumps({"format": "emo-policy", "version": 99, "gpus": []}))
put("calibration_garbage.json", json.dumps({"ratios": "none"}))
put("step_times_bad.txt", "examples/gpt_train_h200.json.gz twelve\n")

# EMO's own format, cut from the example trace: a wrong magic, the file header alone, half of it,
# and a version from the future.
example = open(os.path.join(os.path.dirname(OUT), "..", "..", "examples", "streams_graph_h200.emotrace"), "rb").read()
put("emotrace_bad_magic.emotrace", b"EMOTRACX" + example[8:4096])
put("emotrace_header_only.emotrace", example[:16])
put("emotrace_half.emotrace", example[:len(example) // 2])
put("emotrace_future_version.emotrace", example[:8] + bytes([99]) + example[9:4096])
