"""Many agents in one plume (layer 2).

``MultiAgentPlumeEnv`` runs ``num_agents`` (static) agents in one
environment that share one plume state. The per-agent logic is the
single-agent env's own (``PlumeEnv.agent_start``, ``agent_move``,
``agent_outcome``), vmapped over the agents, so there is one code path:
with ``num_agents=1`` this env reproduces ``PlumeEnv`` step for step (up to
the leading agent axis).

Shapes (``A = num_agents``): observations ``f32[A, ...]``, actions
``int32[A]`` (or ``f32[A, action_dim]`` for ``Box`` action models), rewards
``f32[A]``, ``terminated`` ``bool[A]`` (the agent has reached the goal, at
this step or before), ``truncated`` ``bool[A]`` (the episode hit
``max_steps`` before the agent arrived). ``info["done"]`` (``bool[]``) says
whether the episode ended: when *all* agents have arrived
(``done_mode="all"``) or the *first* has (``done_mode="any"``), or at the
step limit; ``step`` auto-resets on it like the single-agent env.

Rules:

- An agent that has reached the goal stays put: its further actions are
  executed as ``noop`` and it earns no further reward.
- An invalid action is executed as ``noop`` for that agent only;
  ``info["action_valid"]`` and ``info["executed_action"]`` are per agent.
- ``collisions=True``: no two agents occupy the same cell. Moves are
  resolved in agent-index order: agent ``i`` moves unless its target cell
  holds another agent (agents ``< i`` at their new cells, agents ``> i`` at
  their old ones), in which case it stays where it was. Start cells are
  redrawn (up to ``START_RETRIES`` times) for agents that land on an
  earlier agent's cell; an agent still on one after that is placed, in
  agent-index order, on the next cell in row-major order (wrapping) that
  no agent holds and that lies outside the goal region, so no two agents
  ever start on one cell (``make`` refuses more agents than such cells).
- ``observe_others=True``: each observation is followed by the positions of
  the other agents relative to the observer, in other-agent index order,
  divided by ``(width - 1, height - 1)`` (so in ``[-1, 1]``).

Random keys: agent ``i`` uses ``fold_in(k, i)`` of each per-step key ``k``
(for a single agent, ``k`` itself, which is what ``PlumeEnv`` uses).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from plume_jax.core import spaces
from plume_jax.envs.plume_env import PlumeEnv, to_gymnax_space
from plume_jax.core.errors import ValidationError
from plume_jax.core.types import EnvParams, EnvState

DONE_MODES = ("all", "any")
START_RETRIES = 4


def _where(mask: jax.Array, a: Any, b: Any) -> Any:
    """Per-agent select over pytrees whose leaves have a leading agent axis."""
    return jax.tree.map(
        lambda x, y: jnp.where(jnp.reshape(mask, mask.shape + (1,) * (x.ndim - mask.ndim)), x, y),
        a, b)


@dataclasses.dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class MultiAgentPlumeEnv(PlumeEnv):
    """``num_agents`` agents sharing one plume (see the module docstring).

    A :class:`~plume_jax.envs.plume_env.PlumeEnv` (same fields, same identity rules)
    with four more static fields, keyword-only:
        num_agents: number of agents (>= 1).
        done_mode: ``"all"`` or ``"any"``.
        collisions: forbid two agents in one cell.
        observe_others: append the others' relative positions to each observation.
    """

    # required (``field()`` keeps PlumeEnv's class attribute ``num_agents = 1``
    # from becoming its default)
    num_agents: int = dataclasses.field()  # type: ignore[misc]
    done_mode: str = "all"
    collisions: bool = False
    observe_others: bool = False

    is_multi_agent: ClassVar[bool] = True

    def __post_init__(self) -> None:
        num_agents = self.num_agents
        if isinstance(num_agents, bool) or not isinstance(num_agents, int) or num_agents < 1:
            raise ValidationError.for_parameter("num_agents", num_agents, "an integer >= 1")
        if self.done_mode not in DONE_MODES:
            raise ValidationError.for_parameter("done_mode", self.done_mode,
                                                f"one of {list(DONE_MODES)}")
        if self.observe_others and self.default_params is not None and not isinstance(
                self.sensor.observation_space(self.default_params.sensor), spaces.Box):
            raise ValidationError.for_parameter(
                "observe_others", self.observe_others,
                "False for a sensor with a Dict observation")
        cells = self.grid.width * self.grid.height
        if self.collisions and num_agents > cells:
            raise ValidationError.for_parameter(
                "num_agents", num_agents,
                f"at most {cells} with collisions=True (no two agents share a cell; the "
                f"{self.grid.width}x{self.grid.height} grid has {cells} cells)")
        object.__setattr__(self, "collisions", bool(self.collisions))
        object.__setattr__(self, "observe_others", bool(self.observe_others))
        super().__post_init__()

    @classmethod
    def from_env(cls, env: PlumeEnv, *, num_agents: int, done_mode: str = "all",
                 collisions: bool = False, observe_others: bool = False,
                 settings: dict | None = None) -> "MultiAgentPlumeEnv":
        """The same components, grid and default params with ``num_agents`` agents."""
        base = {f.name: getattr(env, f.name) for f in dataclasses.fields(PlumeEnv)}
        base["settings"] = dict(env.settings) if settings is None else settings
        return cls(**base, num_agents=num_agents, done_mode=done_mode, collisions=collisions,
                   observe_others=observe_others)

    def __repr__(self) -> str:
        return (f"MultiAgentPlumeEnv(num_agents={self.num_agents}, done_mode={self.done_mode!r}, "
                f"collisions={self.collisions}, observe_others={self.observe_others}, "
                f"{super().__repr__()})")

    # -- spaces and description -------------------------------------------
    def agent_observation_space(self, params: EnvParams | None = None) -> Any:
        """One agent's observation space (a :mod:`plume_jax.core.spaces` space)."""
        base = self.sensor.observation_space(self._params(params).sensor)
        if not self.observe_others:
            return base
        assert isinstance(base, spaces.Box)  # a Dict observation is refused at construction
        extra = 2 * (self.num_agents - 1)
        return spaces.Box(low=tuple(base.low) + (-1.0,) * extra,
                          high=tuple(base.high) + (1.0,) * extra,
                          shape=(int(base.low_array.size) + extra,))

    def observation_space(self, params: EnvParams | None = None) -> Any:
        """The gymnax space of the joint observation ``[A, ...]``."""
        space = self.agent_observation_space(params)
        if isinstance(space, spaces.Dict):
            return to_gymnax_space(spaces.Dict.of({
                k: _stack_box(v, self.num_agents) for k, v in space.items()}))
        return to_gymnax_space(_stack_box(space, self.num_agents))

    def observation_labels(self) -> list[str]:
        """What each index of one agent's (flat) observation means."""
        labels = list(self.sensor.observation_labels())
        for j in range(self.num_agents - 1):
            if self.observe_others:
                labels += [f"other_{j}_dx", f"other_{j}_dy"]
        return labels

    def describe(self) -> dict[str, Any]:
        """:meth:`PlumeEnv.describe` plus the multi-agent settings."""
        return {**super().describe(), "num_agents": self.num_agents, "done_mode": self.done_mode,
                "collisions": self.collisions, "observe_others": self.observe_others}

    # -- helpers --------------------------------------------------------------
    def agent_keys(self, key: jax.Array) -> jax.Array:
        """Per-agent keys: ``key[None]`` for one agent, else ``fold_in(key, i)``."""
        if self.num_agents == 1:
            return key[None]
        return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, jnp.arange(self.num_agents))

    def _with_others(self, obs: Any, positions: jax.Array) -> Any:
        if not self.observe_others:
            return obs
        scale = jnp.maximum(self.grid.upper, 1.0)
        rel = (positions[None, :, :] - positions[:, None, :]) / scale  # [i, j] = p_j - p_i
        a = self.num_agents
        others = jnp.stack([jnp.concatenate([rel[i, :i], rel[i, i + 1:]]) for i in range(a)]) \
            if a > 1 else jnp.zeros((1, 0, 2), jnp.float32)
        return jnp.concatenate([obs.reshape(a, -1), others.reshape(a, -1)], axis=1)

    def _first_conflicts(self, positions: jax.Array) -> jax.Array:
        """bool[A]: agent i shares its cell with some agent j < i."""
        cells = jnp.round(positions)
        same = jnp.all(cells[:, None, :] == cells[None, :, :], axis=-1)
        earlier = jnp.tril(jnp.ones((self.num_agents, self.num_agents), bool), k=-1)
        return jnp.any(same & earlier, axis=1)

    def _place_on_free_cells(self, positions: jax.Array, goal: jax.Array,
                             goal_radius: jax.Array) -> jax.Array:
        """f32[A, 2]: ``positions`` with every agent that shares its cell with
        an earlier agent moved, one at a time in agent-index order, to the
        first cell after its own in row-major order (wrapping around the
        grid) that no agent holds and that lies outside the goal region
        (farther than ``goal_radius`` from ``goal``); to the first cell no
        agent holds when every free cell is inside the goal region.

        Deterministic and jittable; it does nothing (zero loop iterations)
        when no two agents share a cell. Cells are scanned in chunks of at
        most 64, so a placement costs ``O(A * 64)`` per chunk scanned.
        """
        w, h = self.grid.width, self.grid.height
        n = w * h
        chunk = min(n, 64)
        offsets = jnp.arange(chunk, dtype=jnp.int32)

        def place(positions):
            conflicts = self._first_conflicts(positions)
            i = jnp.argmax(conflicts)
            cells = jnp.round(positions).astype(jnp.int32)
            others = jnp.arange(self.num_agents) != i
            own = cells[i, 1] * w + cells[i, 0]

            def scan_chunk(carry):
                start, strict, lenient = carry
                index = (own + 1 + start + offsets) % n
                xy = jnp.stack([index % w, index // w], axis=-1)
                held = jnp.any(jnp.all(xy[:, None, :] == cells[None, :, :], axis=-1)
                               & others[None, :], axis=1)
                outside = jnp.linalg.norm(xy.astype(jnp.float32) - goal, axis=-1) > goal_radius
                in_range = start + offsets < n
                ok_strict = in_range & ~held & outside
                ok_lenient = in_range & ~held
                strict = jnp.where((strict < 0) & jnp.any(ok_strict),
                                   index[jnp.argmax(ok_strict)], strict)
                lenient = jnp.where((lenient < 0) & jnp.any(ok_lenient),
                                    index[jnp.argmax(ok_lenient)], lenient)
                return start + chunk, strict, lenient

            none = jnp.asarray(-1, jnp.int32)
            _, strict, lenient = jax.lax.while_loop(
                lambda c: (c[1] < 0) & (c[0] < n), scan_chunk, (jnp.asarray(0, jnp.int32),
                                                                 none, none))
            cell = jnp.where(strict >= 0, strict, lenient)
            xy = jnp.stack([cell % w, cell // w]).astype(positions.dtype)
            return positions.at[i].set(xy)

        return jax.lax.while_loop(lambda p: jnp.any(self._first_conflicts(p)), place, positions)

    # -- episode start ---------------------------------------------------------
    def _start_episode(self, k_start, k_sensor, plume_state, episode_count, params):
        start = jax.vmap(self.agent_start, in_axes=(0, 0, None, None))
        ks, kss = self.agent_keys(k_start), self.agent_keys(k_sensor)
        if self.collisions and self.num_agents > 1:
            # start cells: drawn, redrawn (START_RETRIES times) where an
            # earlier agent holds the cell, then placed on the next free cell;
            # the sensors start once, at the final cells
            goal = self.goal_location(plume_state, params)
            probe = self.probe(plume_state, params)
            sample = jax.vmap(lambda k: self.start.sample(
                k, self.grid, goal, params.goal_radius, params.start, probe=probe))
            agents = sample(ks)
            for retry in range(1, START_RETRIES + 1):
                redo = self._first_conflicts(agents.position)
                agents = _where(redo, sample(
                    jax.vmap(jax.random.fold_in, in_axes=(0, None))(ks, retry)), agents)
            agents = agents.replace(position=self._place_on_free_cells(
                agents.position, goal, params.goal_radius))
            obs, sensor_state = jax.vmap(self.sensor.init, in_axes=(0, 0, None, None))(
                kss, agents, probe, params.sensor)
        else:
            obs, agents, sensor_state = start(ks, kss, plume_state, params)
        a = self.num_agents
        state = EnvState(
            agent=agents, plume=plume_state, sensor=sensor_state,
            step_count=jnp.asarray(0, jnp.int32),
            episode_count=jnp.asarray(episode_count, jnp.int32),
            total_reward=jnp.zeros(a, jnp.float32),
            goal_reached=jnp.zeros(a, bool),
        )
        return self._with_others(obs, agents.position), state

    # -- step --------------------------------------------------------------------
    def _resolve_collisions(self, old: Any, moved: Any) -> tuple[Any, jax.Array]:
        """Index-ordered: agent i keeps ``old`` if its target cell is taken,
        by an agent ``j < i`` where that agent ended up (its target, or its
        old cell if it was blocked) or by an agent ``j > i`` in its old cell.
        Returns ``(agents, blocked bool[A])``.

        The sequential rule (agent by agent) as a fixed point of one
        vectorised update over all agents: agent i's outcome depends only on
        agents ``j < i``, so the update's fixed point is unique and reached
        after as many updates as the longest chain of agents blocking one
        another (usually one or two) instead of ``A`` sequential steps.
        """
        a = self.num_agents
        target = jnp.round(moved.position)
        before = jnp.round(old.position)
        # [i, j]: agent i's target is agent j's target / agent j's old cell
        on_target = jnp.all(target[:, None, :] == target[None, :, :], axis=-1)
        on_old = jnp.all(target[:, None, :] == before[None, :, :], axis=-1)
        earlier = jnp.tril(jnp.ones((a, a), bool), k=-1)
        by_later = jnp.any(jnp.triu(jnp.ones((a, a), bool), k=1) & on_old, axis=1)

        def update(blocked):
            taken = jnp.where(blocked[None, :], on_old, on_target)
            return by_later | jnp.any(earlier & taken, axis=1)

        first = update(jnp.zeros(a, bool))
        _, blocked = jax.lax.while_loop(lambda c: jnp.any(c[0] != c[1]),
                                        lambda c: (c[1], update(c[1])), (first, update(first)))
        return _where(blocked, old, moved), blocked

    def step_env(self, key: jax.Array, state: EnvState, action: Any, params: EnvParams):
        """One joint transition without auto-reset (see the module docstring)."""
        keys = self.step_keys(key)
        plume_state = self.plume.advance(keys.plume, state.plume, params.plume)
        action = jnp.asarray(action)
        moved, valid, executed = jax.vmap(self.agent_move, in_axes=(0, 0, 0, None, None))(
            self.agent_keys(keys.action), action, state.agent, plume_state, params)
        arrived = state.goal_reached
        noop = self.actions.noop_id
        moved = _where(arrived, state.agent, moved)
        executed = jnp.where(arrived, noop, executed)
        blocked = jnp.zeros(self.num_agents, bool)
        if self.collisions and self.num_agents > 1:
            moved, blocked = self._resolve_collisions(state.agent, moved)
        out = jax.vmap(self.agent_outcome, in_axes=(0, 0, 0, 0, None, None))(
            self.agent_keys(keys.sensor), state.agent, moved, state.sensor, plume_state, params)
        terminated = out["goal_reached"] | arrived
        reward = jnp.where(arrived, 0.0, out["reward"]).astype(jnp.float32)
        step_count = state.step_count + 1
        finished = jnp.all(terminated) if self.done_mode == "all" else jnp.any(terminated)
        out_of_time = (step_count >= params.max_steps) & ~finished
        truncated = out_of_time & ~terminated
        new_state = EnvState(
            agent=moved, plume=plume_state, sensor=out["sensor"], step_count=step_count,
            episode_count=state.episode_count, total_reward=state.total_reward + reward,
            goal_reached=terminated,
        )
        info = {
            **self.step_info(new_state, out, valid, executed, plume_state, params),
            "blocked": blocked,
            "done": finished | out_of_time,
            "num_arrived": jnp.sum(terminated).astype(jnp.int32),
        }
        obs, new_state = self.detach_transition(self._with_others(out["obs"], moved.position),
                                                new_state)
        return obs, new_state, reward, terminated, truncated, info

    def episode_done(self, terminated, truncated, info):
        return info["done"]

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        return jnp.all(state.goal_reached) if self.done_mode == "all" \
            else jnp.any(state.goal_reached)

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        return (state.step_count >= params.max_steps) & ~self.is_terminated(state, params)


def _stack_box(space: spaces.Box, n: int) -> spaces.Box:
    return spaces.Box(low=tuple(space.low) * n, high=tuple(space.high) * n,
                      shape=(n, *space.shape))
