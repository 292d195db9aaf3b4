"""Infotaxis and space-aware infotaxis (agents/infotaxis.py) and the
position sensor: the likelihood against the env's own plume and sensor, the
posterior against brute-force Bayes, the decision rules against a
brute-force computation and on hand-made posteriors, jit/vmap, determinism,
knowing the position (dead reckoning and the position sensor), and a short
scenario run. Grids are tiny (7x6, 9x5, 8x7) to keep compiles cheap."""

from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from agents.base import StatefulAgent
from agents.infotaxis import InfotaxisCarry, InfotaxisPolicy, capped_poisson_table
from agents.registry import make_agent
from plume_jax import ValidationError
from plume_jax.plumes.poisson import PoissonPlumeState

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCENARIOS = os.path.join(ROOT, "configs", "scenarios")
POISSON_SCENARIOS = sorted(f for f in os.listdir(SCENARIOS)
                           if f.startswith("poisson_") and "infotaxis" in f)


ISO_OVERRIDES = {"grid_size": [7, 6], "plume": {"observer": [3, 2], "lambda_over_dx": 1.5,
                                                "r_dt": 2.0},
                 "start": {"position": [3, 2]}, "sensor": {"h_max": 3}, "max_steps": 40}


def iso_env(**extra):
    """Isotropic law on a non-square 7x6 grid, otto's start at (3, 2), 3 hit classes."""
    return plume_jax.make("PlumeNav-Poisson-Iso19x19-v0", **{**ISO_OVERRIDES, **extra})


def windy_env():
    """Windy law, wind not along an axis, on a 9x5 grid, start (6, 2), 2 classes."""
    return plume_jax.make("PlumeNav-Poisson-Windy81x41-v0", grid_size=[9, 5],
                          plume={"observer": [6, 2], "tau": 37.5, "wind_direction": 0.4},
                          start={"position": [6, 2]}, max_steps=40)


def sensor_env():
    """Uniform source and start; the observation is [hits, position_x, position_y]."""
    sensor = {"type": "composite", "sensors": [{"type": "hits", "h_max": 3},
                                               {"type": "position"}]}
    return plume_jax.make("PlumeNav-Poisson-v0", grid_size=[8, 7], sensor=sensor, max_steps=40)


@pytest.fixture(scope="module")
def iso():
    env, params = iso_env()
    return env, params, InfotaxisPolicy.for_env(env), InfotaxisPolicy.for_env(env, space_aware=True)


@pytest.fixture(scope="module")
def windy():
    env, params = windy_env()
    return env, params, InfotaxisPolicy.for_env(env), InfotaxisPolicy.for_env(env, space_aware=True)


# -- brute force -------------------------------------------------------------

_CONC = {}


def _concentrations(env, params):
    """Jitted ``(sources f32[N, 2], agent f32[2]) -> μ f32[N]`` through the
    env's ``plume.concentration`` (compiled once per env)."""
    if id(env) not in _CONC:
        def conc(source, agent):
            state = PoissonPlumeState(source=source, table=jnp.zeros((0,), jnp.float32))
            return env.plume.concentration(state, agent, env.grid, params.plume)

        _CONC[id(env)] = (env, jax.jit(jax.vmap(conc, in_axes=(0, None))))
    return _CONC[id(env)][1]


def brute_likelihood(env, params, agent_xy, h_max: int) -> np.ndarray:
    """f64[h_max, H, W]: P(class h | source at each cell) for the agent at
    ``agent_xy``, from the env's own ``plume.concentration`` (the path the
    hits sensor reads) and the Poisson law written out; 0 at the agent's cell."""
    W, H = env.grid.width, env.grid.height
    cells = jnp.asarray([[x, y] for y in range(H) for x in range(W)], jnp.float32)
    mu = _concentrations(env, params)(cells, jnp.asarray(agent_xy, jnp.float32))
    mu = np.maximum(np.asarray(mu, np.float64), 0.0).reshape(H, W)
    out = np.zeros((h_max, H, W))
    for h in range(h_max - 1):
        out[h] = np.exp(-mu) * mu ** h / math.factorial(h)
    out[h_max - 1] = 1.0 - out[:h_max - 1].sum(axis=0)
    out[:, int(agent_xy[1]), int(agent_xy[0])] = 0.0
    return out


def brute_scores(policy, env, params, posterior: np.ndarray, agent_xy) -> np.ndarray:
    """What each of the policy's moves minimises, computed the long way:
    explicit per-class posteriors, their entropies and mean distances."""
    W, H = env.grid.width, env.grid.height
    ys, xs = np.mgrid[0:H, 0:W]
    out = []
    for dx, dy in policy.move_deltas:
        c = (agent_xy[0] + dx, agent_xy[1] + dy)
        if not (0 <= c[0] < W and 0 <= c[1] < H):
            out.append(np.inf)
            continue
        p_end = posterior[c[1], c[0]]
        q = posterior.copy()
        q[c[1], c[0]] = 0.0
        q /= q.sum()
        lik = brute_likelihood(env, params, c, policy.h_max)
        total = 0.0
        for h in range(policy.h_max):
            joint = q * lik[h]
            p_h = joint.sum()
            if p_h <= 0:
                continue
            post = joint / p_h
            nz = post > 0
            entropy = -np.sum(post[nz] * np.log2(post[nz]))
            if policy.space_aware:
                mean_d = np.sum(post * (np.abs(xs - c[0]) + np.abs(ys - c[1])))
                total += p_h * math.log2(mean_d + 2 ** (entropy - 1) - 0.5)
            else:
                total += p_h * entropy
        out.append((1 - p_end) * total)
    return np.asarray(out)


# -- the likelihood ----------------------------------------------------------

def test_capped_poisson_classes_sum_to_one_and_match_the_law():
    mu = np.array([0.0, 1e-8, 0.05, 0.7, 2.5, 40.0])
    table = capped_poisson_table(mu, 4)
    np.testing.assert_allclose(table.sum(axis=0), 1.0, atol=1e-12)
    for h in range(3):
        np.testing.assert_allclose(table[h], np.exp(-mu) * mu ** h / math.factorial(h),
                                   rtol=1e-12, atol=1e-300)
    # the capped class for tiny means comes from the series, not 1 - head
    np.testing.assert_allclose(table[3, 1], 1e-24 / 6, rtol=1e-6)
    assert table[3, 0] == 0.0


@pytest.mark.parametrize("which", ["iso", "windy"])
def test_likelihood_table_equals_the_envs_plume(which, iso, windy):
    env, params, policy, _ = iso if which == "iso" else windy
    lik = policy.tables()["lik"]
    H, W = env.grid.height, env.grid.width
    for agent in [(0, 0), (3, 2), (W - 1, H - 1), (1, H - 2)]:
        brute = brute_likelihood(env, params, agent, policy.h_max)
        window = lik[:, H - 1 - agent[1]:2 * H - 1 - agent[1], W - 1 - agent[0]:2 * W - 1 - agent[0]]
        np.testing.assert_allclose(window, brute, atol=2e-6)


def test_likelihood_matches_the_hits_sensors_draws(windy):
    """Class frequencies of the env's own sensor draws agree with the table
    (chi-square, 40000 draws at three source offsets)."""
    env, params, policy, _ = windy
    lik = policy.tables()["lik"]
    H, W = env.grid.height, env.grid.width
    agent = jnp.asarray([4.0, 2.0])
    for source in [(3, 2), (2, 1), (4, 4)]:
        state = PoissonPlumeState(source=jnp.asarray(source, jnp.float32),
                                  table=jnp.zeros((0,), jnp.float32))
        probe = env.probe(state, params)
        from plume_jax.core.types import AgentState

        def draw(key):
            return env.sensor.observe(key, AgentState.at(agent), probe, (), params.sensor)[0][0]

        n = 40000
        obs = np.asarray(jax.jit(jax.vmap(draw))(jax.random.split(jax.random.key(7), n)))
        counts = np.bincount(obs.astype(int), minlength=policy.h_max)
        expected = n * lik[:, source[1] - 2 + H - 1, source[0] - 4 + W - 1].astype(np.float64)
        chi2 = np.sum((counts - expected) ** 2 / np.maximum(expected, 1e-9))
        assert chi2 < 20.0, (source, counts, expected)  # 1 dof: p < 1e-5


# -- the posterior -------------------------------------------------------------

@pytest.mark.parametrize("which", ["iso", "windy"])
def test_posterior_update_equals_brute_force_bayes(which, iso, windy):
    env, params, policy, _ = iso if which == "iso" else windy
    H, W = env.grid.height, env.grid.width
    rng = np.random.default_rng(3)
    prior = rng.random((H, W))
    prior /= prior.sum()
    update = jax.jit(policy.update)
    posterior, brute = jnp.asarray(prior, jnp.float32), prior.copy()
    for agent, h in [((3, 2), 1), ((4, 2), 0), ((4, 3), policy.h_max - 1), ((0, 0), 0)]:
        posterior = update(posterior, jnp.asarray(agent, jnp.int32), jnp.asarray(h))
        brute = brute * brute_likelihood(env, params, agent, policy.h_max)[h]
        brute /= brute.sum()
        np.testing.assert_allclose(np.asarray(posterior), brute, atol=1e-6)
        assert abs(float(jnp.sum(posterior)) - 1.0) < 1e-5
        assert float(posterior[agent[1], agent[0]]) == 0.0


def test_first_update_is_otto_initial_belief(iso):
    """Uniform prior, first (non-zero) hit at the start: the belief is
    uniform over the other cells times the hit's likelihood."""
    env, params, policy, _ = iso
    carry = policy.init(jax.random.key(0))
    np.testing.assert_allclose(np.asarray(carry.posterior).sum(), 1.0, rtol=1e-6)
    assert tuple(np.asarray(carry.position)) == (3, 2)
    posterior = policy.update(carry.posterior, carry.position, jnp.asarray(2))
    brute = brute_likelihood(env, params, (3, 2), 3)[2]
    np.testing.assert_allclose(np.asarray(posterior), brute / brute.sum(), atol=1e-6)


def test_posterior_normalised_and_zero_at_every_visited_cell(iso):
    """A real episode: after every step the posterior sums to 1, is >= 0,
    and vanishes at every cell visited so far (the source is not where the
    search went on); the dead-reckoned position is the env's."""
    env, params, policy, _ = iso
    act, step = jax.jit(policy.act), jax.jit(env.step_env)
    key = jax.random.key(11)
    obs, state = env.reset_env(key, params)
    carry = policy.init(key)
    visited = []
    for t in range(40):
        assert tuple(np.asarray(carry.position)) == tuple(np.asarray(state.agent.position).astype(int))
        visited.append(tuple(np.asarray(state.agent.position).astype(int)))
        action, carry = act(carry, obs, jax.random.fold_in(key, t))
        p = np.asarray(carry.posterior)
        assert abs(p.sum() - 1.0) < 1e-5 and p.min() >= 0.0
        for x, y in visited:
            assert p[y, x] == 0.0
        obs, state, _, terminated, truncated, _ = step(jax.random.fold_in(key, 100 + t), state,
                                                       action, params)
        if bool(terminated) or bool(truncated):
            break
    assert len(visited) > 1


# -- the decision rules --------------------------------------------------------

@pytest.mark.parametrize("which", ["iso", "windy"])
@pytest.mark.parametrize("space_aware", [False, True])
def test_scores_equal_a_brute_force_computation(which, space_aware, iso, windy):
    env, params, info, sai = iso if which == "iso" else windy
    policy = sai if space_aware else info
    H, W = env.grid.height, env.grid.width
    rng = np.random.default_rng(5)
    for agent in [(3, 2), (0, 0), (W - 1, 1)]:
        p = rng.random((H, W)) ** 4
        p[agent[1], agent[0]] = 0.0
        p /= p.sum()
        score, valid = policy.scores(jnp.asarray(p, jnp.float32), jnp.asarray(agent, jnp.int32))
        brute = brute_scores(policy, env, params, p, agent)
        assert np.array_equal(np.asarray(valid), np.isfinite(brute))
        np.testing.assert_allclose(np.asarray(score)[np.isfinite(brute)],
                                   brute[np.isfinite(brute)], rtol=2e-4, atol=2e-5)


def _posterior_on(cells, H, W):
    p = np.zeros((H, W), np.float32)
    for x, y in cells:
        p[y, x] = 1.0
    return jnp.asarray(p / p.sum())


@pytest.mark.parametrize("space_aware", [False, True])
def test_all_mass_next_door_is_entered(space_aware, iso):
    env, _, info, sai = iso
    policy = sai if space_aware else info
    ids = env.action_ids
    for cell, name in [((4, 2), "move_east"), ((2, 2), "move_west"), ((3, 3), "move_north"),
                       ((3, 1), "move_south")]:
        carry = InfotaxisCarry(posterior=_posterior_on([cell], 6, 7), position=jnp.asarray([3, 2]))
        score, valid = policy.scores(carry.posterior, carry.position)
        assert int(policy.choose(score, valid, jax.random.key(0))) == policy.move_ids.index(ids[name])


@pytest.mark.parametrize("space_aware", [False, True])
def test_mass_on_one_side_draws_the_searcher_there(space_aware, iso):
    """All mass spread along one edge of the grid (column or row): both
    rules step toward it, whatever the key. (Mass on a short stretch of an
    edge need not attract infotaxis: a move along the edge can be more
    informative.)"""
    env, _, info, sai = iso
    policy = sai if space_aware else info
    for cells, name in [([(6, y) for y in range(6)], "move_east"),
                        ([(x, 5) for x in range(7)], "move_north"),
                        ([(0, y) for y in range(6)], "move_west"),
                        ([(x, 0) for x in range(7)], "move_south")]:
        score, valid = policy.scores(_posterior_on(cells, 6, 7), jnp.asarray([3, 2]))
        for k in range(5):
            choice = int(policy.choose(score, valid, jax.random.key(k)))
            assert policy.move_ids[choice] == env.action_ids[name], (name, np.asarray(score))


def test_moves_off_the_grid_are_never_chosen(iso):
    env, _, policy, _ = iso
    posterior = jnp.full((6, 7), 1.0 / 41).at[0, 0].set(0.0)
    score, valid = policy.scores(posterior, jnp.asarray([0, 0]))
    names = [env.action_names[i] for i in policy.move_ids]
    off = [names.index("move_west"), names.index("move_south")]
    assert not np.asarray(valid)[off].any() and np.isinf(np.asarray(score)[off]).all()
    for k in range(20):
        assert int(policy.choose(score, valid, jax.random.key(k))) not in off


def test_ties_first_is_deterministic_random_uses_every_tied_move(iso):
    env, _, rand, _ = iso
    first = InfotaxisPolicy.for_env(env, tie_break="first")
    # mass two cells away in each direction: the four moves tie by symmetry
    posterior = _posterior_on([(5, 2), (1, 2), (3, 4), (3, 0)], 6, 7)
    score, valid = first.scores(posterior, jnp.asarray([3, 2]))
    assert float(jnp.max(score) - jnp.min(score)) < first.tie_tolerance
    picks = {int(first.choose(score, valid, jax.random.key(k))) for k in range(10)}
    assert picks == {0}
    picks = {int(rand.choose(score, valid, jax.random.key(k))) for k in range(60)}
    assert picks == {0, 1, 2, 3}


# -- batching, jit, determinism ---------------------------------------------

def test_vmapped_act_equals_one_search_at_a_time(windy):
    """Under vmap ``step`` runs its lax.map batching rule; one search at a
    time runs the plain code. Same actions, same posteriors."""
    env, params, _, sai = windy
    n = 6
    keys = jax.random.split(jax.random.key(2), n)
    rng = np.random.default_rng(0)
    post = rng.random((n, 5, 9)).astype(np.float32) ** 3
    post /= post.sum(axis=(1, 2), keepdims=True)
    carry = InfotaxisCarry(posterior=jnp.asarray(post),
                           position=jnp.asarray(rng.integers(0, [9, 5], (n, 2)), jnp.int32))
    obs = jnp.asarray(rng.integers(0, 2, (n, 1)), jnp.float32)
    actions, new = jax.jit(jax.vmap(sai.act))(carry, obs, keys)
    single = jax.jit(sai.act)
    for i in range(n):
        a, c = single(jax.tree.map(lambda x: x[i], carry), obs[i], keys[i])
        assert int(a) == int(actions[i])
        np.testing.assert_allclose(np.asarray(c.posterior), np.asarray(new.posterior[i]),
                                   rtol=1e-6, atol=1e-9)
        assert np.array_equal(np.asarray(c.position), np.asarray(new.position[i]))



# -- knowing the position ---------------------------------------------------

def test_position_sensor_and_the_policy_reading_it():
    """The position sensor reads the agent's cell; with it (uniform start,
    no dead reckoning possible) the policy takes each reading's cell from
    the observation."""
    env, params = sensor_env()
    assert env.observation_labels() == ["hits.hits", "position.position_x",
                                        "position.position_y"]
    space = env.observation_space(params)
    assert tuple(np.asarray(space.high)[1:]) == (7.0, 6.0)
    policy = InfotaxisPolicy.for_env(env)
    assert policy.position_index == (1, 2) and policy.start is None
    act, step = jax.jit(policy.act), jax.jit(env.step_env)
    key = jax.random.key(3)
    obs, state = jax.jit(env.reset_env)(key, params)
    carry = policy.init(key)
    for t in range(10):
        assert np.array_equal(np.asarray(obs[1:]), np.asarray(state.agent.position))
        assert bool(space.contains(obs))
        action, carry = act(carry, obs, jax.random.fold_in(key, t))
        assert float(carry.posterior[int(obs[2]), int(obs[1])]) == 0.0
        obs, state, _, terminated, truncated, _ = step(jax.random.fold_in(key, 50 + t), state,
                                                       action, params)
        if bool(terminated):
            break
        assert np.array_equal(np.asarray(carry.position), np.asarray(obs[1:]).astype(int))


def test_for_env_rejects_what_it_cannot_model():
    gaussian, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16])
    with pytest.raises(ValidationError, match="poisson"):
        InfotaxisPolicy.for_env(gaussian)
    uniform, _ = plume_jax.make("PlumeNav-Poisson-v0", grid_size=[8, 8])
    with pytest.raises(ValidationError, match="fixed"):
        InfotaxisPolicy.for_env(uniform)
    env, _ = iso_env()
    with pytest.raises(ValidationError, match="position"):
        InfotaxisPolicy.for_env(env, position="sensor")
    with pytest.raises(ValidationError, match="tie_break"):
        InfotaxisPolicy.for_env(env, tie_break="last")


def test_registry_builds_both_rules_hashable_and_stateful():
    env, _ = iso_env()
    info, sai = make_agent("infotaxis", env), make_agent("space_aware_infotaxis", env)
    assert isinstance(info, InfotaxisPolicy) and not info.space_aware
    assert sai.space_aware and sai.rule == "space_aware_infotaxis"
    assert hash(info) == hash(InfotaxisPolicy.for_env(env)) and info == InfotaxisPolicy.for_env(env)
    assert info != sai
    agent = StatefulAgent(sai, seed=0)
    obs, _ = env.reset_env(jax.random.key(0), env.default_params)
    assert agent.act(np.asarray(obs)) in set(env.action_ids.values())


# -- scenarios ---------------------------------------------------------------

@pytest.mark.slow
def test_short_scenario_run_on_a_tiny_poisson_grid_and_rollouts_are_deterministic(iso):
    """``run_scenario`` on the tiny isotropic grid succeeds; the same
    batched rollout (compiled once by the scenario run) is bit-identical
    for a key and differs for another key."""
    from plume_jax.evaluate.rollout import rollout
    from plume_jax.evaluate.scenario import run_scenario, validate_scenario

    overrides = {k: v for k, v in ISO_OVERRIDES.items() if k != "max_steps"}
    scenario = validate_scenario({
        "name": "tiny_poisson_space_aware_infotaxis",
        "env": {"preset": "PlumeNav-Poisson-Iso19x19-v0", "overrides": overrides},
        "agent": {"name": "space_aware_infotaxis"},
        "episodes": 16, "seed": 0, "max_steps": 40, "expect": {"min_success_rate": 0.75}})
    report = run_scenario(scenario)
    m = report["metrics"]
    assert report["failures"] == [] and m["episodes"] == 16
    assert 1.0 <= m["mean_steps"] <= 40.0 and m["success_rate"] >= 0.75

    env, params, _, sai = iso
    a = rollout(env, params, sai, jax.random.key(4), 16, 40)
    b = rollout(env, params, sai, jax.random.key(4), 16, 40)
    c = rollout(env, params, sai, jax.random.key(5), 16, 40)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(np.asarray(a.episode_length), np.asarray(c.episode_length))


@pytest.mark.parametrize("name", POISSON_SCENARIOS)
def test_benchmark_scenario_files_build_their_agent(name):
    from plume_jax.evaluate.scenario import load_scenario

    scenario = load_scenario(os.path.join(SCENARIOS, name))
    env, _ = plume_jax.make(scenario["env"]["preset"], **scenario["env"]["overrides"])
    policy = make_agent(scenario["agent"]["name"], env, **scenario["agent"]["params"])
    assert isinstance(policy, InfotaxisPolicy)
    assert policy.space_aware == ("space_aware" in name)


def test_there_is_a_scenario_per_benchmark_and_rule():
    assert len(POISSON_SCENARIOS) == 6


def test_benchmark_script_cases_are_the_presets():
    """The infotaxis benchmark's literature cases and the presets agree (the
    script stops on any difference; the presets once differed in hit classes
    and the windy length scale)."""
    from scripts.bench.infotaxis import CASES, check_preset

    for case in CASES.values():
        check_preset(case)
    wrong = {**CASES["windy"], "reference": {**CASES["windy"]["reference"], "tau_bar": 37.5}}
    with pytest.raises(SystemExit, match="lambda_bar"):
        check_preset(wrong)


def test_benchmark_addon_run_keeps_main_run_end_load():
    """``--lockstep-only`` / ``--decisions-only`` once overwrote the main run's
    ``machine.load_average_end`` with the load at the end of the add-on run."""
    import argparse

    from scripts.bench.infotaxis import stamp_end_load

    def report():
        return {"machine": {"load_average_end": [3.7]}, "lockstep_machine": {}}

    def args(lockstep=False, decisions=False):
        return argparse.Namespace(lockstep_only=lockstep, decisions_only=decisions)

    lock = report()
    stamp_end_load(lock, args(lockstep=True), [0.2])
    assert lock == {"machine": {"load_average_end": [3.7]},
                    "lockstep_machine": {"load_average_end": [0.2]}}
    check = report()
    stamp_end_load(check, args(decisions=True), [0.2])
    assert check == report()
    main = report()
    stamp_end_load(main, args(), [0.9])
    assert main["machine"]["load_average_end"] == [0.9]
