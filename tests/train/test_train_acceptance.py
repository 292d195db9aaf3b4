"""Acceptance (slow): the shipped configs train policies that reach the
source in >= 90% of fresh episodes, evaluated greedily."""

from __future__ import annotations

import json
import pathlib

import pytest

from plume_jax.cli import main

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["train_gaussian.yaml", "train_gaussian_gru.yaml"])
def test_shipped_gaussian_config_reaches_90_percent_greedy_success(name, tmp_path):
    out = tmp_path / "run"
    assert main(["train", "--config", str(CONFIGS / name), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    ev = summary["evaluation"]
    assert ev["greedy"] and ev["episodes"] >= 1000
    assert ev["success_rate"] >= 0.9, ev


@pytest.mark.slow
def test_recurrent_policy_beats_cast_and_surge_on_the_filament_plume(tmp_path):
    """The GRU config against the best baseline there, same episodes, same evaluator."""
    from agents import make_agent
    from plume_jax.evaluate import rollout
    import jax
    import numpy as np

    import plume_jax
    from agents.trained import TrainedPolicy

    out = tmp_path / "run"
    assert main(["train", "--config", str(CONFIGS / "train_filament_gru.yaml"), "--out",
                 str(out), "--quiet"]) == 0
    env, params = plume_jax.make("PlumeNav-Filament-v0")
    key = jax.random.key(0)
    trained = rollout(env, params, TrainedPolicy.load(out / "policy"), key, 500, 500)
    baseline = rollout(env, params, make_agent("cast_and_surge", env), key, 500, 500)
    assert np.mean(trained.success) > np.mean(baseline.success) + 0.05
