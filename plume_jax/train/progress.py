"""Progress lines from inside the compiled program, metrics files, plots.

:class:`Progress` is the host function that ``PPO.run`` hands to
``jax.debug.callback``: the compiled program calls it with the metrics of
every ``log_every``-th update (it never returns anything to the program, so
it cannot break ``jit`` or change results). It prints one line: updates,
env steps, env steps per second since the last line, mean return, success
rate, episode length and the approximate KL. For a sweep it gets the
metrics of all members and prints their mean and range.
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
import sys
import time
from typing import Any, Iterable, TextIO

import numpy as np


def _fmt(x: float, spec: str) -> str:
    return "n/a" if x is None or not math.isfinite(x) else format(x, spec)


class Progress:
    """Prints progress lines (see the module docstring).

    Args:
        num_updates: total updates of the run (for ``update u/N``).
        stream: where to print (default stdout).
        label: prefix of every line.
    """

    def __init__(self, num_updates: int, stream: TextIO | None = None, label: str = "train"):
        self.num_updates = num_updates
        self.stream = stream or sys.stdout
        self.label = label
        self.lines: list[dict[str, float]] = []
        self.restart()

    def restart(self, env_steps: float = 0.0) -> None:
        """Reset the SPS clock (call right before running a compiled chunk)."""
        self._t = time.perf_counter()
        self._steps = env_steps

    def __call__(self, metrics: dict[str, Any]) -> None:
        m = {k: np.asarray(v, np.float64) for k, v in metrics.items()}
        batched = m["update"].ndim > 0
        update = int(m["update"].reshape(-1)[0])
        steps = float(m["env_steps"].reshape(-1)[0])
        now = time.perf_counter()
        sps = (steps - self._steps) / max(now - self._t, 1e-9)
        self._t, self._steps = now, steps

        def agg(name: str) -> tuple[float, float, float]:
            v = m[name].reshape(-1)
            v = v[np.isfinite(v)]
            if v.size == 0:
                return math.nan, math.nan, math.nan
            return float(v.mean()), float(v.min()), float(v.max())

        ret, succ, length, kl = agg("return_mean"), agg("success_rate"), agg("length_mean"), \
            agg("approx_kl")
        line = (f"[{self.label}] update {update}/{self.num_updates} | steps {steps:,.0f} | "
                f"SPS {sps:,.0f} | return {_fmt(ret[0], '.3f')} | "
                f"success {_fmt(100 * succ[0], '.1f')}% | length {_fmt(length[0], '.0f')} | "
                f"kl {_fmt(kl[0], '.4f')}")
        if batched:
            line += (f" | {m['update'].size} members, success range "
                     f"[{_fmt(100 * succ[1], '.0f')}, {_fmt(100 * succ[2], '.0f')}]%")
        self.lines.append({"update": update, "env_steps": steps, "sps": sps})
        print(line, file=self.stream, flush=True)


def metric_rows(metrics: dict[str, Any]) -> list[dict[str, float]]:
    """Stacked per-update metrics (arrays [U] or [U, M]) -> one dict per
    update (and member)."""
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


def read_jsonl(path: str | pathlib.Path) -> list[dict[str, Any]]:
    path = pathlib.Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


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


def _smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Running mean over up to ``window`` finite points (NaNs skipped)."""
    out = np.full(y.shape, np.nan)
    for i in range(len(y)):
        seg = y[max(0, i - window + 1): i + 1]
        seg = seg[np.isfinite(seg)]
        if seg.size:
            out[i] = seg.mean()
    return out


def plot_learning_curves(path: str | pathlib.Path, curves: dict[str, list[dict[str, Any]]],
                         title: str = "", smooth: int = 5) -> pathlib.Path:
    """PNG with success rate and mean episode return against env steps, one
    line per curve (``label -> metric rows``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for label, rows in curves.items():
        x = np.asarray([r["env_steps"] for r in rows], np.float64)
        for ax, name, scale in ((axes[0], "success_rate", 100.0), (axes[1], "return_mean", 1.0)):
            y = np.asarray([np.nan if r.get(name) is None else r[name] for r in rows], np.float64)
            ax.plot(x, scale * _smooth(y, smooth), label=label, linewidth=1.2)
    axes[0].set_ylabel("success rate of finished episodes (%)")
    axes[1].set_ylabel("mean episode return (training reward)")
    for ax in axes:
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    if 1 < len(curves) <= 16:
        axes[1].legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
