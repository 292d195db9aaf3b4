"""The recipe estimators of Agarwal et al. 2021 (issue 39): IQM, mean,
percentile bootstrap intervals, probability of improvement and performance
profiles, against hand computations and a plain NumPy bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from plume_jax.scoreboard.recipe_stats import improvement_estimate, interval, iqm, \
    performance_profile, probability_of_improvement, recipe_estimates

FILAMENT_SEEDS = [0.962, 0.921, 0.812, 0.998, 0.95, 1.0, 0.346, 0.964]


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm([8, 1, 7, 2, 6, 3, 5, 4]) == pytest.approx(4.5)
    # one outlying seed moves the mean but not the IQM
    assert iqm(FILAMENT_SEEDS) == pytest.approx(np.mean([0.921, 0.95, 0.962, 0.964]))


def test_probability_of_improvement_counts_ties_half():
    assert probability_of_improvement([1.0, 2.0], [1.0, 0.0]) == pytest.approx(3.5 / 4)
    assert probability_of_improvement([0.5], [0.5]) == pytest.approx(0.5)
    assert probability_of_improvement([0.0, 0.1], [0.9]) == 0.0


def _numpy_percentile_bootstrap(x, statistic, reps=20_000, seed=1):
    rng = np.random.default_rng(seed)
    samples = x[rng.integers(0, len(x), (reps, len(x)))]
    values = statistic(samples)
    return np.percentile(values, [2.5, 97.5])


def test_intervals_agree_with_a_plain_numpy_bootstrap():
    x = np.asarray(FILAMENT_SEEDS)
    est = recipe_estimates(x, seed=0)
    for name, stat in (("iqm", lambda s: iqm(s, -1)), ("mean", lambda s: s.mean(-1))):
        low, high = est[name]["ci95"]
        ref_low, ref_high = _numpy_percentile_bootstrap(x, stat)
        assert low == pytest.approx(ref_low, abs=0.03) and high == pytest.approx(ref_high,
                                                                                 abs=0.03)
        assert min(x) <= low <= est[name]["value"] <= high <= max(x)


def test_estimates_are_reproducible_and_a_single_run_has_no_interval():
    assert recipe_estimates(FILAMENT_SEEDS, seed=3) == recipe_estimates(FILAMENT_SEEDS, seed=3)
    one = recipe_estimates([0.4])
    assert one["runs"] == 1 and one["iqm"]["ci95"] is None and one["mean"]["value"] == 0.4
    same = recipe_estimates([1.0, 1.0, 1.0])
    assert same["iqm"] == {"value": 1.0, "ci95": [1.0, 1.0]}
    assert interval(np.mean, np.asarray([2.0])) is None


def test_improvement_over_a_fixed_baseline_is_the_share_of_runs_above_it():
    est = improvement_estimate(FILAMENT_SEEDS, [0.723])
    assert est["value"] == pytest.approx(7 / 8)
    low, high = est["ci95"]
    assert 0.5 <= low <= 7 / 8 <= high <= 1.0
    both = improvement_estimate([0.9, 0.95, 0.99], [0.1, 0.2])
    assert both == {"value": 1.0, "ci95": [1.0, 1.0]}


def test_improvement_of_a_single_run_over_several_runs_does_not_crash_the_bootstrap():
    """scipy's bootstrap refuses a one-observation sample: a one-seed recipe
    against a several-seed one is resampled on the several-seed side only."""
    est = improvement_estimate([0.5], [0.1, 0.4, 0.6, 0.9])
    assert est["value"] == pytest.approx(0.5)
    low, high = est["ci95"]
    assert 0.0 <= low <= 0.5 <= high <= 1.0
    assert improvement_estimate([0.5], [0.4]) == {"value": 1.0, "ci95": None}


def test_performance_profile_falls_with_the_threshold_and_brackets_its_values():
    prof = performance_profile(FILAMENT_SEEDS, np.linspace(0, 1, 11))
    frac = np.asarray(prof["fraction"])
    assert frac[0] == 1.0 and frac[-1] == 0.0 and np.all(np.diff(frac) <= 0)
    for f, lo, hi in zip(prof["fraction"], prof["low"], prof["high"]):
        assert lo <= f <= hi


@pytest.mark.parametrize("bad", [[], [0.5, float("nan")], [float("inf")]])
def test_a_score_that_is_not_a_finite_number_is_refused(bad):
    with pytest.raises(ValueError, match="one finite score per run"):
        recipe_estimates(bad)
