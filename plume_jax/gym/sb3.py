"""``PlumeSB3VecEnv``: a Stable-Baselines3 ``VecEnv`` stepping N envs in one compiled call.

Importing this module imports ``stable_baselines3`` (the optional ``sb3``
extra); nothing else in plume_jax does, so ``import plume_jax`` never pulls
in SB3 or torch. ``plume_jax.gym.PlumeSB3VecEnv`` resolves to this class on
first access.

SB3's conventions, as ``DummyVecEnv`` follows them:

- ``step_wait`` returns ``(obs, rewards, dones, infos)`` with
  ``dones = terminated | truncated``; an env that is done has already been
  reset, and its ``infos[i]`` carries ``"terminal_observation"`` (the last
  observation of the ended episode) and ``"TimeLimit.truncated"`` (True when
  the episode was cut by ``max_steps`` rather than ended by the goal, so
  that SB3 bootstraps its value).
- On episode end ``infos[i]`` also has ``"is_success"`` (goal reached) and
  ``"episode": {"r", "l", "t"}`` (return, length, seconds since creation),
  so SB3 logs ``ep_rew_mean``, ``ep_len_mean`` and ``success_rate``
  without a ``VecMonitor`` (wrapping one anyway is harmless).
- Only the envs that ended are reset, in the same compiled call as the
  step (:mod:`plume_jax.gym.batch`); each env keeps ``PlumeGymEnv``'s key
  stream, so it matches ``DummyVecEnv`` over ``PlumeGymEnv`` instances on a static
  plume.
- ``seed(s)`` makes the next ``reset()`` seed env ``i`` with ``s + i``;
  ``reset()`` without seeds continues each env's key stream. After
  ``reset()``, ``reset_infos[i]`` is env ``i``'s reset info with
  ``PlumeGymEnv``'s keys and types (as ``DummyVecEnv`` keeps its envs').

Example::

    from stable_baselines3 import PPO
    from plume_jax.gym.sb3 import PlumeSB3VecEnv
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    model = PPO("MlpPolicy", PlumeSB3VecEnv(env, params, num_envs=64)).learn(100_000)
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.gym import _common as common
from plume_jax.gym.batch import BatchCore, row


def _reset_info(info: dict[str, np.ndarray], seeds: list, i: int, integer_xy: bool
                ) -> dict[str, Any]:
    """Env ``i``'s reset info with ``PlumeGymEnv``'s keys and Python types."""
    return {
        "step_count": int(info["step_count"][i]),
        "episode_count": int(info["episode_count"][i]),
        "total_reward": float(info["total_reward"][i]),
        "goal_reached": bool(info["goal_reached"][i]),
        "agent_xy": common.xy_tuple(info["agent_xy"][i], integer_xy),
        "seed": seeds[i],
        "goal_location": common.location_tuple(info["goal_location"][i]),
        "source_location": common.location_tuple(info["source_location"][i]),
    }


class PlumeSB3VecEnv(common.ActionNames, VecEnv):
    """SB3 ``VecEnv`` over ``num_envs`` copies of a functional env.

    Args:
        env: a ``PlumeEnv``.
        params: its ``EnvParams`` (shared); default ``env.default_params``.
        num_envs: number of environments.
        render_mode: None or ``"rgb_array"`` (``get_images()`` returns the
            ``num_envs`` frames; ``render()`` tiles them).
        render_scale: pixels per cell in rendered frames.
        trail_length: recent positions drawn per env when rendering.
        seed: optional seed for the first ``reset()`` (env ``i`` gets
            ``seed + i``), as if ``seed(seed)`` had been called.
    """

    def __init__(self, env: Any, params: Any = None, num_envs: int = 64, *,
                 render_mode: str | None = None, render_scale: int = 2, trail_length: int = 50,
                 seed: int | None = None) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValidationError.for_parameter("render_mode", render_mode,
                                                "None or 'rgb_array'")
        self.render_scale = common.check_scale(render_scale)
        self._core = BatchCore(env, params, num_envs,
                               render_scale=None if render_mode is None else self.render_scale,
                               trail_length=trail_length)
        self.env = env
        self.params = self._core.params
        self.render_mode = render_mode  # read by VecEnv.__init__ through get_attr
        super().__init__(self._core.num_envs, self._core.single_observation_space,
                         self._core.single_action_space)
        self._actions: np.ndarray | None = None
        self._t0 = time.perf_counter()
        if seed is not None:
            self.seed(seed)

    # ------------------------------------------------------------ VecEnv API
    def reset(self) -> np.ndarray:
        """Reset every env with the seeds given by ``seed()`` (if any);
        reset options are not supported (use ``PlumeGymEnv`` for those)."""
        if self._core.closed:
            raise StateError("reset() called on a closed vector environment; create a new one")
        if any(self._options):
            raise ValidationError.for_parameter(
                "options", next(o for o in self._options if o),
                "no reset options (PlumeSB3VecEnv takes none; PlumeGymEnv accepts start_position)")
        seeds = self._core.normalise_seeds(list(self._seeds))
        obs, info, reported = self._core.reset(seeds)
        self.reset_infos = [_reset_info(info, reported, i, self._core.integer_xy)
                            for i in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        actions, self._actions = self._actions, None
        if actions is None:
            raise ValidationError.for_parameter("actions", None, "actions given by step_async()")
        r = self._core.step(actions)
        dones = r.terminated | r.truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if dones.any():
            elapsed = round(time.perf_counter() - self._t0, 6)
            final = r.final_info
            for i in np.flatnonzero(dones):
                infos[i] = {
                    "terminal_observation": row(r.final_obs, i),
                    "TimeLimit.truncated": bool(r.truncated[i] and not r.terminated[i]),
                    "is_success": bool(r.terminated[i]),
                    "episode": {"r": float(final["total_reward"][i]),
                                "l": int(final["step_count"][i]), "t": elapsed},
                }
        return r.obs, r.reward.astype(np.float32), dones, infos

    def close(self) -> None:
        self._core.close()

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Every env's current frame (``render_mode="rgb_array"``)."""
        if self.render_mode != "rgb_array":
            return [None] * self.num_envs
        return list(self._core.render())

    # The sub-envs are rows of one batched state, not Python objects: every
    # attribute is shared, so get_attr answers from this adapter.
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError(
            f"PlumeSB3VecEnv cannot set {attr_name!r} per env: its envs share one compiled "
            "function and one params pytree; build a new adapter with other params instead")

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        raise AttributeError(
            f"PlumeSB3VecEnv has no per-env objects to call {method_name!r} on; "
            "use the adapter's own methods")

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def __repr__(self) -> str:
        return f"PlumeSB3VecEnv({self.env.name}, num_envs={self.num_envs})"
