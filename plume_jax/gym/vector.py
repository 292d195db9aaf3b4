"""``PlumeVectorEnv``: a Gymnasium 1.x ``VectorEnv`` stepping N envs in one compiled call.

Autoreset modes (``autoreset_mode=``, advertised in ``metadata["autoreset_mode"]``),
each one compiled call per step, with the semantics of Gymnasium's own
``SyncVectorEnv`` over ``PlumeGymEnv`` instances:

``AutoresetMode.SAME_STEP`` (the default of the class; ``gymnasium.make_vec``'s is NEXT_STEP)
    When env ``i`` terminates or truncates, the ``step`` that ends its
    episode already returns the first observation of its next episode in
    ``obs[i]``; the last observation of the ended episode is in
    ``info["final_obs"][i]`` and the info of the ending step in
    ``info["final_info"]`` (with ``is_success``; masks ``info["_final_obs"]``
    and ``info["_final_info"]`` mark which envs ended). Every action passed
    to ``step`` is used.
``AutoresetMode.NEXT_STEP`` (Gymnasium's default, and ``gymnasium.make_vec``'s here)
    The step that ends env ``i``'s episode returns its last observation and
    ``info["is_success"][i]`` (mask ``info["_is_success"]``); the *next*
    ``step`` resets env ``i`` instead of stepping it: its action is ignored,
    its reward is 0 and its flags are False.

Either way only the envs that ended are reset, with the next subkey of
their stream, so both modes give each env the same episodes.

Seeding: ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (Gymnasium's
convention); a list gives each env its own seed (None continues that env's
stream). See :mod:`plume_jax.gym.batch` for how the key streams relate to
:class:`~plume_jax.gym.PlumeGymEnv`'s.

Info: a dict of arrays with a leading ``num_envs`` axis and a boolean
``_<key>`` mask per key, Gymnasium's vector convention. After ``step``:
``step_count``, ``episode_count``, ``total_reward``, ``goal_reached``,
``agent_xy`` (int64 ``[N, 2]`` for grid actions) and ``distance_to_goal``,
describing each env *after* the step (a fresh episode where one was reset).
After ``reset``: the same stable keys (without ``distance_to_goal``) plus
``seed``, ``goal_location`` and ``source_location``.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.gym import _common as common
from plume_jax.gym.batch import AUTORESET_MODES, BatchCore, row
from plume_jax.gym.env import RENDER_FPS


def _autoreset_mode(mode: Any) -> AutoresetMode:
    """``mode`` (an ``AutoresetMode`` or its value) as an ``AutoresetMode`` this
    env implements, or ``ValidationError``."""
    allowed = (f"one of {[m.value for m in AUTORESET_MODES]} (AutoresetMode.SAME_STEP or "
               "AutoresetMode.NEXT_STEP)")
    try:
        mode = AutoresetMode(mode)
    except (TypeError, ValueError):
        raise ValidationError.for_parameter("autoreset_mode", mode, allowed) from None
    if mode not in AUTORESET_MODES:
        raise ValidationError.for_parameter("autoreset_mode", mode, allowed)
    return mode


def _with_masks(info: dict[str, Any], mask: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in info.items():
        out[key] = value
        out[f"_{key}"] = mask.copy()
    return out


class PlumeVectorEnv(common.ActionNames, gymnasium.vector.VectorEnv):
    """``num_envs`` copies of a functional env, stepped by one jitted vmapped call.

    Args:
        env: a ``PlumeEnv``.
        params: its ``EnvParams`` (shared by all envs); default
            ``env.default_params``.
        num_envs: number of environments.
        autoreset_mode: ``AutoresetMode.SAME_STEP`` (default) or
            ``NEXT_STEP`` (or their string values); see the module docstring.
        render_mode: None or ``"rgb_array"`` (``render()`` returns a tuple
            of ``num_envs`` frames).
        render_scale: pixels per cell in rendered frames.
        trail_length: recent positions drawn per env when rendering.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": RENDER_FPS,
                "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, env: Any, params: Any = None, num_envs: int = 16, *,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
                 render_mode: str | None = None, render_scale: int = 2,
                 trail_length: int = 50) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValidationError.for_parameter(
                "render_mode", render_mode, f"None or one of {self.metadata['render_modes']}")
        self.render_scale = common.check_scale(render_scale)
        mode = _autoreset_mode(autoreset_mode)
        self._core = BatchCore(env, params, num_envs, autoreset_mode=mode,
                               render_scale=None if render_mode is None else self.render_scale,
                               trail_length=trail_length)
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.env = env
        self.params = self._core.params
        self.num_envs = self._core.num_envs
        self.render_mode = render_mode
        self.single_action_space = self._core.single_action_space
        self.single_observation_space = self._core.single_observation_space
        self.action_space = common.batch_gymnasium_space(self.single_action_space, self.num_envs)
        self.observation_space = common.batch_gymnasium_space(self.single_observation_space,
                                                              self.num_envs)
        self._all = np.ones(self.num_envs, bool)

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """The autoreset mode (see the module docstring)."""
        return self._core.autoreset_mode

    @property
    def env_state(self) -> Any:
        """The batched functional ``EnvState`` (None before reset)."""
        return self._core.state

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every env (see the module docstring for seeds).

        Raises:
            StateError: after ``close()``.
            ValidationError: a bad seed, or options (not supported by the
                vector env: use ``PlumeGymEnv`` to choose start positions).
        """
        if self._core.closed:
            raise StateError("reset() called on a closed vector environment; create a new one")
        if options:
            raise ValidationError.for_parameter(
                "options", options, "None or {} (PlumeVectorEnv takes no reset options; "
                "PlumeGymEnv accepts start_position)")
        seeds = self._core.normalise_seeds(seed)
        obs, info, reported = self._core.reset(seeds)
        if isinstance(seed, (int, np.integer)):
            super().reset(seed=int(seed))
        elif seed is None and all(s is not None for s in reported):
            super().reset(seed=reported[0])
        return obs, _with_masks(info, self._all)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                         dict[str, Any]]:
        """Step every env (see the module docstring for how episodes that end
        are reset in each autoreset mode).

        Raises:
            StateError: before ``reset`` or after ``close``.
            ValidationError: an invalid action (nothing changes).
        """
        r = self._core.step(actions)
        info = _with_masks(r.info, self._all)
        done = r.terminated | r.truncated
        if done.any():
            success = r.final_info["goal_reached"] & done
            if self.autoreset_mode is AutoresetMode.SAME_STEP:
                final_obs = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(done):
                    final_obs[i] = row(r.final_obs, i)
                info["final_obs"], info["_final_obs"] = final_obs, done.copy()
                final_info = _with_masks({**r.final_info, "is_success": success}, done)
                info["final_info"], info["_final_info"] = final_info, done.copy()
            else:
                info["is_success"], info["_is_success"] = success, done.copy()
        return r.obs, r.reward.astype(np.float64), r.terminated, r.truncated, info

    def render(self) -> tuple[np.ndarray, ...] | None:
        """``rgb_array``: a tuple of ``num_envs`` uint8[H, W, 3] frames
        (one compiled call); None without a render mode."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render mode: pass "
                                  "render_mode='rgb_array' to the constructor")
            return None
        return tuple(self._core.render())

    def close_extras(self, **kwargs: Any) -> None:
        self._core.close()

    def __repr__(self) -> str:
        return f"PlumeVectorEnv({self.env.name}, num_envs={self.num_envs})"
