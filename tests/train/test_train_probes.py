"""Probe environments: tiny envs whose correct value function and policy are
known, so a PPO bug shows up as a wrong number (cf. the debugging
checklist of Jones, "Debugging RL without the agonizing pain", 2021).

One env class, six probes selected by an env *param* (``mode``): all probes
of one network type train as ONE vmapped program (a sweep over env params
and hyperparameters), which also keeps compile time down.

===  ==========  ======================================================  =====================
mode name        dynamics                                                 known answer
===  ==========  ======================================================  =====================
0    constant    obs 0, reward 1, ends after 1 step                       V(0) = 1
1    obs         obs ±1 at random, reward = obs, 1 step                   V(±1) = ±1
2    action      obs 0, reward +1 for action 1 else -1, 1 step            greedy 1, V(0) = 1
3    delayed     t0: obs ±1, reward 0; t1: obs 0, reward +1 iff the t0    greedy a0 = [obs>0],
                 action was 1 exactly when obs>0 (else -1); 2 steps       V(t0) = γ, V(t1) = 1
4    truncation  reward 0 on the first step then 1 per step, never        V(1) = 1/(1-γ),
                 terminates, truncated after 5 steps; obs 0 at the        V(0) = γ/(1-γ)
                 start, 1 afterwards
5    memory      t0: obs ±1; t1: obs 0, reward +1 iff the t1 action is    return 1 needs memory
                 1 exactly when the t0 obs was >0 (else -1); 2 steps      (GRU); an MLP gets ~0
===  ==========  ======================================================  =====================
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import environment, spaces

from plume_jax.train.config import NetworkConfig
from plume_jax.train.algorithms.ppo import PPO, Hparams, PPOStatic

CONSTANT, OBS, ACTION, DELAYED, TRUNCATION, MEMORY = range(6)
GAMMAS = {CONSTANT: 0.9, OBS: 0.9, ACTION: 0.9, DELAYED: 0.9, TRUNCATION: 0.8, MEMORY: 0.9}
TRUNC_STEPS = 5


@chex.dataclass(frozen=True)
class ProbeParams:
    mode: jax.Array
    max_steps: jax.Array


@chex.dataclass(frozen=True)
class ProbeState:
    t: jax.Array
    sign: jax.Array
    correct0: jax.Array


class ProbeEnv(environment.Environment):
    """The probes above, with gymnax-style auto-reset and the plume_jax step
    signature ``(obs, state, reward, terminated, truncated, info)``."""

    @property
    def default_params(self) -> ProbeParams:
        return ProbeParams(mode=jnp.asarray(0, jnp.int32), max_steps=jnp.asarray(TRUNC_STEPS))

    def _obs(self, state: ProbeState, params: ProbeParams) -> jax.Array:
        t0 = state.t == 0
        first = jnp.where((params.mode == OBS) | (params.mode == DELAYED) | (params.mode == MEMORY),
                          state.sign, 0.0)
        later = jnp.where(params.mode == TRUNCATION, 1.0, 0.0)
        return jnp.reshape(jnp.where(t0, first, later), (1,)).astype(jnp.float32)

    def reset_env(self, key, params):
        sign = jnp.where(jax.random.bernoulli(key), 1.0, -1.0)
        state = ProbeState(t=jnp.asarray(0), sign=sign, correct0=jnp.asarray(False))
        return self._obs(state, params), state

    def step_env(self, key, state, action, params):
        mode, t = params.mode, state.t
        matches = (action == 1) == (state.sign > 0)
        pm = jnp.where(matches, 1.0, -1.0)
        reward = jnp.select(
            [mode == CONSTANT, mode == OBS, mode == ACTION, mode == DELAYED, mode == TRUNCATION],
            [1.0, state.sign, jnp.where(action == 1, 1.0, -1.0),
             jnp.where(t == 0, 0.0, jnp.where(state.correct0, 1.0, -1.0)),
             jnp.where(t == 0, 0.0, 1.0)],
            jnp.where(t == 0, 0.0, pm))  # MEMORY
        one_step = (mode == CONSTANT) | (mode == OBS) | (mode == ACTION)
        two_step = (mode == DELAYED) | (mode == MEMORY)
        terminated = one_step | (two_step & (t == 1))
        new = ProbeState(t=t + 1, sign=state.sign, correct0=jnp.where(t == 0, matches,
                                                                       state.correct0))
        truncated = (mode == TRUNCATION) & (new.t >= params.max_steps)
        return self._obs(new, params), new, reward.astype(jnp.float32), terminated, truncated, {}

    def step(self, key, state, action, params=None):
        params = self.default_params if params is None else params
        k_step, k_reset = jax.random.split(key)
        obs, st, reward, term, trunc, info = self.step_env(k_step, state, action, params)
        obs_re, st_re = self.reset_env(k_reset, params)
        done = term | trunc
        state = jax.tree.map(lambda a, b: jnp.where(done, a, b), st_re, st)
        return (jnp.where(done, obs_re, obs), state, reward, term, trunc,
                {"final_observation": obs})

    def reset(self, key, params=None):
        return self.reset_env(key, self.default_params if params is None else params)

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def observation_space(self, params=None):
        return spaces.Box(-1.0, 1.0, (1,), jnp.float32)


@chex.dataclass(frozen=True)
class BoxParams:
    target: jax.Array


class BoxProbe(environment.Environment):
    """Continuous actions: obs 0, a Box action in [-2, 2], reward
    ``-(a - target)^2``, one step. The Gaussian mean must map to ``target``."""

    @property
    def default_params(self) -> BoxParams:
        return BoxParams(target=jnp.asarray(0.5, jnp.float32))

    def reset(self, key, params=None):
        return jnp.zeros(1, jnp.float32), jnp.asarray(0)

    def step(self, key, state, action, params=None):
        params = self.default_params if params is None else params
        reward = -jnp.sum(jnp.square(action - params.target))
        obs = jnp.zeros(1, jnp.float32)
        return obs, state, reward, jnp.asarray(True), jnp.asarray(False), \
            {"final_observation": obs}

    def action_space(self, params=None):
        return spaces.Box(-2.0, 2.0, (1,), jnp.float32)

    def observation_space(self, params=None):
        return spaces.Box(-1.0, 1.0, (1,), jnp.float32)


NUM_UPDATES = 60
MODES = [CONSTANT, OBS, ACTION, DELAYED, TRUNCATION, MEMORY]


def _static(kind: str, num_updates: int = NUM_UPDATES) -> PPOStatic:
    return PPOStatic(num_envs=16, num_steps=10, update_epochs=4, num_minibatches=2,
                     num_updates=num_updates, anneal_lr=False, clip_value=False,
                     network=NetworkConfig(type=kind, hidden_sizes=(32, 32), gru_size=16))


def _hp(gammas, lr=3e-3, ent=0.0):
    n = len(gammas)
    return Hparams(learning_rate=jnp.full(n, lr, jnp.float32),
                   ent_coef=jnp.full(n, ent, jnp.float32), vf_coef=jnp.full(n, 0.5, jnp.float32),
                   gamma=jnp.asarray(gammas, jnp.float32), gae_lambda=jnp.full(n, 0.95, jnp.float32),
                   clip_eps=jnp.full(n, 0.2, jnp.float32),
                   max_grad_norm=jnp.full(n, 0.5, jnp.float32),
                   weight_decay=jnp.zeros(n, jnp.float32))


def _train_probes(kind: str):
    env = ProbeEnv()
    algo = PPO(env, env.default_params, _static(kind))
    n = len(MODES)
    env_params = ProbeParams(mode=jnp.asarray(MODES, jnp.int32),
                             max_steps=jnp.full(n, TRUNC_STEPS, jnp.int32))
    hp = _hp([GAMMAS[m] for m in MODES])
    keys = jax.vmap(jax.random.key)(jnp.arange(n))

    @jax.jit
    def run(keys, hp, env_params):
        runner = jax.vmap(algo.init)(keys, hp, env_params)
        return algo.run(runner, hp, env_params, NUM_UPDATES, batched=True)

    runner, metrics = run(keys, hp, env_params)
    return algo, runner, jax.device_get(metrics)


def _member(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def _net(algo, params, xs, starts=None):
    """Value and logits for an observation sequence ``xs`` (T values) of one env."""
    x = jnp.asarray(xs, jnp.float32).reshape(-1, 1, 1)
    starts = jnp.zeros(x.shape[:2], bool).at[0].set(True) if starts is None else starts
    h = jnp.zeros((1, algo.hidden_dim), jnp.float32)
    _, (logits, _), value = algo.net.apply(params, h, x, starts)
    return np.asarray(value[:, 0]), np.asarray(logits[:, 0])


@pytest.fixture(scope="module")
def mlp_probes():
    return _train_probes("mlp")


@pytest.fixture(scope="module")
def gru_probes():
    return _train_probes("gru")


@pytest.fixture(scope="module", params=["mlp", "gru"])
def probes(request, mlp_probes, gru_probes):
    return {"mlp": mlp_probes, "gru": gru_probes}[request.param]


def test_constant_reward_value_is_one(probes):
    algo, runner, _ = probes
    value, _ = _net(algo, _member(runner.params, MODES.index(CONSTANT)), [0.0])
    assert value[0] == pytest.approx(1.0, abs=0.1)


def test_value_learns_reward_from_observation(probes):
    algo, runner, _ = probes
    params = _member(runner.params, MODES.index(OBS))
    assert _net(algo, params, [1.0])[0][0] == pytest.approx(1.0, abs=0.15)
    assert _net(algo, params, [-1.0])[0][0] == pytest.approx(-1.0, abs=0.15)


def test_policy_learns_reward_from_action(probes):
    algo, runner, metrics = probes
    i = MODES.index(ACTION)
    value, logits = _net(algo, _member(runner.params, i), [0.0])
    assert np.argmax(logits[0]) == 1
    assert value[0] == pytest.approx(1.0, abs=0.15)
    assert np.nanmean(metrics["return_mean"][-5:, i]) > 0.9


def test_one_step_delayed_reward_is_credited_to_the_earlier_action(probes):
    algo, runner, metrics = probes
    i = MODES.index(DELAYED)
    params = _member(runner.params, i)
    for sign in (1.0, -1.0):
        value, logits = _net(algo, params, [sign, 0.0])
        assert np.argmax(logits[0]) == (1 if sign > 0 else 0)
        assert value[0] == pytest.approx(GAMMAS[DELAYED], abs=0.15)  # reward one step later
        assert value[1] == pytest.approx(1.0, abs=0.15)
    assert np.nanmean(metrics["return_mean"][-5:, i]) > 0.9


def test_truncation_bootstraps_from_the_final_observation(probes):
    """Time limits are not part of the state: V(1) = 1/(1-γ) = 5. Treating
    truncation as termination would give at most 1 + γ + ... + γ^3 = 3.36."""
    algo, runner, _ = probes
    g = GAMMAS[TRUNCATION]
    value, _ = _net(algo, _member(runner.params, MODES.index(TRUNCATION)), [0.0, 1.0])
    assert value[1] == pytest.approx(1 / (1 - g), rel=0.12)
    assert value[0] == pytest.approx(g / (1 - g), rel=0.12)


def test_memory_probe_needs_the_recurrent_policy(mlp_probes, gru_probes):
    i = MODES.index(MEMORY)
    gru_return = np.nanmean(gru_probes[2]["return_mean"][-5:, i])
    mlp_return = np.nanmean(mlp_probes[2]["return_mean"][-5:, i])
    assert gru_return > 0.9
    assert mlp_return < 0.5  # it cannot do better than chance (0) at the second step


def test_box_policy_learns_the_best_continuous_action():
    env = BoxProbe()
    algo = PPO(env, env.default_params, _static("mlp", 40))
    hp = Hparams.create(learning_rate=1e-2, ent_coef=0.0, vf_coef=0.5, gamma=0.9,
                        gae_lambda=0.95, clip_eps=0.2, max_grad_norm=0.5)
    params = env.default_params

    @jax.jit
    def run(key):
        runner = algo.init(key, hp, params)
        return algo.run(runner, hp, params, 40)

    runner, metrics = run(jax.random.key(0))
    h = jnp.zeros((1, 1), jnp.float32)
    _, (mean, log_std), value = algo.net.apply(runner.params, h, jnp.zeros((1, 1, 1)),
                                               jnp.ones((1, 1), bool))
    # normalised mean u maps to low + (u + 1) / 2 * (high - low) = 2u in [-2, 2]
    assert 2.0 * float(mean[0, 0, 0]) == pytest.approx(0.5, abs=0.1)
    assert float(metrics["return_mean"][-1]) > -0.1
    assert float(log_std[0, 0, 0]) < 0.0  # exploration noise shrank


def test_rollout_takes_the_final_value_from_final_observation_not_the_reset_one():
    """In the truncation probe the observation is 1 when the episode is cut
    and 0 after the auto-reset: the stored final value must be V(1)."""
    env = ProbeEnv()
    algo = PPO(env, env.default_params, _static("mlp"))
    hp = Hparams.create(learning_rate=1e-3, ent_coef=0.0, vf_coef=0.5, gamma=0.8,
                        gae_lambda=0.95, clip_eps=0.2, max_grad_norm=0.5)
    params = env.default_params.replace(mode=jnp.asarray(TRUNCATION, jnp.int32))

    @jax.jit  # init and rollout in one program: one compile
    def start_and_roll(key):
        runner = algo.init(key, hp, params)
        return runner, algo.rollout(runner, hp, params, jax.random.key(1))[1]

    runner, traj = jax.device_get(start_and_roll(jax.random.key(0)))
    truncated = np.asarray(traj.truncated)
    assert truncated.sum() >= algo.static.num_envs  # every env was cut at least once
    v_final = _net(algo, runner.params, [1.0])[0][0]
    v_reset = _net(algo, runner.params, [0.0])[0][0]
    assert abs(v_final - v_reset) > 1e-4  # the test can tell them apart
    np.testing.assert_allclose(np.asarray(traj.final_value)[truncated], v_final, rtol=1e-5)
    # and the value stored for the auto-reset observation is V(0)
    starts = np.asarray(traj.start)
    np.testing.assert_allclose(np.asarray(traj.value)[starts], v_reset, rtol=1e-5)


def test_rollout_with_step_batch_matches_the_vmapped_step():
    """Outside a sweep the PPO rollout steps the plume env with
    ``env.step_batch`` (resets only where episodes ended); inside one
    (``vmapped``) with ``vmap(env.step)``: the same transitions."""
    import plume_jax
    from tests.same_results import assert_same_up_to_rounding

    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                                 goal_radius=3.0, max_steps=4)
    algo = PPO(env, params, _static("mlp"))
    hp = Hparams.create(learning_rate=1e-3, ent_coef=0.0, vf_coef=0.5, gamma=0.9,
                        gae_lambda=0.95, clip_eps=0.2, max_grad_norm=0.5)

    @jax.jit  # init and both rollouts in one program: one compile
    def both(key):
        runner = algo.init(key, hp, params)
        return tuple(algo.rollout(runner, hp, params, jax.random.key(1), vmapped=v)[1]
                     for v in (False, True))

    plain, swept = jax.device_get(both(jax.random.key(0)))
    ends = np.asarray(plain.terminated) | np.asarray(plain.truncated)
    assert ends.any()   # auto-resets happened
    assert_same_up_to_rounding(plain, swept)
