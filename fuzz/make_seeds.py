#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs into OUT/<target>/ (scripts/fuzz.sh runs it).

kineto_json_piecewise gets the Kineto seeds with a batch-size and a read-size byte in front. Seeds are small on
purpose: libFuzzer truncates an input to -max_len, and a cut gzip stream or
a JSON document cut in half reaches little of a reader. Kineto traces are cut to their first
events (kept valid JSON, plain and gzipped); .emotrace files are cut after their last chunk that
fits; every other file is copied as it is.
"""
import glob
import gzip
import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("EMO_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
MAX_LEN = int(os.environ.get("EMO_FUZZ_SEED_BYTES", "16384"))


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def copy_all(out, target, paths):
    for p in paths:
        if os.path.isfile(p):
            put(out, target, os.path.basename(p), open(p, "rb").read())


def kineto_cuts(out, path):
    try:
        doc = json.loads(read(path))
    except (ValueError, OSError):
        return
    events = doc.get("traceEvents", [])
    base = os.path.basename(path).split(".")[0]
    # A few windows of consecutive events: the start (metadata, CPU ops) and spots where GPU
    # work and its launches lie close together.
    starts = [0]
    for i, e in enumerate(events):
        if isinstance(e, dict) and e.get("cat") == "kernel":
            starts.append(max(0, i - 20))
            if len(starts) >= 4:
                break
    for k, s in enumerate(starts):
        n = 60
        while n > 4:
            cut = dict(doc)
            cut["traceEvents"] = events[s:s + n]
            text = json.dumps(cut, separators=(",", ":")).encode()
            if len(text) <= MAX_LEN // 2:
                break
            n //= 2
        put(OUT, "kineto_json", f"{base}_{k}.json", text)
        if k == 0:
            put(OUT, "kineto_json", f"{base}_{k}.json.gz", gzip.compress(text))


def emotrace_cut(out, path):
    data = read(path)
    if data[:8] != b"EMOTRACE" or len(data) < 16:
        return
    header_bytes = struct.unpack_from("<I", data, 12)[0]
    pos, end = header_bytes, header_bytes
    while pos + 32 <= len(data):
        stored = struct.unpack_from("<I", data, pos + 16)[0]
        if pos + 32 + stored > MAX_LEN:
            break
        pos += 32 + stored
        end = pos
    put(out, "emo_trace", os.path.basename(path), data[:end] if end > header_bytes else data[:MAX_LEN])


OUT = sys.argv[1]
corpus = os.path.join(ROOT, "tests", "corpus")
malformed = glob.glob(os.path.join(corpus, "malformed", "*"))
for target in ("kineto_json", "kineto_json_piecewise", "emo_trace", "policy", "device", "stage_profile"):
    copy_all(OUT, target, glob.glob(os.path.join(corpus, "fuzz", target, "*")))

copy_all(OUT, "kineto_json", [p for p in malformed if ".json" in p])
for p in sorted(glob.glob(os.path.join(ROOT, "examples", "*.json.gz")) +
                glob.glob(os.path.join(ROOT, "data", "*", "*.json.gz")) +
                glob.glob(os.path.join(SHARED, "traces", "h200", "*.json.gz")))[:40]:
    kineto_cuts(OUT, p)

copy_all(OUT, "emo_trace", [p for p in malformed if p.endswith(".emotrace")])
for p in glob.glob(os.path.join(ROOT, "data", "*", "*.emotrace")) + glob.glob(os.path.join(ROOT, "examples", "*.emotrace")):
    emotrace_cut(OUT, p)

copy_all(OUT, "policy", [p for p in malformed if "policy" in os.path.basename(p)])
copy_all(OUT, "device", [p for p in malformed if "device" in os.path.basename(p)])
copy_all(OUT, "device", glob.glob(os.path.join(ROOT, "devices", "*.json")))
copy_all(OUT, "stage_profile", [p for p in malformed if p.endswith(".csv")])
for p in glob.glob(os.path.join(SHARED, "data", "perseus_sosp24", "stage_profile", "*.csv")):
    data = read(p)
    if len(data) > MAX_LEN:
        data = data[:data.rfind(b"\n", 0, MAX_LEN) + 1]
    put(OUT, "stage_profile", os.path.basename(p), data)

# The piecewise target reads its first two bytes as the batch size (1 << byte % 12) and the read
# size (1 << byte % 13): the Kineto seeds, each behind three pairs (one event at a time read a
# byte at a time; a few in 64-byte pieces; whole in 4 KiB pieces).
kineto = os.path.join(OUT, "kineto_json")
for name in sorted(os.listdir(kineto)) if os.path.isdir(kineto) else []:
    data = open(os.path.join(kineto, name), "rb").read()
    for b, r in ((0, 0), (6, 6), (11, 12)):
        put(OUT, "kineto_json_piecewise", f"b{b}r{r}_{name}", bytes([b, r]) + data)
