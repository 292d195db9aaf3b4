"""Progress from inside the compiled program, and the metrics files.

:class:`Progress` is the ``jax.debug.callback`` of a training program: called
with the metrics of every ``log_every``-th update (it returns nothing to the
program, so it cannot change results), it feeds a
:class:`plume_jax.progress.ProgressBar` the env steps done and a line
(update, env steps per second, return, success, length, KL; a program's
members' mean and range).
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
import time
from typing import Any, Iterable

import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.progress import ProgressBar


def _fmt(x: float, spec: str) -> str:
    return "n/a" if x is None or not math.isfinite(x) else format(x, spec)


def _percent(rate: float, spec: str = ".1f") -> str:
    """``rate`` (a fraction) as ``"42.0%"``, or ``"n/a"`` (never ``"n/a%"``)."""
    return "n/a" if rate is None or not math.isfinite(rate) else f"{format(100 * rate, spec)}%"


def _ended(episodes: np.ndarray, batched: bool) -> str:
    """How many episodes ended: of a run, or of a program's members (their
    total and how many members had one: the rates that follow are theirs)."""
    if not batched:
        return f"{_fmt(float(episodes.reshape(-1)[0]), '.0f')} episodes ended: "
    counts = np.nan_to_num(episodes.reshape(-1))
    total, some = float(counts.sum()), int((counts > 0).sum())
    return (f"{total:.0f} episode{'' if total == 1 else 's'} ended in {some} of "
            f"{counts.size} members: ")


class Progress:
    """The ``jax.debug.callback`` of a training program (module docstring).

    Args:
        bar: the bar to feed (shared by the programs of a sweep).
        num_updates: updates of the run (for ``update u/N``).
        steps_per_update: env steps of one update (of one member).
        offset: the bar's count before this program (a sweep's earlier
            programs).
        members: members trained by this program (the bar counts the env
            steps of all of them).
        prefix: text before the message (``"program 2/3"``).
    """

    def __init__(self, bar: ProgressBar, num_updates: int, steps_per_update: int,
                 offset: float = 0.0, members: int = 1, prefix: str = ""):
        self.bar = bar
        self.num_updates = num_updates
        self.steps_per_update = steps_per_update
        self.offset = offset
        self.members = members
        self.prefix = prefix
        self.restart()

    def restart(self, env_steps: float = 0.0) -> None:
        """Reset the SPS clock (call right before running a compiled chunk);
        ``env_steps``: the steps done so far (of one member)."""
        self._t = time.perf_counter()
        self._steps = env_steps

    def __call__(self, metrics: dict[str, Any]) -> None:
        m = {k: np.asarray(v, np.float64) for k, v in metrics.items()}
        batched = m["update"].ndim > 0
        update = int(m["update"].reshape(-1)[0])
        steps = float(m["env_steps"].reshape(-1)[0])
        now = time.perf_counter()
        sps = self.members * (steps - self._steps) / max(now - self._t, 1e-9)
        self._t, self._steps = now, steps

        def agg(name: str) -> tuple[float, float, float]:
            if name not in m:  # an algorithm without this metric
                return math.nan, math.nan, math.nan
            v = m[name].reshape(-1)
            v = v[np.isfinite(v)]
            if v.size == 0:
                return math.nan, math.nan, math.nan
            return float(v.mean()), float(v.min()), float(v.max())

        ret, succ, length, kl = agg("return_mean"), agg("success_rate"), agg("length_mean"), \
            agg("approx_kl")
        message = f"update {update}/{self.num_updates} | SPS {sps:,.0f} | "
        episodes = agg("episodes")
        if "episodes" in m and not episodes[2] > 0:  # no rate without an ended episode
            message += "no episode ended in this update (return, success, length: n/a)"
        else:
            ended = "" if "episodes" not in m else _ended(m["episodes"], batched)
            message += (f"{ended}return {_fmt(ret[0], '.3f')} | "
                        f"success {_percent(succ[0])} (sampled actions) | "
                        f"length {_fmt(length[0], '.0f')}")
        if math.isfinite(kl[0]):  # value-iteration algorithms have no policy KL
            message += f" | kl {_fmt(kl[0], '.4f')}"
        if batched:
            message += (f" | {m['update'].size} members, success range "
                        f"[{_percent(succ[1], '.0f')}, {_percent(succ[2], '.0f')}]")
        if self.prefix:
            message = f"{self.prefix} | {message}"
        self.bar.update(self.offset + self.members * steps, message=message)


def metric_rows(metrics: dict[str, Any]) -> list[dict[str, float | int | None]]:
    """Stacked per-update metrics (arrays [U] or [U, M]) -> one dict per
    update (and member): Python scalars, None where a value is NaN or infinite."""
    arrays = {k: np.asarray(v) for k, v in metrics.items()}
    n = arrays["update"].shape[0]
    rows = []
    for i in range(n):
        if arrays["update"].ndim == 1:
            rows.append({k: _scalar(v[i]) for k, v in arrays.items()})
        else:
            for j in range(arrays["update"].shape[1]):
                rows.append({"member": j, **{k: _scalar(v[i, j]) for k, v in arrays.items()}})
    return rows


def _scalar(x: Any) -> float | int | None:
    x = np.asarray(x).item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def append_jsonl(path: str | pathlib.Path, rows: Iterable[dict[str, Any]]) -> None:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


#: The largest metrics file read (bytes).
MAX_METRICS_BYTES = 4 << 30


def read_jsonl(path: str | pathlib.Path) -> list[dict[str, Any]]:
    """The rows of a metrics file (at most :data:`MAX_METRICS_BYTES`): one
    JSON object with an integer ``update`` per line. A torn last line (a kill
    during the append) is skipped; a damaged line before it is a
    ``ValidationError`` naming the file and the line."""
    from plume_jax.files.safe_io import read_bytes_bounded

    path = pathlib.Path(path)
    if not path.exists():
        return []
    data = read_bytes_bounded(path, MAX_METRICS_BYTES, "metrics")
    lines = data.decode("utf-8", errors="replace").splitlines()
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            if line.count("[") + line.count("{") > 256:
                raise ValueError("nested deeper than a metrics row")
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            if isinstance(row.get("update"), bool) or not isinstance(row.get("update"), int):
                raise ValueError("no integer 'update'")
        except (ValueError, RecursionError) as exc:
            if i == len(lines) - 1:
                break  # torn by a kill: the checkpoint never covers it
            raise ValidationError.for_parameter(
                "metrics", f"{path}:{i + 1}", f"one JSON object per line ({exc})") from None
        rows.append(row)
    return rows


def write_jsonl(path: str | pathlib.Path, rows: Iterable[dict[str, Any]]) -> None:
    """Replace the metrics file with ``rows`` (atomically)."""
    from plume_jax.files import atomic_write

    text = "".join(json.dumps(row) + "\n" for row in rows)
    atomic_write(path, text)


def rows_up_to(path: str | pathlib.Path, last_update: int) -> list[dict[str, Any]]:
    """The rows of a metrics file for updates ``<= last_update`` (a
    checkpoint's), without a torn last line."""
    return [r for r in read_jsonl(path) if int(r.get("update", 0)) <= last_update]


def trim_jsonl(path: str | pathlib.Path, last_update: int) -> list[dict[str, Any]]:
    """Keep only the rows of updates ``<= last_update`` (a checkpoint's), so
    a resumed run counts no update twice; returns them."""
    path = pathlib.Path(path)
    kept = rows_up_to(path, last_update)
    if path.exists():
        write_jsonl(path, kept)
    return kept


def write_csv(path: str | pathlib.Path, rows: list[dict[str, Any]]) -> None:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in fields})
