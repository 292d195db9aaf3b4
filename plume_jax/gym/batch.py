"""``BatchCore``: N functional envs stepped by one compiled call.

The engine behind :class:`~plume_jax.gym.PlumeVectorEnv` and
:class:`~plume_jax.gym.sb3.PlumeSB3VecEnv`. It holds the batched state and
the per-env key streams on the device and returns NumPy arrays.

Per env, the key stream is exactly :class:`~plume_jax.gym.PlumeGymEnv`'s:
a seeded reset starts at ``seed_key(seed)``, and every step and every reset
takes ``key, sub = jax.random.split(key)``. Episodes that end are reset
through the functional core's cheap ``auto_reset``, either in the same
compiled call (same-step autoreset) or in the next one, in place of a step
(next-step autoreset, Gymnasium's default); either way with the next subkey
of their stream, so both modes give each env the same episodes. For a
static plume (``PlumeNav-Gaussian-v0``) env ``i`` of a batch seeded with
``s`` therefore follows the same trajectory as a ``PlumeGymEnv`` reset with
seed ``s + i`` and re-``reset()`` without a seed after each episode, given
the same actions (what Gymnasium's ``SyncVectorEnv`` over ``PlumeGymEnv`` instances
does). A dynamic plume keeps running across auto-resets (``plume.reinit``)
instead of being re-initialised as ``reset`` does.

Only the envs that ended are reset (:func:`plume_jax.core.autoreset.reset_where`:
at most ``max_resets`` gathered, reset and scattered back, the whole batch
when more end at once); the results are those of resetting every env
speculatively (``speculative=True``, the reference the tests compare with),
keys, states, counts and flags exactly, floats up to rounding.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium.vector import AutoresetMode

from plume_jax.core.autoreset import (default_max_resets, reset_if, reset_where, step_then_reset,
                                 step_then_reset_batch)
from plume_jax.core.errors import StateError, ValidationError
from plume_jax.gym import _common as common
from plume_jax.render.frames import check_frame_size

#: The autoreset modes :class:`BatchCore` implements.
AUTORESET_MODES = (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP)


def _select_rows(mask: jax.Array, new: Any, old: Any) -> Any:
    """Per-env choice between two batched pytrees (``mask`` bool[N])."""
    return jax.tree.map(
        lambda a, b: jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b), new, old)


def _split_each(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``key, sub = jax.random.split(key)`` for every key of a batch."""
    both = jax.vmap(jax.random.split)(keys)
    return both[:, 0], both[:, 1]


class BatchStepOutput(NamedTuple):
    """What one compiled batch step returns (leading axis N on every leaf).

    ``keys`` and ``state`` continue each env's stream and episode; ``obs``
    describes each env after the call (a fresh episode where one was reset);
    ``final_obs`` the step itself; ``reward``, ``terminated``,
    ``truncated``, ``done`` (either) and ``action_valid`` the step;
    ``final`` the :class:`~plume_jax.gym._common.EpisodeView` of the step,
    ``now`` that of the env after the call; ``was_reset`` which envs started
    a new episode in this call. The leaves are ``jax.Array``s inside the
    program and NumPy arrays once the call has returned them to the host.
    """

    keys: jax.Array
    state: Any
    obs: Any
    final_obs: Any
    reward: Any
    terminated: Any
    truncated: Any
    done: Any
    action_valid: Any
    final: common.EpisodeView
    now: common.EpisodeView
    was_reset: Any


def batch_reset_parts(env: Any, keys: jax.Array, params: Any, episode_count: jax.Array
                      ) -> common.ResetOutput:
    """Vmapped :func:`~plume_jax.gym._common.reset_parts`."""
    return jax.vmap(lambda k, e: common.reset_parts(env, k, params, e))(keys, episode_count)


def same_step_parts(env: Any, keys: jax.Array, state: Any, actions: Any, params: Any, *,
                    max_resets: int, speculative: bool = False) -> BatchStepOutput:
    """One step of every env; those that end are reset in the same call,
    with the subkey that follows the step's in their stream.

    ``speculative``: compute the reset for every env and select (the
    reference path) instead of only for those that ended.
    """
    keys, sub = _split_each(keys)
    keys_after_reset, sub_reset = _split_each(keys)
    if speculative:
        out = jax.vmap(functools.partial(step_then_reset, env), in_axes=(0, 0, 0, 0, None))(
            sub, sub_reset, state, actions, params)
    else:
        out = step_then_reset_batch(env, sub, sub_reset, state, actions, params, max_resets)
    done = out.terminated | out.truncated
    return BatchStepOutput(
        keys=jax.vmap(lambda d, a, b: jnp.where(d, a, b))(done, keys_after_reset, keys),
        state=out.state, obs=out.obs, final_obs=out.info["final_observation"],
        reward=out.reward, terminated=out.terminated, truncated=out.truncated, done=done,
        action_valid=out.info["action_valid"], final=common.episode_view(out.info),
        now=jax.vmap(common.state_view, in_axes=(None, 0, None))(env, out.state, params),
        was_reset=done)


def next_step_parts(env: Any, keys: jax.Array, state: Any, actions: Any, pending: jax.Array,
                    params: Any, *, max_resets: int, speculative: bool = False
                    ) -> BatchStepOutput:
    """Next-step autoreset: the envs whose episode ended in the previous call
    (``pending``, bool[N]) start a new one, ignoring their action (reward 0,
    flags False); the others step. Each takes one subkey of its stream.

    ``speculative``: as for :func:`same_step_parts`.
    """
    keys, sub = _split_each(keys)
    obs, stepped, reward, terminated, truncated, info = jax.vmap(
        env.step_env, in_axes=(0, 0, 0, None))(sub, state, actions, params)
    ended = _select_rows(pending, state, stepped)  # a pending env resets its ended episode
    if speculative:
        obs_next, state_next = jax.vmap(functools.partial(reset_if, env),
                                        in_axes=(0, 0, 0, 0, None))(pending, sub, obs, ended,
                                                                    params)
    else:
        obs_next, state_next = reset_where(env, pending, sub, obs, ended, params, max_resets)
    terminated = terminated & ~pending
    truncated = truncated & ~pending
    return BatchStepOutput(
        keys=keys, state=state_next, obs=obs_next, final_obs=obs,
        reward=jnp.where(pending, 0.0, reward).astype(jnp.float32), terminated=terminated,
        truncated=truncated, done=terminated | truncated,
        action_valid=info["action_valid"] | pending, final=common.episode_view(info),
        now=jax.vmap(common.state_view, in_axes=(None, 0, None))(env, state_next, params),
        was_reset=pending)


#: The compiled batch calls (:class:`~plume_jax.gym._common.HostCall`: keys and
#: states stay on the device, the rest comes back as NumPy in two buffers).
compiled_batch_reset = common.HostCall(batch_reset_parts, ("key", "state"))
compiled_same_step = common.HostCall(same_step_parts, ("keys", "state"))
compiled_next_step = common.HostCall(next_step_parts, ("keys", "state"))


def row(tree: Any, i: int | np.integer) -> Any:
    """Env ``i``'s slice of a batched (host) pytree."""
    return jax.tree.map(lambda x: x[i], tree)


def view_arrays(view: common.EpisodeView, integer_xy: bool) -> dict[str, np.ndarray]:
    """A host :class:`~plume_jax.gym._common.EpisodeView` as the vector info's
    arrays: int64 counts, float64 rewards and distances, bool flags,
    ``agent_xy`` int64 (integer cells) or float64."""
    return {
        "step_count": np.asarray(view.step_count, np.int64),
        "episode_count": np.asarray(view.episode_count, np.int64),
        "total_reward": np.asarray(view.total_reward, np.float64),
        "goal_reached": np.asarray(view.goal_reached, bool),
        "agent_xy": _xy(view.agent_xy, integer_xy),
        "distance_to_goal": np.asarray(view.distance_to_goal, np.float64),
    }


def _xy(xy: np.ndarray | jax.Array, integer_xy: bool) -> np.ndarray:
    if integer_xy:
        return np.rint(xy).astype(np.int64)
    return np.asarray(xy, np.float64)


class StepResult(NamedTuple):
    """NumPy results of one batched step (see :class:`BatchStepOutput`):
    ``info`` describes each env after the call, ``final_info`` the step."""

    obs: np.ndarray
    final_obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, np.ndarray]
    final_info: dict[str, np.ndarray]


class BatchCore:
    """Batched state, key streams and trails of ``num_envs`` envs.

    Args:
        env, params: the functional env and its (shared) params.
        num_envs: batch size (>= 1).
        autoreset_mode: ``AutoresetMode.SAME_STEP`` or ``NEXT_STEP``.
        render_scale: pixels per cell of rendered frames, or None when the
            batch is never rendered; with a scale, each env's recent
            positions are kept (``trail_length`` of them) and the ``N``
            frames must fit :data:`~plume_jax.render.frames.MAX_FRAME_PIXELS`.
    """

    def __init__(self, env: Any, params: Any, num_envs: int, *,
                 autoreset_mode: AutoresetMode = AutoresetMode.SAME_STEP,
                 render_scale: int | None = None, trail_length: int = 50) -> None:
        if isinstance(num_envs, (bool, np.bool_)) or not isinstance(num_envs, (int, np.integer)) \
                or num_envs < 1:
            raise ValidationError.for_parameter("num_envs", num_envs, "an integer >= 1")
        if autoreset_mode not in AUTORESET_MODES:
            raise ValidationError.for_parameter(
                "autoreset_mode", autoreset_mode,
                f"one of {[m.value for m in AUTORESET_MODES]} (AutoresetMode.SAME_STEP or "
                "AutoresetMode.NEXT_STEP)")
        self.env = env
        self.params = env.default_params if params is None else params
        self.num_envs = int(num_envs)
        self.autoreset_mode = autoreset_mode
        self.max_resets = default_max_resets(self.num_envs)
        self.single_action_space = common.to_gymnasium_space(env.actions.action_space)
        self.single_observation_space = common.to_gymnasium_space(
            env.sensor.observation_space(self.params.sensor))
        shape, allowed = common.action_template(self.single_action_space)
        self._action_shape = (self.num_envs, *shape)
        self._action_allowed = f"an array of shape {self._action_shape}, each entry {allowed}"
        self.integer_xy = common.integer_positions(env)
        self.keys: jax.Array | None = None
        self.state: Any = None
        self._pending = np.zeros(self.num_envs, bool)
        self.closed = False
        self.render_scale = render_scale
        self.track_trail = render_scale is not None
        if render_scale is not None:  # track_trail
            check_frame_size(env.grid, render_scale, frames=self.num_envs, name="render_scale")
        self.trail_length = max(common.check_trail_length(trail_length), 1)
        self.trail = np.zeros((self.num_envs, self.trail_length, 2), np.float32)
        self.trail_valid = np.zeros((self.num_envs, self.trail_length), bool)
        self._trail_next = np.zeros(self.num_envs, np.int64)

    # ------------------------------------------------------------------ reset
    def normalise_seeds(self, seed: Any) -> list[int | None]:
        """Per-env seeds from ``None``, an int ``s`` (env ``i`` gets ``s + i``)
        or a sequence of ``num_envs`` ints/None."""
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
            base = common.check_seed(seed)
            return [common.check_seed(base + i) for i in range(self.num_envs)]
        if isinstance(seed, (list, tuple, np.ndarray)) and len(seed) == self.num_envs:
            return [None if s is None else common.check_seed(s, f"seed[{i}]")
                    for i, s in enumerate(seed)]
        raise ValidationError.for_parameter(
            "seed", seed, f"None, an integer, or a sequence of {self.num_envs} integers/None")

    def reset(self, seeds: Sequence[int | None]) -> tuple[np.ndarray, dict[str, np.ndarray],
                                                           list[int | None]]:
        """Reset every env; env ``i`` starts a stream at ``seeds[i]`` or
        continues its own when it is None (a first reset draws seeds).

        Returns ``(obs, info arrays, reported seeds)``.
        """
        if self.closed:
            raise StateError("reset() called on a closed vector environment; create a new one")
        seeds = list(seeds)
        if self.keys is None and any(s is None for s in seeds):
            base = common.fresh_seed()
            seeds = [base + i if s is None else s for i, s in enumerate(seeds)]
        given_seeds = {i: s for i, s in enumerate(seeds) if s is not None}
        given = np.asarray([s is not None for s in seeds])
        if given.all():
            keys = common.keys_from_seeds(list(given_seeds.values()))
            episode = np.ones(self.num_envs, np.int32)
        else:
            assert self.keys is not None  # no keys yet: every seed was filled in above
            keys = self.keys
            episode = np.asarray(jax.device_get(self.state.episode_count), np.int32) + 1
            if given.any():
                idx = np.flatnonzero(given)
                keys = keys.at[idx].set(common.keys_from_seeds([given_seeds[int(i)] for i in idx]))
                episode[idx] = 1
        out = compiled_batch_reset(self.env, keys, self.params, jnp.asarray(episode))
        self.keys, self.state = out.key, out.state
        self._pending[:] = False
        if self.track_trail:
            self.trail_valid[:] = False
            self._trail_next[:] = 0
            self._push_trail(out.start.agent_xy)
        n = self.num_envs
        info = {
            "step_count": np.zeros(n, np.int64),
            "episode_count": episode.astype(np.int64),
            "total_reward": np.zeros(n, np.float64),
            "goal_reached": np.zeros(n, bool),
            "agent_xy": _xy(out.start.agent_xy, self.integer_xy),
            "seed": np.asarray([s if g else None for s, g in zip(seeds, given)], dtype=object),
            "goal_location": np.asarray(out.start.goal_location, np.float64),
            "source_location": np.asarray(out.start.source_location, np.float64),
        }
        return out.obs, info, [s if g else None for s, g in zip(seeds, given)]

    # ------------------------------------------------------------------- step
    def compiled_step(self, actions: Any, *, speculative: bool = False) -> BatchStepOutput:
        """The compiled call of one step from the current keys and state (no
        checks, nothing committed); ``speculative`` selects the reference path."""
        statics = {"max_resets": self.max_resets, "speculative": speculative}
        if self.autoreset_mode is AutoresetMode.NEXT_STEP:
            return compiled_next_step(self.env, self.keys, self.state, actions, self._pending,
                                      self.params, **statics)
        return compiled_same_step(self.env, self.keys, self.state, actions, self.params,
                                  **statics)

    def step(self, actions: Any) -> StepResult:
        """Step every env; raises ``ValidationError`` (changing nothing) if
        any action is invalid."""
        if self.closed:
            raise StateError("step() called on a closed vector environment; create a new one")
        if self.state is None:
            raise StateError("step() called before reset(); call reset() first")
        arr = common.as_action_array(actions, self._action_shape, self._action_allowed, "actions")
        out = self.compiled_step(arr)
        if not out.action_valid.all():
            bad = np.flatnonzero(~out.action_valid)
            raise ValidationError.for_parameter(
                f"actions[{int(bad[0])}]", np.asarray(actions)[bad[0]],
                f"{common.action_template(self.single_action_space)[1]} "
                f"(invalid at indices {bad.tolist()[:10]})")
        self.keys, self.state = out.keys, out.state
        self._pending = out.done
        info = view_arrays(out.now, self.integer_xy)
        if self.track_trail:
            if out.was_reset.any():
                self.trail_valid[out.was_reset] = False
                self._trail_next[out.was_reset] = 0
            self._push_trail(out.now.agent_xy)
        return StepResult(obs=out.obs, final_obs=out.final_obs,
                          reward=out.reward, terminated=out.terminated,
                          truncated=out.truncated, info=info,
                          final_info=view_arrays(out.final, self.integer_xy))

    # -------------------------------------------------------------- rendering
    def _push_trail(self, xy: np.ndarray | jax.Array) -> None:
        cols = self._trail_next
        rows = np.arange(self.num_envs)
        self.trail[rows, cols] = np.asarray(xy, np.float32)
        self.trail_valid[rows, cols] = True
        self._trail_next = (cols + 1) % self.trail_length

    def render(self) -> np.ndarray:
        """uint8[N, H * render_scale, W * render_scale, 3], every env's current frame."""
        if self.closed:
            raise StateError("render() called on a closed vector environment")
        if self.state is None:
            raise StateError("render() called before reset(); there is nothing to draw yet")
        frames = common.compiled_render_batch(self.env, self.render_scale, self.state.plume,
                                              self.state.agent, self.params, self.trail,
                                              self.trail_valid)
        return np.array(frames)

    def close(self) -> None:
        self.closed = True
        self.state = None
        self.keys = None
