"""What a training recipe does over seeds, with the estimators of Agarwal et
al. 2021 ("Deep RL at the edge of the statistical precipice"): the
interquartile mean (IQM) and the mean over runs, each with a 95 %
percentile bootstrap interval over the runs, the probability of
improvement over another policy, and performance profiles.

A *run* is one trained policy of the recipe (one seed) scored on one task
(a preset under one protocol): a float, e.g. its success rate over the
protocol's episodes. With one task, the paper's stratified bootstrap is
the plain bootstrap over runs, which ``scipy.stats.bootstrap`` computes
(``method='percentile'``, as rliable does by default); rliable itself is
not used because its pinned ``arch`` (< 8) does not import beside pandas 3.

Everything here is host-side NumPy/SciPy on small arrays (tens of runs).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np
from scipy import stats

#: Bootstrap resamples for every interval (rliable's examples use 2000 to 50000).
RESAMPLES = 20_000
#: The intervals' confidence.
CONFIDENCE = 0.95


def iqm(scores: Any, axis: int = -1) -> Any:
    """Interquartile mean: the mean of the middle 50 % of ``scores`` (25 %
    trimmed from each end, along ``axis``)."""
    return stats.trim_mean(np.asarray(scores, np.float64), 0.25, axis=axis)


def _checked(scores: Sequence[float], name: str) -> np.ndarray:
    x = np.asarray(scores, np.float64).reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: one finite score per run (got {list(scores)!r})")
    return x


def interval(statistic: Callable[..., Any], *samples: np.ndarray, seed: int = 0,
             resamples: int = RESAMPLES) -> tuple[float, float] | None:
    """The 95 % percentile bootstrap interval of ``statistic(*samples)``,
    each sample resampled on its own (runs of different policies are
    independent); None for a single run (no spread to resample)."""
    if all(s.size < 2 for s in samples):
        return None
    if all(np.ptp(s) == 0 for s in samples):  # every resample gives the same value
        value = float(statistic(*samples))
        return value, value
    result = stats.bootstrap(samples, statistic, n_resamples=resamples, vectorized=True,
                             paired=False, confidence_level=CONFIDENCE, method="percentile",
                             # random_state, not rng: rng= needs scipy >= 1.15
                             random_state=np.random.default_rng(seed))
    low, high = result.confidence_interval
    return float(low), float(high)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A point estimate over runs and its 95 % bootstrap interval (None
    with one run)."""

    value: float
    low: float | None
    high: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value,
                "ci95": None if self.low is None else [self.low, self.high]}


def _estimate(statistic: Callable[..., Any], *samples: np.ndarray, seed: int) -> Estimate:
    ci = interval(statistic, *samples, seed=seed)
    return Estimate(float(statistic(*samples)), *(ci if ci is not None else (None, None)))


def recipe_estimates(scores: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """IQM and mean of a recipe's per-run ``scores``, each with its
    interval: ``{"runs", "scores", "iqm", "mean"}`` (each estimate as
    :meth:`Estimate.to_dict`)."""
    x = _checked(scores, "scores")
    return {"runs": int(x.size), "scores": [float(v) for v in x],
            "iqm": _estimate(lambda s, axis=-1: iqm(s, axis), x, seed=seed).to_dict(),
            "mean": _estimate(lambda s, axis=-1: np.mean(s, axis=axis), x, seed=seed).to_dict()}


def probability_of_improvement(x: Any, y: Any, axis: int = -1) -> Any:
    """P(X > Y): the chance that a run of X scores higher than a run of Y,
    ties counted half (the Mann-Whitney U statistic over ``m x n``). The
    runs lie along the last axis (``axis`` must be -1; leading axes are
    batches of resamples)."""
    if axis != -1:
        raise ValueError(f"axis: -1 (the runs' axis), not {axis}")
    a = np.expand_dims(np.asarray(x, np.float64), -1)
    b = np.expand_dims(np.asarray(y, np.float64), -2)
    return np.mean((a > b) + 0.5 * (a == b), axis=(-2, -1))


def improvement_estimate(x: Sequence[float], y: Sequence[float], seed: int = 0
                         ) -> dict[str, Any]:
    """:func:`probability_of_improvement` of runs ``x`` over runs ``y`` with
    its interval (both resampled on their own; a single-run side, such as
    a hand-coded baseline with no training seed, stays fixed; one run on
    each side has no interval)."""
    a, b = _checked(x, "x"), _checked(y, "y")
    if b.size == 1:  # a fixed policy: only x's runs are resampled
        fixed_y = float(b[0])
        return _estimate(lambda s, axis=-1: probability_of_improvement(s, [fixed_y], axis), a,
                         seed=seed).to_dict()
    if a.size == 1:  # one run of x against several of y: only y's are resampled
        fixed_x = float(a[0])
        return _estimate(lambda s, axis=-1: probability_of_improvement([fixed_x], s, axis), b,
                         seed=seed).to_dict()
    return _estimate(probability_of_improvement, a, b, seed=seed).to_dict()


def performance_profile(scores: Sequence[float], thresholds: Sequence[float], seed: int = 0
                        ) -> dict[str, list[float | None]]:
    """The fraction of runs scoring above each threshold (the run score
    distribution, Agarwal et al.'s performance profile), with its pointwise
    bootstrap interval: ``{"tau", "fraction", "low", "high"}``."""
    x = _checked(scores, "scores")
    taus = np.asarray(thresholds, np.float64)
    out: dict[str, list[float | None]] = {"tau": [float(t) for t in taus], "fraction": [],
                                          "low": [], "high": []}
    for t in taus:
        e = _estimate(lambda s, axis=-1, t=t: np.mean(s > t, axis=axis), x, seed=seed)
        out["fraction"].append(e.value)
        out["low"].append(e.low)
        out["high"].append(e.high)
    return out


__all__ = ["CONFIDENCE", "Estimate", "RESAMPLES", "improvement_estimate", "interval", "iqm",
           "performance_profile", "probability_of_improvement", "recipe_estimates"]
