"""The H200 loops with a measured energy per iteration, read from their traces, for the research
fits of the power model (power_form_limits.py, flop_rate_power.py): the kernel sweep
(data/h200_kernels), the held-out sets (data/h200_heldout{,2,3}) and ../shared/traces/h200.

Each loop: set, name, step (measured s), J (measured per iteration), steps (ProfilerSteps in the
trace), ops (GPU ops: name, cat, ts, dur µs, blocks, stream, ext = the launching CPU op's External
id), multi (several streams), cpu (External id -> the innermost CPU op: name, dims, types,
concrete; empty where the trace has no shapes) and config (the sweep's config name, else None)."""
import gzip, json, os, subprocess, sys

SETS_HELD = ("h200_heldout", "h200_heldout2", "h200_heldout3")
SM = 132  # the H200's streaming multiprocessors
COMM_W = 60.0  # NCCL kernels above idle (too few to fit; a quarter of a streaming kernel's)
FIXED = {"comm": COMM_W, "memset": 0.0}  # powers above idle the fits do not fit


def command_line():
    """(repo, emo, shared): the repository, and the command line's first two arguments that are not
    options (defaults: build/ci's emo, ../shared beside the repository)."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    emo = args[0] if args else f"{repo}/build/ci/tools/emo/emo"
    shared = args[1] if len(args) > 1 else f"{repo}/../shared"
    return repo, emo, shared


def option(name, default=None):
    """The value after `name` on the command line (removed from sys.argv with it), or default."""
    if name in sys.argv:
        i = sys.argv.index(name)
        value = sys.argv[i + 1]
        del sys.argv[i:i + 2]
        return value
    return default


def device(repo):
    """(idle W, cap W) of devices/h200.json."""
    dev = json.load(open(f"{repo}/devices/h200.json"))
    return dev["idle_power_w"]["value"], dev["cap_power_w"]["value"]


def power_group(op, kinds):
    """The research fits' power groups: tc (tensor-core compute), cc (CUDA-core GEMMs), mem (memory-
    bound and other), comm (NCCL), memset (at idle)."""
    if op["cat"] == "gpu_memset":
        return "memset"
    if op["cat"] != "kernel":
        return "mem"
    k = kinds[op["name"]]
    if k["class"] == "communication":
        return "comm"
    if k["share_kind"] == "memset":
        return "memset"
    if k["share_kind"] == "cuda_core_gemm":
        return "cc"
    return {"compute": "tc", "memory": "mem"}.get(k["class"], "mem")  # other tied to memory


def _samples(repo, shared):
    """(set, loop, trace, measured step s, measured J per iteration, sweep config or None)"""
    out = []
    kp = json.load(open(f"{repo}/data/h200_kernels/measured.json"))
    for n, c in sorted(kp["configs"].items()):
        out.append(("kernels", n, f"{repo}/data/h200_kernels/{n}.json.gz", c["iter_s"], c["energy_per_iter_j"], n))
    for d in SETS_HELD:
        truth = json.load(open(f"{repo}/data/{d}/truth.json"))
        for w, v in truth.items():
            if not isinstance(v, dict) or "traces" not in v:
                continue
            for cfg, t in sorted(v["traces"].items()):
                out.append((d, f"{w}_{cfg}", f"{repo}/data/{d}/{w}_{cfg}.json.gz",
                            t["energy_per_iter_j"] / t["avg_power_w"], t["energy_per_iter_j"], None))
    m = json.load(open(f"{shared}/traces/h200/measured.json"))
    for n, t in list(m["workloads"].items()) + list(m.get("multi_gpu", {}).items()):
        out.append(("shared", n, f"{shared}/traces/h200/{n}.json.gz", t["energy_per_iter_j"] / t["avg_power_w"],
                    t["energy_per_iter_j"], None))
    return out


def load(repo, shared, emo):
    """(loops, kinds): kinds maps each kernel name to `emo model classify`'s record."""
    loops, names = [], set()
    for set_, name, path, step, joules, config in _samples(repo, shared):
        ev = json.load(gzip.open(path))["traceEvents"]
        steps = sum(1 for e in ev if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("ProfilerStep"))
        ops, cpu = [], {}
        for e in ev:
            a = e.get("args", {})
            if e.get("cat") == "cpu_op" and "Input Dims" in a:
                # Nested ops share no External id; the last one read with an id is the innermost.
                cpu[a.get("External id")] = {"name": e["name"], "dims": a["Input Dims"],
                                             "types": a.get("Input type", []), "concrete": a.get("Concrete Inputs", [])}
            if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") or e.get("dur", 0) <= 0:
                continue
            g = a.get("grid") or [0, 0, 0]
            ops.append({"name": e["name"], "cat": e["cat"], "ts": e["ts"], "dur": e["dur"],
                        "blocks": g[0] * g[1] * g[2], "stream": a.get("stream"), "ext": a.get("External id")})
            if e["cat"] == "kernel":
                names.add(e["name"])
        loops.append({"set": set_, "name": name, "step": step, "J": joules, "steps": max(1, steps), "ops": ops,
                      "multi": len({o["stream"] for o in ops}) > 1, "cpu": cpu, "config": config})
    out = subprocess.run([emo, "model", "classify", "--json", "-", "-"], input="\n".join(sorted(names)),
                         capture_output=True, text=True, check=True).stdout
    return loops, {k["name"]: k for k in json.loads(out)["kernels"]}
