"""``BatchCore``: N functional envs stepped by one compiled call.

The engine behind :class:`~plume_jax.gym.PlumeVectorEnv` and
:class:`~plume_jax.gym.sb3.PlumeSB3VecEnv`. It holds the batched state and
the per-env key streams on the device and returns NumPy arrays.

Per env, the key stream is exactly :class:`~plume_jax.gym.PlumeGymEnv`'s:
a seeded reset starts at ``jax.random.key(seed)``, and every step and every
reset takes ``key, sub = jax.random.split(key)``. An episode that ends is
reset *in the same compiled call* (same-step auto-reset) with the next
subkey, through the functional core's cheap ``auto_reset``. For a static
plume (``PlumeNav-Gaussian-v0``) env ``i`` of a batch seeded with ``s``
therefore follows the same trajectory as a ``PlumeGymEnv`` reset with seed
``s + i`` and re-``reset()`` without a seed after each episode, given the
same actions. A dynamic plume keeps running across auto-resets
(``plume.reinit``) instead of being re-initialised as ``reset`` does.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.errors import StateError, ValidationError
from plume_jax.gym import _common as C

def _select(mask: jax.Array, new: Any, old: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(mask, a, b), new, old)


@functools.partial(jax.jit, static_argnames=("env",))
def compiled_batch_reset(env: Any, keys: jax.Array, params: Any, episode_count: jax.Array):
    """Vmapped :func:`~plume_jax.gym._common.compiled_reset`."""
    return jax.vmap(lambda k, e: C.compiled_reset(env, k, params, e))(keys, episode_count)


@functools.partial(jax.jit, static_argnames=("env",))
def compiled_batch_step(env: Any, keys: jax.Array, state: Any, actions: Any, params: Any):
    """One step of every env, with same-step auto-reset of those that end.

    Returns ``(next_keys, next_state, obs, final_obs, floats, ints)``:
    ``obs`` describes each env after the step (a fresh episode where one
    ended), ``final_obs`` the step itself. ``floats`` f32[N, 9] packs the
    step's reward, total_reward, distance_to_goal, agent x, agent y, then the
    env's current total_reward, distance_to_goal, agent x, agent y; ``ints``
    i32[N, 9] packs the step's terminated, truncated, action_valid,
    goal_reached, step_count, episode_count, then the current goal_reached,
    step_count, episode_count (two buffers for the host to fetch).
    """

    def one(key, state, action):
        key, sub = jax.random.split(key)
        obs, stepped, reward, terminated, truncated, info = env.step_env(sub, state, action, params)
        done = jnp.logical_or(terminated, truncated)
        key_after_reset, sub_reset = jax.random.split(key)
        obs_reset, fresh = env.auto_reset(sub_reset, stepped, params)
        next_key = jnp.where(done, key_after_reset, key)
        next_state = _select(done, fresh, stepped)
        next_obs = _select(done, obs_reset, obs)
        goal = env.goal_location(next_state.plume, params)
        position = next_state.agent.position.astype(jnp.float32)
        step_f, step_i = C.pack_step(reward, terminated, truncated, info)
        floats = jnp.concatenate([step_f, jnp.stack([
            next_state.total_reward.astype(jnp.float32),
            jnp.linalg.norm(position - goal).astype(jnp.float32)]), position])
        ints = jnp.concatenate([step_i, jnp.stack([
            jnp.asarray(info["episode_count"], jnp.int32),
            next_state.goal_reached.astype(jnp.int32),
            next_state.step_count.astype(jnp.int32),
            next_state.episode_count.astype(jnp.int32)])])
        return next_key, next_state, next_obs, obs, floats, ints

    return jax.vmap(one)(keys, state, actions)


def keys_from_seeds(seeds: Sequence[int]) -> jax.Array:
    """``jax.random.key(s)`` for each seed, stacked (one call when all < 2**32)."""
    seeds = [int(s) for s in seeds]
    if all(0 <= s < 2**32 for s in seeds):
        return jax.vmap(jax.random.key)(np.asarray(seeds, np.uint32))
    return jnp.stack([jax.random.key(s) for s in seeds])


def row(tree: Any, i: int) -> Any:
    """Env ``i``'s slice of a batched (host) pytree."""
    return jax.tree.map(lambda x: x[i], tree)


class StepResult(NamedTuple):
    """NumPy results of one batched step (see :func:`compiled_batch_step`)."""

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
        track_trail: keep each env's recent positions for rendering
            (``trail_length`` of them).
    """

    def __init__(self, env: Any, params: Any, num_envs: int, *, track_trail: bool = False,
                 trail_length: int = 50) -> None:
        if isinstance(num_envs, (bool, np.bool_)) or not isinstance(num_envs, (int, np.integer)) \
                or num_envs < 1:
            raise ValidationError.for_parameter("num_envs", num_envs, "an integer >= 1")
        self.env = env
        self.params = env.default_params if params is None else params
        self.num_envs = int(num_envs)
        self.single_action_space = C.to_gymnasium_space(env.actions.action_space)
        self.single_observation_space = C.to_gymnasium_space(
            env.sensor.observation_space(self.params.sensor))
        shape, allowed = C.action_template(self.single_action_space)
        self._action_shape = (self.num_envs, *shape)
        self._action_allowed = f"an array of shape {self._action_shape}, each entry {allowed}"
        self.integer_xy = C.integer_positions(env)
        self.keys: jax.Array | None = None
        self.state: Any = None
        self.closed = False
        self.track_trail = bool(track_trail)
        self.trail_length = max(C.check_trail_length(trail_length), 1)
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
            base = C.check_seed(seed)
            return [C.check_seed(base + i) for i in range(self.num_envs)]
        if isinstance(seed, (list, tuple, np.ndarray)) and len(seed) == self.num_envs:
            return [None if s is None else C.check_seed(s, f"seed[{i}]") for i, s in enumerate(seed)]
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
            base = C.fresh_seed()
            seeds = [base + i if s is None else s for i, s in enumerate(seeds)]
        given = np.asarray([s is not None for s in seeds])
        if given.all():
            keys = keys_from_seeds(seeds)
            episode = np.ones(self.num_envs, np.int32)
        else:
            keys = self.keys
            episode = np.asarray(jax.device_get(self.state.episode_count), np.int32) + 1
            if given.any():
                idx = np.flatnonzero(given)
                keys = keys.at[idx].set(keys_from_seeds([seeds[i] for i in idx]))
                episode[idx] = 1
        keys, obs, state, summary = compiled_batch_reset(self.env, keys, self.params,
                                                         jnp.asarray(episode))
        obs, summary = jax.device_get((obs, summary))
        agent_xy, goal, source = summary[:, 0:2], summary[:, 2:4], summary[:, 4:6]
        self.keys, self.state = keys, state
        if self.track_trail:
            self.trail_valid[:] = False
            self._trail_next[:] = 0
            self._push_trail(agent_xy, np.ones(self.num_envs, bool))
        n = self.num_envs
        info = {
            "step_count": np.zeros(n, np.int64),
            "episode_count": episode.astype(np.int64),
            "total_reward": np.zeros(n, np.float64),
            "goal_reached": np.zeros(n, bool),
            "agent_xy": self._xy(agent_xy),
            "seed": np.asarray([s if g else None for s, g in zip(seeds, given)], dtype=object),
            "goal_location": np.asarray(goal, np.float64),
            "source_location": np.asarray(source, np.float64),
        }
        return C.to_numpy(obs), info, [s if g else None for s, g in zip(seeds, given)]

    # ------------------------------------------------------------------- step
    def step(self, actions: Any) -> StepResult:
        """Step every env; raises ``ValidationError`` (changing nothing) if
        any action is invalid."""
        if self.closed:
            raise StateError("step() called on a closed vector environment; create a new one")
        if self.state is None:
            raise StateError("step() called before reset(); call reset() first")
        arr = C.as_action_array(actions, self._action_shape, self._action_allowed, "actions")
        keys, state, obs, final_obs, floats, ints = compiled_batch_step(
            self.env, self.keys, self.state, arr, self.params)
        obs, final_obs, floats, ints = jax.device_get((obs, final_obs, floats, ints))
        valid = ints[:, 2].astype(bool)
        if not valid.all():
            bad = np.flatnonzero(~valid)
            raise ValidationError.for_parameter(
                f"actions[{int(bad[0])}]", np.asarray(actions)[bad[0]],
                f"{C.action_template(self.single_action_space)[1]} "
                f"(invalid at indices {bad.tolist()[:10]})")
        self.keys, self.state = keys, state
        terminated, truncated = ints[:, 0].astype(bool), ints[:, 1].astype(bool)
        done = terminated | truncated
        now_xy = floats[:, 7:9]
        if self.track_trail:
            if done.any():
                self.trail_valid[done] = False
                self._trail_next[done] = 0
            self._push_trail(now_xy, np.ones(self.num_envs, bool))
        final_info = {
            "step_count": ints[:, 4].astype(np.int64),
            "episode_count": ints[:, 5].astype(np.int64),
            "total_reward": floats[:, 1].astype(np.float64),
            "goal_reached": ints[:, 3].astype(bool),
            "agent_xy": self._xy(floats[:, 3:5]),
            "distance_to_goal": floats[:, 2].astype(np.float64),
        }
        info = {
            "step_count": ints[:, 7].astype(np.int64),
            "episode_count": ints[:, 8].astype(np.int64),
            "total_reward": floats[:, 5].astype(np.float64),
            "goal_reached": ints[:, 6].astype(bool),
            "agent_xy": self._xy(now_xy),
            "distance_to_goal": floats[:, 6].astype(np.float64),
        }
        return StepResult(obs=C.to_numpy(obs), final_obs=C.to_numpy(final_obs),
                          reward=floats[:, 0].copy(), terminated=terminated, truncated=truncated,
                          info=info, final_info=final_info)

    def _xy(self, xy: np.ndarray) -> np.ndarray:
        if self.integer_xy:
            return np.rint(xy).astype(np.int64)
        return np.asarray(xy, np.float64)

    # -------------------------------------------------------------- rendering
    def _push_trail(self, xy: np.ndarray, mask: np.ndarray) -> None:
        rows = np.flatnonzero(mask)
        cols = self._trail_next[rows]
        self.trail[rows, cols] = np.asarray(xy, np.float32)[rows]
        self.trail_valid[rows, cols] = True
        self._trail_next[rows] = (cols + 1) % self.trail_length

    def render(self, scale: int) -> np.ndarray:
        """uint8[N, H * scale, W * scale, 3], every env's current frame."""
        if self.closed:
            raise StateError("render() called on a closed vector environment")
        if self.state is None:
            raise StateError("render() called before reset(); there is nothing to draw yet")
        frames = C.compiled_render_batch(self.env, scale, self.state.plume, self.state.agent,
                                         self.params, self.trail, self.trail_valid)
        return np.array(frames)

    def close(self) -> None:
        self.closed = True
        self.state = None
        self.keys = None
