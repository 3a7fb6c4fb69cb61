#!/usr/bin/env python3
"""Order 2 -- undo the PyTorch profiler's overhead by a per-trace CPU *speed gauge*.

Model (see REPORT.md):
  * every CPU node of the steady iteration (CPU intervals and CUDA API calls) is scaled by one
    factor r, GPU op durations are kept, the graph is replayed (emo's replay);
  * r = c * sum_th busy_th / g_th / sum_th busy_th          (steady iteration, threads th)
    g_th = speed gauge of thread th in the steady iteration, in units of a reference table;
    c    = one constant per profiler configuration (light / shapes), fitted leave-one-workload-out.
  * gauge ("hybrid"): g_u = A * h_u for a unit u = (iteration, thread)
      h_u = sum(dur of leaf cpu_ops in u) / sum(median dur of the same op name over the whole trace)
            -> relative speed of that unit inside its own trace (precise: ~1000 ops per unit)
      A   = sum(dur of S-events) / sum(ref(name) * h_unit)   over all units of the trace, iterations >= 2
            -> absolute speed of the trace on the S-events at h = 1
      S   = fixed-cost events: aten::empty, aten::empty_strided (leaf cpu_op) and cudaLaunchKernel,
            cuLaunchKernelEx, cudaMemsetAsync (runtime/driver calls)
      ref(name) = median traced duration of that S-event over the training traces (no truth needed)
Replaying with CPU x r and GPU x 1 is done exactly as  r * emo whatif(GPU x 1/r, --correct-overhead off).

Usage:  python3 ovh.py [--gauge hybrid|plain] [--set alloc+launch|alloc|launch] [--pool-cfg] [--recompute]
"""
import argparse, collections, gzip, json, math, os, pickle, statistics, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TR = os.path.join(REPO, "..", "shared", "traces", "h200", "overhead")
HELD_DIR = os.path.join(REPO, "data", "h200_heldout")  # other workloads recorded the same way (evaluation only)
HELD_WORK = ["mlp_small_train", "bert_infer", "cnn_dataload_train"]
EMO = os.environ.get("EMO", os.path.join(REPO, "build", "release", "tools", "emo", "emo"))
HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("EMO_OVH_CACHE", "/tmp/emo_overhead_gauge_cache")
os.makedirs(CACHE, exist_ok=True)
WORK = ["gpt_train", "resnet_train", "multistream"]
MODES = ["sync", "async"]
CFGS = ["light", "shapes"]
ALLOC = {"aten::empty", "aten::empty_strided"}
LAUNCH = {"cudaLaunchKernel", "cuLaunchKernelEx", "cudaMemsetAsync"}
SETS = {"alloc+launch": ALLOC | LAUNCH, "alloc": ALLOC, "launch": LAUNCH,
        "empty": {"aten::empty"}, "lk": {"cudaLaunchKernel"}}
IDLE_US = 50.0          # = emo's cross_thread_idle_ns: a longer span with no recorded event is a wait
RS = [round(0.20 + 0.01 * i, 2) for i in range(101)]   # r grid for the replay
TRUTH = json.load(open(f"{TR}/truth.json"))
if os.path.exists(f"{HELD_DIR}/truth.json"):
    TRUTH.update({w: v for w, v in json.load(open(f"{HELD_DIR}/truth.json")).items() if w in HELD_WORK})


def path(n):
    return f"{HELD_DIR if n[0] in HELD_WORK else TR}/{key(n)}.json.gz"


def names():
    return [(w, m, c) for c in CFGS for w in WORK for m in MODES]


def key(n):
    return "_".join(n)


def true_ms(n):
    return TRUTH[n[0]][f"unprofiled_{n[1]}"]["median_s"] * 1e3


def med(a):
    return statistics.median(a)


# ---------------------------------------------------------------- trace -> per (iteration, thread)
def units(n):
    """For each ProfilerStep: {tid: dict(busy_ms, leaf=[(name,dur)], S=[(name,dur)])}.  Cached."""
    os.makedirs(CACHE, exist_ok=True)
    p = f"{CACHE}/{key(n)}.units50.pkl"
    if os.path.exists(p):
        return pickle.load(open(p, "rb"))
    ev = json.load(gzip.open(path(n)))["traceEvents"]
    cpu, steps = [], []
    for e in ev:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat == "user_annotation" and e["name"].startswith("ProfilerStep"):
            steps.append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["tid"]))
        elif cat in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"):
            cpu.append([e["name"], float(e["ts"]), float(e.get("dur", 0)), e["tid"], cat, False])
    steps.sort()
    # leaf = cpu_op with no recorded event nested inside it on its thread
    by = collections.defaultdict(list)
    for x in cpu:
        by[x[3]].append(x)
    for tid, xs in by.items():
        xs.sort(key=lambda x: (x[1], -x[2]))
        stack = []
        for x in xs:
            while stack and stack[-1][1] + stack[-1][2] <= x[1]:
                stack.pop()
            if stack:
                stack[-1][5] = True       # parent has a child
            stack.append(x)
    out = []
    for s0, s1, main in steps:
        d = {}
        for tid, xs in by.items():
            inside = [x for x in xs if s0 <= x[1] < s1]
            if not inside:
                continue
            pts = sorted([x[1] for x in inside] + [x[1] + x[2] for x in inside])
            if tid == main:
                pts = [s0] + pts + [s1]
            busy = sum(b - a for a, b in zip(pts, pts[1:]) if b - a < IDLE_US)
            busy -= sum(x[2] for x in inside if "ynchronize" in x[0] and x[2] < IDLE_US)
            leaf = [(x[0], x[2]) for x in inside if x[4] == "cpu_op" and not x[5]]
            S = [(x[0], x[2]) for x in inside
                 if (x[4] == "cpu_op" and not x[5] and x[0] in ALLOC | SETS["empty"])
                 or (x[4] in ("cuda_runtime", "cuda_driver") and x[0] in LAUNCH)]
            d[tid] = dict(busy=busy / 1e3, leaf=leaf, S=S)
        out.append(d)
    pickle.dump(out, open(p, "wb"))
    return out


def emo_json(args):
    return json.loads(subprocess.run([EMO] + args + ["--json", "-"], capture_output=True, text=True, check=True).stdout)


def steady_index(n):
    """emo's steady iteration (median of the traced iterations after the first)."""
    p = f"{CACHE}/steady_names.json"
    st = json.load(open(p)) if os.path.exists(p) else {}
    if key(n) not in st:
        j = emo_json(["analyze", path(n), "--correct-overhead", "off"])
        st[key(n)] = dict(steady=j["steady_iteration"], per=[x["name"] for x in j["per_iteration"]],
                          it=j["iteration_time_us"])
        json.dump(st, open(p, "w"))
    return st[key(n)]["per"].index(st[key(n)]["steady"])


# ---------------------------------------------------------------- replay grid (emo)
def grid(recompute=False, traces=None, fname="grid.json"):
    """steady iteration (ms) with every CPU node x r, GPU kept = r * whatif(GPU x 1/r)."""
    p = f"{CACHE}/{fname}"
    if os.path.exists(p) and not recompute:
        return json.load(open(p))
    jobs = [(n, r) for n in (traces or names()) for r in RS]

    def one(a):
        n, r = a
        j = emo_json(["whatif", path(n), "--scale", f".={1 / r:.9f}", "--correct-overhead", "off"])
        return r * j["iteration_time_us"]["whatif"] / 1e3
    with ThreadPoolExecutor(4) as ex:
        res = list(ex.map(one, jobs))
    g = {}
    for (n, r), v in zip(jobs, res):
        g.setdefault(key(n), {})[str(r)] = v
    json.dump(g, open(p, "w"))
    return g


GRID = None


def pred(n, r):
    """linear interpolation of the replay grid in r"""
    r = min(max(r, RS[0]), RS[-1])
    i = min(int((r - RS[0]) / 0.01 + 1e-9), len(RS) - 2)
    a, b = GRID[key(n)][str(RS[i])], GRID[key(n)][str(RS[i + 1])]
    return a + (b - a) * (r - RS[i]) / 0.01


# ---------------------------------------------------------------- gauges
def refs(pool, S):
    d = collections.defaultdict(list)
    for n in pool:
        for u in units(n):
            for v in u.values():
                for x in v["S"]:
                    if x[0] in S:
                        d[x[0]].append(x[1])
    return {k: med(v) for k, v in d.items()}


def unit_gauges(n, ref, S, kind):
    """g per (iteration, thread); None where a unit has too few events to say."""
    U = units(n)
    if kind == "plain":
        out = []
        for u in U:
            row = {}
            for t, v in u.items():
                xs = [x for x in v["S"] if x[0] in S and x[0] in ref]
                row[t] = sum(x[1] for x in xs) / sum(ref[x[0]] for x in xs) if len(xs) >= 20 else None
            out.append(row)
        return out
    # hybrid
    m = collections.defaultdict(list)
    for u in U[1:]:
        for v in u.values():
            for x in v["leaf"]:
                m[x[0]].append(x[1])
    m = {k: med(v) for k, v in m.items()}
    h = [{t: (sum(x[1] for x in v["leaf"]) / sum(m[x[0]] for x in v["leaf"]) if len(v["leaf"]) >= 20 else None)
          for t, v in u.items()} for u in U]
    num = den = 0.0
    for j, u in enumerate(U):
        if j == 0:
            continue
        for t, v in u.items():
            if h[j][t] is None:
                continue
            for x in v["S"]:
                if x[0] in S and x[0] in ref:
                    num += x[1]
                    den += ref[x[0]] * h[j][t]
    A = num / den if den else None
    plain = unit_gauges(n, ref, S, "plain")
    # a unit with too few leaf ops for h falls back to its plain gauge (None if that lacks events too)
    return [{t: (A * h[j][t] if (A and h[j][t]) else plain[j][t]) for t in u} for j, u in enumerate(U)]


def base_r(n, ref, S, kind):
    """r for c = 1:  sum busy/g / sum busy over the threads of the steady iteration."""
    i = steady_index(n)
    u = units(n)[i]
    g = unit_gauges(n, ref, S, kind)[i]
    known = [(v["busy"], g[t]) for t, v in u.items() if g[t]]
    # a thread without enough events takes the busy-weighted gauge of the others; none at all:
    # the S-events of the whole trace pooled; no S-event at all: 1
    if known:
        gdef = sum(b for b, _ in known) / sum(b / x for b, x in known)
    else:
        xs = [x for uu in units(n)[1:] for v in uu.values() for x in v["S"] if x[0] in S and x[0] in ref]
        gdef = sum(x[1] for x in xs) / sum(ref[x[0]] for x in xs) if xs else 1.0
    busy = sum(v["busy"] for v in u.values())
    return sum(v["busy"] / (g[t] or gdef) for t, v in u.items()) / busy


def fit_c(train, b):
    """least squares of log(predicted / true) over the training traces, c on a 0.00025 grid"""
    best = None
    for i in range(1601):
        c = 0.4 + i * 0.00025
        loss = sum(math.log(pred(n, c * b[n]) / true_ms(n)) ** 2 for n in train)
        if best is None or loss < best[0] - 1e-12:
            best = (loss, c)
    return best[1]


def lowo(S, kind, per_cfg=True):
    rows = []
    for held in WORK:
        pool = [n for n in names() if n[0] != held]          # training traces: other two workloads
        ref = refs(pool, S)
        b = {n: base_r(n, ref, S, kind) for n in names()}
        for cfg in CFGS:
            train = [n for n in pool if not per_cfg or n[2] == cfg]
            c = fit_c(train, b)
            for m in MODES:
                n = (held, m, cfg)
                r = c * b[n]
                p = pred(n, r)
                rows.append(dict(n=n, traced=GRID[key(n)]["1.0"], true=true_ms(n), pred=p,
                                 err=100 * (p / true_ms(n) - 1), c=c, r=r, b=b[n],
                                 fitted_on="+".join(w for w in WORK if w != held) + (f" ({cfg})" if per_cfg else " (both cfgs)")))
    return rows


def table(rows, out=sys.stdout):
    out.write("| trace | traced ms | true ms | predicted ms | error % | r | c | fitted on |\n|---|---|---|---|---|---|---|---|\n")
    for x in rows:
        out.write(f"| {key(x['n'])} | {x['traced']:.2f} | {x['true']:.2f} | {x['pred']:.2f} | {x['err']:+.1f} | "
                  f"{x['r']:.3f} | {x['c']:.4f} | {x['fitted_on']} |\n")
    out.write(f"\nworst |error|: {max(abs(x['err']) for x in rows):.1f} %\n")


def heldout(S, kind):
    """Frozen method on the held-out workloads: refs and c fitted on all three training workloads."""
    global GRID
    hn = [(w, m, c) for c in CFGS for w in HELD_WORK for m in MODES]
    GRID.update(grid(False, hn, "grid_heldout.json"))
    pool = names()
    ref = refs(pool, S)
    b = {n: base_r(n, ref, S, kind) for n in pool + hn}
    rows = []
    for cfg in CFGS:
        c = fit_c([n for n in pool if n[2] == cfg], b)
        for n in [x for x in hn if x[2] == cfg]:
            r = c * b[n]
            p = pred(n, r)
            rows.append(dict(n=n, traced=GRID[key(n)]["1.0"], true=true_ms(n), pred=p, err=100 * (p / true_ms(n) - 1),
                             c=c, r=r, b=b[n], fitted_on=f"all three training workloads ({cfg})"))
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--gauge", default="hybrid", choices=["hybrid", "plain"])
    ap.add_argument("--set", default="alloc+launch", choices=list(SETS))
    ap.add_argument("--pool-cfg", action="store_true", help="fit one c over both profiler configurations")
    ap.add_argument("--recompute", action="store_true", help="recompute the emo replay grid")
    ap.add_argument("--heldout", action="store_true", help="also score the frozen method on data/h200_heldout")
    a = ap.parse_args()
    GRID = grid(a.recompute)
    rows = lowo(SETS[a.set], a.gauge, per_cfg=not a.pool_cfg)
    print(f"gauge={a.gauge} set={a.set} c per config={not a.pool_cfg}\n")
    table(rows)
    if a.heldout:
        print("\nheld-out workloads (" + HELD_DIR + "), c fitted on all training workloads:\n")
        table(heldout(SETS[a.set], a.gauge))
