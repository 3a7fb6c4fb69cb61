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
import json
import os
import tempfile
from typing import Iterable, NamedTuple, Union

from . import _emo

__all__ = ["EmoError", "Completed", "cli", "analyze", "whatif", "optimize", "Monitor", "Measurement"]
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
