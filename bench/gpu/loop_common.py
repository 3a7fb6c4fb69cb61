"""Shared harness of the PyTorch bench loops (train_loop.py, decode_loop.py).

A workload gives a `step()` that ends in a host synchronization of its own (`loss.item()` in
training, the generated tokens copied to the host in decode), as user code does. The harness:
  - runs `--steps` steps in all; the first `--warmup` are untimed (allocator, cuBLAS and
    attention-kernel selection), the rest form the timed region;
  - calls torch.cuda.synchronize() only at the two boundaries of the timed region (the steps
    synchronize themselves), and times each step with time.perf_counter() from just before the
    step to just after its own sync;
  - with `--nvtx`, wraps every step (warm-up ones too) in torch.cuda.nvtx.range_push("step") /
    range_pop(), for testing NVTX iteration detection; without it the code is plain user code;
  - with `--torch-profiler OUT.json`, runs the timed region inside torch.profiler.profile
    (CPU+CUDA, record_shapes off, schedule wait/warmup/active, repeat=1), calls prof.step()
    after each step outside the step's timing, exports a Chrome trace after the loop, and
    reports the step-time medians of the un-profiled and the profiled steps separately;
  - with `--nvml-energy`, reads the NVML energy counter at the two synchronized boundaries
    (energy_check.py: getters only) and adds energy_per_step_j and window_s;
  - with `--emo-monitor`, also measures the same region with EMO's Python package (emo.Monitor,
    importable from PYTHONPATH; GPU = the NVML index --device) and adds emo_monitor_*;
  - with `--emo-trace OUT`, traces the timed region with `with emo.trace(OUT, warmup=..,
    iterations=..)` (EMO's tracer in-process) and adds emo_trace: the block's summary (as
    `emo trace --json` gives it per file, without the per-iteration list);
  - with `--cpu-probe N`, runs a fixed piece of pure-Python work (N rounds of integer arithmetic,
    no CUDA call, so no tracer callback) after every step, outside the step's timing, and
    reports its time per step (probe_ms): a gauge of how fast the host ran the interpreter at
    that moment, against which a bench can set the step times of runs on a host whose speed
    drifts (bench/gpu/overhead_summary.py);
  - reports the CPU time of the tracer's own threads over the timed region, per step
    (emo_threads_cpu_ms_per_step, by name: the injection library names them emo-control,
    emo-writer, emo-gpu, emo-clocks; absent when none runs), from /proc/self/task: a figure of
    the tracer's background cost that the host's speed scales but no other process moves;
  - with `--instructions`, counts the instructions retired by the main thread in each step, and by
    the tracer's threads over the timed region (perf_event_open through perf_counter.py):
    step_instructions, median_step_instructions, emo_threads_instructions_per_step. Unlike times,
    these counts do not move with the host's speed, so what a tracer adds to the program's thread
    shows between processes; where the host has no counter, instructions_unavailable says why;
  - with `--step-starts`, adds step_start_s: each step's start on CLOCK_MONOTONIC (time.monotonic,
    seconds), which every process of the machine shares, so that two programs run at the same
    time can be compared over the same stretch of wall time (bench/gpu/overhead_concurrent.sh);
  - with `--host-spin-us N`, spins the main thread for N µs of wall time at the start of every
    step, inside its timing and before its first launch: a host-side cost of known size, against
    which a design that compares step times can be calibrated (overhead_concurrent.sh's `spin`);
  - prints ONE JSON line on stdout (everything else goes to stderr):
    {"workload", "median_step_ms", "steps", "timed_steps", ..., "step_ms": [every step, warm-up
    included, in order]}.
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time


def add_args(ap, steps, warmup):
    ap.add_argument("--steps", type=int, default=steps, help=f"steps run in all, warm-up included (default {steps})")
    ap.add_argument("--warmup", type=int, default=warmup,
                    help=f"untimed steps at the start (default {warmup}); the rest are timed")
    ap.add_argument("--nvtx", action="store_true", help='wrap each step in an NVTX range "step"')
    ap.add_argument("--torch-profiler", metavar="OUT.json",
                    help="run the timed region under torch.profiler and export a Chrome trace here")
    ap.add_argument("--prof-wait", type=int, default=1, help="profiler schedule: wait steps (default 1)")
    ap.add_argument("--prof-warmup", type=int, default=3, help="profiler schedule: warmup steps (default 3)")
    ap.add_argument("--prof-active", type=int, default=10, help="profiler schedule: active steps (default 10)")
    ap.add_argument("--prof-no-sync-events", action="store_true",
                    help="leave out CUDA sync events from the profiler trace (on by default, as in ../shared traces)")
    ap.add_argument("--nvml-energy", action="store_true",
                    help="measure NVML energy over the timed region (adds energy_per_step_j, window_s)")
    ap.add_argument("--emo-monitor", action="store_true",
                    help="measure the timed region with emo.Monitor too (adds emo_monitor_energy_per_step_j, ...)")
    ap.add_argument("--emo-trace", metavar="OUT.emotrace",
                    help="trace the timed region with emo.trace (EMO's tracer in-process) into this file")
    ap.add_argument("--emo-trace-warmup", type=int, default=5, help="emo.trace: untraced iterations first (default 5)")
    ap.add_argument("--emo-trace-iterations", type=int, default=5, help="emo.trace: iterations traced (default 5)")
    ap.add_argument("--emo-trace-monitor", action="store_true", help="emo.trace(monitor=True): time and energy only")
    ap.add_argument("--emo-trace-steps", type=int, default=-1,
                    help="emo.trace: end the block after this many timed steps (default: the whole timed region)")
    ap.add_argument("--cpu-probe", type=int, default=0, metavar="N",
                    help="after each step, time N rounds of pure-Python arithmetic (adds probe_ms; default 0: off)")
    ap.add_argument("--instructions", action="store_true",
                    help="count the instructions retired per step by the main thread and by the tracer's threads "
                         "(perf_event_open; adds step_instructions, median_step_instructions)")
    ap.add_argument("--no-step-list", action="store_true", help="leave out step_ms (the list of every step)")
    ap.add_argument("--host-spin-us", type=float, default=0, metavar="N",
                    help="spin N µs on the main thread at the start of every step, inside its timing (default 0)")
    ap.add_argument("--step-starts", action="store_true",
                    help="add step_start_s: every step's start on CLOCK_MONOTONIC, in seconds (shared by all processes)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    ap.add_argument("--seed", type=int, default=0)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def _stats(ms):
    if not ms:
        return {"median": None, "mean": None, "p10": None, "p90": None, "n": 0}
    q = statistics.quantiles(ms, n=10) if len(ms) >= 2 else [ms[0]] * 9
    return {"median": statistics.median(ms), "mean": statistics.fmean(ms), "p10": q[0], "p90": q[-1], "n": len(ms)}


def _cpu_probe(rounds):
    """Milliseconds to run `rounds` rounds of pure-Python integer arithmetic (no CUDA call)."""
    t0 = time.perf_counter()
    x = 0
    for i in range(rounds):
        x = (x * 31 + i) & 0xFFFF
    return (time.perf_counter() - t0) * 1e3


def _emo_thread_ids():
    """{tid: name} of this process's threads whose name starts with "emo-"."""
    out = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith("emo-"):
            out[int(tid)] = name
    return out


def _emo_threads_cpu_ns():
    """CPU time (ns) of each of this process's threads whose name starts with "emo-", summed by
    name: /proc/self/task/<tid>/schedstat (ns on the CPU), else stat's utime+stime (ticks)."""
    out = {}
    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    for tid, name in _emo_thread_ids().items():
        base = f"/proc/self/task/{tid}"
        try:
            try:
                with open(f"{base}/schedstat") as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                with open(f"{base}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ns = (int(fields[11]) + int(fields[12])) * tick_ns  # utime, stime (fields 14, 15)
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
        out[name] = out.get(name, 0) + ns
    return out


def _profiler(args, torch):
    from torch.profiler import ProfilerActivity, profile, schedule

    kw = {}
    if not args.prof_no_sync_events:
        try:
            kw["experimental_config"] = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
        except Exception as e:  # older/newer torch without it: trace without sync events, say so
            log(f"torch profiler: no cuda sync events ({e})")
    sched = schedule(wait=args.prof_wait, warmup=args.prof_warmup, active=args.prof_active, repeat=1)
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched, record_shapes=False,
                   **kw)
    return prof, ("experimental_config" in kw)


def _phase(args, j):
    """The profiler's phase in timed step j (0-based): what schedule(j) does with it."""
    if j < args.prof_wait:
        return "before"
    if j < args.prof_wait + args.prof_warmup:
        return "prof_warmup"
    if j < args.prof_wait + args.prof_warmup + args.prof_active:
        return "active"
    return "after"


def run(workload, args, step, extra=None):
    """Runs the loop of `step` per `args` and prints the JSON line. `extra`: fields to add (a dict, or
    a function called after the loop that returns one)."""
    import torch

    if args.warmup < 0 or args.steps <= args.warmup:
        sys.exit(f"{workload}: --steps ({args.steps}) must exceed --warmup ({args.warmup})")
    if args.torch_profiler and args.steps - args.warmup < args.prof_wait + args.prof_warmup + args.prof_active:
        sys.exit(f"{workload}: the timed region ({args.steps - args.warmup} steps) is shorter than the profiler "
                 f"schedule ({args.prof_wait}+{args.prof_warmup}+{args.prof_active})")
    nvtx = torch.cuda.nvtx if args.nvtx else None
    step_ms, step_cpu_ms, probe_ms, step_instr, step_start_s = [], [], [], [], []
    counter = None
    if args.instructions:
        from perf_counter import ThreadInstructions  # also opens the emo-* threads' counters below
        counter = ThreadInstructions()
        if not counter.ok:
            log(f"{workload}: no instruction counts: {counter.why}")

    def one():
        i0 = counter.read() if counter and counter.ok else None
        c0 = time.thread_time()
        if args.step_starts:
            step_start_s.append(time.monotonic())
        t0 = time.perf_counter()
        if args.host_spin_us > 0:
            until = t0 + args.host_spin_us * 1e-6
            while time.perf_counter() < until:
                pass
        if nvtx:
            nvtx.range_push("step")
        step()
        if nvtx:
            nvtx.range_pop()
        step_ms.append((time.perf_counter() - t0) * 1e3)
        step_cpu_ms.append((time.thread_time() - c0) * 1e3)
        if i0 is not None:
            step_instr.append(counter.read() - i0)
        if args.cpu_probe > 0:
            probe_ms.append(_cpu_probe(args.cpu_probe))

    for _ in range(args.warmup):
        one()

    energy = None
    if args.nvml_energy:
        from energy_check import EnergyWindow, for_torch_device
        energy = EnergyWindow(for_torch_device(args.device))

    monitor = None
    if args.emo_monitor:
        import emo
        monitor = emo.Monitor(gpu_indices=[args.device])

    timed = args.steps - args.warmup
    prof, sync_events = (None, False)
    prof_step_s = 0.0
    if args.torch_profiler:
        prof, sync_events = _profiler(args, torch)

    tracer = None
    if args.emo_trace:
        import emo
        tracer = emo.trace(args.emo_trace, warmup=args.emo_trace_warmup, iterations=args.emo_trace_iterations,
                           monitor=args.emo_trace_monitor)

    torch.cuda.synchronize()
    if energy:
        energy.start()
    if monitor:
        monitor.begin_window("timed region")
    block = contextlib.ExitStack()
    if tracer:
        block.enter_context(tracer)
    emo_cpu0 = _emo_threads_cpu_ns()
    emo_counters = {}
    if counter and counter.ok:
        for tid, name in _emo_thread_ids().items():
            c = ThreadInstructions(tid)
            if c.ok:
                emo_counters[tid] = (name, c, c.read())
    t_region = time.perf_counter()
    if prof:
        with prof:
            for _ in range(timed):
                one()
                s = time.perf_counter()
                prof.step()
                prof_step_s += time.perf_counter() - s
            torch.cuda.synchronize()
    else:
        for j in range(timed):
            if j == args.emo_trace_steps:
                block.close()  # the block ends here; the rest of the region runs after it
            one()
    torch.cuda.synchronize()
    region_s = time.perf_counter() - t_region
    emo_cpu1 = _emo_threads_cpu_ns()
    emo_instr = {}
    for name, c, n0 in emo_counters.values():
        emo_instr[name] = emo_instr.get(name, 0) + c.read() - n0
        c.close()
    block.close()
    m = monitor.end_window("timed region") if monitor else None
    e = energy.stop(timed) if energy else None

    timed_ms = step_ms[args.warmup:]
    st = _stats(timed_ms)
    out = {"workload": workload, "host_spin_us": args.host_spin_us, "median_step_ms": st["median"],
           "steps": args.steps, "timed_steps": timed,
           "warmup_steps": args.warmup, "mean_step_ms": st["mean"], "p10_step_ms": st["p10"],
           "p90_step_ms": st["p90"], "median_step_cpu_ms": _stats(step_cpu_ms[args.warmup:])["median"],
           "region_s": region_s, "region_ms_per_step": region_s * 1e3 / timed,
           "nvtx": bool(args.nvtx), "timing": "perf_counter per step (the step syncs itself); "
                                              "torch.cuda.synchronize only at the timed region's ends"}
    if prof:
        by = {}
        for j, ms in enumerate(timed_ms):
            by.setdefault(_phase(args, j), []).append(ms)
        unprof = by.get("before", []) + by.get("after", [])
        t = time.perf_counter()
        prof.export_chrome_trace(args.torch_profiler)
        out.update({
            "median_step_ms": _stats(unprof)["median"],  # the un-profiled steps of this process
            "all_timed_median_step_ms": st["median"],
            "profiled_median_step_ms": _stats(by.get("active", []))["median"],
            "profiled_steps": len(by.get("active", [])),
            "prof_warmup_median_step_ms": _stats(by.get("prof_warmup", []))["median"],
            "before_profiler_median_step_ms": _stats(by.get("before", []))["median"],
            "after_profiler_median_step_ms": _stats(by.get("after", []))["median"],
            "unprofiled_steps": len(unprof),
            "profiler": {"schedule": {"wait": args.prof_wait, "warmup": args.prof_warmup,
                                      "active": args.prof_active, "repeat": 1},
                         "record_shapes": False, "cuda_sync_events": sync_events,
                         "prof_step_calls_s": prof_step_s, "export_s": time.perf_counter() - t,
                         "trace": args.torch_profiler, "trace_bytes": os.path.getsize(args.torch_profiler)},
        })
    if e:
        out.update(e)
    if m:
        out.update({"emo_monitor_energy_per_step_j": m.energy[args.device] / timed, "emo_monitor_window_s": m.time,
                    "emo_monitor_uncertainty_j": m.uncertainty[args.device], "emo_monitor_measurable": m.measurable})
    if tracer:
        summary = tracer.summary()
        summary.pop("iteration_times", None)
        out["emo_trace"] = summary
    out.update({"device": torch.cuda.get_device_name(args.device), "torch": torch.__version__})
    if callable(extra):
        extra = extra()
    if extra:
        out.update(extra)
    if emo_cpu1:
        by_name = {k: (v - emo_cpu0.get(k, 0)) / 1e6 / timed for k, v in sorted(emo_cpu1.items())}
        out["emo_threads_cpu_ms_per_step"] = sum(by_name.values())
        out["emo_threads_cpu_ms_per_step_by_name"] = by_name
    if counter:
        if step_instr:
            out["median_step_instructions"] = statistics.median(step_instr[args.warmup:])
            out["instructions_counted"] = "user+kernel" if counter.kernel else "user"
            if emo_counters:
                out["emo_threads_instructions_per_step"] = sum(emo_instr.values()) / timed
                out["emo_threads_instructions_per_step_by_name"] = {k: v / timed for k, v in sorted(emo_instr.items())}
        else:
            out["instructions_unavailable"] = counter.why
    if probe_ms:
        out["cpu_probe_rounds"] = args.cpu_probe
        out["median_probe_ms"] = _stats(probe_ms[args.warmup:])["median"]
    if step_start_s:
        out["step_start_s"] = [round(x, 6) for x in step_start_s]
    if not args.no_step_list:
        out["step_ms"] = [round(x, 4) for x in step_ms]
        if probe_ms:
            out["probe_ms"] = [round(x, 4) for x in probe_ms]
        if step_instr:
            out["step_instructions"] = step_instr
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
