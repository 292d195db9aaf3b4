"""Loisy & Eloy's value iteration on the belief
(``plume_jax.train.algorithms.value_iteration.BeliefValueIteration``) and its training
run driver (``plume_jax.train.run.train``), on a tiny Poisson grid: the Bellman
target against a hand computation, the symmetry average, the exploration
schedule, the replay ring, chunked runs and checkpoint resume bit for bit,
the exported policy's decisions, and the settings it refuses."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms import value_iteration as VI

from tests.train.test_belief_training import TINY  # noqa: E402  (7x6 grid: 11 x 13 belief images)

#: The same law on a square 6x6 grid (11x11 images: all 8 symmetries of the square).
SQUARE = {**TINY, "grid_size": [6, 6]}
#: Small settings: each iteration is a few milliseconds.
SMALL = dict(hidden_sizes=[16], batch_size=8, gd_steps=2, memory_size=16, walkers=4,
             steps_per_iteration=1, epsilon_decay=3.0, eval_every=2, eval_searches=4,
             max_episode_steps=12)


def make_env(overrides=TINY):
    return plume_jax.make("PlumeNav-Poisson-Iso19x19-v0", **overrides)


@pytest.fixture(scope="module")
def tiny():
    env, params = make_env()
    return env, params, VI.BeliefValueIteration(env, params, iterations=10, **SMALL)


@pytest.fixture(scope="module")
def square():
    env, params = make_env(SQUARE)
    return env, params, VI.BeliefValueIteration(env, params, iterations=10, **SMALL)


@pytest.fixture(scope="module")
def five_iterations(tiny):
    """``run(runner) -> (runner, metrics)``: 5 iterations of ``tiny``'s
    algorithm at its own settings, compiled once for the tests that train it."""
    _, params, algo = tiny
    return jax.jit(lambda r: algo.run(r, None, params, 5))


@pytest.fixture(scope="module")
def four_iterations_at(tiny):
    """``run(runner, hp) -> (runner, metrics)``: 4 iterations of ``tiny``'s
    algorithm at the hyperparameters ``hp`` (one member), compiled once."""
    _, params, algo = tiny
    return jax.jit(lambda r, h: algo.run(r, h, params, 4))


@functools.lru_cache(maxsize=None)
def compiled_step(env):
    """``env.step_env`` jitted once per env (a fresh ``jax.jit`` of a bound
    method compiles again: about 0.9 s of CPU each walk)."""
    return jax.jit(env.step_env)


def walk_observations(env, params, key, steps, actions=None):
    """Real belief observations along a short walk (to cells by the walls)."""
    obs, state = env.reset(key, params)
    out = [np.asarray(obs)]
    step = compiled_step(env)
    for t in range(steps):
        name = actions[t % len(actions)] if actions else "move_west"
        key, k = jax.random.split(key)
        obs, state = step(k, state, env.action_ids[name], params)[:2]
        out.append(np.asarray(obs))
    return out


def random_params(algo, seed, scale=1.0):
    """A network whose values differ visibly between beliefs."""
    p = VI.init_network(jax.random.key(seed), algo.in_dim, algo.hidden_sizes)
    return {**p, "out/kernel": p["out/kernel"] * 40.0 * scale, "out/bias": p["out/bias"] + 2.0}


def test_init_network_with_conv_layers_and_no_image_shape_names_image_shape():
    """The cnn branch needs the image its conv layers read; without one the
    error names it (it was a TypeError from unpacking None)."""
    with pytest.raises(ValidationError, match="image_shape"):
        VI.init_network(jax.random.key(0), 4, (8,), None, conv_features=(2,),
                        conv_kernels=(3,), conv_strides=(1,))


def split_obs(algo, obs):
    rows, cols = algo.image_shape
    size = rows * cols
    obs = np.asarray(obs, np.float32).reshape(-1)
    return obs[:size].reshape(rows, cols), obs[size:2 * size].reshape(rows, cols)


# --------------------------------------------------------------------------- 1. Bellman target

def hand_target(algo, frozen, belief, grid):
    """min over moves of Σ_h P(h) (1 + V(b'_h)) + P(found) · 1, in float64 NumPy
    from the likelihood table: a move off the grid stays in place."""
    rows, cols = algo.image_shape
    cy, cx = (rows - 1) // 2, (cols - 1) // 2
    lik = np.asarray(algo.likelihood, np.float64)
    b = np.asarray(belief, np.float64)
    qs, found = [], []
    for dx, dy in algo.move_deltas:
        if grid[cy + dy, cx + dx] < 0.5:  # wall: the agent stays and reads again
            dx, dy = 0, 0
        shifted = np.zeros_like(b)
        for j in range(rows):
            for i in range(cols):
                if 0 <= j + dy < rows and 0 <= i + dx < cols:
                    shifted[j, i] = b[j + dy, i + dx]
        q = 1.0  # the step, whatever it reads; the found branch costs nothing after it
        mass_total = 0.0
        for h in range(lik.shape[0]):
            joint = shifted * lik[h]
            mass = joint.sum()
            mass_total += mass
            if mass > 0:
                post = (joint / mass).astype(np.float32).reshape(1, -1)
                v = float(VI.network_values(frozen, jnp.asarray(post))[0])
                q += mass * v
        qs.append(q)
        found.append(1.0 - mass_total)
    return min(qs), np.asarray(qs), np.asarray(found)


def test_bellman_target_is_the_hand_computed_minimum_over_moves(tiny):
    env, params, algo = tiny
    frozen = random_params(algo, 5)
    observations = walk_observations(env, params, jax.random.key(1), 4)
    beliefs, grids = zip(*(split_obs(algo, o) for o in observations))
    beliefs, grids = np.stack(beliefs), np.stack(grids)
    valid = np.stack([np.asarray(VI.valid_moves(jnp.asarray(g), jnp.asarray(algo.move_deltas)))
                      for g in grids])
    assert not valid.all(), "the walk should reach a wall"
    got = np.asarray(jax.jit(algo.targets)(frozen, jnp.asarray(beliefs), jnp.asarray(valid)))
    some_found = False
    for k in range(len(beliefs)):
        expected, qs, found = hand_target(algo, frozen, beliefs[k], grids[k])
        some_found |= bool(np.max(found) > 1e-3)
        np.testing.assert_allclose(got[k], expected, rtol=2e-5)
        # the per-move values, from the module's own look-ahead
        q, _, _ = VI.move_values(frozen, jnp.asarray(algo.likelihood),
                                 jnp.asarray(algo.move_deltas), jnp.asarray(beliefs[k]),
                                 jnp.asarray(valid[k]), None)
        np.testing.assert_allclose(np.asarray(q), qs, rtol=2e-5)
    assert some_found, "some move should find the source with visible probability"


def test_bellman_target_uses_the_lookahead_successors_of_the_exported_agent(tiny):
    """The same target from agents.trained.lookahead_successors' successor
    observations and probabilities (walls: the move's delta set to 0)."""
    from agents.trained import lookahead_successors

    env, params, algo = tiny
    frozen = random_params(algo, 6)
    obs = walk_observations(env, params, jax.random.key(2), 3)[-1]
    belief, grid = split_obs(algo, obs)
    rows, cols = algo.image_shape
    shape = (2, rows, cols)
    _, _, _, valid = lookahead_successors(shape, algo.likelihood, algo.move_deltas, obs)
    eff = np.where(np.asarray(valid)[:, None], algo.move_deltas, 0)
    succ, _, mass, _ = lookahead_successors(shape, algo.likelihood, eff, obs)
    v = np.asarray(VI.network_values(frozen, succ[:, :rows * cols])).reshape(mass.shape)
    qs = 1.0 + np.sum(np.asarray(mass) * v, axis=-1)
    got = float(algo.targets(frozen, jnp.asarray(belief)[None], jnp.asarray(valid)[None])[0])
    np.testing.assert_allclose(got, qs.min(), rtol=2e-5)


# --------------------------------------------------------------------------- 2. symmetries

def test_symmetry_averaged_value_is_invariant_under_the_eight_symmetries(square):
    env, params, algo = square
    rows, cols = algo.image_shape
    assert rows == cols and algo.symmetry_perm.shape == (8, rows * cols)
    net = random_params(algo, 7)
    obs = walk_observations(env, params, jax.random.key(3), 3)[-1]
    belief, _ = split_obs(algo, obs)
    images = []
    for transpose in (False, True):
        for turns in range(4):
            img = belief.T if transpose else belief
            images.append(np.rot90(img, turns))
    images = np.stack(images).reshape(8, -1)
    assert len({im.tobytes() for im in images}) == 8, "the belief should not be symmetric"
    perm = jnp.asarray(algo.symmetry_perm)
    # the tables' images are the square's 8 symmetries of the belief
    tabled = np.asarray(belief).reshape(-1)[algo.symmetry_perm]
    assert {im.tobytes() for im in tabled} == {im.tobytes() for im in images}
    averaged = np.asarray(VI.belief_values(net, jnp.asarray(images), perm))
    plain = np.asarray(VI.belief_values(net, jnp.asarray(images), None))
    assert np.ptp(plain) > 1e-3, "the plain values should differ between the symmetric images"
    np.testing.assert_allclose(averaged, averaged[0], rtol=1e-6)
    np.testing.assert_allclose(averaged[0], plain.mean(), rtol=1e-6)


def test_symmetry_maps_move_offsets_as_the_images_move(square):
    """``maps[s] @ (dx, dy)`` is where symmetry ``s`` takes an offset."""
    _, _, algo = square
    rows, cols = algo.image_shape
    cy, cx = (rows - 1) // 2, (cols - 1) // 2
    for perm, m in zip(algo.symmetry_perm, algo.symmetry_maps):
        for dx, dy in [(1, 0), (0, 1), (2, -1)]:
            probe = np.zeros((rows, cols), np.float32)
            probe[cy + dy, cx + dx] = 1.0
            j, i = np.argwhere(probe.reshape(-1)[perm].reshape(rows, cols) > 0.5)[0]
            np.testing.assert_array_equal(m @ np.asarray([dx, dy]), [i - cx, j - cy])


# --------------------------------------------------------------------------- 3. epsilon

def test_epsilon_schedule_decays_exponentially_to_its_floor(tiny):
    env, params, _ = tiny
    algo = VI.BeliefValueIteration(env, params, **{**SMALL, "epsilon_start": 0.9,
                                                   "epsilon_floor": 0.2, "epsilon_decay": 4.0})
    for it in (0, 1, 3, 4, 6, 50):
        expected = max(0.9 * np.exp(-it / 4.0), 0.2)
        np.testing.assert_allclose(float(algo.epsilon(it)), expected, rtol=1e-6)
    assert float(algo.epsilon(50)) == pytest.approx(0.2)
    # that each iteration explores with the epsilon of its own index (0, 1, 2, ...)
    # is checked on a compiled run by test_chunked_runs_are_bit_identical_to_one_run


# --------------------------------------------------------------------------- 4. replay ring

def test_replay_memory_fills_in_order_and_wraps_around(tiny):
    _, params, algo = tiny  # memory_size 16
    runner = algo.init(jax.random.key(0), None, params)
    rows, cols = algo.image_shape
    m = algo.move_ids.shape[0]
    written = []
    for k in range(6):  # 6 x 3 = 18 beliefs into 16 slots
        beliefs = jnp.full((3, rows, cols), float(k * 3), jnp.float32) \
            + jnp.arange(3, dtype=jnp.float32)[:, None, None]
        valid = jnp.asarray(np.arange(3 * m).reshape(3, m) % (k + 2) == 0)
        runner = runner.replace(**algo._remember(runner, beliefs, valid))
        written.extend(zip(range(k * 3, k * 3 + 3), np.asarray(valid)))
        n = 3 * (k + 1)
        assert int(runner.memory_count) == min(n, 16)
        assert int(runner.memory_next) == n % 16
    memory = np.asarray(runner.memory)
    for index, valid in written:
        slot = index % 16
        if index < 2:  # overwritten by beliefs 16 and 17
            continue
        assert memory[slot, 0, 0] == index
        np.testing.assert_array_equal(np.asarray(runner.memory_moves)[slot], valid)
    assert memory[0, 0, 0] == 16 and memory[1, 0, 0] == 17


def test_training_iterations_write_their_walkers_beliefs_into_the_ring(tiny, five_iterations):
    _, params, algo = tiny  # 4 walkers x 1 step into 16 slots
    runner = algo.init(jax.random.key(0), None, params)
    out, _ = five_iterations(runner)
    assert int(out.memory_count) == 16 and int(out.memory_next) == 20 % 16
    assert int(out.transitions) == 20
    sums = np.asarray(out.memory).sum(axis=(1, 2))
    np.testing.assert_allclose(sums, 1.0, rtol=1e-4)  # every slot a posterior


# --------------------------------------------------------------------------- 5. chunks

def test_chunked_runs_are_bit_identical_to_one_run(tiny, five_iterations):
    _, params, algo = tiny  # evaluates every 2 iterations: best_params cross the chunks
    run = jax.jit(lambda r, n: algo.run(r, None, params, 3, count=n))
    runner = algo.init(jax.random.key(11), None, params)
    one, m_one = five_iterations(runner)
    a, m_a = run(runner, np.int32(3))
    b, m_b = run(a, np.int32(2))
    for x, y in zip(jax.tree.leaves(one), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    joined = {k: np.concatenate([np.asarray(m_a[k]), np.asarray(m_b[k])[:2]]) for k in m_one}
    for k in m_one:
        np.testing.assert_array_equal(np.asarray(m_one[k]), joined[k], err_msg=k)
    assert np.all(np.isnan(np.asarray(m_b["loss"])[2:]))  # past count: nothing ran
    assert int(b.update) == 5 and np.isfinite(float(b.best_score))
    # each iteration explores with the epsilon of its own index (0, 1, 2, ...)
    np.testing.assert_allclose(np.asarray(m_one["epsilon"]),
                               [float(algo.epsilon(i)) for i in range(5)], rtol=1e-6)
    assert len({float(e) for e in np.asarray(m_one["epsilon"])}) > 1  # it decays here


# --------------------------------------------------------------------------- 6. the run driver

def tiny_config(iterations):
    from plume_jax.train.config import train_config

    own = {k: v for k, v in SMALL.items()
           if k not in ("hidden_sizes", "walkers", "steps_per_iteration", "eval_every")}
    return train_config({
        "env": {"id": "PlumeNav-Poisson-Iso19x19-v0", "overrides": TINY},
        "algo": {"algorithm": "belief_value_iteration", "num_envs": SMALL["walkers"],
                 "num_steps": 1, "total_steps": SMALL["walkers"] * iterations,
                 "learning_rate": 0.003, **own},
        "network": {"hidden_sizes": SMALL["hidden_sizes"], "activation": "relu"},
        "run": {"seed": 4, "log_every": 1, "checkpoint_every": 2, "tensorboard": False},
        "eval": {"num_envs": 4, "num_steps": 12, "every": 3, "periodic_episodes": 4}})


@pytest.mark.slow  # CI time; test_chunked_runs_are_bit_identical_to_one_run stays by default
def test_plume_jax_train_resume_is_bit_identical_to_a_straight_run(tmp_path):
    """The algorithm through the run driver (plume-jax train's ``train``):
    2 iterations then a resume to 4 equal 4 straight, bit for bit; the export
    is the best evaluated parameters and loads as an agents.trained policy."""
    from agents.trained import TrainedPolicy
    from plume_jax.train.checkpoint import read_checkpoint
    from plume_jax.train.run import train

    train(tiny_config(2), tmp_path / "a", progress=False, evaluate=False)
    train(tiny_config(4), tmp_path / "a", progress=False, evaluate=False,
          resume=tmp_path / "a")
    straight = train(tiny_config(4), tmp_path / "b", progress=False)
    _, leaves_a = read_checkpoint(tmp_path / "a" / "checkpoint")
    _, leaves_b = read_checkpoint(tmp_path / "b" / "checkpoint")
    for k in leaves_a:
        np.testing.assert_array_equal(np.asarray(leaves_a[k]), np.asarray(leaves_b[k]))
    rows = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    policy = TrainedPolicy.load(tmp_path / "b" / "policy")
    assert policy.spec["policy"] == "belief_lookahead" and policy.spec["best_update"] == 3
    assert straight.summary["evaluation"]["episodes"] == 4


def test_a_network_it_does_not_build_is_refused_naming_the_setting():
    from plume_jax.train.algorithms.base import algorithm_class

    cfg = tiny_config(2)
    env, params = cfg.make_env()
    bad = cfg.replace(network={"activation": "tanh"})
    with pytest.raises(ValidationError, match=r"network\.activation"):
        algorithm_class("belief_value_iteration").from_config(bad, env, params)


# --------------------------------------------------------------------------- 7. exported policy

def test_exported_policy_acts_as_the_greedy_symmetry_averaged_decision(square):
    env, params, algo = square
    # an evaluated runner (finite best score) whose best parameters are not its
    # current ones, without compiling a training run (that a run evaluates and
    # keeps a finite best score: test_chunked_runs_are_bit_identical_to_one_run)
    runner = algo.init(jax.random.key(2), None, params).replace(
        params=random_params(algo, 8), best_params=random_params(algo, 9),
        best_score=jnp.asarray(12.0, jnp.float32))
    arrays = VI.export_arrays(algo, runner)
    assert arrays["symmetry_perm"].shape[0] == 8
    decide = jax.jit(lambda o: (VI.act(arrays, o), VI.policy_scores(arrays, o)))  # one compile
    act = lambda o: decide(o)[0]  # noqa: E731
    scores = lambda o: decide(o)[1]  # noqa: E731
    observations = walk_observations(env, params, jax.random.key(5), 5,
                                     actions=["move_west", "move_north"])
    beliefs, grids = zip(*(split_obs(algo, o) for o in observations))
    expected = np.asarray(algo.greedy_actions(runner.best_params, jnp.asarray(np.stack(beliefs)),
                                              jnp.asarray(np.stack(grids)), symmetric=True))
    q, _, _, _ = algo._q(runner.best_params, jnp.asarray(np.stack(beliefs)),
                         jnp.asarray(np.stack(grids)), symmetric=True)
    for k, obs in enumerate(observations):
        assert int(act(obs)) == int(expected[k])
        np.testing.assert_allclose(np.asarray(scores(obs)), np.asarray(q[k]), rtol=1e-6)


# --------------------------------------------------------------------------- 8. refusals

@pytest.mark.parametrize("name,value", [
    ("hidden_sizes", []), ("hidden_sizes", [16, 0]), ("learning_rate", 0.0),
    ("adam_eps", -1.0), ("batch_size", 0), ("gd_steps", 1.5), ("memory_size", 4),
    ("walkers", 0), ("steps_per_iteration", 0), ("epsilon_start", 1.5),
    ("epsilon_floor", -0.1), ("epsilon_decay", 0.0), ("target_update_every", 0),
    ("stop_p", 0.0), ("max_episode_steps", 0), ("symmetry_augment", "yes"),
    ("symmetry_average", 1), ("eval_every", -1), ("eval_searches", 0), ("eval_seed", -1),
    ("iterations", 0), ("learning_rate", float("nan")), ("batch_size", True),
])
def test_bad_settings_are_refused_naming_the_setting(tiny, name, value):
    env, params, _ = tiny
    with pytest.raises(ValidationError, match=rf"^{name}=") as info:
        VI.BeliefValueIteration(env, params, **{**SMALL, name: value})
    assert info.value.parameter == name


def test_envs_it_cannot_plan_on_are_refused():
    sensor = dict(TINY["sensor"])
    no_grid = {**TINY, "sensor": {**sensor, "grid_channel": False}}
    env, params = make_env(no_grid)
    with pytest.raises(ValidationError, match=r"^env\.sensor="):
        VI.BeliefValueIteration(env, params, **SMALL)
    env, params = make_env({**TINY, "sensor": {"type": "hits", "h_max": 3,
                                               "nonzero_first": True}})
    with pytest.raises(ValidationError, match=r"^env\.sensor="):
        VI.BeliefValueIteration(env, params, **SMALL)


def test_missing_env_params_are_refused(tiny):
    _, params, algo = tiny
    with pytest.raises(ValidationError, match=r"^env_params="):
        algo.init(jax.random.key(0), None, None)
    runner = algo.init(jax.random.key(0), None, params)
    with pytest.raises(ValidationError, match=r"^env_params="):
        algo.update(runner, None, None)


# --------------------------------------------------------------------------- 7. sweeps

@pytest.fixture(scope="module")
def two_seeds(tiny, four_iterations_at):
    """Seeds 3 and 7, at learning rates 1e-3 and 3e-3, trained 4 iterations
    (evaluated at 2 and 4) as one batched program, and each alone."""
    from plume_jax.train.members import shared

    _, params, algo = tiny
    hps = [VI.ValueIterationHparams(learning_rate=jnp.float32(lr)) for lr in (1e-3, 3e-3)]
    runners = [algo.init(jax.random.key(k), hp, params) for k, hp in zip((3, 7), hps)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *runners)
    hp = jax.tree.map(lambda *xs: jnp.stack(xs), *hps)
    batched = jax.jit(lambda r, h: algo.run(r, h, shared(params), 4, batched=True))(stacked, hp)
    alone = [four_iterations_at(r, h) for r, h in zip(runners, hps)]
    return algo, shared(params), stacked, batched, alone


def test_the_learning_rate_is_a_leaf_of_hp_not_compiled_in(tiny, four_iterations_at):
    """belief_value_iteration's learning rate was a constant compiled into
    the program, and ``hp`` was ignored: a sweep over it could not share a
    program. It is now the leaf ``hp.learning_rate``: one compiled run
    trains at either rate, and the rates train differently; ``hparams``
    reads it from the config."""
    _, params, algo = tiny
    start = algo.init(jax.random.key(3), None, params)
    slow, fast = (four_iterations_at(start, VI.ValueIterationHparams(
        learning_rate=jnp.float32(lr)))[0].params for lr in (1e-4, 1e-1))
    assert not all(np.allclose(a, b) for a, b in zip(jax.tree.leaves(slow),
                                                      jax.tree.leaves(fast)))
    hp = algo.hparams(tiny_config(2), params)
    assert float(hp.learning_rate) == pytest.approx(0.003)


def test_a_sweep_trains_each_seed_as_it_trains_alone(two_seeds):
    """belief_value_iteration is sweepable: members vmapped in one program
    train, evaluate and keep their best parameters as each does alone."""
    algo, _, _, (runner, metrics), alone = two_seeds
    assert algo.sweepable
    for j, (one, m_one) in enumerate(alone):
        for name in m_one:
            np.testing.assert_allclose(np.asarray(metrics[name])[:, j], np.asarray(m_one[name]),
                                       rtol=1e-4, atol=1e-6, err_msg=name)
        member = jax.tree.map(lambda x: x[j], runner)
        for a, b in zip(jax.tree.leaves(member.best_params), jax.tree.leaves(one.best_params)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
        assert int(member.best_update) == int(one.best_update) > 0
    steps = np.asarray(metrics["eval_mean_steps"])  # [iterations, members]
    assert np.all(np.isnan(steps[[0, 2]])) and np.all(np.isfinite(steps[[1, 3]]))


def test_a_sweep_evaluates_only_on_its_schedule_not_at_every_iteration(two_seeds):
    """Under vmap, a lax.cond on each member's own iteration count becomes a
    select that runs the evaluation (eval_searches searches) at every
    iteration; the batched step evaluates once for all members, under a
    cond whose branch holds the evaluation's while loop."""
    algo, params, stacked, _, _ = two_seeds
    jaxpr = jax.make_jaxpr(lambda r: algo.batched_step(r, None, params))(stacked)
    conds = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "cond"]
    assert len(conds) == 1
    assert "while" in str(conds[0].params["branches"])
    others = [e for e in jaxpr.jaxpr.eqns if e.primitive.name != "cond"]
    assert "while" not in str(others)  # no evaluation outside the cond


def test_a_sweeps_export_holds_each_members_own_policy(two_seeds):
    """The policy of a batched runner: every array with the member axis,
    each member's arrays those of its own export (the best evaluated
    parameters), its spec's per-member figures as lists."""
    algo, _, _, (runner, _), _ = two_seeds
    spec, arrays = algo.policy(runner)
    assert spec["best_update"] == [int(b) for b in np.asarray(runner.best_update)]
    assert spec["parameters"] == ["best evaluated"] * 2
    for j in range(2):
        one_spec, one = algo.policy(jax.tree.map(lambda x: x[j], runner))
        assert set(one) == set(arrays)
        assert one_spec["best_update"] == spec["best_update"][j]
        for k in one:
            np.testing.assert_array_equal(arrays[k][j], one[k], err_msg=k)


@pytest.mark.slow  # CI time: two trainings through the run driver, about 30 s
def test_plume_jax_sweep_trains_the_seeds_of_a_searcher_as_one_program(tmp_path):
    """A seed sweep of a belief_value_iteration config (the zoo searcher's
    recipe, configs/sweep_seeds_poisson-iso19x19-searcher.yaml, in small) is
    one vmapped program; each member's run folder holds its exported policy,
    which loads as an agents.trained policy; and a single run with
    ``run.lanes: 2`` trains member 0 bit for bit."""
    from agents.trained import TrainedPolicy
    from plume_jax.train.config import train_config
    from plume_jax.train.sweep import program_groups, run_sweep, sweep_config
    from plume_jax.train.run import train

    sweep = sweep_config({"base": tiny_config(4).to_dict(), "grid": {"run.seed": [0, 1]}})
    assert program_groups(sweep) == [[0, 1]]
    result = run_sweep(sweep, tmp_path / "s", progress=False)
    assert [p.setup.members for p in result.programs] == [[0, 1]]
    for name in sweep.names:
        folder = tmp_path / "s" / "members" / name
        policy = TrainedPolicy.load(folder / "policy")
        assert policy.spec["policy"] == "belief_lookahead" and policy.spec["best_update"] == 3
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["evaluation"]["episodes"] == 4
    raw = sweep.configs[0].to_dict()
    raw["run"]["lanes"] = 2
    single = train(train_config(raw), tmp_path / "lanes", progress=False, evaluate=False)
    member = jax.tree.map(lambda x: x[0], result.programs[0].runner)
    for a, b in zip(jax.tree.leaves(single.runner), jax.tree.leaves(member)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_step_size_two_is_refused_because_the_env_clamps_where_the_lookahead_stays():
    """Regression: with ``step_size`` 2 a move that would cross a wall takes
    the env's agent to the edge (one cell), while the look-ahead and the
    walkers modelled it as staying in place; such envs are refused."""
    env, params = make_env({**TINY, "actions": {"step_size": 2}})
    obs, state = env.reset(jax.random.key(0), params)  # start (3, 2) on a 7x6 grid
    for _ in range(2):  # (3, 2) -> (1, 2) -> clamped at (0, 2), not left at (1, 2)
        obs, state = env.step_env(jax.random.key(1), state, env.action_ids["move_west"],
                                  params)[:2]
    np.testing.assert_array_equal(np.asarray(state.agent.position), [0, 2])
    with pytest.raises(ValidationError, match=r"^env\.actions\.step_size=2"):
        VI.BeliefValueIteration(env, params, **SMALL)


# --------------------------------------------------------------------------- 9. ablations

#: The tiny CNN of the ablation tests (11x13 images -> 6x7x4 -> 3x4x4 features).
TINY_CNN = {"type": "cnn", "image_shape": [11, 13], "conv_features": [4, 4],
            "conv_kernels": [3, 3], "conv_strides": [2, 2], "hidden_sizes": [8],
            "activation": "relu"}


@pytest.mark.slow  # about 25 s on the shared 2-core CPU
def test_cnn_without_frozen_target_trains_and_its_export_acts_bit_for_bit_as_in_training(
        tmp_path):
    """Both training ablations in one run through the run driver
    (``network.type: cnn``, ``algo.frozen_target: false``): it trains,
    evaluates and exports; the exported policy (agents.trained) gives the
    in-training look-ahead's values and actions bit for bit."""
    from agents.trained import TrainedPolicy
    from plume_jax.train.algorithms.base import algorithm_class
    from plume_jax.train.run import train

    cfg = tiny_config(3).replace(network=TINY_CNN, algo={"frozen_target": False})
    train(cfg, tmp_path / "run", progress=False, evaluate=False)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3]
    assert all(np.isfinite(r["loss"]) for r in rows) and np.isfinite(rows[-1]["eval_mean_steps"])
    env, params = cfg.make_env()
    algo = algorithm_class("belief_value_iteration").from_config(cfg, env, params)
    assert algo.network_type == "cnn" and not algo.static.frozen_target
    policy = TrainedPolicy.for_env(env, tmp_path / "run" / "policy")
    assert policy.spec["network"]["conv_strides"] == [2, 2]
    assert policy.params["conv_1/kernel"].shape == (3, 3, 4, 4)
    assert policy.params["dense_0/kernel"].shape == (3 * 4 * 4, 8)
    net = {k: v for k, v in policy.params.items() if "/" in k}  # not the look-ahead's model
    observations = walk_observations(env, params, jax.random.key(5), 4,
                                     actions=["move_west", "move_north"])
    q_train = jax.jit(lambda b, g: algo._q(net, b[None], g[None], symmetric=True)[0][0])
    step = jax.jit(lambda o: policy.act(policy.init(None), o, jax.random.key(0))[0])
    scores = jax.jit(lambda o: VI.policy_scores(policy.params, o, algo.conv_strides))
    for obs in observations:
        belief, grid = split_obs(algo, obs)
        q = np.asarray(q_train(jnp.asarray(belief), jnp.asarray(grid)))
        np.testing.assert_array_equal(np.asarray(scores(obs)), q)
        assert int(step(obs)) == int(algo.move_ids[np.argmin(q)])


def test_cnn_export_gives_the_in_training_lookahead_values_and_actions_bit_for_bit(tiny):
    """An untrained CNN's export (no run: cheap) through agents.trained's
    TrainedPolicy: the look-ahead scores and actions of the training code,
    bit for bit, so the strides recorded in policy.json reach the forward pass."""
    from agents.trained import TrainedPolicy

    env, params, _ = tiny
    algo = VI.BeliefValueIteration(env, params, iterations=10, **{
        **SMALL, "network_type": "cnn", "conv_features": [4, 4], "conv_kernels": [3, 3],
        "conv_strides": [2, 2], "hidden_sizes": [8]})
    runner = algo.init(jax.random.key(3), None, params)
    net = {**runner.params, "out/kernel": runner.params["out/kernel"] * 40.0}  # visible values
    runner = runner.replace(params=net)
    policy = TrainedPolicy(VI.policy_spec(algo, runner), VI.export_arrays(algo, runner))
    obs = walk_observations(env, params, jax.random.key(5), 2)[-1]
    belief, grid = split_obs(algo, obs)

    @jax.jit  # one program (one compile): in training, exported scores, exported action
    def both(b, g, o):
        return (algo._q(net, b[None], g[None], symmetric=True)[0][0],
                VI.policy_scores(policy.params, o, (2, 2)),
                policy.act(policy.init(None), o, jax.random.key(0))[0])

    q, scores, action = (np.asarray(x) for x in both(jnp.asarray(belief), jnp.asarray(grid),
                                                      jnp.asarray(obs)))
    np.testing.assert_array_equal(scores, q)
    assert int(action) == int(algo.move_ids[np.argmin(q)])
    assert len(set(np.round(q, 4).tolist())) > 1  # the moves' values differ


def _iterate(env, params, gd_steps, frozen_target):
    algo = VI.BeliefValueIteration(env, params, iterations=10, **{
        **SMALL, "eval_every": 0, "gd_steps": gd_steps, "frozen_target": frozen_target})
    runner = algo.init(jax.random.key(8), None, params)
    return algo, runner, jax.jit(lambda r: algo.update(r, None, params))(runner)


@pytest.mark.slow  # about 14 s on the shared 2-core CPU (two compiles of an iteration)
def test_without_frozen_target_one_gradient_step_is_bit_for_bit_the_frozen_copy_step(tiny):
    """``frozen_target: false`` with one gradient step per iteration: the
    current parameters are the frozen copy's (refreshed every iteration), so
    the iteration is bit for bit otto's."""
    env, params, _ = tiny
    _, _, frozen = _iterate(env, params, 1, True)
    _, _, current = _iterate(env, params, 1, False)
    for x, y in zip(jax.tree.leaves(frozen), jax.tree.leaves(current)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.slow  # about 30 s on the shared 2-core CPU
def test_without_frozen_target_each_gradient_step_targets_the_current_parameters(tiny):
    """``frozen_target: false`` with two gradient steps: the second step's
    targets come from the parameters after the first (by hand)."""
    env, params, _ = tiny
    algo, runner, (after, metrics) = _iterate(env, params, 2, False)
    b = algo.static.batch_size
    key = _typed(runner.key)
    _, _, k_batch = jax.random.split(key, 3)
    idx = jax.random.randint(k_batch, (2 * b,), 0, after.memory_count)
    x, valid = after.memory[idx], after.memory_moves[idx]
    one = VI.BeliefValueIteration(env, params, iterations=10, **{**SMALL, "gd_steps": 1})
    y0 = one.targets(runner.params, x[:b], valid[:b])
    p1 = _one_adam_step(one, runner.params, x[:b], y0)
    y1 = one.targets(p1, x[b:], valid[b:])
    frozen_y1 = one.targets(runner.params, x[b:], valid[b:])
    assert not np.allclose(np.asarray(y1), np.asarray(frozen_y1), rtol=1e-6, atol=0)
    np.testing.assert_allclose(float(metrics["target_mean"]),
                               float(jnp.mean(jnp.concatenate([y0, y1]))), rtol=1e-5)


def _typed(key):
    return jax.random.wrap_key_data(key) if not jnp.issubdtype(
        key.dtype, jax.dtypes.prng_key) else key


def _one_adam_step(algo, p, x, y):
    import optax

    def loss(q):
        return jnp.sum(jnp.square(algo.values(q, x.reshape(x.shape[0], -1)) - y))

    tx = algo.tx()
    upd, _ = tx.update(jax.grad(loss)(p), tx.init(p), p)
    return VI.project_nonnegative(optax.apply_updates(p, upd))


@pytest.mark.parametrize("name,value", [
    ("frozen_target", "no"), ("network_type", "gru"), ("conv_features", []),
    ("conv_kernels", [3, 0]), ("conv_strides", "2"), ("conv_features", [4, 4, 4]),
])
def test_bad_ablation_settings_are_refused_naming_the_setting(tiny, name, value):
    env, params, _ = tiny
    cnn = {"network_type": "cnn", "conv_features": [4, 4], "conv_kernels": [3, 3],
           "conv_strides": [2, 2]}
    wrong = "conv_kernels" if value == [4, 4, 4] else name  # a count mismatch names the kernels
    with pytest.raises(ValidationError, match=rf"^{wrong}=") as info:
        VI.BeliefValueIteration(env, params, **{**SMALL, **cnn, name: value})
    assert info.value.parameter == wrong


@pytest.mark.parametrize("network,setting", [
    ({"type": "gru"}, "network.type"),
    ({"type": "rnn"}, "network.type"),
    ({**TINY_CNN, "image_shape": [13, 11]}, "network.image_shape"),
])
def test_a_value_network_it_cannot_build_is_refused_naming_the_setting(network, setting):
    from plume_jax.train.algorithms.base import algorithm_class

    cfg = tiny_config(2)
    env, params = cfg.make_env()
    with pytest.raises(ValidationError, match=rf"^{setting}="):
        algorithm_class("belief_value_iteration").from_config(
            cfg.replace(network=network), env, params)


def test_the_shipped_searcher_config_keeps_otto_frozen_target_and_mlp():
    """The defaults of the two ablation options are otto's recipe, so the
    shipped config and policy run as before (an MLP spec has no strides)."""
    import pathlib

    from agents.belief_lookahead import spec_conv_strides
    from plume_jax.train.config import load_train_config

    root = pathlib.Path(__file__).resolve().parents[2]
    cfg = load_train_config(root / "configs" / "train_iso19x19_searcher.yaml")
    assert cfg.algo["frozen_target"] is True and cfg.network.type == "mlp"
    spec = json.loads((root / "configs" / "policies" / "poisson_iso19x19_searcher"
                       / "policy.json").read_text())
    assert spec_conv_strides(spec) == ()


# --------------------------------------------------------------------------- shipped policy

@pytest.mark.slow
def test_shipped_searcher_runs_its_scenario_and_acts_as_the_trained_lookahead():
    """configs/scenarios/poisson_iso19x19_learned.yaml: the shipped policy
    (trained on a GPU) loads against its scenario's env, finds the sources of
    a few searches, and decides as the training code's look-ahead does."""
    import pathlib

    from agents.trained import TrainedPolicy
    from plume_jax.evaluate import scenario as sc

    root = pathlib.Path(__file__).resolve().parents[2]
    scenario = sc.load_scenario(root / "configs" / "scenarios" / "poisson_iso19x19_learned.yaml")
    path = root / scenario["agent"]["params"]["path"]
    report = sc.run_scenario(scenario, agent="trained", agent_params={"path": str(path)},
                             episodes=4)
    assert report["metrics"]["episodes"] == 4 and report["metrics"]["successes"] >= 3
    env, params = plume_jax.make(scenario["env"]["preset"], **scenario["env"]["overrides"])
    policy = TrainedPolicy.for_env(env, path)
    obs, _ = env.reset(jax.random.key(1), params)
    action, _ = policy.act(policy.init(None), obs, jax.random.key(0))
    assert int(action) == int(VI.act(policy.params, obs))


def test_an_eval_seed_the_config_accepts_builds_the_algorithm():
    """algo.eval_seed took [0, 2**63) in the config but the constructor stopped at
    2**31 - 1, so a valid config failed when the algorithm was built."""
    from plume_jax.train.algorithms.base import algorithm_class

    cfg = tiny_config(2).replace(algo={"eval_seed": 2**40 + 5})
    env, params = cfg.make_env()
    algo = algorithm_class("belief_value_iteration").from_config(cfg, env, params)
    assert algo.static.eval_seed == 2**40 + 5


@pytest.mark.parametrize("name, window, symmetries", [
    ("train_iso53x53_searcher.yaml", (105, 105), 8),
    ("train_windy81x41_searcher.yaml", (81, 161), 2)])
def test_the_larger_case_configs_build_the_reference_networks_and_symmetries(name, window,
                                                                             symmetries):
    """Issue 27 item 3: otto-benchmark's settings for Iso53x53 and Windy81x41
    (3 x 1024, epsilon decay 20 000) on the full centred window, averaging over
    the symmetries each plume keeps (the square's 8; the wind axis reflection)."""
    import pathlib

    from plume_jax.train.algorithms.base import algorithm_class
    from plume_jax.train.config import load_train_config

    root = pathlib.Path(__file__).resolve().parents[2]
    cfg = load_train_config(root / "configs" / name)
    env, params = cfg.make_env()
    algo = algorithm_class("belief_value_iteration").from_config(cfg, env, params)
    assert algo.hidden_sizes == (1024, 1024, 1024) and algo.static.epsilon_decay == 20_000.0
    assert algo.image_shape == window and len(algo.symmetry_perm) == symmetries
