"""Periodic evaluation during training with the best policy kept (issue 30:
RL Zoo's EvalCallback / best_model), for any algorithm the run driver trains."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plume_jax.train.config import train_config
from plume_jax.train.folder import best_row, better
from plume_jax.train.progress import read_jsonl
from plume_jax.train.run import train

CONFIG = {
    "env": {"id": "PlumeNav-Gaussian-v0",
            "overrides": {"grid_size": [24, 24], "sigma": 6.0, "max_steps": 40,
                          "goal_radius": 3.0}},
    "algo": {"total_steps": 3072, "num_envs": 16, "num_steps": 32, "update_epochs": 1,
             "num_minibatches": 2, "learning_rate": 3e-3},
    "network": {"hidden_sizes": [16]},
    "run": {"seed": 0, "checkpoint_every": 2, "tensorboard": True},
    "eval": {"num_envs": 20, "every": 2, "periodic_episodes": 24},
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("periodic") / "run"
    result = train(train_config(CONFIG), out, progress=False)
    return out, result


def test_periodic_evaluations_write_a_row_at_every_multiple_and_keep_the_best(run):
    out, result = run
    rows = read_jsonl(out / "evaluations.jsonl")
    assert [r["update"] for r in rows] == [2, 4, 6]
    assert all(r["episodes"] == 24 and r["seed"] == 2000003 for r in rows)
    assert [r["env_steps"] for r in rows] == [1024, 2048, 3072]
    best = None
    for r in rows:  # the flags follow the documented order
        assert r["best"] == better(r, best)
        best = r if r["best"] else best
    kept = best_row(out)
    assert kept == best
    assert result.summary["best_periodic_evaluation"] == best
    assert json.loads((out / "summary.json").read_text())["best_periodic_evaluation"] == best


def test_the_best_policy_is_the_one_its_row_scored(run):
    """best/ holds the evaluated policy: evaluating it again on the periodic
    seed gives its row's numbers."""
    from agents.trained import TrainedPolicy
    from plume_jax.train.evaluation import evaluate

    out, result = run
    best = best_row(out)
    policy = TrainedPolicy.load(out / "best", greedy=True)
    env, params = train_config(CONFIG).make_env()
    again = evaluate(env, policy.spec, policy.params, params, 2000003, 24, 40)
    assert again["success_rate"] == best["success_rate"]
    assert again["mean_return"] == pytest.approx(best["mean_return"], rel=1e-6)
    assert policy.spec["best_of_periodic_evaluations"]["update"] == best["update"]


def test_periodic_evaluations_reach_tensorboard_under_sb3_tags(run):
    from tbparse import SummaryReader

    out, _ = run
    scalars = SummaryReader(str(out / "tensorboard")).scalars
    for tag in ("eval/mean_reward", "eval/success_rate"):
        steps = sorted(scalars[scalars.tag == tag].step)
        assert {1024, 2048} <= set(steps), (tag, steps)


def test_the_final_evaluation_no_longer_adds_a_second_eval_point_at_the_last_step(run):
    """Issue 44.5: the final evaluation wrote ``eval/success_rate`` at the step
    of the last periodic one (two points there), and ``eval/mean_return``
    beside the periodic ``eval/mean_reward``. It is under ``final/`` now, with
    the periodic tags' names for the numbers both have."""
    from tbparse import SummaryReader

    out, result = run
    scalars = SummaryReader(str(out / "tensorboard")).scalars
    rows = read_jsonl(out / "evaluations.jsonl")
    for tag, name in (("eval/success_rate", "success_rate"), ("eval/mean_reward", "mean_return")):
        points = scalars[scalars.tag == tag].sort_values("step")
        assert list(points.step) == [r["env_steps"] for r in rows], tag  # one point per step
        np.testing.assert_allclose(points.value, [r[name] for r in rows], rtol=1e-6)
    tags = set(scalars.tag)
    assert not {t for t in tags if t.startswith("eval/")} - {
        "eval/success_rate", "eval/mean_reward", "eval/mean_ep_length"}
    evaluation = result.summary["evaluation"]
    for tag, value in (("final/success_rate", evaluation["success_rate"]),
                       ("final/mean_reward", evaluation["mean_return"])):
        points = scalars[scalars.tag == tag]
        assert list(points.step) == [3072], tag
        assert float(points.value.iloc[0]) == pytest.approx(value, rel=1e-6)
    assert "final/mean_return" not in tags and "hparam/final/success_rate" in tags


def test_periodic_evaluation_leaves_training_unchanged_and_resume_trims_later_rows(run,
                                                                                  tmp_path):
    """A resume from the kept checkpoint of update 2 drops the rows (and a
    best/) past it, trains the same updates again and writes the same rows:
    the evaluations never change the training state."""
    out, result = run
    rows = read_jsonl(out / "evaluations.jsonl")
    copy = tmp_path / "run"
    import shutil

    shutil.copytree(out, copy)
    again = train(train_config(CONFIG), copy, progress=False,
                  resume=copy / "checkpoints" / "update_00000002")
    assert read_jsonl(copy / "evaluations.jsonl") == rows
    assert best_row(copy) == best_row(out)
    a = read_jsonl(out / "metrics.jsonl")
    b = read_jsonl(copy / "metrics.jsonl")
    assert [r["loss"] if "loss" in r else r["update"] for r in a] == \
        [r["loss"] if "loss" in r else r["update"] for r in b]
    np.testing.assert_array_equal(np.asarray(result.runner.update), again.runner.update)


def test_better_prefers_success_then_fewer_steps_and_keeps_the_earlier_on_a_tie():
    a = {"success_rate": 0.5, "mean_steps_to_goal": 20.0}
    assert better(a, None)
    assert better({"success_rate": 0.6, "mean_steps_to_goal": 90.0}, a)
    assert better({"success_rate": 0.5, "mean_steps_to_goal": 19.0}, a)
    assert not better({"success_rate": 0.5, "mean_steps_to_goal": 20.0}, a)
    assert not better({"success_rate": 0.0, "mean_steps_to_goal": None},
                      {"success_rate": 0.0, "mean_steps_to_goal": None})


def test_periodic_evaluation_settings_are_checked():
    from plume_jax.core.errors import ValidationError

    for key, bad in (("every", 0), ("every", 1.5), ("periodic_episodes", 0),
                     ("periodic_seed", -1)):
        with pytest.raises(ValidationError) as info:
            train_config({**CONFIG, "eval": {key: bad}})
        assert info.value.parameter == f"eval.{key}"


@pytest.mark.slow
def test_a_sweep_keeps_each_members_best_policy(tmp_path):
    from plume_jax.train.sweep import run_sweep, sweep_config

    cfg = {**CONFIG, "run": {"seed": 0, "tensorboard": False}}
    out = tmp_path / "sweep"
    run_sweep(sweep_config({"base": cfg, "grid": {"algo.learning_rate": [1e-3, 3e-3]}}), out,
              progress=False)
    members = sorted((out / "members").iterdir())
    assert len(members) == 2
    for folder in members:
        rows = read_jsonl(folder / "evaluations.jsonl")
        assert [r["update"] for r in rows] == [2, 4, 6]
        assert best_row(folder) == [r for r in rows if r["best"]][-1]
