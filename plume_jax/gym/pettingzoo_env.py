"""A PettingZoo ``ParallelEnv`` over a :class:`~plume_jax.multi_agent.MultiAgentPlumeEnv`
(PettingZoo is an optional dependency: ``pip install pettingzoo``).

Agents are named ``agent_0 .. agent_{A-1}`` in the env's agent order.
Following PettingZoo's parallel API, an agent that reaches the goal is
reported ``terminated`` and leaves ``self.agents``; it stays in the
functional env (where it is frozen at the goal) until the episode ends.
When the episode ends — all agents arrived (``done_mode="all"``), the first
arrived (``"any"``), or ``max_steps`` — every remaining agent is reported
``terminated`` or ``truncated`` and ``self.agents`` becomes empty.

``step`` validates every action before anything changes and raises
:class:`~plume_jax.errors.ValidationError` naming the agent; actions of
agents not in ``self.agents`` must not be given. Seeding: ``reset(seed=s)``
starts a key stream at ``jax.random.key(s)``; every reset and step takes the
next subkey, and a seedless ``reset`` continues the stream. Observations are
NumPy float32 arrays, rewards Python floats. ``render()`` returns an RGB
array (``render_mode="rgb_array"``).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from pettingzoo import ParallelEnv

from plume_jax.errors import StateError, ValidationError
from plume_jax.gym._common import to_gymnasium_space
from plume_jax.render import render_state


@functools.partial(jax.jit, static_argnames=("env",))
def _reset(env: Any, key: jax.Array, params: Any):
    key, sub = jax.random.split(key)
    obs, state = env.reset_env(sub, params)
    return key, obs, state


@functools.partial(jax.jit, static_argnames=("env",))
def _step(env: Any, key: jax.Array, state: Any, actions: jax.Array, params: Any):
    key, sub = jax.random.split(key)
    obs, state, reward, terminated, truncated, info = env.step_env(sub, state, actions, params)
    return key, obs, state, reward, terminated, truncated, info["done"], info["agent_xy"]


@functools.partial(jax.jit, static_argnames=("env", "scale"))
def _render(env: Any, state: Any, params: Any, scale: int):
    return render_state(env, state, params, scale=scale)


class PlumeParallelEnv(ParallelEnv):
    """PettingZoo parallel env over a multi-agent plume env (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "name": "plume_jax_multi_agent_v0",
                "is_parallelizable": True, "render_fps": 10}

    def __init__(self, env: Any, params: Any = None, render_mode: str | None = None,
                 render_scale: int = 4):
        if not hasattr(env, "num_agents"):
            raise ValidationError.for_parameter("env", type(env).__name__,
                                                "a MultiAgentPlumeEnv (plume_jax.make(..., num_agents=N))")
        if render_mode not in (None, "rgb_array"):
            raise ValidationError.for_parameter("render_mode", render_mode, "None or 'rgb_array'")
        self.env = env
        self.params = env.default_params if params is None else params
        self.render_mode = render_mode
        self.render_scale = render_scale
        self.possible_agents = [f"agent_{i}" for i in range(env.num_agents)]
        self.agents: list[str] = []
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        self._observation_space = to_gymnasium_space(env.agent_observation_space(self.params))
        self._action_space = to_gymnasium_space(env.actions.action_space)
        self._noop = env.action_ids.get("noop", 0)
        self._key = None
        self._state = None
        self._closed = False

    def observation_space(self, agent: str):
        return self._observation_space

    def action_space(self, agent: str):
        return self._action_space

    @property
    def action_names(self) -> list[str]:
        return self.env.action_names

    @property
    def action_ids(self) -> dict[str, int]:
        return self.env.action_ids

    def reset(self, seed: int | None = None, options: dict | None = None):
        if self._closed:
            raise StateError("reset() after close(): create a new environment")
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ValidationError.for_parameter("seed", seed, "a non-negative integer or None")
            self._key = jax.random.key(int(seed))
        elif self._key is None:
            self._key = jax.random.key(int(np.random.SeedSequence().generate_state(1)[0]))
        self._key, obs, self._state = _reset(self.env, self._key, self.params)
        self.agents = list(self.possible_agents)
        obs = np.asarray(obs)
        observations = {a: obs[i].copy() for i, a in enumerate(self.agents)}
        positions = np.asarray(self._state.agent.position)
        infos = {a: {"agent_xy": tuple(positions[i].tolist())} for i, a in enumerate(self.agents)}
        return observations, infos

    def step(self, actions: dict[str, Any]):
        if self._closed:
            raise StateError("step() after close(): create a new environment")
        if self._state is None or not self.agents:
            raise StateError("step() without an active episode: call reset() first")
        for name, action in actions.items():
            if name not in self._index:
                raise ValidationError.for_parameter("agent", name, f"one of {self.possible_agents}")
            if name not in self.agents:
                raise ValidationError.for_parameter(
                    f"actions[{name!r}]", action, "no action: this agent's episode is over")
            if not bool(self.env.actions.validate_action(action)):
                raise ValidationError.for_parameter(
                    f"actions[{name!r}]", action,
                    f"an action of {name}'s action space {self._action_space}")
        joint = np.full(self.env.num_agents, self._noop, np.int32)
        for name, action in actions.items():
            joint[self._index[name]] = int(action)
        self._key, obs, self._state, reward, terminated, truncated, done, xy = _step(
            self.env, self._key, self._state, jnp.asarray(joint), self.params)
        obs, reward, terminated, truncated, xy = (np.asarray(x) for x in
                                                  (obs, reward, terminated, truncated, xy))
        done = bool(done)
        live = list(self.agents)
        observations = {a: obs[self._index[a]].copy() for a in live}
        rewards = {a: float(reward[self._index[a]]) for a in live}
        terminations = {a: bool(terminated[self._index[a]]) for a in live}
        truncations = {a: bool(truncated[self._index[a]]) or (done and not terminations[a])
                       for a in live}
        infos = {a: {"agent_xy": tuple(xy[self._index[a]].tolist())} for a in live}
        self.agents = [a for a in live if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def render(self):
        if self.render_mode != "rgb_array" or self._state is None:
            return None
        return np.asarray(_render(self.env, self._state, self.params, self.render_scale))

    def close(self):
        self._closed = True

    def state(self) -> np.ndarray:
        """Global state: every agent's position, f32[A * 2]."""
        if self._state is None:
            raise StateError("state() before reset()")
        return np.asarray(self._state.agent.position, np.float32).reshape(-1)
