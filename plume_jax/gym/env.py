"""``PlumeGymEnv``: a Gymnasium ``Env`` over any functional ``PlumeEnv``.

It adds what the functional core leaves to its caller, following the
Gymnasium API and environment state machine contracts of ``plume_nav_sim``
(the stateful simulator plume_jax re-implements):

Lifecycle (:class:`EnvironmentState`)
    ``CREATED`` after construction; ``reset`` -> ``READY`` from any state but
    ``CLOSED``; ``step`` from ``READY`` -> ``READY``, ``TERMINATED`` (goal
    reached) or ``TRUNCATED`` (``max_steps``); ``close`` -> ``CLOSED`` from
    anywhere, idempotently. ``step`` in any other state, and ``reset`` or
    ``step`` after ``close``, raise :class:`~plume_jax.core.errors.StateError`.

Actions
    An action that the action model's ``validate_action`` rejects raises
    :class:`~plume_jax.core.errors.ValidationError` and changes nothing: not the
    episode, not the key stream, not the counters, not the trail. (Inside
    ``jit`` the core executes such an action as ``noop`` instead.)

Seeding
    ``reset(seed=s)``, ``s`` in ``[0, 2**63)``, starts a key stream at
    ``jax.random.key(s)`` for ``s < 2**32``; a larger seed's high bits are
    folded in (:func:`plume_jax.core.seeding.seed_key`), so every bit counts; every
    ``reset`` and ``step`` takes the next subkey of the stream
    (``key, sub = jax.random.split(key)``). ``reset()`` without a seed
    continues the stream, so ``reset(seed=s)`` followed by any sequence of
    ``step``s and seedless ``reset``s is reproducible as a whole. A first
    ``reset()`` without any seed draws one from OS entropy and reports it
    in ``info["seed"]``. ``episode_count`` counts the episodes of the stream
    (1 after a seeded reset), so infos are reproducible too.

Info (Python types, exactly the contract's keys)
    ``reset``: ``step_count``, ``episode_count``, ``total_reward``,
    ``goal_reached``, ``agent_xy``, ``seed`` (the seed that started this
    episode's stream at this reset, None when the stream was continued),
    ``goal_location``, ``source_location``. ``step``: the five stable keys
    and ``distance_to_goal``, plus ``is_success`` (goal reached) on the step
    that ends an episode, where SB3's ``Monitor`` and success-rate logging
    read it. ``agent_xy`` is a tuple of ints for action models that keep the
    agent on cells, floats otherwise; locations are ints when they are whole
    cells.

Compilation
    ``reset_env`` and ``step_env`` (the core's step *without* auto-reset)
    run as module-level jitted functions that take the ``PlumeEnv`` as a
    static argument, so all instances over equal envs share one compilation.
"""

from __future__ import annotations

import enum
from typing import Any, SupportsFloat

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.gym import _common as common
from plume_jax.gym.viewer import HumanViewer
from plume_jax.render.frames import check_frame_size


class EnvironmentState(enum.Enum):
    """Lifecycle states of :class:`PlumeGymEnv` (the state-machine contract)."""

    CREATED = "created"
    READY = "ready"
    TERMINATED = "terminated"
    TRUNCATED = "truncated"
    CLOSED = "closed"


#: ``render_fps`` advertised in ``metadata`` (used by ``RecordVideo`` and the viewer).
RENDER_FPS = 10


class PlumeGymEnv(common.ActionNames, gymnasium.Env):
    """Gymnasium environment over a functional env and its params.

    Args:
        env: a ``PlumeEnv`` (from ``plume_jax.make`` or ``build_env``).
        params: its ``EnvParams``; default ``env.default_params``.
        render_mode: None, ``"rgb_array"`` or ``"human"``.
        render_scale: pixels per grid cell in rendered frames.
        trail_length: how many recent positions the rendered trail shows.

    Example::

        env, params = plume_jax.make("PlumeNav-Gaussian-v0")
        genv = PlumeGymEnv(env, params, render_mode="rgb_array")
        obs, info = genv.reset(seed=0)
        obs, reward, terminated, truncated, info = genv.step(genv.action_ids["move_north"])
    """

    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": RENDER_FPS}

    def __init__(self, env: Any, params: Any = None, *, render_mode: str | None = None,
                 render_scale: int = 4, trail_length: int = 50) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValidationError.for_parameter(
                "render_mode", render_mode, f"None or one of {self.metadata['render_modes']}")
        if getattr(env, "is_multi_agent", False):
            raise ValidationError.for_parameter(
                "env", f"{type(env).__name__}(num_agents={env.num_agents})",
                "a single-agent env (for several agents use "
                "plume_jax.gym.pettingzoo_env.PlumeParallelEnv)")
        self.env = env
        self.params = env.default_params if params is None else params
        self.render_mode = render_mode
        self.render_scale = common.check_render(env, render_mode, render_scale)
        self.trail_length = common.check_trail_length(trail_length)
        self.action_space = common.to_gymnasium_space(env.actions.action_space)
        self.observation_space = common.to_gymnasium_space(
            env.sensor.observation_space(self.params.sensor))
        self._action_shape, self._action_allowed = common.action_template(self.action_space)
        self._integer_xy = common.integer_positions(env)
        self._goal_radius = float(np.asarray(self.params.goal_radius))
        self._lifecycle = EnvironmentState.CREATED
        self._key: jax.Array | None = None
        self._env_state: Any = None
        self._episode_count = 0
        # Trail: a ring buffer of the most recent positions (oldest overwritten).
        self._trail = np.zeros((max(self.trail_length, 1), 2), np.float32)
        self._trail_valid = np.zeros(max(self.trail_length, 1), bool)
        self._trail_next = 0
        self._viewer: HumanViewer | None = None

    # ------------------------------------------------------------ properties
    @property
    def lifecycle_state(self) -> EnvironmentState:
        """The current :class:`EnvironmentState`."""
        return self._lifecycle

    @property
    def env_state(self) -> Any:
        """The functional ``EnvState`` of the current episode (None before the
        first reset and after close)."""
        return self._env_state

    @property
    def trail(self) -> np.ndarray:
        """f32[T, 2], the recent positions (oldest first) the renderer draws."""
        if self.trail_length == 0:
            return np.zeros((0, 2), np.float32)
        order = np.roll(np.arange(self.trail_length), -self._trail_next)
        order = order[self._trail_valid[order]]
        return self._trail[order].copy()

    # ------------------------------------------------------------- lifecycle
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode; see the module docstring for seeding and info.

        Options:
            ``start_position``: ``(x, y)`` start cell, inside the grid and
            farther than ``goal_radius`` from the goal (integer cells for
            action models that keep the agent on cells).
            ``start_heading``: radians, only with ``start_position``; by
            default the heading the start distribution draws.

        Raises:
            StateError: after ``close()``.
            ValidationError: a bad seed or bad options (nothing changes).
        """
        if self._lifecycle is EnvironmentState.CLOSED:
            raise StateError("reset() called on a closed environment; create a new one")
        start = common.parse_reset_options(options, self.env)
        reported_seed: int | None
        if seed is not None:
            seed = common.check_seed(seed)
            key, episode, reported_seed = common.seed_key(seed), 1, seed
        elif self._key is None:
            reported_seed = common.fresh_seed()
            key, episode = common.seed_key(reported_seed), 1
        else:
            key, episode, reported_seed = self._key, self._episode_count + 1, None

        if start:
            position = start["start_position"]
            heading = start["start_heading"]
            out = common.compiled_reset_at(
                self.env, key, self.params, episode, jnp.asarray(position, jnp.float32),
                jnp.asarray(0.0 if heading is None else heading, jnp.float32),
                jnp.asarray(heading is None))
            common.check_start_outside_goal(position, out.start.goal_location,
                                            self._goal_radius)
        else:
            out = common.compiled_reset(self.env, key, self.params, episode)

        # Everything below commits the new episode; nothing above changed self.
        super().reset(seed=reported_seed)
        self._key, self._env_state, self._episode_count = out.key, out.state, episode
        self._lifecycle = EnvironmentState.READY
        self._trail_valid[:] = False
        self._trail_next = 0
        self._push_trail(out.start.agent_xy)
        info = {
            "step_count": 0,
            "episode_count": episode,
            "total_reward": 0.0,
            "goal_reached": False,
            "agent_xy": common.xy_tuple(out.start.agent_xy, self._integer_xy),
            "seed": reported_seed,
            "goal_location": common.location_tuple(out.start.goal_location),
            "source_location": common.location_tuple(out.start.source_location),
        }
        if self.render_mode == "human":
            self._render_human()
        return out.obs, info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """One step of the current episode (no auto-reset).

        Raises:
            StateError: before the first ``reset``, after the episode ended
                (``TERMINATED``/``TRUNCATED``) and after ``close``.
            ValidationError: an invalid action; nothing changes.
        """
        if self._lifecycle is not EnvironmentState.READY:
            raise StateError(self._step_refusal())
        arr = common.as_action_array(action, self._action_shape, self._action_allowed)
        out = common.compiled_step(self.env, self._key, self._env_state, arr, self.params)
        if not out.action_valid:
            raise ValidationError.for_parameter("action", action, self._action_allowed)
        terminated, truncated = bool(out.terminated), bool(out.truncated)
        self._key, self._env_state = out.key, out.state
        if terminated:
            self._lifecycle = EnvironmentState.TERMINATED
        elif truncated:
            self._lifecycle = EnvironmentState.TRUNCATED
        view = out.view
        self._push_trail(view.agent_xy)
        info = {
            "step_count": int(view.step_count),
            "episode_count": self._episode_count,
            "total_reward": float(view.total_reward),
            "goal_reached": bool(view.goal_reached),
            "agent_xy": common.xy_tuple(view.agent_xy, self._integer_xy),
            "distance_to_goal": float(view.distance_to_goal),
        }
        if terminated or truncated:
            info["is_success"] = bool(view.goal_reached)
        if self.render_mode == "human":
            self._render_human()
        return out.obs, float(out.reward), terminated, truncated, info

    def close(self) -> None:
        """Release the window and the episode; idempotent."""
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None
        self._env_state = None
        self._lifecycle = EnvironmentState.CLOSED

    def _step_refusal(self) -> str:
        state = self._lifecycle
        if state is EnvironmentState.CREATED:
            return "step() called before reset(); call reset() to start an episode"
        if state is EnvironmentState.CLOSED:
            return "step() called on a closed environment; create a new one"
        return (f"step() called after the episode ended ({state.name}); "
                "call reset() to start a new episode")

    # ------------------------------------------------------------- rendering
    def _push_trail(self, xy: Any) -> None:
        if self.trail_length == 0:
            return
        self._trail[self._trail_next] = np.asarray(xy, np.float32).reshape(2)
        self._trail_valid[self._trail_next] = True
        self._trail_next = (self._trail_next + 1) % self.trail_length

    def _frame(self) -> np.ndarray:
        check_frame_size(self.env.grid, self.render_scale, name="render_scale")
        state = self._env_state
        frame = common.compiled_render(self.env, self.render_scale, state.plume, state.agent,
                                  self.params, self._trail, self._trail_valid)
        return np.array(frame)

    def _render_human(self) -> None:
        if self._viewer is None:
            self._viewer = HumanViewer(self.metadata["render_fps"])
        if self._viewer.usable:  # skip drawing entirely where no window can be shown
            self._viewer.show(self._frame())

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """Draw the current state.

        ``"rgb_array"``: uint8[H * render_scale, W * render_scale, 3], north
        up (see :mod:`plume_jax.render.frames`). ``"human"``: shows the frame in a
        window when a display exists, otherwise does nothing; returns None.
        ``mode`` defaults to the constructor's ``render_mode``. Rendering
        reads the state only, so it never changes a trajectory.

        Raises:
            StateError: before the first ``reset`` or after ``close``.
            ValidationError: an unsupported mode.
        """
        mode = self.render_mode if mode is None else mode
        if mode is None:
            gymnasium.logger.warn(
                "render() called without a render mode: pass render_mode='rgb_array' or "
                "'human' to the constructor (or a mode to render())")
            return None
        if mode not in self.metadata["render_modes"]:
            raise ValidationError.for_parameter("mode", mode,
                                                f"one of {self.metadata['render_modes']}")
        if self._lifecycle is EnvironmentState.CLOSED:
            raise StateError("render() called on a closed environment")
        if self._env_state is None:
            raise StateError("render() called before reset(); there is nothing to draw yet")
        if mode == "rgb_array":
            return self._frame()
        self._render_human()
        return None

    def __repr__(self) -> str:
        return f"PlumeGymEnv({self.env.name}, {self.env.grid.width}x{self.env.grid.height})"
