"""A PettingZoo ``ParallelEnv`` over a :class:`~plume_jax.envs.multi_agent.MultiAgentPlumeEnv`
(PettingZoo is an optional dependency: ``pip install pettingzoo``).

Agents are named ``agent_0 .. agent_{A-1}`` in the env's agent order.
Following PettingZoo's parallel API, an agent that reaches the goal is
reported ``terminated`` and leaves ``self.agents``; it stays in the
functional env (where it is frozen at the goal) until the episode ends.
When the episode ends — all agents arrived (``done_mode="all"``), the first
arrived (``"any"``), or ``max_steps`` — every remaining agent is reported
``terminated`` or ``truncated`` and ``self.agents`` becomes empty. On the step
an agent leaves, its info holds ``is_success`` (it reached the goal), as the
Gymnasium env's does.

``step`` takes a dict ``{agent name: action}``; anything else, an unknown
or departed agent's name, or an invalid action raises
:class:`~plume_jax.core.errors.ValidationError` naming the agent, and nothing
changes (live agents without an action do ``noop``). Seeding is
:class:`~plume_jax.gym.PlumeGymEnv`'s, with the same checks and the same
compiled reset and step: ``reset(seed=s)``, ``s`` in ``[0, 2**63)``, starts
a key stream at :func:`~plume_jax.core.seeding.seed_key` ``(s)``
(``jax.random.key(s)`` below ``2**32``; every bit of ``s`` used); every
reset and step takes the next subkey, and a seedless ``reset`` continues
the stream. No step resets speculatively: the episode ends with the agents
list. Observations are NumPy float32 arrays, rewards Python floats.
``render()`` returns an RGB array (``render_mode="rgb_array"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pettingzoo import ParallelEnv

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.gym import _common as common


class PlumeParallelEnv(common.ActionNames, ParallelEnv):
    """PettingZoo parallel env over a multi-agent plume env (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "name": "plume_jax_multi_agent_v0",
                "is_parallelizable": True, "render_fps": 10}

    def __init__(self, env: Any, params: Any = None, render_mode: str | None = None,
                 render_scale: int = 4):
        if not getattr(env, "is_multi_agent", False):  # e.g. a gymnax env: refused
            raise ValidationError.for_parameter("env", type(env).__name__,
                                                "a MultiAgentPlumeEnv (plume_jax.make(..., num_agents=N))")
        if render_mode not in (None, "rgb_array"):
            raise ValidationError.for_parameter("render_mode", render_mode, "None or 'rgb_array'")
        self.env = env
        self.params = env.default_params if params is None else params
        self.render_mode = render_mode
        self.render_scale = common.check_render(env, render_mode, render_scale)
        self.possible_agents = [f"agent_{i}" for i in range(env.num_agents)]
        self.agents: list[str] = []
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        self._observation_space = common.to_gymnasium_space(
            env.agent_observation_space(self.params))
        self._action_space = common.to_gymnasium_space(env.actions.action_space)
        self._action_shape, self._action_allowed = common.action_template(self._action_space)
        self._noop = np.asarray(env.action_ids.get("noop", 0), np.int32) \
            if self._action_shape == () else np.zeros(self._action_shape, np.float32)
        self._key = None
        self._state = None
        self._episode_count = 0
        self._closed = False

    def observation_space(self, agent: str):
        return self._observation_space

    def action_space(self, agent: str):
        return self._action_space

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an episode (see the module docstring for seeding). ``options``
        are accepted and ignored, as PettingZoo's API test expects of an env
        without any.

        Raises:
            StateError: after ``close()``.
            ValidationError: a bad seed (nothing changes).
        """
        if self._closed:
            raise StateError("reset() after close(): create a new environment")
        if seed is not None:
            key, episode = common.seed_key(common.check_seed(seed)), 1
        elif self._key is None:
            key, episode = common.seed_key(common.fresh_seed()), 1
        else:
            key, episode = self._key, self._episode_count + 1
        out = common.compiled_reset(self.env, key, self.params, episode)
        self._key, self._state, self._episode_count = out.key, out.state, episode
        self.agents = list(self.possible_agents)
        observations = {a: np.array(out.obs[i]) for i, a in enumerate(self.agents)}
        infos = {a: {"agent_xy": tuple(out.start.agent_xy[i].tolist())}
                 for i, a in enumerate(self.agents)}
        return observations, infos

    def step(self, actions: dict[str, Any]):
        """One joint step; live agents without an action do ``noop``.

        Raises:
            StateError: after ``close()``, or without an active episode.
            ValidationError: ``actions`` is not a dict, names an unknown or
                departed agent, or holds an invalid action (nothing changes).
        """
        if self._closed:
            raise StateError("step() after close(): create a new environment")
        if self._state is None or not self.agents:
            raise StateError("step() without an active episode: call reset() first")
        if not isinstance(actions, dict):
            raise ValidationError.for_parameter(
                "actions", actions, f"a dict from agent names ({self.agents}) to actions")
        joint = np.stack([self._noop] * self.env.num_agents)
        for name, action in actions.items():
            if name not in self._index:
                raise ValidationError.for_parameter("agent", name,
                                                    f"one of {self.possible_agents}")
            if name not in self.agents:
                raise ValidationError.for_parameter(
                    f"actions[{name!r}]", action, "no action: this agent's episode is over")
            allowed = f"{self._action_allowed} (an action of {name}'s action space)"
            arr = common.as_action_array(action, self._action_shape, allowed,
                                         f"actions[{name!r}]")
            if joint.dtype.kind != arr.dtype.kind and joint.dtype.kind == "i":
                # a float or bool for a discrete space: invalid whatever its value
                raise ValidationError.for_parameter(f"actions[{name!r}]", action, allowed)
            joint[self._index[name]] = arr
        out = common.compiled_step(self.env, self._key, self._state, joint, self.params)
        invalid = [a for a in actions if not out.action_valid[self._index[a]]]
        if invalid:
            raise ValidationError.for_parameter(
                f"actions[{invalid[0]!r}]", actions[invalid[0]],
                f"{self._action_allowed} (an action of {invalid[0]}'s action space)")
        self._key, self._state = out.key, out.state
        done = bool(out.done)
        live = list(self.agents)
        index = {a: self._index[a] for a in live}
        observations = {a: np.array(out.obs[i]) for a, i in index.items()}
        rewards = {a: float(out.reward[i]) for a, i in index.items()}
        terminations = {a: bool(out.terminated[i]) for a, i in index.items()}
        truncations = {a: bool(out.truncated[i]) or (done and not terminations[a])
                       for a, i in index.items()}
        infos = {a: {"agent_xy": tuple(out.view.agent_xy[i].tolist())} for a, i in index.items()}
        for a, i in index.items():
            if terminations[a] or truncations[a]:  # as the Gymnasium env: on the last step
                infos[a]["is_success"] = bool(out.view.goal_reached[i])
        self.agents = [a for a in live if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def render(self):
        """uint8[H * render_scale, W * render_scale, 3] of every agent
        (``render_mode="rgb_array"``), else None; None before reset."""
        if self.render_mode != "rgb_array" or self._state is None:
            return None
        no_trail = np.zeros((1, 2), np.float32)
        return np.array(common.compiled_render(self.env, self.render_scale, self._state.plume,
                                               self._state.agent, self.params, no_trail,
                                               np.zeros(1, bool)))

    def close(self):
        self._closed = True

    def state(self) -> np.ndarray:
        """Global state: every agent's position, f32[A * 2]."""
        if self._state is None:
            raise StateError("state() before reset()")
        return np.asarray(self._state.agent.position, np.float32).reshape(-1)
