"""Training and sweep configs are validated with clear errors; GAE on a
constructed example with termination and truncation; the shipped configs
load. Nothing here compiles a training program."""

from __future__ import annotations

import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from plume_jax.cli import main
from plume_jax.errors import ValidationError
from plume_jax.train.config import load_train_config, train_config
from plume_jax.train.ppo import gae, resolve_gamma
from plume_jax.train.sweep import load_sweep_config, setup, sweep_config

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"

MINIMAL = {"env": {"id": "PlumeNav-Gaussian-v0"}, "algo": {"total_steps": 100_000}}


def _with(section: str, **values):
    data = {k: dict(v) for k, v in MINIMAL.items()}
    data.setdefault(section, {}).update(values)
    return data


def test_minimal_config_fills_every_default():
    cfg = train_config(MINIMAL)
    d = cfg.to_dict()
    assert d["algo"]["num_envs"] == 64 and d["algo"]["learning_rate"] == 3e-4
    assert d["network"]["type"] == "mlp" and d["network"]["hidden_sizes"] == [64, 64]
    assert cfg.num_updates == 100_000 // (64 * 128)
    assert train_config(d) == cfg  # the resolved form round-trips


@pytest.mark.parametrize("data, parameter", [
    (_with("algo", learning_rat=1e-3), "algo.learning_rat"),
    ({**MINIMAL, "optimiser": {}}, "optimiser"),
    (_with("network", kind="gru"), "network.kind"),
    (_with("algo", learning_rate=-1.0), "algo.learning_rate"),
    (_with("algo", learning_rate="fast"), "algo.learning_rate"),
    (_with("algo", num_envs=0), "algo.num_envs"),
    (_with("algo", num_envs=2.5), "algo.num_envs"),
    (_with("algo", anneal_lr="yes"), "algo.anneal_lr"),
    (_with("algo", gamma=1.5), "algo.gamma"),
    (_with("network", type="transformer"), "network.type"),
    (_with("network", hidden_sizes=[]), "network.hidden_sizes"),
    (_with("network", obs_transform="sqrt"), "network.obs_transform"),
    (_with("run", devices="all"), "run.devices"),
    ({"algo": {"total_steps": 1000}}, "env.id"),
    ({"env": {"id": "PlumeNav-Gaussian-v0"}}, "algo.total_steps"),
    (_with("algo", total_steps=100, num_envs=64, num_steps=128), "algo.total_steps"),
    (_with("algo", num_minibatches=3), "algo.num_minibatches"),
    (_with("network", type="gru", **{"hidden_sizes": [8]}) | {"algo": {"total_steps": 10**6,
                                                                      "num_minibatches": 5}},
     "algo.num_minibatches"),
])
def test_bad_config_names_the_key(data, parameter):
    with pytest.raises(ValidationError) as info:
        train_config(data)
    assert info.value.parameter == parameter
    assert parameter in str(info.value)


def test_scientific_notation_strings_are_numbers():
    # YAML 1.1 (PyYAML) reads 3e-4 as a string
    cfg = train_config(yaml.safe_load("env: {id: PlumeNav-Gaussian-v0}\n"
                                      "algo: {total_steps: 1e6, learning_rate: 3e-4}"))
    assert cfg.algo["learning_rate"] == 3e-4 and cfg.algo["total_steps"] == 10**6


def test_env_overrides_are_validated_by_make():
    cfg = train_config(_with("env", overrides={"sigmaa": 3.0}))
    with pytest.raises(ValidationError) as info:
        cfg.make_env()
    assert info.value.parameter == "sigmaa"


def test_gamma_defaults_to_the_shaping_discount_and_refuses_a_contradiction():
    import plume_jax

    env, params = plume_jax.make("PlumeNav-Gaussian-v0",
                                 reward={"type": "potential_shaping", "gamma": 0.97})
    assert resolve_gamma(env, params, None) == pytest.approx(0.97)
    with pytest.raises(ValidationError) as info:
        resolve_gamma(env, params, 0.99)
    assert info.value.parameter == "algo.gamma"
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    assert resolve_gamma(env, params, None) == pytest.approx(0.99)
    assert resolve_gamma(env, params, 0.9) == pytest.approx(0.9)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("train_*.yaml")), ids=lambda p: p.name)
def test_shipped_train_configs_validate_and_build_their_env(path):
    cfg = load_train_config(path)
    env, params = cfg.make_env()
    assert cfg.num_updates >= 1
    resolve_gamma(env, params, cfg.algo["gamma"])


def test_shipped_sweep_config_has_at_least_8_members_of_one_program():
    sweep = load_sweep_config(CONFIGS / "sweep_gaussian.yaml")
    assert len(sweep.members) >= 8
    s = setup(sweep)
    assert s.keys.shape == (len(sweep.members),)
    lrs = np.asarray(s.hp.learning_rate)
    scales = np.asarray(s.env_params.reward.scale)
    assert sorted(set(lrs.round(6))) == [0.0003, 0.001]
    assert sorted(set(scales.round(6))) == [0.05, 0.1]


SWEEP_BASE = {"env": {"id": "PlumeNav-Gaussian-v0"}, "algo": {"total_steps": 10_000}}


def test_sweep_product_and_zip():
    s = sweep_config({"base": SWEEP_BASE, "grid": {"run.seed": [0, 1, 2],
                                                   "algo.ent_coef": [0.0, 0.01]}})
    assert len(s.members) == 6
    z = sweep_config({"base": SWEEP_BASE, "mode": "zip",
                      "grid": {"run.seed": [0, 1], "env.sigma": [10.0, 20.0]}})
    assert z.members == [{"run.seed": 0, "env.sigma": 10.0}, {"run.seed": 1, "env.sigma": 20.0}]
    assert z.configs[1].env["overrides"]["sigma"] == 20.0


@pytest.mark.parametrize("grid, parameter", [
    ({"algo.num_envs": [8, 16]}, "grid.algo.num_envs"),
    ({"network.hidden_sizes": [[8], [16]]}, "grid.network.hidden_sizes"),
    ({"algo.learning_rate": 0.1}, "grid.algo.learning_rate"),
    ({"algo.learning_rate": [0.1, -1.0]}, "algo.learning_rate"),
])
def test_sweep_refuses_static_keys_and_bad_values(grid, parameter):
    with pytest.raises(ValidationError) as info:
        sweep_config({"base": SWEEP_BASE, "grid": grid})
    assert info.value.parameter == parameter


def test_sweep_refuses_env_settings_that_change_the_program():
    sweep = sweep_config({"base": SWEEP_BASE, "grid": {"env.grid_size": [[32, 32], [64, 64]]}})
    with pytest.raises(ValidationError) as info:
        setup(sweep)
    assert info.value.parameter == "env.grid_size"


def test_sweep_refuses_unknown_top_level_keys():
    with pytest.raises(ValidationError) as info:
        sweep_config({"base": SWEEP_BASE, "grid": {"run.seed": [0]}, "grids": {}})
    assert info.value.parameter == "grids"


# ------------------------------------------------------------------- GAE
def test_gae_on_a_constructed_example_with_truncation_and_termination():
    """γ = 0.5, λ = 1 (Monte-Carlo targets with bootstrap). Step 1 is
    truncated with V(final observation) = 10, step 3 terminates:

        G3 = 4                      (terminal: no bootstrap)
        G2 = 3 + 0.5 * G3 = 5
        G1 = 2 + 0.5 * 10 = 7       (bootstrap from the final observation,
                                     not from V(next obs) = 2 of the new episode)
        G0 = 1 + 0.5 * G1 = 4.5
    """
    rewards = jnp.asarray([1.0, 2.0, 3.0, 4.0])
    values = jnp.asarray([0.5, 1.0, 2.0, 3.0])
    terminated = jnp.asarray([False, False, False, True])
    truncated = jnp.asarray([False, True, False, False])
    final_values = jnp.asarray([-99.0, 10.0, -99.0, -99.0])  # read only where truncated
    adv, target = gae(rewards, values, terminated, truncated, final_values,
                      jnp.asarray(-99.0), 0.5, 1.0)
    np.testing.assert_allclose(target, [4.5, 7.0, 5.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(adv, [4.0, 6.0, 3.0, 1.0], rtol=1e-6)

    # λ = 0: one-step targets r + γ B with the same bootstraps
    _, target0 = gae(rewards, values, terminated, truncated, final_values,
                     jnp.asarray(-99.0), 0.5, 0.0)
    np.testing.assert_allclose(target0, [1.5, 7.0, 4.5, 4.0], rtol=1e-6)


def test_gae_bootstraps_the_last_step_from_last_value_and_batches():
    rewards = jnp.ones((3, 2))
    values = jnp.zeros((3, 2))
    false = jnp.zeros((3, 2), bool)
    adv, target = gae(rewards, values, false, false, jnp.zeros((3, 2)),
                      jnp.asarray([2.0, 0.0]), 0.5, 1.0)
    # env 0: 1 + .5(1 + .5(1 + .5 * 2)) = 2 ; env 1: 1 + .5 + .25 = 1.75
    np.testing.assert_allclose(target[0], [2.0, 1.75], rtol=1e-6)
    np.testing.assert_allclose(adv, target, rtol=1e-6)


# ------------------------------------------------------------------- CLI errors
def test_cli_train_reports_a_bad_config_with_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_with("algo", learning_rate=-3.0)))
    assert main(["train", "--config", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "algo.learning_rate=-3.0 is invalid" in err
    assert main(["train", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert main(["train", "--config", str(CONFIGS / "train_gaussian.yaml"),
                 "--total-steps", "0"]) == 2
    assert not (tmp_path / "out").exists()


def test_cli_sweep_reports_a_static_grid_key_with_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "sweep.yaml"
    bad.write_text(yaml.safe_dump({"base": SWEEP_BASE, "grid": {"algo.num_steps": [8, 16]}}))
    assert main(["sweep", "--config", str(bad)]) == 2
    assert "grid.algo.num_steps" in capsys.readouterr().err
