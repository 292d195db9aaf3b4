"""Rates only where they have a count (issue 30, friction 8): the learning
curves drew 100 % from the two episodes that ended in the first update, and
sweep tables mixed ``100.0`` with ``n/a`` without saying what either was.
Now a plotted point pools at least ``MIN_EPISODES_PER_POINT`` ended
episodes and the count is drawn below; a table gives each training rate
with the episodes it is over, "no episode ended" where none did, and says
which success is the greedy evaluation's and which the sampled training
actions'. No compilation: metrics rows are written by hand."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from plume_jax.train import report
from plume_jax.train.report import episode_mean, print_results, rank_settings, \
    summary_markdown, training_tail
from plume_jax.train.sweep import sweep_config

#: Episodes ended and training success per update: the first updates end a
#: few quick successes, later ones many episodes at a lower rate.
EPISODES = [2, 2, 4, 8, 10, 20, 20, 20, 20, 20]
SUCCESS = [1.0, 1.0, 0.5, 0.25, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1]


def _rows(episodes=EPISODES, success=SUCCESS):
    return [{"update": u + 1, "env_steps": 100.0 * (u + 1), "episodes": float(n),
             "success_rate": s if n else None, "return_mean": s if n else None,
             "length_mean": 10.0 if n else None} for u, (n, s) in enumerate(zip(episodes, success))]


def test_training_success_counts_each_ended_episode_once():
    """Two episodes at 100 % and 98 at 0 % are 2 %, not the 50 % a mean
    over updates gives."""
    rows = _rows([2, 98], [1.0, 0.0])
    assert episode_mean(rows, "success_rate") == (pytest.approx(0.02), 100)
    assert episode_mean(_rows([0, 0], [0.0, 0.0]), "success_rate") == (None, 0)
    no_counts = [{k: v for k, v in r.items() if k != "episodes"} for r in rows]
    assert episode_mean(no_counts, "success_rate") == (pytest.approx(0.5), None)


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions would save."""
    figures = []

    def keep(fig, path):
        figures.append(fig)
        return path

    monkeypatch.setattr(report, "_save", keep)
    yield figures
    for fig in figures:
        report._pyplot().close(fig)


def _expected_curve(window=5):
    """Pooled success per update, NaN until the window holds 20 episodes."""
    out = []
    for i in range(len(EPISODES)):
        n = EPISODES[max(0, i - window + 1): i + 1]
        s = SUCCESS[max(0, i - window + 1): i + 1]
        out.append(100 * np.dot(n, s) / sum(n) if sum(n) >= report.MIN_EPISODES_PER_POINT
                   else math.nan)
    return np.asarray(out)


def test_learning_curve_plots_no_success_rate_from_a_handful_of_episodes(drawn, tmp_path):
    report.plot_learning_curves(tmp_path / "curve.png", {"run": _rows()})
    success, _, count = drawn[0].axes
    y = success.lines[0].get_ydata()
    assert np.isnan(y[:4]).all()  # 2, 4, 8, 16 episodes in the window: no point
    np.testing.assert_allclose(y, _expected_curve())
    assert y[4] == pytest.approx(100 * 10 / 26)  # the first point pools 26 episodes
    np.testing.assert_array_equal(count.lines[0].get_ydata(), EPISODES)  # the count, shown
    assert "20 episodes" in success.get_title()
    assert "sampled actions" in success.get_ylabel()


def test_sweep_training_curves_plot_no_rate_from_a_handful_of_episodes(drawn, tmp_path):
    other = _rows([n + 10 for n in EPISODES], SUCCESS)  # a second seed, more episodes
    report.plot_setting_curves(tmp_path / "s.png", {"lr=0.1": [_rows(), other]},
                              "success_rate", "training success (%)", scale=100.0)
    ax, count_ax = drawn[0].axes[:2]
    mean = ax.lines[0].get_ydata()
    seed_two = report.episode_curve(other, "success_rate")
    assert np.isnan(mean[0]) and np.isnan(seed_two[0])  # 2 and 12 episodes: no point
    np.testing.assert_allclose(mean[4:], np.mean([_expected_curve()[4:], 100 * seed_two[4:]],
                                                 axis=0))
    np.testing.assert_allclose(count_ax.lines[0].get_ydata(), np.asarray(EPISODES) + 5)


def _summary(evaluated: bool):
    """A sweep's summary as run_sweep builds it, from hand-written rows:
    setting lr=0.001 ends episodes, setting lr=0.01 ends none in its last
    updates."""
    sweep = sweep_config({"base": {"env": {"id": "PlumeNav-Gaussian-v0"},
                                   "algo": {"total_steps": 10_000}},
                          "grid": {"algo.learning_rate": [0.001, 0.01], "run.seed": [0, 1]}})
    member_rows = [_rows(), _rows([n + 10 for n in EPISODES]), _rows([4] + [0] * 9),
                   _rows([0] * 10)]
    results = []
    for i, rows in enumerate(member_rows):
        row = {"member": i, "name": sweep.names[i], "program": 1, **sweep.members[i],
               **training_tail(rows)}
        if evaluated:
            row.update(eval_success_rate=[0.03, 0.05, 0.0, 0.0][i],
                       eval_mean_steps_to_goal=[80.0, 70.0, None, None][i])
        results.append(row)
    summary = {"members": 4, "results": results, "settings": rank_settings(sweep, results),
               "programs": [{"program": 1, "static_settings": {}, "members": sweep.names,
                             "compile_seconds": 1.0, "train_seconds": 2.0}],
               "compile_seconds": 1.0, "train_seconds": 2.0, "wall_seconds": 3.0,
               "steps_per_second_excl_compile": 100.0}
    if evaluated:
        summary["eval"] = {"episodes": 100, "seed": 7}
    return sweep, summary


@pytest.mark.parametrize("evaluated", [True, False])
def test_sweep_tables_print_no_training_rate_where_no_episode_ended(evaluated):
    sweep, summary = _summary(evaluated)
    tail = [r["train_episodes_last10pct"] for r in summary["results"]]
    assert tail == [20, 30, 0, 0]
    md = summary_markdown(summary)
    printed = io.StringIO()
    print_results(summary, printed)
    for text in (md, printed.getvalue()):
        assert "n/a" not in text
        assert "no episode ended" in text
    assert f"| `members/{sweep.names[2]}/` | " in md
    member_lines = [line for line in md.splitlines() if line.startswith("| 3 | `members/")]
    assert member_lines[0].count("no episode ended") == 1
    assert "| 10.0, 20 episodes |" in md  # member 0: the rate and its count
    if not evaluated:
        assert "not evaluated" in md
        assert "greedy" not in printed.getvalue().split("settings ranked")[1]


def test_sweep_tables_say_which_success_is_greedy_and_which_sampled():
    sweep, summary = _summary(True)
    md = summary_markdown(summary)
    assert "| greedy success % | mean steps to goal | training success % (sampled actions, " \
           "last 10% of updates) |" in md
    assert "*Greedy success*" in md and "*Training success*" in md
    assert "most likely action" in md and "sampled its actions" in md
    printed = io.StringIO()
    print_results(summary, printed)
    best = [line for line in printed.getvalue().splitlines() if line.startswith("  1. ")][0]
    assert best == ("  1. learning_rate=0.001: greedy success 4.0 ± 1.4 (3.0–5.0) %, steps "
                    "75.0 ± 7.1, training success 10.0 ± 0.0 (10.0–10.0) %, 50 episodes "
                    "(2 seeds)")
    worst = [line for line in printed.getvalue().splitlines() if line.startswith("  2. ")][0]
    assert "steps none reached it" in worst and "training success no episode ended" in worst
