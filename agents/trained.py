"""Agents from policies trained by ``plume-jax train`` (``plume_jax.train``).

A trained policy is exported as a folder with ``policy.npz`` (network
parameters, observation statistics) and ``policy.json`` (network settings,
action space, observation transform, the env it was trained on). This module
runs it without flax, with the forward pass training runs
(:func:`agents.actor_critic.actor_critic`; look-ahead policies with
:mod:`agents.belief_lookahead`), in both agent forms:

- :class:`TrainedPolicy`: a functional policy (``init(key) -> carry``,
  ``act(carry, obs, key) -> (action, carry)``) that ``jit``, ``vmap`` and
  ``lax.scan`` accept — e.g. ``plume_jax.evaluate.rollout``;
- :class:`TrainedAgent`: the stateful ``Agent`` (``act(obs)``, ``reset()``)
  for a Gymnasium env such as ``plume_jax.gym.PlumeGymEnv``.

Example::

    from agents.trained import TrainedAgent
    agent = TrainedAgent.load("runs/gaussian/policy")
    obs, info = gym_env.reset(seed=0)
    agent.reset()
    while True:
        obs, reward, terminated, truncated, info = gym_env.step(agent.act(obs))
        if terminated or truncated:
            break

The carry holds the recurrent state (``gru`` and ``rnn`` networks, zeroed
at an episode's first observation as in training), the previous action
and observation (networks fed their previous action or the change of the
observation) and whether the next observation is the first of an episode. Greedy by default: argmax of the logits, or the
Gaussian mean; ``greedy=False`` samples from the policy.

:meth:`TrainedPolicy.for_env` (what ``make_agent("trained", env, path=...)``
uses) checks the policy against the env it is about to run on before any
step: the action space (kind, number of actions or shape and bounds), the
observation size, and — from the env settings recorded in ``policy.json`` —
the action names and observation labels; then it traces one decision
abstractly, so weights that do not fit the spec are refused too.
"""

from __future__ import annotations

import pathlib
import warnings
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from agents.actor_critic import actor_critic, hidden_width
from agents.base import StatefulAgent, describe
from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree

POLICY_FORMAT = "plume_jax.trained_policy/1"


@chex.dataclass(frozen=True)
class TrainedCarry(Pytree):
    """Attributes:
        hidden: f32[H], recurrent state (``H``: ``gru_size`` or ``rnn_size``;
            1 and unused for an MLP or a CNN).
        prev_action: i32[] or f32[A], the last action (normalised for Box).
        prev_obs: f32[D], the last transformed observation (for ``obs_delta``).
        start: bool[], the next observation is the first of an episode.
    """

    hidden: jax.Array
    prev_action: jax.Array
    prev_obs: jax.Array
    start: jax.Array


def lookahead_successors(image_shape: Any, likelihood: jax.Array, move_deltas: jax.Array,
                         obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """What each move can lead to, from a ``belief`` sensor observation
    (centred, full window, grid channel, optional summaries).

    Args:
        image_shape: ``(2, R, K)``: the posterior and the grid images.
        likelihood: f32[h_max, R, K], the hit classes' likelihood over the
            source's offset from the agent.
        move_deltas: i32[M, 2], each move's ``(dx, dy)``.
        obs: f32[D], the observation.

    Returns:
        ``(successors f32[M * h_max, D], baseline f32[M * h_max], mass
        f32[M, h_max], valid bool[M])``: the observation after each move and
        hit class (posterior and grid re-centred on the new cell, summaries
        recomputed), its :func:`~plume_jax.plumes.poisson_posterior.search_time_estimate`,
        the probability of each (not finding the source and reading that
        class), and whether the move stays on the grid.
    """
    from plume_jax.plumes.poisson_posterior import (belief_summaries, predict_readings,
                                                    search_time_estimate, shift_centred)

    channels, rows, cols = (int(v) for v in image_shape)
    size = rows * cols
    obs = jnp.asarray(obs, jnp.float32).reshape(-1)
    belief, grid = obs[:size].reshape(rows, cols), obs[size:2 * size].reshape(rows, cols)
    summaries = obs.shape[0] > channels * size

    def one(delta):
        mass, posteriors = predict_readings(belief, likelihood, delta)
        moved_grid = jnp.broadcast_to(shift_centred(grid, delta), posteriors.shape)
        stats = jax.vmap(belief_summaries)(posteriors)
        parts = [posteriors.reshape(-1, size), moved_grid.reshape(-1, size)]
        if summaries:
            parts.append(stats)
        valid = grid[(rows - 1) // 2 + delta[1], (cols - 1) // 2 + delta[0]] > 0.5
        return jnp.concatenate(parts, axis=-1), search_time_estimate(stats), mass, valid

    succ, baseline, mass, valid = jax.vmap(one)(jnp.asarray(move_deltas, jnp.int32))
    return succ.reshape(-1, obs.shape[0]), baseline.reshape(-1), mass, valid


def lookahead_scores(spec: dict[str, Any], params: dict, obs: jax.Array) -> jax.Array:
    """f32[M]: the expected number of steps to the source after each move,
    ``1 + Σ_h mass_h V(successor_h)``, ``+inf`` for moves off the grid, with
    ``V`` = the network's value output + ``lookahead/baseline`` × the
    successor's search-time estimate, compressed with
    ``lookahead/baseline_scale`` (``plume_jax.train.algorithms.lookahead``; policies
    exported before that setting existed lack it and use the estimate)."""
    from plume_jax.plumes.poisson_posterior import compressed_estimate

    succ, baseline, mass, valid = lookahead_successors(
        spec["network"]["image_shape"], params["lookahead/likelihood"],
        params["lookahead/move_deltas"], obs)
    carry = initial_carry(spec)
    values = jax.vmap(lambda o: forward(spec, params, carry, o)[2])(succ)
    scale = params.get("lookahead/baseline_scale", jnp.float32(0.0))  # absent: older exports
    values = values + params["lookahead/baseline"] * compressed_estimate(baseline, scale)
    q = 1.0 + jnp.sum(mass * values.reshape(mass.shape), axis=-1)
    return jnp.where(valid, q, jnp.inf)


def check_spec(spec: dict[str, Any]) -> None:
    if not isinstance(spec, dict) or spec.get("format") != POLICY_FORMAT:
        raise ValueError(f"not a {POLICY_FORMAT} policy spec: {spec!r:.200}")


def preprocess(spec: dict[str, Any], params: dict, carry: TrainedCarry, obs: jax.Array
               ) -> tuple[jax.Array, jax.Array]:
    """``(features, transformed obs)`` of one observation: flattened,
    transformed (``log``), with its change since the previous step
    (``obs_delta``; zero at an episode's start), normalised."""
    net = spec["network"]
    tobs = jnp.reshape(jnp.asarray(obs, jnp.float32), (-1,))
    if net["obs_transform"] == "log":
        tobs = jnp.log(jnp.maximum(tobs, 0.0) + net["log_eps"])
    x = tobs
    if net.get("obs_delta", False):
        x = jnp.concatenate([tobs, jnp.where(carry.start, 0.0, tobs - carry.prev_obs)])
    if spec["normalize_obs"]:
        x = jnp.clip((x - params["obs_mean"]) / jnp.sqrt(params["obs_var"] + 1e-8), -10.0, 10.0)
    return x, tobs


def forward(spec: dict[str, Any], params: dict, carry: TrainedCarry, obs: jax.Array):
    """``(hidden', (logits_or_mean, log_std | None), value, transformed obs)``
    for one observation: the network of :func:`agents.actor_critic.actor_critic`
    (the code training runs) on one row and one step. ``value`` is None for a
    policy trained with a centralised critic, which needs every agent's
    features; a value-only network (acted on by look-ahead) gives zero logits."""
    net = spec["network"]
    x, tobs = preprocess(spec, params, carry, obs)
    if net["prev_action"]:
        if spec["discrete"]:
            pa = jax.nn.one_hot(carry.prev_action, spec["action_dim"], dtype=jnp.float32)
        else:
            pa = jnp.clip(carry.prev_action, -1.0, 1.0)
        x = jnp.concatenate([x, jnp.where(carry.start, 0.0, pa)])
    value_only = "actor_out/kernel" not in params
    hidden, (out, log_std), value = actor_critic(
        net, params, carry.hidden[None], x[None, None], jnp.reshape(carry.start, (1, 1)),
        action_dim=spec["action_dim"], discrete=spec["discrete"], value_only=value_only,
        with_value=value_only or net.get("critic", "decentralised") != "centralised")
    return (hidden[0], (out[0, 0], None if log_std is None else log_std[0, 0]),
            None if value is None else value[0, 0], tobs)


def initial_carry(spec: dict[str, Any]) -> TrainedCarry:
    size = hidden_width(spec["network"])  # gru_size (gru), rnn_size (rnn), else 1
    prev = (jnp.zeros((), jnp.int32) if spec["discrete"]
            else jnp.zeros(spec["action_dim"], jnp.float32))
    return TrainedCarry(hidden=jnp.zeros(size, jnp.float32), prev_action=prev,
                        prev_obs=jnp.zeros(spec["obs_dim"], jnp.float32),
                        start=jnp.asarray(True))


def policy_step(spec: dict[str, Any], params: dict, carry: TrainedCarry, obs: jax.Array,
                key: jax.Array, greedy: bool = True) -> tuple[jax.Array, TrainedCarry]:
    """Pure ``(env action, carry')``; ``params`` may be traced (e.g. vmapped
    over the members of a sweep). A policy trained by look-ahead value
    iteration (``lookahead/*`` model arrays in ``params``) takes the move of
    least :func:`lookahead_scores`, first in move order on ties (always
    greedy)."""
    if spec.get("policy") == "belief_lookahead":  # plume_jax.train.algorithms.value_iteration's
        from agents.belief_lookahead import act, spec_conv_strides

        action = act(params, obs, spec_conv_strides(spec))
        return action, carry.replace(prev_action=action, start=jnp.asarray(False))
    if "lookahead/likelihood" in params:
        index = jnp.argmin(lookahead_scores(spec, params, obs))
        action = jnp.asarray(params["lookahead/move_ids"], jnp.int32)[index]
        return action, carry.replace(prev_action=action, start=jnp.asarray(False))
    hidden, (out, log_std), _, tobs = forward(spec, params, carry, obs)
    if spec["discrete"]:
        action = (jnp.argmax(out) if greedy
                  else jax.random.categorical(key, out)).astype(jnp.int32)
        env_action = action
    else:
        action = out if greedy else out + jnp.exp(log_std) * jax.random.normal(key, out.shape)
        low = jnp.asarray(spec["action_low"], jnp.float32)
        high = jnp.asarray(spec["action_high"], jnp.float32)
        env_action = low + 0.5 * (jnp.clip(action, -1.0, 1.0) + 1.0) * (high - low)
    return env_action, TrainedCarry(hidden=hidden, prev_action=action, prev_obs=tobs,
                                    start=jnp.asarray(False))


#: Bytes of array data a ``policy.npz`` may hold (a bound on what is
#: decompressed; the shipped policies are a few MB).
MAX_POLICY_NPZ_BYTES = 1 << 30
#: Arrays of integer indices (not weights) that an exported belief
#: look-ahead policy carries; matched on the last part of the name.
INDEX_ARRAYS = frozenset({"move_deltas", "move_ids", "symmetry_perm"})


def load_policy_files(path: str | pathlib.Path, parameter: str = "path", *,
                      max_bytes: int = MAX_POLICY_NPZ_BYTES
                      ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(spec, arrays)`` from an exported policy folder: the one reader of
    policy folders (the ``trained`` and ``zoo:`` agents, ``plume-jax
    record``, warm starts: :mod:`plume_jax.train.warm_start`).

    ``policy.json`` is read with the bounds of
    :func:`plume_jax.files.safe_io.load_json_file` (1 MiB, 64 levels) and
    must be a mapping of the trained-policy format; ``policy.npz`` with
    :func:`plume_jax.files.safe_io.load_npz_bounded` (no pickle, at most
    ``max_bytes`` unpacked, default :data:`MAX_POLICY_NPZ_BYTES`; a zip bomb
    refused). Every weight must be a finite real floating-point array
    (float16/32/64; not complex, integer or bool); the index tables of
    :data:`INDEX_ARRAYS` must be 32- or 64-bit signed integers; ``obs_var``
    (the observation variance) must be ``>= 0``.

    Args:
        path: the policy folder.
        parameter: the name errors give (``"path"``; a warm start's
            ``"run.init_from"``).
        max_bytes: the most array data ``policy.npz`` may unpack to.

    Raises:
        ValidationError: (parameter ``parameter``) the folder,
            ``policy.json`` or ``policy.npz`` is missing, unreadable, too big
            or too deep, the spec is not a trained-policy spec, or an array
            (named) has another dtype, holds NaN or infinity, or is a
            negative variance.
    """
    from plume_jax.files.safe_io import load_json_file, load_npz_bounded

    folder = pathlib.Path(path)
    allowed = "a policy folder written by `plume-jax train` (policy.json and policy.npz)"
    if not folder.is_dir():
        raise ValidationError.for_parameter(parameter, str(path), f"{allowed}; no such folder")
    if not (folder / "policy.json").exists() and (folder / "policy" / "policy.json").is_file():
        raise ValidationError.for_parameter(
            parameter, str(path), f"{allowed}; this is a run folder (or a sweep member's or tune "
            f"trial's), which keeps its exported policy in policy/: path={folder / 'policy'}")
    spec = load_json_file(folder / "policy.json", parameter)
    try:
        check_spec(spec)
    except ValueError as error:
        raise ValidationError.for_parameter(parameter, str(path), f"{allowed}; {error}") from None
    arrays = load_npz_bounded(folder / "policy.npz", parameter, max_bytes=max_bytes)
    for name, array in arrays.items():
        where = f"{folder / 'policy.npz'}: array {name[:100]!r}"
        if name.rsplit("/", 1)[-1] in INDEX_ARRAYS:
            if array.dtype.kind != "i" or array.dtype.itemsize < 4:
                raise ValidationError.for_parameter(
                    parameter, str(path), f"{allowed}; {where} has dtype {array.dtype}, an index "
                    "table must be int32 or int64")
        elif array.dtype.kind != "f" or array.dtype.itemsize > 8:
            raise ValidationError.for_parameter(
                parameter, str(path), f"{allowed}; {where} has dtype {array.dtype}, weights must "
                "be real floating point (float16, float32 or float64)")
        elif not np.isfinite(array).all():
            raise ValidationError.for_parameter(
                parameter, str(path), f"{allowed}; {where} holds "
                f"{int(np.size(array) - np.isfinite(array).sum())} NaN or infinite values")
        elif name == "obs_var" and (array < 0).any():
            raise ValidationError.for_parameter(
                parameter, str(path), f"{allowed}; {where} (a variance) holds "
                f"{int((array < 0).sum())} negative values")
    return spec, arrays


def _recorded_interface(spec: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    """``(observation labels, action names)`` of the env the policy was trained
    on, rebuilt from the sensor and action settings recorded in
    ``policy.json``; ``None`` when the spec records no env settings, or (with
    a warning) when this version of plume_jax cannot rebuild them."""
    from plume_jax.actions import ACTIONS
    from plume_jax.sensors import SENSORS
    from plume_jax.core.types import Grid

    env = spec.get("env") or {}
    if not all(key in env for key in ("sensor", "actions", "grid_size")):
        return None
    try:
        grid = Grid(width=int(env["grid_size"][0]), height=int(env["grid_size"][1]))
        built = {}
        for slot, table in (("sensor", SENSORS), ("actions", ACTIONS)):
            values = dict(env[slot])
            built[slot] = table[values.pop("type")].build(values, grid, slot)[0]
        return list(built["sensor"].observation_labels()), list(built["actions"].action_names)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        warnings.warn(f"the training env's sensor/action settings in policy.json could not be "
                      f"rebuilt ({type(error).__name__}: {error}); only the sizes of the "
                      "observation and the action space were checked", stacklevel=3)
        return None


def check_env(spec: dict[str, Any], env: Any) -> None:
    """Refuse an env (or its description) the policy of ``spec`` cannot drive.

    Checked: the action space (discrete vs box; the number of actions, or the
    shape and bounds), one agent's observation size, and — when the spec
    records the training env's settings — the action names (same ids) and the
    observation labels (same entries in the same order).

    Raises:
        ValidationError: naming what differs, the policy's value and the env's.
    """
    info = describe(env)
    space = info["action_space"]
    trained_on = (spec.get("env") or {}).get("id", "its training env")
    if spec["discrete"] != (space["type"] == "discrete"):
        kind = "discrete" if spec["discrete"] else "continuous (Box)"
        raise ValidationError.for_parameter(
            "actions", info.get("actions_type"),
            f"an env with {kind} actions, as the trained policy (trained on {trained_on}) emits")
    if spec["discrete"] and space["n"] != spec["action_dim"]:
        raise ValidationError.for_parameter(
            "actions", f"{space['n']} actions {info['action_names']}",
            f"{spec['action_dim']} discrete actions, as the trained policy (trained on "
            f"{trained_on}) chooses among")
    if not spec["discrete"]:
        same = list(space["shape"]) == [spec["action_dim"]] and np.allclose(
            space["low"], spec["action_low"]) and np.allclose(space["high"], spec["action_high"])
        if not same:
            raise ValidationError.for_parameter(
                "actions", f"Box shape {space['shape']}, low {space['low']}, high {space['high']}",
                f"a Box of shape [{spec['action_dim']}] with low {spec['action_low']} and high "
                f"{spec['action_high']}, as the trained policy (trained on {trained_on}) emits")
    shape = list(info["observation_shape"])
    per_agent = shape[1:] if info.get("num_agents", 1) > 1 else shape
    if int(np.prod(per_agent, dtype=np.int64)) != spec["obs_dim"]:
        raise ValidationError.for_parameter(
            "sensor", f"{info.get('sensor_type')} (observation shape {per_agent})",
            f"an observation of {spec['obs_dim']} values, as the trained policy (trained on "
            f"{trained_on}) reads")
    recorded = _recorded_interface(spec)
    if recorded is None:
        return
    labels, names = recorded
    if names != list(info["action_names"]):
        raise ValidationError.for_parameter(
            "actions", info["action_names"],
            f"the actions the trained policy was trained with, in the same order: {names}")
    if labels != list(info["observation_labels"]):
        raise ValidationError.for_parameter(
            "sensor", info["observation_labels"],
            f"the observation the trained policy was trained on, in the same order: {labels}")


def check_obs_shape(spec: dict[str, Any], shape: tuple[int, ...]) -> None:
    """``ValidationError`` naming the shape received and the one expected
    unless an observation of ``shape`` holds ``spec["obs_dim"]`` values (the
    policy reads it flattened). Shapes are static, so this holds under
    ``jit`` and ``vmap`` too (it checks one observation's shape)."""
    dim = int(spec["obs_dim"])
    shape = tuple(int(n) for n in shape)
    if int(np.prod(shape, dtype=np.int64)) != dim:
        raise ValidationError.for_parameter(
            "obs shape", shape,
            f"({dim},): an observation of {dim} value{'s' if dim != 1 else ''}, as the trained "
            f"policy was trained on (got {int(np.prod(shape, dtype=np.int64))}; one "
            "observation, not a batch: use jax.vmap for several)")


class TrainedPolicy:
    """Functional policy of an exported network (see the module docstring).

    Hashable by identity, so it can be a static argument of ``jit`` (as in
    ``plume_jax.evaluate.rollout``); the parameters are baked into the
    compiled program as constants.
    """

    def __init__(self, spec: dict[str, Any], arrays: dict[str, Any], greedy: bool = True):
        check_spec(spec)
        self.spec = spec
        self.params = {k: jnp.asarray(v) for k, v in arrays.items()}
        self.greedy = bool(greedy)

    @classmethod
    def load(cls, path: str | pathlib.Path, greedy: bool = True) -> "TrainedPolicy":
        """Load ``policy.json`` / ``policy.npz`` from the folder ``path``."""
        spec, arrays = load_policy_files(path)
        return cls(spec, arrays, greedy=greedy)

    @classmethod
    def for_env(cls, env: Any, path: str | pathlib.Path, greedy: bool = True) -> "TrainedPolicy":
        """Load the policy in ``path`` and check it against ``env`` (see
        :func:`check_env`), then trace one decision on an observation of the
        env's shape (abstractly: nothing runs, nothing compiles).

        Raises:
            ValidationError: an unreadable folder, an env the policy was not
                trained for, or weights that do not fit the spec.
        """
        policy = cls.load(path, greedy=greedy)
        check_env(policy.spec, env)
        info = describe(env)
        shape = info["observation_shape"][1:] if info.get("num_agents", 1) > 1 \
            else info["observation_shape"]
        obs = jax.ShapeDtypeStruct(tuple(shape), jnp.float32)
        key = jax.eval_shape(lambda: jax.random.key(0))
        try:
            action, _ = jax.eval_shape(policy.act, policy.init(key), obs, key)
        except (TypeError, ValueError, KeyError) as error:
            raise ValidationError.for_parameter(
                "path", str(path), f"weights (policy.npz) that fit the network in policy.json "
                f"({type(error).__name__}: {str(error)[:300]})") from None
        expected = () if policy.discrete else (policy.spec["action_dim"],)
        if tuple(action.shape) != expected:
            raise ValidationError.for_parameter(
                "path", str(path), f"a network whose action has shape {expected}, not "
                f"{tuple(action.shape)}")
        return policy

    @property
    def discrete(self) -> bool:
        return bool(self.spec["discrete"])

    def init(self, key: jax.Array) -> TrainedCarry:
        return initial_carry(self.spec)

    def act(self, carry: TrainedCarry, obs: jax.Array, key: jax.Array):
        """``(action, carry')`` for one observation.

        Raises:
            ValidationError: ``obs`` does not hold ``spec["obs_dim"]`` values
                (:func:`check_obs_shape`; a static check, also under jit).
        """
        check_obs_shape(self.spec, jnp.shape(obs))
        return policy_step(self.spec, self.params, carry, obs, key, self.greedy)

    def value(self, carry: TrainedCarry, obs: jax.Array) -> jax.Array:
        """The critic's value estimate of ``obs`` (for inspection).

        Raises:
            ValidationError: the policy was trained with a centralised critic
                (its value needs every agent's features, not one observation).
        """
        if self.spec["network"].get("critic", "decentralised") == "centralised":
            from plume_jax.core.errors import ValidationError

            raise ValidationError.for_parameter(
                "network.critic", "centralised",
                "a decentralised critic: a centralised critic's value reads every agent's "
                "features and is not defined for one agent's observation")
        check_obs_shape(self.spec, jnp.shape(obs))
        return forward(self.spec, self.params, carry, obs)[2]


class TrainedAgent(StatefulAgent):
    """A :class:`TrainedPolicy` as a stateful ``Agent``: ``act(obs)`` returns
    an ``int`` (discrete actions) or a float32 array (``Box`` actions)."""

    policy: TrainedPolicy

    def __init__(self, policy: TrainedPolicy, seed: int = 0):
        super().__init__(policy, seed=seed)

    @classmethod
    def load(cls, path: str | pathlib.Path, greedy: bool = True, seed: int = 0) -> "TrainedAgent":
        return cls(TrainedPolicy.load(path, greedy=greedy), seed=seed)

    def act(self, obs: np.ndarray) -> Any:
        """The action for ``obs``.

        Raises:
            ValidationError: ``obs`` is not of the shape the policy reads
                (checked here, before the compiled step runs).
        """
        obs = np.asarray(obs, np.float32)
        check_obs_shape(self.policy.spec, obs.shape)
        action, self._carry = self._act(self._carry, obs, self._next_key())
        if self.policy.discrete:
            return int(action)
        return np.asarray(action, np.float32)
