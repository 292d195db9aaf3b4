"""``run.init_from``: a run starts from a trained policy (a curriculum's
next stage, issue 40: Singh et al. trained 1M steps on the constant plume,
then 4M on switch-many, from the same network). The weights and
observation statistics carry over bit for bit, a sweep's members take
their namesakes', and a policy of another network or space is refused,
naming what differs, before anything trains."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

from plume_jax.core.errors import ValidationError
from plume_jax.train import loop as driver
from plume_jax.train.config import train_config
from plume_jax.train.sweep import setup, sweep_config
from plume_jax.train.run import train
from plume_jax.train.warm_start import policy_folder

ENV = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5, "max_steps": 40,
       "start": {"type": "fixed", "position": [4, 7]}}
UPDATES = 24


def config(updates: int = UPDATES, **run):
    return {
        "env": {"id": "PlumeNav-Gaussian-v0", "overrides": dict(ENV)},
        "algo": {"total_steps": 16 * 32 * updates, "num_envs": 16, "num_steps": 32,
                 "update_epochs": 2, "num_minibatches": 2, "learning_rate": 3e-3,
                 "normalize_obs": True, "ent_coef": 0.0},
        "network": {"hidden_sizes": [16, 16]},
        "run": {"seed": 0, "log_every": 8, "checkpoint_minutes": None, "tensorboard": False,
                **run},
        "eval": {"num_envs": 64},
    }


@pytest.fixture(scope="module")
def stage1(tmp_path_factory):
    out = tmp_path_factory.mktemp("warm") / "stage1"
    result = train(train_config(config()), out, progress=False)
    return {"out": out, "summary": result.summary}


def program_of(data):
    cfg = train_config(data)
    env, env_params = cfg.make_env()
    return driver.build_program([driver.Member(cfg, env, env_params)], batched=False)


def arrays_of(folder: pathlib.Path) -> dict[str, np.ndarray]:
    with np.load(folder / "policy.npz") as data:
        return {k: np.asarray(data[k]) for k in data.files}


def test_a_run_started_from_a_policy_begins_with_its_weights_and_statistics(stage1):
    p = program_of(config(init_from=str(stage1["out"]), seed=7))
    runner = driver.init_runner(p)
    _, arrays = p.algo.policy(runner)
    saved = arrays_of(stage1["out"] / "policy")
    assert sorted(arrays) == sorted(saved)
    for name in saved:
        np.testing.assert_array_equal(np.asarray(arrays[name]), saved[name], err_msg=name)
    # counted as one update's observations, so the new env's statistics take over quickly
    assert float(runner.obs_stats.count) == 16 * 32
    fresh = driver.init_runner(program_of(config(seed=7)))
    assert not np.array_equal(np.asarray(p.algo.policy(fresh)[1]["actor_out/kernel"]),
                              saved["actor_out/kernel"])
    # what does not carry over starts as a fresh run's: the env batch, the key, the update
    np.testing.assert_array_equal(np.asarray(runner.key), np.asarray(fresh.key))
    assert int(runner.update) == 0


@pytest.mark.slow
def test_a_second_stage_keeps_what_the_first_learned(stage1, tmp_path):
    """One update from the stage-1 policy: its critic already predicts the
    returns (a fresh critic's first value loss is far larger) and its greedy
    policy evaluates as stage 1's did."""
    trained = stage1["summary"]["evaluation"]["success_rate"]
    warm = train(train_config(config(updates=1, init_from=str(stage1["out"] / "policy"))),
                 tmp_path / "warm", progress=False)
    cold = train(train_config(config(updates=1)), tmp_path / "cold", progress=False)
    assert warm.summary["evaluation"]["success_rate"] >= trained - 0.2, (warm.summary, trained)
    assert warm.rows[0]["vf_loss"] < 0.5 * cold.rows[0]["vf_loss"], (warm.rows, cold.rows)
    recorded = (tmp_path / "warm" / "config.yaml").read_text()
    assert str(stage1["out"] / "policy") in recorded  # the run folder says where it started


def test_sweep_members_start_from_their_namesakes(stage1, tmp_path):
    sweep = sweep_config({"base": config(init_from=str(tmp_path / "stage1_sweep")),
                          "grid": {"run.seed": [0, 1]}})
    names = sweep.names
    stage1_sweep(names, tmp_path / "stage1_sweep", stage1)
    p = setup(sweep)
    runner = driver.init_runner(p)
    for j, name in enumerate(names):
        saved = arrays_of(tmp_path / "stage1_sweep" / "members" / name / "policy")
        got = p.algo.policy(p.runner_of(runner, j))[1]
        np.testing.assert_array_equal(np.asarray(got["actor_out/kernel"]),
                                      saved["actor_out/kernel"])
        np.testing.assert_array_equal(np.asarray(got["obs_mean"]), saved["obs_mean"])


def stage1_sweep(names, folder, stage1):
    """A stage-1 sweep folder whose members hold different policies (the
    stage-1 policy, and the same with its output layer and observation mean
    moved)."""
    for k, name in enumerate(names):
        dest = folder / "members" / name / "policy"
        shutil.copytree(stage1["out"] / "policy", dest)
        arrays = arrays_of(dest)
        arrays["actor_out/kernel"] = arrays["actor_out/kernel"] * (k + 1)
        arrays["obs_mean"] = arrays["obs_mean"] + k
        np.savez(dest / "policy.npz", **arrays)


def test_a_policy_of_another_network_is_refused_naming_the_difference(stage1, tmp_path):
    data = config(init_from=str(stage1["out"]))
    data["network"] = {"hidden_sizes": [8]}
    with pytest.raises(ValidationError) as info:
        driver.init_runner(program_of(data))
    assert info.value.parameter == "run.init_from"
    assert "network" in str(info.value) and "hidden_sizes" in str(info.value)
    data = config(init_from=str(stage1["out"]))
    data["algo"]["normalize_obs"] = False
    with pytest.raises(ValidationError, match="normalize_obs"):
        driver.init_runner(program_of(data))


def test_a_missing_policy_is_refused_before_a_folder_is_written(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValidationError) as info:
        train(train_config(config(init_from=str(tmp_path / "nowhere"))), out, progress=False)
    assert info.value.parameter == "run.init_from" and "policy.json" in str(info.value)
    assert not out.exists()
    (tmp_path / "sweep" / "members" / "seed-0").mkdir(parents=True)
    with pytest.raises(ValidationError, match="members/<name>"):
        policy_folder(str(tmp_path / "sweep"))


def test_an_algorithm_that_cannot_start_from_a_policy_is_refused_before_a_folder_is_written(
        stage1, tmp_path):
    """belief_value_iteration exports no actor-critic to continue: refused
    with ``run.init_from`` named, before its out folder exists."""
    from tests.train.test_value_iteration import tiny_config

    cfg = tiny_config(2)
    cfg = train_config({**cfg.to_dict(), "run": {**cfg.run, "init_from": str(stage1["out"])}})
    out = tmp_path / "out"
    with pytest.raises(ValidationError, match="cannot start from a trained policy") as info:
        train(cfg, out, progress=False)
    assert info.value.parameter == "run.init_from" and not out.exists()


def test_a_warm_start_says_on_the_console_what_it_started_from(stage1, tmp_path, capsys):
    """Issue 55 claim 1: stage 2 of a warm start never said what it started
    from; the console (even with --quiet) and the summary's notes name the
    policy folder."""
    import yaml

    from plume_jax.cli import main

    source = stage1["out"] / "policy"
    path = tmp_path / "stage2.yaml"
    data = config(updates=1, init_from=str(stage1["out"]))
    data["eval"] = {"num_envs": 8}
    path.write_text(yaml.safe_dump(data))
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"note: started from the policy in {source}" in out, out
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert any(f"started from the policy in {source}" in n for n in summary["notes"]), summary
