"""``protocol: singh240`` as their evaluation code ran it: one plume
evolution replayed for every episode, their switch-many wind history, and
their online observation normalisation (docs/singh2023.md)."""

from __future__ import annotations

import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.core.errors import ValidationError
from plume_jax.evaluate import scenario as sc
from plume_jax.evaluate import singh_protocol as sp
from plume_jax.plumes.singh import wind_record

SCENARIOS = pathlib.Path(__file__).resolve().parents[2] / "configs" / "scenarios"
STEPS = 40


class Sniffer:
    """Deterministic and touchy: turns by the odour and the wind it feels, so
    two episodes from one start fly the same path only if they read the same
    odour and wind at every step."""

    def init(self, key):
        return ()

    def act(self, carry, obs, key):
        turn = jnp.clip(40.0 * obs[2] + 3.0 * obs[1] - 0.2, -1.0, 1.0)
        return jnp.stack([jnp.asarray(0.0), turn]), carry


@pytest.fixture(scope="module")
def switch_many():
    """The switch-many plume with its recorded winds, small (a 12 s warm-up,
    few slots), the scenarios' sensor (no per-episode odour gain: an agent's
    own draw), and two start times' plumes."""
    env, params = plume_jax.make("PlumeNav-Singh2023-SwitchMany-v0", plume={
        "wind_record": "singh2023_switch_many", "warmup_steps": 300, "capacity": 512,
        "birth_rate": 0.4}, sensor=sc.load_scenario(
            SCENARIOS / "singh2023_switch_many.yaml")["env"]["overrides"]["sensor"])
    key = jax.random.key(1)
    starts, agents, groups = sp.plan_starts(env, params, key, 1, sp.PROTOCOL)
    return env, params, key, starts, agents, groups


def _paths(rollout, n=4):
    return np.asarray(rollout["path"])[:n], np.asarray(rollout["position"])[:n]


def test_two_episodes_of_one_start_time_see_the_same_puffs_and_winds(switch_many):
    """Four episodes, the same start, each its own key: on one plume
    evolution (singh240) they fly one path; with per-episode plume futures
    (singh240_paper's rollout) the same four part ways, so the check can
    fail."""
    env, params, key, starts, agents, groups = switch_many
    same = jax.tree.map(lambda a: jnp.repeat(a[:1], 4, axis=0), agents)
    keys = jax.random.split(jax.random.key(9), 4)
    times = jnp.zeros(4, jnp.int32)
    t, _ = sp.replayed_rollout(env, params, Sniffer(), keys, starts, times, same,
                               sp.evolution_key(key), STEPS)
    path, end = _paths(t)
    assert int(t["steps"]) > 5 and path[0] > 0.05
    np.testing.assert_array_equal(path, path[0])
    np.testing.assert_array_equal(end, np.broadcast_to(end[0], end.shape))
    # per-episode futures: the same start, the same agent, different puffs
    first = jax.tree.map(lambda a: jnp.repeat(a[:1], 4, axis=0), starts)
    paper = sp.fixed_start_rollout(env, params, Sniffer(), jax.random.key(9), first, same, STEPS)
    assert len(set(np.asarray(paper.path_length).round(6))) > 1


def test_the_second_start_time_is_the_first_ones_plume_one_second_on(switch_many):
    """One evolution: the second start time's plume is the first's advanced
    25 steps with the evolution's own keys (steps 0..24)."""
    env, params, key, starts, _, _ = switch_many
    k_evo = sp.evolution_key(key)
    first = jax.tree.map(lambda a: a[0], starts)
    state, advance = first, jax.jit(env.plume.advance)
    for i in range(sp.TIME_OFFSETS[1]):
        state = advance(jax.random.fold_in(k_evo, i), state, params.plume)
    second = jax.tree.map(lambda a: a[1], starts)
    np.testing.assert_allclose(np.asarray(state.positions), np.asarray(second.positions),
                               atol=1e-5)
    assert int(second.clock) - int(first.clock) == 100


def test_the_switch_many_winds_are_the_shipped_history():
    """Every simulator step of a recorded plume takes the shipped file's
    direction (clock 0 = their 60.00 s), and the file holds their history
    as their generator wrote it (+41.9 degrees, +53.6 at 60.08 s, -17.1 at
    63.09 s, +5.3, -13.9)."""
    offsets, start = wind_record("singh2023_switch_many")
    assert start == 6000 and offsets.shape == (12100,)
    switches = np.flatnonzero(np.diff(offsets)) + 1
    at = [int(s) for s in switches if 5800 < s < 7000]
    assert at == [6008, 6309, 6593, 6916]
    np.testing.assert_allclose(np.degrees(offsets[[6000, 6008, 6309, 6593, 6916]]),
                               [41.864, 53.625, -17.086, 5.262, -13.875], atol=1e-3)
    env, params = plume_jax.make("PlumeNav-Singh2023-SwitchMany-v0", plume={
        "wind_record": "singh2023_switch_many", "warmup_steps": 2, "capacity": 16})
    state = env.plume.init(jax.random.key(0), params.plume)
    seen, advance = [], jax.jit(env.plume.advance)
    for i in range(30):  # 120 simulator steps, through the switch at 60.08 s
        state = advance(jax.random.key(i), state, params.plume)
        seen.append(float(state.offset))
    np.testing.assert_array_equal(np.asarray(seen, np.float32),
                                  offsets[start + 3:start + 120:4])
    # the recorded history only with switch_many
    with pytest.raises(ValidationError, match="wind_record"):
        plume_jax.make("PlumeNav-Singh2023-Constant-v0",
                       plume={"wind_record": "singh2023_switch_many"})


def test_the_papers_reading_is_a_named_variant_and_online_normalisation_is_checked():
    scenario = sc.load_scenario(SCENARIOS / "singh2023_paper_switch_many.yaml")
    run = sc.plan_run(scenario, sc.AgentChoice("cast_and_surge", params={
        "obs_label": "odour", "threshold": 0.0}))
    assert run.scenario["protocol"] == "singh240_paper"
    assert float(run.params.plume.diffusion) == 0.5 and not run.env.plume.wind_record
    code = sc.load_scenario(SCENARIOS / "singh2023_switch_many.yaml")
    with pytest.raises(ValidationError, match="normalisation='online' is invalid: expected "
                       "'saved' for this agent"):
        sc.plan_run({**code, "normalisation": "online"}, sc.AgentChoice("cast_and_surge"))
    with pytest.raises(ValidationError, match="'saved' with protocol singh240_paper"):
        sp.check_options(sp.PAPER, "online")
    with pytest.raises(ValidationError, match="normalisation='online' is invalid: expected "
                       "'saved' without a protocol"):
        sc.plan_run({**code, "protocol": None, "normalisation": "online"},
                    sc.AgentChoice("cast_and_surge"))
    with pytest.raises(ValidationError, match="normalisation"):
        sc.validate_scenario({**code, "normalisation": "live"})


def test_online_normalisation_is_their_running_mean_and_variance(tmp_path):
    """OnlineNormalised updates SB3's RunningMeanStd (count 1e-4, mean 0,
    variance 1) with every feature vector it acts on, before acting, and
    the policy then normalises with those statistics."""
    from agents.trained import TrainedPolicy
    from tests.policy_folders import write_policy_folder

    env, params = plume_jax.make("PlumeNav-Singh2023-Constant-v0")
    plain = TrainedPolicy.load(write_policy_folder(tmp_path / "p", env, params))
    policy = TrainedPolicy({**plain.spec, "normalize_obs": True},  # saved statistics to replace
                           {**plain.params, "obs_mean": np.full(3, 5.0, np.float32),
                            "obs_var": np.full(3, 9.0, np.float32)})
    online = sp.OnlineNormalised(policy)
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(6, 3)).astype(np.float32) * [1.0, 2.0, 0.1] + [0.3, -1.0, 0.05]
    carry = online.init(jax.random.key(0))
    mean, var, count = np.zeros(3), np.ones(3), 1e-4
    for x in xs:  # SB3 RunningMeanStd.update_from_moments, a batch of one
        delta, total = x - mean, count + 1
        mean, var = mean + delta / total, (var * count + delta ** 2 * count / total) / total
        count = total
        action, carry = online.act(carry, jnp.asarray(x), jax.random.key(1))
        ref = {**policy.params, "obs_mean": jnp.asarray(mean, jnp.float32),
               "obs_var": jnp.asarray(var, jnp.float32)}
        from agents.trained import policy_step

        want, _ = policy_step(policy.spec, ref, carry[0], jnp.asarray(x), jax.random.key(1))
    np.testing.assert_allclose(np.asarray(carry[1]), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(carry[2]), var, rtol=1e-4)
    assert math.isclose(float(carry[3]), 6 + 1e-4, rel_tol=1e-6)
    np.testing.assert_allclose(np.asarray(action), np.asarray(want), rtol=1e-5, atol=1e-6)
    from agents.trained import forward

    def mean_action(p):  # the Gaussian mean, before clipping to the action box
        return np.asarray(forward(policy.spec, p, carry[0], jnp.asarray(xs[-1]))[1][0])

    assert not np.allclose(mean_action(policy.params), mean_action(ref))  # the statistics matter


def test_no_wall_lies_within_reach_of_an_agent_that_has_not_strayed():
    """Their agent is unbounded and leaves only by straying (more than 2 m
    from every puff). The singh240 scenarios' arena reaches past the box
    the puffs live in by more than the stray limit plus one step's flight
    and drift, so the wall's clamp never moves an agent that is still in
    its episode (one step ago it was within the stray limit of a puff
    inside the box)."""
    for path in sorted(SCENARIOS.glob("singh2023_*.yaml")):
        scenario = sc.load_scenario(path)
        if scenario["protocol"] != sp.PROTOCOL:
            continue
        env, params, _ = sc.scenario_env(scenario)
        pp = params.plume
        source = np.asarray(pp.source, float)
        step = float(env.actions.max_speed) + float(pp.wind_speed) * float(
            pp.substep_seconds) * env.plume.substeps
        reach = float(pp.stray_limit) + step
        upper = np.asarray(env.grid.upper, float) if hasattr(env.grid, "upper") else \
            np.asarray(env.grid_size, float) - 1.0
        low = source - [float(pp.trim_upwind), float(pp.trim_crosswind)]
        high = source + [float(pp.trim_downwind), float(pp.trim_crosswind)]
        assert np.all(low - reach > 0.0) and np.all(high + reach < upper), path.name
