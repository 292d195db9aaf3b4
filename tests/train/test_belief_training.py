"""Learning on the belief sensor: the ``cnn`` network type (config
validation; agents.trained's plain-jax.numpy forward pass equals the flax
network's), ``lookahead_vi`` (its successor beliefs are the sensor's; a short
run through the trainer on a tiny Poisson grid whose exported policy acts by
the algorithm's own scores; what it refuses), and the shipped 19x19 policy
on its scenario."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms import networks as N
from plume_jax.train.algorithms.base import network_spec
from plume_jax.train.checkpoint import policy_arrays
from plume_jax.train.config import NetworkConfig, train_config
from plume_jax.train.algorithms.normalize import ObsStats
from plume_jax.train.algorithms.epochs import AdamHparams
from plume_jax.train.algorithms.ppo import PPO, PPOStatic
from tests.train.test_train_run import _agent_side, _ppo_side

#: The isotropic benchmark's law on a 7x6 grid, otto's start at (3, 2): the
#: belief image is 11 rows x 13 columns, two channels (posterior, grid).
TINY = {"grid_size": [7, 6], "max_steps": 30,
        "plume": {"observer": [3, 2], "lambda_over_dx": 1.5, "r_dt": 2.0},
        "start": {"position": [3, 2]},
        "sensor": {"type": "belief", "sensor": {"type": "hits", "h_max": 3,
                                                "nonzero_first": True},
                   "plume": {"lambda_over_dx": 1.5, "r_dt": 2.0}, "grid_channel": True}}
IMAGE = [2, 11, 13]


def tiny_env():
    return plume_jax.make("PlumeNav-Poisson-Iso19x19-v0", **TINY)


def test_cnn_config_needs_an_image_shape_and_one_entry_per_layer():
    base = {"env": {"id": "PlumeNav-Poisson-Iso19x19-v0"}, "algo": {"total_steps": 10**6}}
    with pytest.raises(ValidationError, match=r"network\.image_shape"):
        train_config({**base, "network": {"type": "cnn"}})
    with pytest.raises(ValidationError, match=r"network\.image_shape"):
        train_config({**base, "network": {"type": "cnn", "image_shape": [1, 2, 3, 4]}})
    with pytest.raises(ValidationError, match=r"network\.conv_kernels"):
        train_config({**base, "network": {"type": "cnn", "image_shape": [37, 37],
                                          "conv_features": [8, 8], "conv_kernels": [3],
                                          "conv_strides": [2, 2]}})
    cfg = train_config({**base, "network": {"type": "cnn", "image_shape": [2, 37, 37]}})
    assert cfg.network.image_channels_rows_columns == (2, 37, 37)
    assert cfg.to_dict()["network"]["image_shape"] == [2, 37, 37]  # YAML-safe lists
    assert train_config(cfg.to_dict()) == cfg


def test_cnn_image_that_does_not_fit_the_observation_is_refused():
    env, params = tiny_env()
    net = NetworkConfig(type="cnn", image_shape=(2, 13, 13), hidden_sizes=(8,))
    algo = PPO(env, params, PPOStatic(num_envs=2, num_steps=4, update_epochs=1,
                                      num_minibatches=1, num_updates=1, network=net))
    with pytest.raises(ValidationError, match=r"network\.image_shape"):
        jax.eval_shape(lambda k: N.init_params(algo.net, k, algo.in_dim), jax.random.key(0))


@pytest.mark.parametrize("prev_action", [False, True])
def test_exported_cnn_forward_pass_equals_the_training_network(prev_action):
    """agents.trained (plain jax.numpy, lax.conv) gives the flax network's
    logits and values on real belief observations, with the previous action
    after the image and with normalised inputs."""
    env, params = tiny_env()
    net = NetworkConfig(type="cnn", image_shape=tuple(IMAGE), conv_features=(4, 6),
                        conv_kernels=(3, 2), conv_strides=(2, 1), hidden_sizes=(8, 8),
                        activation="relu", obs_transform="log", prev_action=prev_action)
    algo = PPO(env, params, PPOStatic(num_envs=2, num_steps=4, update_epochs=1,
                                      num_minibatches=1, num_updates=1, normalize_obs=True,
                                      network=net))
    shapes = jax.eval_shape(lambda k: N.init_params(algo.net, k, algo.in_dim), jax.random.key(3))
    rng = np.random.default_rng(2)
    net_params = jax.tree.map(
        lambda x: jnp.asarray(rng.normal(0.0, 0.5, x.shape).astype(np.float32)), shapes)
    stats = ObsStats(mean=jnp.asarray(rng.normal(-5.0, 1.0, algo.obs_dim).astype(np.float32)),
                     var=jnp.asarray(rng.uniform(0.5, 4.0, algo.obs_dim).astype(np.float32)),
                     count=jnp.asarray(10.0))
    obs, state = env.reset(jax.random.key(0), params)
    obs_seq, actions = [], rng.integers(0, algo.action_dim, 5).astype(np.int32)
    for t, action in enumerate(actions):
        obs_seq.append(np.asarray(obs))
        obs, state, *_ = env.step(jax.random.key(t + 1), state, int(action), params)
    obs_seq = np.stack(obs_seq)
    starts = np.asarray([True, False, False, True, False])
    expected = _ppo_side(algo, net_params, stats, obs_seq, starts, actions)
    spec = network_spec(algo, algo.static.network, algo.static.normalize_obs)
    got = _agent_side(spec, policy_arrays(net_params, stats), obs_seq, starts, actions)
    np.testing.assert_allclose(got[0], expected[0], rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got[1], expected[1], rtol=2e-5, atol=2e-5)
    assert np.ptp(expected[1]) > 1e-3  # the sequence exercises the network


# -- look-ahead value iteration ------------------------------------------------------

def test_lookahead_successors_are_the_sensors_next_observations():
    """For every move and hit class, the predicted observation (posterior
    and walls re-centred, summaries recomputed) is what the belief sensor
    observes after that move and reading, and the predicted probabilities
    are Bayes': P(class h there and the source not there)."""
    from agents.trained import lookahead_successors
    from plume_jax.actions.discrete_grid import MOVES

    env, params = plume_jax.make("PlumeNav-Poisson-Iso19x19-v0",
                                 **{**TINY, "sensor": {**TINY["sensor"], "summaries": True}})
    sensor = env.sensor
    table = np.asarray(sensor.likelihood(), np.float64)
    lik = jnp.asarray(table, jnp.float32)
    names = ["move_north", "move_south", "move_east", "move_west"]
    deltas = np.asarray([MOVES[n] for n in names], np.int32)
    predict = jax.jit(lambda o: lookahead_successors(IMAGE, lik, deltas, o))
    observe = jax.jit(jax.vmap(lambda p, cell, h: sensor.view(
        sensor.update(p, cell, jnp.reshape(h, (1,)).astype(jnp.float32)), cell),
        in_axes=(None, None, 0)))
    obs, state = env.reset(jax.random.key(4), params)
    for t in range(4):  # a few real posteriors, from cells next to the walls
        cell = np.asarray(state.agent.position).astype(int)
        succ, baseline, mass, valid = predict(obs)
        posterior = np.asarray(state.sensor.posterior)
        for m, (dx, dy) in enumerate(deltas):
            new = cell + (dx, dy)
            on_grid = 0 <= new[0] < 7 and 0 <= new[1] < 6
            assert bool(valid[m]) == on_grid
            if not on_grid:
                continue
            expected = observe(state.sensor.posterior, jnp.asarray(new, jnp.int32),
                               jnp.arange(3))
            np.testing.assert_allclose(np.asarray(succ[m * 3:m * 3 + 3]), np.asarray(expected),
                                       rtol=1e-4, atol=1e-6)
            entropy, distance = np.asarray(expected)[:, -3], np.asarray(expected)[:, -2]
            np.testing.assert_allclose(np.asarray(baseline[m * 3:m * 3 + 3]),
                                       distance + 2.0 ** (entropy - 1) - 0.5, rtol=1e-5)
            for h in range(3):
                brute = sum(posterior[y, x] * table[h, y - new[1] + 5, x - new[0] + 6]
                            for y in range(6) for x in range(7) if (x, y) != tuple(new))
                np.testing.assert_allclose(float(mass[m, h]), brute, rtol=1e-4, atol=1e-7)
            np.testing.assert_allclose(float(np.sum(mass[m])), 1.0 - posterior[new[1], new[0]],
                                       rtol=1e-5)
        obs, state, *_ = env.step(jax.random.key(10 + t), state, t % 4, params)


LOOKAHEAD = {"env": {"id": "PlumeNav-Poisson-Iso19x19-v0",
                     "overrides": {**TINY, "sensor": {**TINY["sensor"], "summaries": True}}},
             "algo": {"algorithm": "lookahead_vi", "epsilon": 0.2, "total_steps": 128,
                      "num_envs": 8, "num_steps": 8, "update_epochs": 1, "num_minibatches": 2,
                      "gamma": 1.0},
             "network": {"type": "cnn", "image_shape": IMAGE, "conv_features": [4],
                         "conv_kernels": [3], "conv_strides": [3], "hidden_sizes": [8],
                         "obs_transform": "log"},
             "run": {"seed": 1, "log_every": 1},
             "eval": {"num_envs": 4, "num_steps": 30}}


@pytest.fixture(scope="module")
def lookahead_run(tmp_path_factory):
    """Two updates of ``lookahead_vi`` through ``plume-jax train``'s trainer."""
    from plume_jax.train.run import train

    out = tmp_path_factory.mktemp("lookahead")
    result = train(train_config(LOOKAHEAD), out, progress=False)
    return out, result


@pytest.mark.slow
def test_lookahead_vi_trains_and_exports_a_policy_that_acts_by_its_lookahead(lookahead_run):
    """The exported policy (plain jax.numpy) takes the move of least expected
    steps that the training algorithm's own scores give, on real beliefs."""
    from agents.trained import TrainedPolicy
    from plume_jax.train.checkpoint import load_checkpoint
    from plume_jax.train.algorithms.lookahead import LookaheadVI
    from plume_jax.train.algorithms.lookahead import LookaheadStatic

    out, _ = lookahead_run
    cfg = train_config(LOOKAHEAD)
    env, params = cfg.make_env()
    algo = LookaheadVI(env, params, LookaheadStatic.from_config(cfg))
    hp = AdamHparams.from_config(cfg, env, params)
    template = jax.eval_shape(algo.init, jax.random.key(0), hp, params)
    runner, meta = load_checkpoint(out / "checkpoint", template)
    assert meta["update"] == 2
    policy = TrainedPolicy.for_env(env, out / "policy")
    obs, state = env.reset(jax.random.key(5), params)
    for t in range(6):
        q, valid = algo.scores(runner.params, obs[None], 1.0)
        expected = int(algo.move_ids[int(jnp.argmin(q[0]))])
        action, _ = policy.act(policy.init(None), obs, jax.random.key(t))
        assert int(action) == expected
        obs, state, *_ = env.step(jax.random.key(20 + t), state, expected, params)
    np.testing.assert_array_equal(np.asarray(policy.params["lookahead/likelihood"]),
                                  env.sensor.likelihood())


@pytest.mark.parametrize("kind", ["gru", "rnn"])
def test_lookahead_vi_refuses_a_recurrent_network_naming_network_type(kind):
    """The value of a belief depends on the belief alone: a gru or an rnn
    is refused before anything is built or compiled."""
    from plume_jax.train.algorithms.base import algorithm_class

    cfg = train_config({**LOOKAHEAD, "network": {"type": kind, "hidden_sizes": [8, 8]}})
    env, params = cfg.make_env()
    with pytest.raises(ValidationError, match=rf"^network\.type='{kind}'"):
        algorithm_class("lookahead_vi").from_config(cfg, env, params)


def test_lookahead_vi_refuses_a_sensor_it_cannot_predict():
    """Anything but a centred, full-window belief with the grid channel is a
    ValidationError naming env.sensor (here: no grid channel)."""
    from plume_jax.train.algorithms.lookahead import LookaheadVI
    from plume_jax.train.algorithms.lookahead import LookaheadStatic

    raw = {**LOOKAHEAD, "env": {"id": "PlumeNav-Poisson-Iso19x19-v0", "overrides": {
        **TINY, "sensor": {**TINY["sensor"], "grid_channel": False}}},
           "network": {**LOOKAHEAD["network"], "image_shape": [1, 11, 13]}}
    cfg = train_config(raw)
    env, params = cfg.make_env()
    with pytest.raises(ValidationError, match=r"env\.sensor"):
        LookaheadVI(env, params, LookaheadStatic.from_config(cfg))


@pytest.mark.slow
def test_a_sweep_of_lookahead_vi_runs_each_member_as_its_own_program(tmp_path):
    """lookahead_vi is not sweepable (no vmapped members): a sweep of it runs
    every member as a program of its own, unbatched, and each member equals
    the single run of its config bit for bit."""
    from plume_jax.train.sweep import program_groups, run_sweep, sweep_config
    from plume_jax.train.run import train

    raw = {**LOOKAHEAD, "algo": {**LOOKAHEAD["algo"], "total_steps": 64}}
    sweep = sweep_config({"base": raw, "grid": {"run.seed": [0, 1]}})
    assert program_groups(sweep) == [[0], [1]]
    result = run_sweep(sweep, tmp_path / "s", progress=False, evaluate_members=False)
    assert [p.setup.members for p in result.programs] == [[0], [1]]
    single = train(sweep.configs[1], progress=False, evaluate=False)
    member = jax.tree.map(lambda x: x[0], result.programs[1].runner)
    for a, b in zip(jax.tree.leaves(single.runner.params), jax.tree.leaves(member.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert (tmp_path / "s" / "members" / sweep.names[1] / "policy" / "policy.json").exists()


def test_shipped_belief_policy_runs_its_scenario():
    """configs/scenarios/poisson_iso19x19_belief_lookahead_vi.yaml: the shipped
    policy loads against the scenario's env (the same look-ahead model as
    the env's belief sensor) and finds the source in a few searches."""
    import pathlib

    from plume_jax.evaluate import scenario as sc

    root = pathlib.Path(__file__).resolve().parents[2]
    scenario = sc.load_scenario(root / "configs" / "scenarios"
                                / "poisson_iso19x19_belief_lookahead_vi.yaml")
    path = root / scenario["agent"]["params"]["path"]
    report = sc.run_scenario(scenario, agent="trained", agent_params={"path": str(path)},
                             episodes=8)
    metrics = report["metrics"]
    assert metrics["episodes"] == 8
    assert metrics["successes"] >= 6
    assert 1.0 <= metrics["mean_steps"] <= 642.0


def test_compressed_estimate_keeps_small_estimates_and_compresses_large_ones():
    """``K ln(1 + E/K)``: ``E`` itself at ``K = 0``; close to ``E`` where
    ``E << K``; logarithmic where ``E >> K`` (the 19x19 prior's ~190 steps
    become ~13 at K = 3.3); increasing; 0 at ``E <= 0``; traced ``K`` works."""
    from plume_jax.plumes.poisson_posterior import compressed_estimate

    e = jnp.asarray([-0.5, 0.0, 0.01, 1.0, 10.0, 190.0], jnp.float32)
    np.testing.assert_array_equal(np.asarray(compressed_estimate(e, 0.0)), np.asarray(e))
    got = np.asarray(compressed_estimate(e, 3.3))
    expected = 3.3 * np.log1p(np.maximum(np.asarray(e, np.float64), 0.0) / 3.3)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert got[0] == got[1] == 0.0
    assert abs(got[2] - 0.01) < 1e-4
    assert 12.0 < got[-1] < 15.0
    assert np.all(np.diff(got[1:]) > 0)
    traced = jax.jit(compressed_estimate)(e, jnp.float32(3.3))
    np.testing.assert_allclose(np.asarray(traced), got, rtol=1e-6)


@pytest.mark.slow  # CI time (15 s); the export acting by its look-ahead stays by default (test_lookahead_vi_trains_and_exports_...)
def test_lookahead_baseline_scale_reaches_the_exported_policy():
    """``algo.baseline_scale`` is part of the look-ahead's model: before any
    training (the network's correction starts at exactly 0) the trainer's
    scores and the exported policy's scores are both ``1 + Σ_h mass_h K ln(1 +
    E_h/K)``, and differ from the uncompressed ones."""
    from agents.trained import lookahead_scores, lookahead_successors
    from plume_jax.plumes.poisson_posterior import compressed_estimate
    from plume_jax.train.algorithms.lookahead import LookaheadVI
    from plume_jax.train.algorithms.lookahead import LookaheadStatic

    raw = {**LOOKAHEAD, "algo": {**LOOKAHEAD["algo"], "baseline_scale": 3.3}}
    cfg = train_config(raw)
    assert cfg.algo["baseline_scale"] == 3.3
    env, params = cfg.make_env()
    algo = LookaheadVI(env, params, LookaheadStatic.from_config(cfg))
    runner = algo.init(jax.random.key(0), AdamHparams.from_config(cfg, env, params), params)
    arrays = policy_arrays(runner.params, None)
    assert float(arrays["lookahead/baseline_scale"]) == pytest.approx(3.3)
    spec = network_spec(algo, algo.static.network, algo.static.normalize_obs)
    obs, state = env.reset(jax.random.key(3), params)
    for t in range(3):
        succ, base, mass, valid = lookahead_successors(IMAGE, algo.likelihood, algo.move_deltas,
                                                       obs)
        expected = 1.0 + jnp.sum(mass * compressed_estimate(base, 3.3).reshape(mass.shape), -1)
        expected = np.where(np.asarray(valid), np.asarray(expected), np.inf)
        q, _ = algo.scores(runner.params, obs[None], 1.0)
        np.testing.assert_allclose(np.asarray(q[0]), expected, rtol=1e-5)
        exported = lookahead_scores(spec, {k: jnp.asarray(v) for k, v in arrays.items()}, obs)
        np.testing.assert_allclose(np.asarray(exported), expected, rtol=1e-5)
        raw_scores = 1.0 + jnp.sum(mass * base.reshape(mass.shape), -1)
        finite = np.isfinite(expected)
        assert not np.allclose(np.asarray(raw_scores)[finite], expected[finite])
        obs, state, *_ = env.step(jax.random.key(20 + t), state, t % 4, params)


def test_lookahead_only_settings_are_refused_with_ppo():
    """``algo.epsilon`` / ``algo.baseline_scale`` with ``algorithm: ppo``
    would do nothing: a ValidationError names them and the algorithm whose
    settings they are, even at their defaults (a PPO config holds PPO's
    settings only); a bad scale is refused by the config and by LookaheadVI
    itself."""
    from plume_jax.train.algorithms.lookahead import LookaheadVI
    from plume_jax.train.algorithms.lookahead import LookaheadStatic

    base = {"env": {"id": "PlumeNav-Poisson-Iso19x19-v0"}, "algo": {"total_steps": 10**6}}
    for key, value in (("baseline_scale", 3.3), ("epsilon", 0.2), ("epsilon", 0.1)):
        with pytest.raises(ValidationError, match=rf"algo\.{key}.*did you mean "
                                                  r"algo\.algorithm: lookahead_vi"):
            train_config({**base, "algo": {"total_steps": 10**6, key: value}})
    cfg = train_config(base)
    assert "epsilon" not in cfg.algo and train_config(cfg.to_dict()) == cfg
    for bad in (-1.0, "three", None):
        with pytest.raises(ValidationError, match=r"algo\.baseline_scale"):
            train_config({**LOOKAHEAD, "algo": {**LOOKAHEAD["algo"], "baseline_scale": bad}})
    cfg = train_config(LOOKAHEAD)
    env, params = cfg.make_env()
    for bad in (-1.0, True, "3"):
        with pytest.raises(ValidationError, match=r"algo\.baseline_scale"):
            LookaheadVI(env, params, dataclasses.replace(
                LookaheadStatic.from_config(cfg), baseline_scale=bad))


@pytest.mark.slow
def test_baseline_lookahead_script_scores_are_the_untrained_lookahead_vi_scores():
    """scripts/bench/lookahead_baselines.py's policy is what ``lookahead_vi`` starts
    from: at depth 1 its scores equal the trainer's before any update (the
    network's correction is exactly 0), for K = 0 and K = 3.3."""
    from plume_jax.train.algorithms.lookahead import LookaheadVI
    from plume_jax.train.algorithms.lookahead import LookaheadStatic
    from scripts.bench.lookahead_baselines import BaselineLookahead

    for scale in (0.0, 3.3):
        cfg = train_config({**LOOKAHEAD, "algo": {**LOOKAHEAD["algo"], "baseline_scale": scale}})
        env, params = cfg.make_env()
        algo = LookaheadVI(env, params, LookaheadStatic.from_config(cfg))
        runner = algo.init(jax.random.key(0), AdamHparams.from_config(cfg, env, params), params)
        policy = BaselineLookahead.for_env(env, scale, 1)
        obs, state = env.reset(jax.random.key(7), params)
        for t in range(3):
            q, _ = algo.scores(runner.params, obs[None], 1.0)
            np.testing.assert_allclose(np.asarray(policy.scores(obs, 1)), np.asarray(q[0]),
                                       rtol=1e-5)
            action, _ = policy.act(policy.init(None), obs, jax.random.key(t))
            assert int(action) == int(algo.move_ids[int(jnp.argmin(q[0]))])
            obs, state, *_ = env.step(jax.random.key(30 + t), state, action, params)


def test_baseline_lookahead_script_moves_honour_the_step_size():
    """The script's policy once built its moves from unit displacements,
    ignoring ``actions.step_size``; its table is now lookahead_vi's."""
    from plume_jax.train.algorithms.lookahead import LookaheadVI
    from plume_jax.train.algorithms.lookahead import LookaheadStatic
    from scripts.bench.lookahead_baselines import BaselineLookahead

    overrides = {**LOOKAHEAD["env"]["overrides"], "actions": {"step_size": 2}}
    cfg = train_config({**LOOKAHEAD, "env": {**LOOKAHEAD["env"], "overrides": overrides}})
    env, params = cfg.make_env()
    algo = LookaheadVI(env, params, LookaheadStatic.from_config(cfg))
    policy = BaselineLookahead.for_env(env, 3.3, 1)
    np.testing.assert_array_equal(policy.move_deltas, algo.move_deltas)
    np.testing.assert_array_equal(policy.move_ids, algo.move_ids)
    assert np.abs(policy.move_deltas).max() == 2


def test_baseline_lookahead_script_refuses_a_folder_as_out_before_searching(tmp_path, capsys):
    from scripts.bench.lookahead_baselines import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--searches", "2", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "--out" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--searches", "1"], ["--scales", "-1"],
                                  ["--scales", "nan"], ["--depth", "3"]])
def test_baseline_lookahead_script_refuses_bad_arguments(argv, capsys):
    from scripts.bench.lookahead_baselines import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "--" in capsys.readouterr().err


@pytest.mark.slow  # compiles the 19x19 rollouts of three policies
def test_baseline_lookahead_script_reports_paired_differences(tmp_path):
    import json

    from scripts.bench.lookahead_baselines import main

    out = tmp_path / "report.json"
    assert main(["--searches", "4", "--seed", "3", "--scales", "0", "3.3", "--out",
                 str(out)]) == 0
    report = json.loads(out.read_text())
    policies = report["policies"]
    assert list(policies) == ["space_aware_infotaxis", "lookahead depth 1, K = 0",
                              "lookahead depth 1, K = 3.3"]
    for name, entry in policies.items():
        assert entry["searches"] == 4 and 0 <= entry["found"] <= 4
        assert ("paired_difference" in entry) == (name != "space_aware_infotaxis")
