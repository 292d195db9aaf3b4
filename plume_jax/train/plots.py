"""Figures of training runs and sweeps (matplotlib, Agg backend, PNG).

- :func:`plot_learning_curves`: one run (or a few): training success rate,
  mean return and the number of episodes that ended, against env steps
  (``learning_curve.png`` of ``train``);
- :func:`plot_setting_curves`: a sweep's training curves of one per-episode
  metric, one line per setting (grid point without the seed): the mean over
  its seeds, with the seeds' range shaded, and below it the episodes that
  ended per update; the legend outside the axes;
- :func:`plot_setting_bars`: a sweep's final numbers of one metric (greedy
  evaluation success, mean steps to the goal) per setting, ranked: the mean
  over seeds as a bar, every seed as a dot, the min-max range as a line.

A point of a per-episode training metric (success rate, return) pools the
episodes that ended in its update and the ``smooth_window - 1`` updates
before it, each episode counting once (:func:`episode_curve`), and is drawn
only where at least :data:`MIN_EPISODES_PER_POINT` of them ended: the few
episodes that end in the first updates are mostly the quick successes (the
others are still running), so a rate from them says little.
"""

from __future__ import annotations

import pathlib
import warnings
from typing import Any, Sequence

import numpy as np

from plume_jax.train.progress import episode_mean

#: The fewest ended episodes a plotted point of a training success rate or
#: return pools (see the module docstring).
MIN_EPISODES_PER_POINT = 20


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def episode_curve(rows: list[dict[str, Any]], metric: str, window: int = 5,
                  min_episodes: int = MIN_EPISODES_PER_POINT) -> np.ndarray:
    """f64[len(rows)]: per update (metrics row), ``metric`` over the
    episodes that ended in it and in the ``window - 1`` updates before
    (episode-weighted, :func:`~plume_jax.train.progress.episode_mean`); NaN
    where fewer than ``min_episodes`` ended there. Rows without an
    ``episodes`` count: the running mean of the finite values."""
    out = np.full(len(rows), np.nan)
    for i in range(len(rows)):
        value, episodes = episode_mean(rows[max(0, i - window + 1): i + 1], metric)
        if value is not None and (episodes is None or episodes >= min_episodes):
            out[i] = value
    return out


def _column(rows: list[dict[str, Any]], name: str) -> np.ndarray:
    return np.asarray([np.nan if r.get(name) is None else r[name] for r in rows], np.float64)


def plot_learning_curves(path: str | pathlib.Path, curves: dict[str, list[dict[str, Any]]],
                         title: str = "", smooth_window: int = 5) -> pathlib.Path:
    """PNG with the training success rate, the mean episode return (points
    of at least :data:`MIN_EPISODES_PER_POINT` episodes over
    ``smooth_window`` updates, :func:`episode_curve`) and the episodes that
    ended per update, against env steps; one line per curve (``label ->
    metric rows``)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for label, rows in curves.items():
        x = _column(rows, "env_steps")
        for ax, name, scale in ((axes[0], "success_rate", 100.0), (axes[1], "return_mean", 1.0)):
            ax.plot(x, scale * episode_curve(rows, name, smooth_window), label=label,
                    linewidth=1.2)
        axes[2].plot(x, _column(rows, "episodes"), label=label, linewidth=1.0)
    axes[0].set_ylabel("training success, sampled actions (%)")
    axes[1].set_ylabel("mean episode return (training reward)")
    axes[2].set_ylabel("episodes ended per update")
    for ax in axes[:2]:
        ax.set_title(f"points: \u2265 {MIN_EPISODES_PER_POINT} episodes in {smooth_window} "
                     "updates", fontsize=8)
    for ax in axes:
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    if len(curves) > 1:
        fig.legend(*axes[1].get_legend_handles_labels(), loc="center left",
                   bbox_to_anchor=(1.0, 0.5), fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_setting_curves(path: str | pathlib.Path,
                        settings: dict[str, list[list[dict[str, Any]]]], metric: str,
                        ylabel: str, title: str = "", scale: float = 1.0,
                        smooth_window: int = 5) -> pathlib.Path:
    """One per-episode metric's training curves, one line per setting:
    ``settings`` maps a setting's label to the metric rows of each of its
    seeds (same env steps). The line is the mean over seeds of the seeds'
    curves (:func:`episode_curve`: points of at least
    :data:`MIN_EPISODES_PER_POINT` episodes over ``smooth_window`` updates),
    the band their min-max range; a panel below shows the episodes that
    ended per update (seed mean)."""
    plt = _pyplot()
    fig, (ax, count_ax) = plt.subplots(2, 1, figsize=(8, 6), sharex=True,
                                       gridspec_kw={"height_ratios": [3, 1]})
    for label, seeds in settings.items():
        x = _column(seeds[0], "env_steps")
        ys = np.stack([scale * episode_curve(rows[:len(x)], metric, smooth_window)
                       for rows in seeds])
        counts = np.stack([_column(rows[:len(x)], "episodes") for rows in seeds])
        with warnings.catch_warnings():  # all-NaN columns (too few episodes ended yet)
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, lo, hi = np.nanmean(ys, 0), np.nanmin(ys, 0), np.nanmax(ys, 0)
            count = np.nanmean(counts, 0)
        (line,) = ax.plot(x, mean, linewidth=1.4,
                          label=f"{label} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})")
        if len(seeds) > 1:
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        count_ax.plot(x, count, linewidth=1.0, color=line.get_color())
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    ax.set_title((f"{title}\n" if title else "") + f"points: \u2265 {MIN_EPISODES_PER_POINT} "
                 f"episodes in {smooth_window} updates", fontsize=9)
    count_ax.set_xlabel("env steps (per member)")
    count_ax.set_ylabel("episodes ended\nper update", fontsize=8)
    count_ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_setting_bars(path: str | pathlib.Path, labels: Sequence[str],
                      values: Sequence[Sequence[float | None]], xlabel: str, title: str = "",
                      scale: float = 1.0) -> pathlib.Path:
    """One final metric per setting, in the given (ranked) order from the
    top: ``values[i]`` holds setting ``i``'s value for each seed (None: no
    value, e.g. no episode reached the goal)."""
    plt = _pyplot()
    n = len(labels)
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * n))
    for i, seeds in enumerate(values):
        y = n - 1 - i
        v = np.asarray([np.nan if s is None else scale * s for s in seeds], np.float64)
        finite = v[np.isfinite(v)]
        if finite.size:
            ax.barh(y, finite.mean(), color="tab:blue", alpha=0.35, height=0.6)
            ax.plot([finite.min(), finite.max()], [y, y], color="tab:blue", linewidth=1.5)
            ax.plot(finite, np.full(finite.shape, y), "o", color="tab:blue", markersize=4)
            ax.text(finite.mean(), y + 0.32, f"{finite.mean():.3g}", fontsize=7, va="bottom")
        else:
            ax.text(0, y, "  n/a", fontsize=7, va="center")
    ax.set_yticks(range(n))
    ax.set_yticklabels(list(reversed(list(labels))), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title)
    return _save(fig, path)
