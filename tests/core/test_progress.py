"""The progress bar of long commands: a rich bar on a terminal, plain lines
otherwise, nothing when quiet."""

from __future__ import annotations

import io

from plume_jax.progress import ProgressBar


def test_plain_lines_when_not_a_terminal_and_always_the_last_update():
    stream = io.StringIO()
    with ProgressBar(1000, "train", unit="steps", stream=stream, min_interval_s=3600) as bar:
        assert bar.mode == "lines"
        bar.update(10, message="first")
        bar.update(500)          # within min_interval_s of the first line: not printed
        bar.update(1000, message="done")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[train] 10/1,000 steps (1.0%)") and lines[0].endswith("| first")
    assert lines[1].startswith("[train] 1,000/1,000 steps (100.0%)") and "ETA 0:00:00" in lines[1]


def test_quiet_prints_nothing():
    stream = io.StringIO()
    with ProgressBar(10, "sweep", quiet=True, stream=stream) as bar:
        for _ in range(10):
            bar.advance()
    assert bar.mode == "quiet" and stream.getvalue() == ""


def test_terminal_mode_draws_a_rich_bar_with_eta():
    stream = io.StringIO()
    with ProgressBar(4, "evaluate", unit="runs", stream=stream, force_terminal=True) as bar:
        assert bar.mode == "terminal"
        bar.advance(message="scenario 1/4")
        bar.update(4)
    text = stream.getvalue()
    assert "evaluate" in text and "4/4" in text and "ETA" in text


def test_eta_is_unknown_before_progress_and_counted_from_restart():
    bar = ProgressBar(100, "x", stream=io.StringIO(), min_interval_s=3600)
    assert bar.eta_seconds() is None
    bar.update(50)
    bar.restart_clock()
    assert bar.eta_seconds() is None      # nothing done since the restart
    bar.close()
    bar.update(60)                         # after close: ignored
    assert bar.completed == 50


def test_training_progress_prints_no_rate_before_an_episode_ended():
    """Issue 30 item 8: the progress line printed 'success n/a%' and rates of
    updates in which no episode had ended; it now says no episode ended, and
    otherwise how many episodes the rates count (of sampled actions)."""
    import numpy as np

    from plume_jax.train.progress import Progress

    out = io.StringIO()
    bar = ProgressBar(100, "train", stream=out, min_interval_s=0.0)
    progress = Progress(bar, num_updates=2)
    nan = np.float32(np.nan)
    progress({"update": 1, "env_steps": 50, "episodes": 0, "return_mean": nan,
              "success_rate": nan, "length_mean": nan, "approx_kl": 0.01})
    progress({"update": 2, "env_steps": 100, "episodes": 3, "return_mean": 0.5,
              "success_rate": 2 / 3, "length_mean": 12.0, "approx_kl": 0.02})
    bar.close()
    first, second = [line for line in out.getvalue().splitlines() if "| update " in line]
    assert "no episode ended in this update" in first and "%" not in first.split("SPS")[1]
    assert "n/a%" not in out.getvalue()
    assert "3 episodes ended: return 0.500 | success 66.7% (sampled actions)" in second


def test_progress_line_of_an_algorithm_without_a_policy_kl_prints_no_kl():
    """The value-iteration algorithms (no policy, so no approximate KL: NaN or
    absent) printed ``kl n/a`` on every progress line; PPO's line keeps it."""
    import numpy as np

    from plume_jax.train.progress import Progress

    out = io.StringIO()
    bar = ProgressBar(150, "train", stream=out, min_interval_s=0.0)
    progress = Progress(bar, num_updates=3)
    progress({"update": 1, "env_steps": 50, "episodes": 2, "return_mean": 0.5,
              "success_rate": 0.5, "length_mean": 9.0, "approx_kl": np.float32(np.nan)})
    progress({"update": 2, "env_steps": 100, "episodes": 2, "return_mean": 0.5,
              "success_rate": 0.5, "length_mean": 9.0})
    progress({"update": 3, "env_steps": 150, "episodes": 2, "return_mean": 0.5,
              "success_rate": 0.5, "length_mean": 9.0, "approx_kl": 0.0125})
    bar.close()
    lines = [line for line in out.getvalue().splitlines() if "| update " in line]
    assert len(lines) == 3
    assert "kl" not in lines[0] and "kl" not in lines[1]
    assert "| kl 0.0125" in lines[2]


def test_elapsed_from_survives_restart_clock_in_lines_and_on_a_terminal():
    """Regression: ``plume-jax tune`` shows one bar a batch of trials, and
    each bar's elapsed time started at 0:00:00 again (and at every compile's
    restart_clock); with ``elapsed_from`` the elapsed time counts from it,
    and restart_clock restarts the ETA's rate only."""
    import time

    started = time.perf_counter() - 100.0  # the study began 100 s ago
    for terminal in (False, True):
        stream = io.StringIO()
        bar = ProgressBar(100, "tune", stream=stream, min_interval_s=0.0,
                          force_terminal=terminal, elapsed_from=started)
        bar.update(20)
        bar.restart_clock(20)  # after a compile
        assert bar.eta_seconds() is None  # the rate restarts
        assert 100.0 <= bar.elapsed() < 160.0
        bar.update(100)
        bar.close()
        shown = stream.getvalue()
        assert "0:01:4" in shown or "0:01:5" in shown, shown  # 1:40 and more, not 0:00:00
    plain = ProgressBar(100, "train", stream=io.StringIO(), min_interval_s=3600)
    plain._t0 -= 100.0
    plain.restart_clock()  # no elapsed_from: elapsed restarts with the ETA, as before
    assert plain.elapsed() < 60.0 and "0:00:0" in plain.line()
