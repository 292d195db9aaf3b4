"""Fitted value iteration on the belief, acting by a one-step model look-ahead
(``algo.algorithm: lookahead_vi``).

The Poisson grid search is a POMDP whose belief (the exact posterior over
the source cell, the ``belief`` sensor's observation) is a sufficient
statistic, and whose observation model is known: from a belief ``b`` a move
``a`` finds the source with probability ``1 - Σ_h U_h(b, a)`` or reads hit
class ``h`` with probability ``U_h(b, a)`` and leads to the posterior
``b'_{a,h}`` (:func:`plume_jax.plumes.poisson_posterior.predict_readings`).
The expected number of steps still needed, ``V(b)``, then obeys

    V(b) = min_a [ 1 + γ Σ_h U_h(b, a) V(b'_{a,h}) ]

(the found branch costs nothing more). A network ``V_θ`` (the ``network``
section: ``cnn`` over the centred posterior, or ``mlp``; its critic output
is ``V``, no actor head) is fitted to the right-hand side evaluated with
the parameters of the start of the update, on the beliefs that the
look-ahead policy ``argmin_a [1 + γ Σ_h U_h V_θ(b'_{a,h})]`` visits in the
env with ``epsilon``-greedy exploration. This is the deep RL of Loisy &
Eloy (*Proc. R. Soc. A* 478, 20220118, 2022; their ``otto`` package) and of
Loisy & Heinonen (*Eur. Phys. J. E* 46, 2023): a value function learned with
the known model, used through a one-step look-ahead, rather than a policy
learned model-free.

Each update (``algo`` settings shared with PPO where they mean the same):

1. ``num_steps`` steps of ``num_envs`` envs under the look-ahead policy with
   the current ``θ``, a random valid move with probability ``epsilon``; each
   visited belief gets its target ``min_a [1 + γ Σ_h U_h V_θ(b'_{a,h})]``
   (moves off the grid excluded; ``γ`` is ``algo.gamma``, 1 to count steps);
2. optionally each belief is replaced by a random symmetry of the problem
   (``symmetries``: the rotations and reflections that leave the plume law
   and the grid unchanged; the value is invariant under them);
3. ``update_epochs`` passes over the batch in ``num_minibatches`` Adam steps
   (``learning_rate``, linearly annealed with ``anneal_lr``; gradients
   clipped at ``max_grad_norm``) on the squared error ``(V_θ(b) - target)²``.

``V_θ`` is the network's output (its last layer starts at 0) plus a
baseline: the search-time estimate ``E`` of the belief, or with
``baseline_scale`` ``K > 0`` its compressed form ``K ln(1 + E/K)``
(:func:`~plume_jax.plumes.poisson_posterior.compressed_estimate`), so the
untrained look-ahead is a hand-made policy (with ``K`` = 3.3 it searches as
fast as space-aware infotaxis on the 19x19 benchmark, ``scripts/bench/lookahead_baselines.py``).

Requirements (checked, ``ValidationError`` otherwise): the env's sensor is a
``belief`` sensor, centred, full window, with ``grid_channel`` (the policy
must see the walls); discrete grid moves; a non-recurrent network without
``prev_action`` or ``obs_delta``; no ``normalize_obs``.

The exported policy (``agents.trained``) carries the look-ahead's model:
``lookahead/likelihood`` f32[h_max, 2H-1, 2W-1], ``lookahead/move_deltas``
i32[M, 2], ``lookahead/move_ids`` i32[M], ``lookahead/baseline`` f32[] (1;
0 turns the baseline off) and ``lookahead/baseline_scale`` f32[] (``K``),
next to the network; its act is
the greedy look-ahead (:func:`agents.trained.lookahead_scores`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from plume_jax.actions.discrete_grid import grid_moves
from plume_jax.envs.plume_env import batched_step
from plume_jax.core.errors import ValidationError
from plume_jax.plumes.poisson_posterior import (belief_summaries, compressed_estimate,
                                                search_time_estimate)
from plume_jax.core.pytree import Pytree
from plume_jax.sensors.belief import BeliefSensor
from plume_jax.train.algorithms import networks as N
from plume_jax.train.algorithms.normalize import transform
from plume_jax.train.algorithms.base import Algorithm, declared, network_policy, typed_key
from plume_jax.train.algorithms.epochs import AdamHparams, EpochStatic, adam, \
    annealing_resume_notes, check_minibatches, learning_rate_at
from plume_jax.settings import real, setting

#: The parameters (under ``params["params"]``) that hold the look-ahead's model, not trained.
MODEL_KEY = "lookahead"


@chex.dataclass(frozen=True)
class LookaheadRunner(Pytree):
    """Everything training carries from one update to the next.

    Attributes:
        params: ``{"params": network parameters + {MODEL_KEY: the model}}``.
        opt_state: Adam state of the network parameters.
        env_state, obs: the env batch (leading axis ``num_envs``).
        ep_return, ep_length: the running episodes' return and length.
        key: u32[2], raw PRNG key data.
        update: i32[], updates done.
    """

    params: Any
    opt_state: Any
    env_state: Any
    obs: jax.Array
    ep_return: jax.Array
    ep_length: jax.Array
    key: jax.Array
    update: jax.Array


def _symmetries(sensor: Any) -> tuple[tuple[bool, int], ...]:
    """``(transpose, quarter_turns)`` of the image symmetries that leave the
    searcher's plume law unchanged: all 8 for the isotropic law on a square
    window, the 4 axis flips and half-turns on a rectangle, the flip across
    the wind axis for a windy law blowing along x or y, else the identity."""
    law = dict(sensor.plume)
    rows, cols = sensor.image_shape
    if law["model"] == "isotropic":
        if rows == cols:
            return tuple((t, r) for t in (False, True) for r in range(4))
        return ((False, 0), (False, 2), (True, 1), (True, 3))  # id, half turn, two axis flips
    direction = float(law["wind_direction"]) % math.pi
    if min(direction, math.pi - direction) < 1e-9:  # wind along x: flip y
        return ((False, 0), (True, 1))
    if abs(direction - math.pi / 2) < 1e-9:  # wind along y: flip x
        return ((False, 0), (True, 3))
    return ((False, 0),)


def _apply_symmetry(images: jax.Array, transpose: bool, turns: int) -> jax.Array:
    """f32[C, R, K] -> the images transposed (``[j, i] -> [i, j]``), then
    rotated by ``turns`` quarter turns."""
    if transpose:
        images = jnp.swapaxes(images, 1, 2)
    return jnp.rot90(images, turns, axes=(1, 2))


@dataclasses.dataclass(frozen=True)
class LookaheadStatic(EpochStatic):
    """The compiled-in settings of look-ahead value iteration: those it
    shares with PPO where they mean the same
    (:class:`~plume_jax.train.algorithms.epochs.EpochStatic`), and its own.
    Its hyperparameters are :class:`~plume_jax.train.algorithms.epochs.AdamHparams`."""

    epsilon: float = setting(0.1, real(low=0.0, high=1.0),
                             doc="probability of a random move while collecting")
    baseline_scale: float = setting(
        0.0, real(low=0.0, high=1e6),
        doc="K (steps) of the baseline value K ln(1 + E/K) of the search-time estimate E "
            "that the network corrects; 0: E itself")


#: The ``algo.*`` settings of look-ahead value iteration.
LOOKAHEAD_SETTINGS = declared(LookaheadStatic, AdamHparams)


class BeliefSearchAlgorithm(Algorithm):
    """An algorithm that predicts one searcher's posterior after each move
    (look-ahead value iteration, belief value iteration): the env's model
    that :func:`belief_searcher` sets on it."""

    #: i32[M], the action id of each grid move.
    move_ids: np.ndarray
    #: i32[M, 2], each move's displacement (cells).
    move_deltas: np.ndarray
    #: f32[h_max, 2H-1, 2W-1], the sensor's likelihood of each detection count.
    likelihood: np.ndarray
    #: None: the actions are discrete.
    action_low: None
    action_high: None


def belief_searcher(algo: BeliefSearchAlgorithm, env: Any, env_params: Any, name: str) -> None:
    """Check that ``env`` is a one-searcher Poisson search the look-ahead can
    predict — a ``belief`` sensor (centred, full window, grid channel) and
    ``discrete_grid`` moves — and set the policy's spaces and the look-ahead's
    model on ``algo`` (``env``, ``discrete``, ``action_dim``, ``obs_dim``,
    ``move_ids``, ``move_deltas``, ``likelihood``, ...). ``ValidationError``
    naming the env setting otherwise; ``name`` is the algorithm's."""
    sensor = env.sensor
    if getattr(env, "is_multi_agent", False):
        raise ValidationError.for_parameter(
            "env.num_agents", env.num_agents,
            f"1 for {name!r} (it predicts one searcher's posterior)")
    if not isinstance(sensor, BeliefSensor) or not sensor.centred \
            or sensor.window is not None or not sensor.grid_channel:
        raise ValidationError.for_parameter(
            "env.sensor", getattr(sensor, "type_name", type(sensor).__name__),
            "a 'belief' sensor with centred: true, window: null and grid_channel: true "
            f"(algo.algorithm {name!r} predicts the posterior after each move)")
    actions = env.settings["actions"]
    move_ids, move_deltas = grid_moves(env.action_names, env.action_ids,
                                       int(actions.get("step_size", 1)))
    if actions.get("type") != "discrete_grid" or not move_ids:
        raise ValidationError.for_parameter(
            "env.actions", actions.get("type"),
            f"'discrete_grid' moves for {name!r} (it predicts where each move leads)")
    algo.env = env
    algo.discrete, algo.action_dim = True, len(env.action_names)
    algo.multi_agent, algo.num_agents = False, 1
    algo.action_low = algo.action_high = None
    algo.obs_dim = int(np.prod(env.observation_space(env_params).shape))
    algo.mesh = None
    algo.move_ids = np.asarray(move_ids, np.int32)
    algo.move_deltas = np.asarray(move_deltas, np.int32)
    algo.likelihood = np.asarray(sensor.likelihood(), np.float32)


class LookaheadVI(BeliefSearchAlgorithm):
    """Fitted value iteration with a one-step look-ahead (module docstring),
    an :class:`~plume_jax.train.algorithms.base.Algorithm` (one run at a time: not
    sweepable).

    Args:
        env: a ``PlumeEnv`` with a ``belief`` sensor (see the requirements).
        env_params: its params (the likelihood is the sensor's, static).
        static: the compiled-in settings (:class:`LookaheadStatic`), among
            them ``epsilon``, the probability of a random valid move while
            collecting, and ``baseline_scale``, ``K`` (steps) of the baseline
            value the network corrects, ``K ln(1 + E/K)`` of the search-time
            estimate ``E``
            (:func:`~plume_jax.plumes.poisson_posterior.compressed_estimate`;
            0 for ``E`` itself).
    """

    name = "lookahead_vi"
    SETTINGS = LOOKAHEAD_SETTINGS
    resume_notes = staticmethod(annealing_resume_notes)
    sweepable = False

    @classmethod
    def check_config(cls, config: Any) -> None:
        check_minibatches(config)

    @classmethod
    def from_config(cls, config: Any, env: Any, env_params: Any, mesh: Any = None
                    ) -> "LookaheadVI":
        return cls(env, env_params, LookaheadStatic.from_config(config))

    def hparams(self, config: Any, env_params: Any) -> AdamHparams:
        return AdamHparams.from_config(config, self.env, env_params)

    def policy(self, runner: LookaheadRunner) -> tuple[dict[str, Any], dict[str, Any]]:
        return network_policy(self, runner.params, self.static.network)

    def __init__(self, env: Any, env_params: Any, static: LookaheadStatic):
        sensor = env.sensor
        epsilon, baseline_scale = static.epsilon, static.baseline_scale
        net = static.network
        belief_searcher(self, env, env_params, "lookahead_vi")
        if net.recurrent or net.prev_action or net.obs_delta:
            raise ValidationError.for_parameter(
                "network.type", net.type,
                "'cnn' or 'mlp' without prev_action or obs_delta for 'lookahead_vi' (the value "
                "of a belief depends on the belief alone)")
        if static.normalize_obs:
            raise ValidationError.for_parameter("algo.normalize_obs", True,
                                                "false for 'lookahead_vi'")
        if not 0.0 <= epsilon <= 1.0:
            raise ValidationError.for_parameter("algo.epsilon", epsilon, "a number in [0, 1]")
        if isinstance(baseline_scale, bool) or not isinstance(baseline_scale, (int, float)) \
                or not 0.0 <= float(baseline_scale) <= 1e6:
            raise ValidationError.for_parameter("algo.baseline_scale", baseline_scale,
                                                "a number of steps in [0, 1e6] (0: the raw estimate)")
        self.static = static
        self.num_updates = static.num_updates
        self.steps_per_update = static.num_envs * static.num_steps
        self.epsilon = float(epsilon)
        self.baseline_scale = float(baseline_scale)
        self.image_shape = (sensor.channels,) + tuple(sensor.image_shape)
        self.symmetries = _symmetries(sensor)
        if net.type == "cnn" and tuple(net.image_channels_rows_columns) != self.image_shape:
            raise ValidationError.for_parameter(
                "network.image_shape", list(net.image_shape or ()),
                f"{list(self.image_shape)}: the belief sensor's images (channels, rows, columns)")
        self.net = N.ActorCritic(net, self.action_dim, True, value_only=True)
        self.in_dim = self.obs_dim

    # ------------------------------------------------------------ the model
    def model(self) -> dict[str, jax.Array]:
        """The look-ahead's model, stored with the network parameters."""
        return {"likelihood": jnp.asarray(self.likelihood),
                "move_deltas": jnp.asarray(self.move_deltas),
                "move_ids": jnp.asarray(self.move_ids),
                "baseline": jnp.asarray(1.0, jnp.float32),
                "baseline_scale": jnp.asarray(self.baseline_scale, jnp.float32)}

    @staticmethod
    def network_params(params: Any) -> Any:
        """The trainable part of ``runner.params``."""
        return {"params": {k: v for k, v in params["params"].items() if k != MODEL_KEY}}

    def net_values(self, params: Any, obs: jax.Array) -> jax.Array:
        """f32[B]: the network's output for raw observations f32[B, D]."""
        net = self.static.network
        x = transform(obs, net.obs_transform, net.log_eps)
        hidden = jnp.zeros((x.shape[0], 1), jnp.float32)
        _, _, value = N.apply_network(self.net, self.network_params(params), hidden, x[None],
                                      jnp.zeros((1, x.shape[0]), bool))
        return value[0]

    def baseline(self, obs: jax.Array, scale: Any) -> jax.Array:
        """f32[B]: the baseline value of the observed posteriors, the
        search-time estimate compressed with ``scale``."""
        _, rows, cols = self.image_shape
        beliefs = obs[:, :rows * cols].reshape(-1, rows, cols)
        return compressed_estimate(search_time_estimate(jax.vmap(belief_summaries)(beliefs)),
                                   scale)

    def scores(self, params: Any, obs: jax.Array, gamma: Any) -> tuple[jax.Array, jax.Array]:
        """``(q f32[B, M], valid bool[B, M])``: the expected steps to the
        source after each move (:func:`agents.trained.lookahead_scores`, the
        exported policy's own computation), ``+inf`` for moves off the grid."""
        from agents.trained import lookahead_successors

        model = params["params"][MODEL_KEY]
        succ, baseline, mass, valid = jax.vmap(lambda o: lookahead_successors(
            self.image_shape, model["likelihood"], model["move_deltas"], o))(obs)
        b, m, h = mass.shape
        v = self.net_values(params, succ.reshape(b * m * h, -1)).reshape(b, m, h)
        v = v + model["baseline"] * compressed_estimate(baseline, model["baseline_scale"]
                                                        ).reshape(b, m, h)
        q = 1.0 + gamma * jnp.sum(mass * v, axis=-1)
        return jnp.where(valid, q, jnp.inf), valid

    # ------------------------------------------------------------ training
    def init(self, key: jax.Array, hp: AdamHparams, env_params: Any) -> LookaheadRunner:
        """A fresh runner: network init, env batch reset."""
        s = self.static
        k_net, k_env, k_run = jax.random.split(typed_key(key), 3)
        net_params = N.init_params(self.net, k_net, self.in_dim)
        params = {"params": {**net_params["params"], MODEL_KEY: self.model()}}
        opt_state = adam(hp, s, jnp.zeros((), jnp.int32)).init(self.network_params(params))
        obs, env_state = jax.vmap(self.env.reset, in_axes=(0, None))(
            jax.random.split(k_env, s.num_envs), env_params)
        return LookaheadRunner(
            params=params, opt_state=opt_state,
            env_state=env_state, obs=obs, ep_return=jnp.zeros(s.num_envs, jnp.float32),
            ep_length=jnp.zeros(s.num_envs, jnp.int32), key=jax.random.key_data(k_run),
            update=jnp.asarray(0, jnp.int32))

    def _symmetrised(self, key: jax.Array, obs: jax.Array) -> jax.Array:
        """Each observation f32[B, D] under a random symmetry (images only;
        the summaries after them are invariant)."""
        if len(self.symmetries) == 1:
            return obs
        c, r, k = self.image_shape
        size = c * r * k
        branches = [functools.partial(_apply_symmetry, transpose=t, turns=n)
                    for t, n in self.symmetries]
        which = jax.random.randint(key, (obs.shape[0],), 0, len(branches))
        images = jax.vmap(lambda x, i: jax.lax.switch(i, branches, x.reshape(c, r, k)))(
            obs[:, :size], which)
        return jnp.concatenate([images.reshape(obs.shape[0], size), obs[:, size:]], axis=-1)

    def update(self, runner: LookaheadRunner, hp: AdamHparams, env_params: Any,
               vmapped: bool = False) -> tuple[LookaheadRunner, dict]:
        """One update (module docstring); returns the runner and the scalar
        metrics of :data:`plume_jax.train.algorithms.ppo.METRIC_NAMES` (``loss`` and
        ``vf_loss`` the squared error, ``value_mean`` the mean target; the
        PPO-only ones NaN)."""
        s = self.static
        key = typed_key(runner.key)
        key, k_roll, k_sym, k_train = jax.random.split(key, 4)
        params = runner.params
        model = params["params"][MODEL_KEY]
        move_ids = jnp.asarray(self.move_ids)

        def step(carry, k):
            env_state, obs, ep_ret, ep_len = carry
            k_explore, k_pick, k_env = jax.random.split(k, 3)
            q, valid = self.scores(params, obs, hp.gamma)
            target = jnp.min(q, axis=-1)
            greedy = jnp.argmin(q, axis=-1)
            random_move = jax.random.categorical(k_pick, jnp.where(valid, 0.0, -jnp.inf))
            explore = jax.random.uniform(k_explore, greedy.shape) < self.epsilon
            action = move_ids[jnp.where(explore, random_move, greedy)]
            obs2, env_state, reward, term, trunc, info = batched_step(
                self.env, jax.random.split(k_env, s.num_envs), env_state, action, env_params)
            term = jnp.asarray(term, bool)
            done = term | jnp.asarray(trunc, bool)
            success = term & jnp.asarray(info.get("goal_reached", term), bool)
            ep_ret = ep_ret + jnp.asarray(reward, jnp.float32)
            ep_len = ep_len + 1
            out = (obs, target, done, success, ep_ret, ep_len)
            return (env_state, obs2, jnp.where(done, 0.0, ep_ret), jnp.where(done, 0, ep_len)), out

        init = (runner.env_state, runner.obs, runner.ep_return, runner.ep_length)
        (env_state, obs, ep_ret, ep_len), (xs, ys, done, success, rets, lens) = jax.lax.scan(
            step, init, jax.random.split(k_roll, s.num_steps))
        total = s.num_steps * s.num_envs
        xs = self._symmetrised(k_sym, xs.reshape(total, -1))
        ys = ys.reshape(total)
        residual = ys - model["baseline"] * self.baseline(xs, model["baseline_scale"])

        tx = adam(hp, s, runner.update)

        def loss(net_params, x, y):
            full = {"params": {**net_params["params"], MODEL_KEY: model}}
            return jnp.mean(jnp.square(self.net_values(full, x) - y))

        def minibatch(carry, batch):
            net_params, opt_state = carry
            value, grads = jax.value_and_grad(loss)(net_params, *batch)
            updates, opt_state = tx.update(grads, opt_state, net_params)
            return (optax.apply_updates(net_params, updates), opt_state), value

        def epoch(carry, k):
            perm = jax.random.permutation(k, total)
            nmb = s.num_minibatches
            batch = (xs[perm].reshape(nmb, total // nmb, -1), residual[perm].reshape(nmb, -1))
            return jax.lax.scan(minibatch, carry, batch)

        (net_params, opt_state), losses = jax.lax.scan(
            epoch, (self.network_params(params), runner.opt_state),
            jax.random.split(k_train, s.update_epochs))
        update = runner.update + 1
        new_runner = runner.replace(
            params={"params": {**net_params["params"], MODEL_KEY: model}}, opt_state=opt_state,
            env_state=env_state, obs=obs, ep_return=ep_ret, ep_length=ep_len,
            key=jax.random.key_data(key), update=update)
        done = done.astype(jnp.float32)
        episodes = done.sum()
        denom = jnp.maximum(episodes, 1.0)
        nan = jnp.float32(jnp.nan)
        mse = jnp.mean(losses)
        metrics = {
            "update": update,
            "env_steps": update.astype(jnp.float32) * total,
            "episodes": episodes,
            "return_mean": jnp.where(episodes > 0, (done * rets).sum() / denom, nan),
            "length_mean": jnp.where(episodes > 0, (done * lens).sum() / denom, nan),
            "success_rate": jnp.where(episodes > 0, success.sum() / denom, nan),
            "loss": mse, "pg_loss": nan, "vf_loss": mse, "entropy": nan, "approx_kl": nan,
            "clip_frac": nan, "learning_rate": learning_rate_at(hp, s, runner.update),
            "value_mean": ys.mean(),
        }
        return new_runner, metrics


__all__ = ["LOOKAHEAD_SETTINGS", "LookaheadRunner", "LookaheadStatic", "LookaheadVI",
           "MODEL_KEY"]
