"""What every benchmark script shares: machine information, timing and JSON output.

One implementation of each, so the scripts' JSON records say the same thing
the same way. A script names the machine fields it records (its output keys
stay what they were) with :func:`machine_info`::

    machine_info("date", "platform", "cpu_count", ("device", "device_str"), "jax")

Imports only the standard library at module level (JAX and plume_jax are
imported by the fields that need them), so ``scripts/`` modules can import
it without pulling each other in: ``scripts/bench/throughput.py`` and
``scripts/bench/adapters.py`` both import from here and from
``scripts/bench/programs.py``, not from one another.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import platform
import subprocess
import time
from importlib import metadata
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _jax():
    import jax

    return jax


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None when absent."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the OS has none."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def load_rounded() -> list[float]:
    """:func:`load_average` rounded to two decimals."""
    return [round(x, 2) for x in os.getloadavg()]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str | None:
    """The checked-out commit of this tree, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def _plume_jax_version() -> str:
    import plume_jax

    return plume_jax.__version__


#: Machine fields by name: what each records.
FIELDS: dict[str, Callable[[], Any]] = {
    "date": lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    "platform": platform.platform,
    "processor": lambda: platform.processor() or platform.machine(),
    "cpu_model": cpu_model,
    "cpu_count": os.cpu_count,
    "load_average": load_average,
    "load_average_1_5_15min": lambda: list(os.getloadavg()),
    "python": platform.python_version,
    "jax": lambda: _jax().__version__,
    "jax_backend": lambda: _jax().default_backend(),
    "jax_devices": lambda: [str(d) for d in _jax().devices()],
    "device_str": lambda: str(_jax().devices()[0]),
    "device_platform": lambda: _jax().devices()[0].platform,
    "device_kind": lambda: _jax().devices()[0].device_kind,
    "device_count": lambda: _jax().device_count(),
    "plume_jax": _plume_jax_version,
    "git_commit": git_commit,
}


def machine_info(*fields: str | tuple[str, str]) -> dict[str, Any]:
    """The named machine fields, in order: a name of :data:`FIELDS`, a
    ``(key, field)`` pair to record a field under another key, or
    ``"version:<distribution>"`` (recorded under ``<distribution>``; None
    when not installed)."""
    out: dict[str, Any] = {}
    for entry in fields:
        key, field = entry if isinstance(entry, tuple) else (entry, entry)
        if field.startswith("version:"):
            name = field.split(":", 1)[1]
            out[name if key == field else key] = package_version(name)
        else:
            out[key] = FIELDS[field]()
    return out


# -- timing ---------------------------------------------------------------------


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``(result, wall seconds)`` of ``fn(*args, **kwargs)``, its JAX arrays
    waited for."""
    t0 = time.perf_counter()
    result = _jax().block_until_ready(fn(*args, **kwargs))
    return result, time.perf_counter() - t0


def time_run_cpu(compiled: Any, state: Any, seed: int) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of one run of a compiled program (key
    ``seed``); cpu is this process's CPU time, all its threads: on a machine
    shared with other jobs, steps per CPU-second is less distorted by their
    load than steps per wall-clock second."""
    jax = _jax()
    t0, c0 = time.perf_counter(), time.process_time()
    jax.block_until_ready(compiled(state, jax.random.key(seed)))
    return time.perf_counter() - t0, time.process_time() - c0


def time_run(compiled: Any, state: Any, seed: int) -> float:
    """Seconds of one run of a compiled program (key ``seed``)."""
    return time_run_cpu(compiled, state, seed)[0]


# -- JSON output ----------------------------------------------------------------


def write_json(payload: Any, path: str | os.PathLike, *, indent: int = 2,
               trailing_newline: bool = False, default: Callable[[Any], Any] | None = None,
               announce: bool = False) -> pathlib.Path:
    """Write ``payload`` as JSON to ``path`` (creating its folder); with
    ``announce``, print ``saved <path>``."""
    out = pathlib.Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=indent, default=default)
    out.write_text(text + ("\n" if trailing_newline else ""))
    if announce:
        print(f"saved {path}")
    return out

