"""EMO from Python: the emo command line's analyses as functions returning its JSON as dicts.

    import emo
    a = emo.analyze("trace.json.gz")                      # emo analyze trace.json.gz --json F
    a["iteration_time_us"]["corrected"]
    w = emo.whatif("trace.json.gz", scale=["aten::mm=0.5"])
    p = emo.optimize("trace.json.gz", device="h200", max_slowdown=0.05)

Each function runs the same code as the `emo` binary, in this process (the native module
emo._emo, with the GIL released), and returns exactly the JSON the command writes with
`--json`. Keyword arguments are the command's flags: `max_slowdown=0.05` is
`--max-slowdown=0.05`, `True` a flag alone, `False`/`None` leaves it out, a list or tuple repeats it. A failure
raises EmoError with emo's own message (the file and the event it names).
"""
import ctypes
import json
import os
import tempfile
import threading
from typing import Iterable, NamedTuple, Union

from . import _emo

__all__ = ["EmoError", "Completed", "cli", "analyze", "whatif", "optimize", "Monitor", "Measurement", "trace"]
__version__ = "0.1.0"

PathLike = Union[str, os.PathLike]


class EmoError(RuntimeError):
    """An emo command failed: `exit_code` 1 (the input) or 2 (the arguments); the message is
    what emo printed on stderr."""

    def __init__(self, message: str, exit_code: int, stdout: str = "", stderr: str = ""):
        super().__init__(message)
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr


class Completed(NamedTuple):
    exit_code: int
    stdout: str
    stderr: str


def cli(args: Iterable[str], check: bool = True) -> Completed:
    """Runs `emo ARGS...` in this process and returns what it printed. `trace`, `monitor` and
    `run` start programs and are refused here: run the emo binary for them. With `check`, a
    non-zero exit raises EmoError."""
    args = [_text(a) for a in args]
    code, out, err = _emo.run(args)
    if check and code != 0:
        # Only errors reach stderr here: progress is shown on terminals only, and this is a capture.
        raise EmoError(err.strip() or f"emo {' '.join(args[:1])}: exit code {code}", code, out, err)
    return Completed(code, out, err)


def flags(options: dict) -> list:
    """Keyword arguments as emo's flags (see the module's doc)."""
    out = []
    for key, value in options.items():
        name = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(name)
        elif isinstance(value, (list, tuple)):
            out += [f"{name}={_text(v)}" for v in value]
        else:
            out.append(f"{name}={_text(value)}")
    return out


def _text(value) -> str:
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _paths(paths) -> list:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _json_command(command: str, paths, options: dict) -> dict:
    if "json" in options:
        raise TypeError(f"emo.{command}: the result is returned; json= is not an option here")
    with tempfile.TemporaryDirectory(prefix="emo_py_") as folder:
        result = os.path.join(folder, "result.json")
        cli([command, *_paths(paths), *flags(options), "--json", result])
        with open(result) as f:
            return json.load(f)


def analyze(paths: Union[PathLike, Iterable[PathLike]], **options) -> dict:
    """`emo analyze PATHS... --json`: replay, critical path, slack, overhead correction; for
    several rank traces, the job jointly. Returns the JSON as a dict."""
    return _json_command("analyze", paths, options)


def whatif(paths: Union[PathLike, Iterable[PathLike]], **options) -> dict:
    """`emo whatif PATHS... --json`: the iteration with ops scaled (scale=["REGEX=FACTOR"]),
    a rank slowed (slow_rank="R=F"), ..."""
    return _json_command("whatif", paths, options)


def optimize(paths: Union[PathLike, Iterable[PathLike]], **options) -> dict:
    """`emo optimize PATHS... --json`: the plan of SM clocks per pack within a slowdown target
    (device="h200", max_slowdown=0.05, policy="p.json", ...)."""
    return _json_command("optimize", paths, options)


class Measurement(NamedTuple):
    """One window of Monitor: `time` in seconds; `energy` and `uncertainty` in joules per GPU
    (NVML index); `total_energy` over the watched GPUs. The counter moves about every 100 ms, so
    each GPU's uncertainty is two such periods of its mean power; `measurable` is False under 2 s,
    where that is over 10 % of the window."""
    name: str
    time: float
    energy: dict
    uncertainty: dict
    total_energy: float
    measurable: bool
    gpu_names: dict


class Monitor:
    """Time and energy windows per GPU, read from NVML's energy counter at each window's begin
    and end (read functions only: nothing is changed on the GPU). Windows may nest and overlap;
    each name is open once at a time.

    gpu_indices: NVML indices to watch (default: every GPU). nvml_library: the NVML to load
    (default: $EMO_NVML_LIBRARY, else libnvidia-ml.so.1)."""

    def __init__(self, gpu_indices=None, nvml_library: str = ""):
        self._windows = _emo.EnergyWindows()
        self._call(self._windows.open, list(gpu_indices or []), nvml_library or "")

    @property
    def gpu_indices(self) -> list:
        return self._windows.indices()

    def begin_window(self, name: str) -> None:
        self._call(self._windows.begin, name)

    def end_window(self, name: str) -> Measurement:
        return Measurement(**self._call(self._windows.end, name))

    @staticmethod
    def _call(method, *args):
        """The native call, its failure as EmoError."""
        try:
            return method(*args)
        except RuntimeError as e:
            raise EmoError(f"emo.Monitor: {e}", 1) from None


class trace:
    """Traces a block of this program with EMO's CUPTI tracer, as `emo trace` traces a whole one:

        with emo.trace("step_%r.emotrace") as t:
            for batch in loader:
                train_step(batch)
        emo.analyze(t.path)         # the block's trace
        t.summary()                 # what `emo trace --json` says of it

    From the block's first iteration (NVTX ranges matching `nvtx_iteration`, else the period of
    the kernel launches) it leaves `warmup` iterations untraced, then traces `iterations` of
    them; outside that window it only times iterations and reads each GPU's energy counter. With
    `monitor=True` nothing is traced (as `emo monitor`). CUDA may already be running: the GPUs of
    its contexts are found when the block begins. A block cannot nest in another, nor run in a
    program started under `emo trace`/`emo run`; one Python thread enters and leaves it.

    output: the file (%r = $RANK or pid<PID>, %p = pid, %h = host). buffer_mib: memory for
    CUPTI's activity buffers (records beyond it are dropped and counted). library: the tracer
    library (default: $EMO_INJECT_LIB, beside this package, or where `emo trace` finds it).
    Failures raise EmoError; the file's path is `path` once the block has begun."""

    _lock = threading.Lock()
    _library = None

    def __init__(self, output: PathLike = "emo_trace_%r.emotrace", *, warmup: int = 5, iterations: int = 5,
                 monitor: bool = False, nvtx_iteration: str = None, buffer_mib: int = 256, library: PathLike = None):
        settings = {"EMO_TRACE_OUT": _text(output), "EMO_TRACE_MODE": "monitor" if monitor else "trace",
                    "EMO_TRACE_WARMUP": int(warmup), "EMO_TRACE_ITERATIONS": int(iterations),
                    "EMO_TRACE_BUFFER_MIB": int(buffer_mib)}
        if nvtx_iteration is not None:
            settings["EMO_TRACE_NVTX_REGEX"] = _text(nvtx_iteration)
        for key, value in settings.items():
            if "\n" in str(value):
                raise EmoError(f"emo.trace: {key} must be one line", 2)
        self._settings = "".join(f"{k}={v}\n" for k, v in settings.items())
        self._library_path = None if library is None else _text(library)
        self.path = None

    def __enter__(self):
        lib = self._load(self._library_path)
        out = ctypes.create_string_buffer(4096)
        # ctypes releases the GIL during the call.
        if lib.emo_trace_begin(self._settings.encode(), out, len(out)) != 0:
            raise EmoError(f"emo.trace: {out.value.decode(errors='replace')}", 1)
        self.path = out.value.decode()
        return self

    def __exit__(self, exc_type, exc, tb):
        lib = self._load(self._library_path)
        out = ctypes.create_string_buffer(4096)
        reason = b"block_end" if exc_type is None else b"exception"
        # An exception leaving the block is the one to see; the file is completed either way.
        if lib.emo_trace_end(reason, out, len(out)) != 0 and exc_type is None:
            raise EmoError(f"emo.trace: {out.value.decode(errors='replace')}", 1)
        return False

    def summary(self) -> dict:
        """What `emo trace --json` lists under "traces" for this block's file: untraced step time,
        energy per iteration and per GPU, the traced window."""
        if self.path is None:
            raise EmoError("emo.trace: the block has not begun", 2)
        try:
            return json.loads(_emo.trace_summary(self.path))
        except RuntimeError as e:
            raise EmoError(f"emo.trace: {e}", 1) from None

    @classmethod
    def _load(cls, explicit):
        """The tracer library, loaded once per process (its sessions are process-wide)."""
        with cls._lock:
            if cls._library is not None:
                return cls._library
            path = explicit or os.environ.get("EMO_INJECT_LIB") or _beside_package("libemo_inject.so")
            if not path:
                try:
                    path = _emo.tracer_library()
                except RuntimeError as e:
                    raise EmoError(f"emo.trace: {e}", 1) from None
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise EmoError(f"emo.trace: cannot load {path} ({e}); it needs CUPTI (libcupti.so.13)", 1) from None
            for name in ("emo_trace_begin", "emo_trace_end"):
                fn = getattr(lib, name)
                fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
                fn.restype = ctypes.c_int
            cls._library = lib
            return lib


def _beside_package(name: str):
    """`name` in this package's folder, or in the bin/ of a bundle around it
    (scripts/device_bundle.sh: python/emo/ beside bin/); None when in neither."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, name), os.path.join(here, "..", "..", "bin", name)):
        if os.path.isfile(candidate):
            return os.path.normpath(candidate)
    return None

