"""The functional environment (layer 2): a gymnax ``Environment``.

``PlumeEnv`` composes a plume, a sensor, an action model, a reward and a
start distribution over a static grid. It is a frozen dataclass, hashable by
its static configuration (and default params, by value), so
``jax.jit(env.step)`` and gymnax-style training code compile once per env and
params structure.

Auto-reset and its cost
-----------------------
``step`` auto-resets like gymnax: when an episode ends, the returned state
and observation belong to a fresh episode, while ``terminated``,
``truncated``, ``reward`` and ``info`` (including ``info["final_observation"]``)
describe the step that ended the old one. Under ``vmap`` (and nested
``vmap``s) ``step`` computes the reset only for the envs that ended
(:func:`plume_jax.core.autoreset.vmappable_step`); ``step_speculative`` computes
it for every env on every step and selects, as gymnax does, so the reset
path must still be cheap. It therefore does *not* call ``plume.init`` (which may warm up a
turbulent plume); it calls ``plume.reinit(key, plume_state, params)``, which
each plume implements cheaply — a static plume rebuilds its trivial state, a
dynamic plume keeps its already-developed state running into the next
episode. Only an explicit ``reset`` pays for ``plume.init``. The new episode's
agent, sensor memory and counters are always fresh. The step-then-reset
itself lives in :mod:`plume_jax.core.autoreset`, shared with ``step_batch`` and
the batch adapters.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import environment as gymnax_env
from gymnax.environments import spaces as gymnax_spaces

from plume_jax.core import spaces
from plume_jax.core.autoreset import (Transition, step_then_reset, step_then_reset_batch,
                                 vmappable_step)
from plume_jax.envs.interfaces import ActionModel, Plume, Reward, Sensor, StartDistribution
from plume_jax.core.types import AgentState, EnvParams, EnvState, Grid, PlumeProbe
from plume_jax.core.vectors import norm

#: Keys of the ``info`` dict returned by ``step`` (all arrays).
INFO_KEYS = (
    "step_count",
    "episode_count",
    "total_reward",
    "goal_reached",
    "agent_xy",
    "agent_heading",
    "distance_to_goal",
    "source_location",
    "goal_location",
    "action_valid",
    "executed_action",
    "discount",
    "terminated",
    "truncated",
    "final_observation",
)


def to_gymnax_space(space: Any) -> Any:
    """Convert a :mod:`plume_jax.core.spaces` space to the gymnax equivalent."""
    if isinstance(space, spaces.Discrete):
        return gymnax_spaces.Discrete(space.n)
    if isinstance(space, spaces.Box):
        low, high = jnp.asarray(space.low_array), jnp.asarray(space.high_array)
        if low.size == 1:
            # bounds of one element as 0-d arrays: gymnax's
            # ``gymnax_space_to_gym_space`` (``GymnaxToGymWrapper``) calls
            # ``float()`` on bounds of size 1, which a 1-D JAX array refuses
            low, high = low.reshape(()), high.reshape(())
        return gymnax_spaces.Box(low, high, space.shape, jnp.float32)
    if isinstance(space, spaces.Dict):
        return gymnax_spaces.Dict({k: to_gymnax_space(v) for k, v in space.items()})
    raise TypeError(f"unsupported space {space!r}")


def _derive_keys(key: jax.Array, first: int, n: int) -> tuple[jax.Array, ...]:
    """``n`` independent keys ``fold_in(key, first + i)``. Unlike one
    ``split``, each is a separate op, so keys a deterministic component never
    reads are removed by XLA and cost nothing per step."""
    return tuple(jax.random.fold_in(key, first + i) for i in range(n))


# Streams of ``fold_in`` indices: ``step`` hands the same key to
# ``step_env`` and ``auto_reset``, which draw from disjoint indices, so the
# speculative reset computed on every step costs one hash level less.
_STEP_STREAM = 0    # step_env: plume, action, sensor
_RESET_STREAM = 3   # reset_env / auto_reset: plume, start, sensor


class StepKeys(NamedTuple):
    """The keys one transition (``step_env``) draws from: ``fold_in(key, 0..2)``."""

    plume: jax.Array
    action: jax.Array
    sensor: jax.Array


class ResetKeys(NamedTuple):
    """The keys one episode start (``reset_env``, ``auto_reset``) draws
    from: ``fold_in(key, 3..5)``, disjoint from :class:`StepKeys`."""

    plume: jax.Array
    start: jax.Array
    sensor: jax.Array


def batched_step(env: Any, keys: jax.Array, state: Any, action: Any, params: Any):
    """One step of a batch of envs: ``env.step_batch`` where the env has it
    (the results of ``vmap(env.step)``, resetting only the envs that ended),
    else ``vmap(env.step)`` (e.g. a gymnax env). Not for use under a further
    ``vmap``."""
    if isinstance(env, PlumeEnv):
        return env.step_batch(keys, state, action, params)
    return jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, action, params)


def _same(value: Any) -> Any:
    return value


def _freeze(tree: Any) -> tuple:
    """A hashable fingerprint of a params pytree (structure, dtypes, values)."""
    leaves, treedef = jax.tree.flatten(tree)
    return (str(treedef),) + tuple(
        (str(np.asarray(x).dtype), np.shape(x), np.asarray(x).tobytes()) for x in leaves
    )


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class PlumeEnv(gymnax_env.Environment[EnvState, EnvParams]):
    """Odour-plume navigation as pure ``reset`` / ``step`` functions.

    A frozen dataclass of its static parts: ``dataclasses.replace(env,
    start=...)`` gives the same env with another component. Two envs are
    equal (and hash alike, so ``jax.jit`` with the env as a static argument
    compiles once for both) when their type, grid, components and default
    params (by value) are equal; ``settings`` is informational.

    Attributes:
        grid: static grid size.
        plume, sensor, actions, reward, start: components, each an
            instance of its interface (:mod:`plume_jax.envs.interfaces`).
        default_params: the ``EnvParams`` used when ``params`` is None.
        settings: the validated, JSON-serialisable settings the env was
            built from (``plume_jax.make`` fills it); informational.
    """

    grid: Grid
    plume: Plume
    sensor: Sensor
    actions: ActionModel
    reward: Reward
    start: StartDistribution
    # A default (None, refused below) keeps a plain class attribute in this
    # class, which shadows gymnax's read-only ``default_params`` property.
    default_params: EnvParams = dataclasses.field(default=None,  # type: ignore[assignment]
                                                  metadata={"fingerprint": _freeze})
    settings: dict = dataclasses.field(default_factory=dict, compare=False)
    #: Whether ``step`` keeps the gradients of the transition's observation
    #: and state (gymnax's ``transition_gradients_enabled``); set it with
    #: :meth:`with_transition_gradients`. Part of the identity: the two
    #: forms compile separately.
    transition_gradients: bool = dataclasses.field(default=False, kw_only=True)

    # gymnax: every plume_jax env has a differentiable transition (what its
    # derivative means depends on the components: docs/functional_api.md)
    _supports_transition_gradients = True

    #: Agents acting in one env: 1 here; ``MultiAgentPlumeEnv.num_agents``
    #: (an instance field there) otherwise.
    num_agents: ClassVar[int] = 1
    #: Whether observations, actions, rewards and flags carry a leading
    #: agent axis ``[num_agents, ...]``: False here, True for a
    #: ``MultiAgentPlumeEnv`` (also one of one agent). Callers branch on
    #: this, not on the env's type.
    is_multi_agent: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.default_params is None:
            raise TypeError(f"{type(self).__name__}() needs default_params (an EnvParams)")
        if self.settings is None:
            object.__setattr__(self, "settings", {})
        identity = (type(self),) + tuple(
            f.metadata.get("fingerprint", _same)(getattr(self, f.name))
            for f in dataclasses.fields(self) if f.compare)
        object.__setattr__(self, "_identity", identity)
        object.__setattr__(self, "_hash", hash(identity))

    # -- gradients through a transition (gymnax 1.0.1's convention) --------
    @property
    def transition_gradients_enabled(self) -> bool:
        """Whether ``step``'s observation and state keep their gradients
        (gymnax API); False unless built by :meth:`with_transition_gradients`."""
        return self.transition_gradients

    def with_transition_gradients(self) -> "PlumeEnv":
        """This env with differentiable transitions (gymnax API): ``step``'s
        observation, state and ``info["final_observation"]`` keep their
        gradients with respect to the action, the state and the params.
        By default they are detached (``stop_gradient``) as gymnax's envs
        detach them; the reward and the rest of ``info`` never are.
        Which components give meaningful gradients: docs/functional_api.md."""
        return dataclasses.replace(self, transition_gradients=True)

    def detach_transition(self, obs: Any, state: Any) -> tuple[Any, Any]:
        """``(obs, state)`` of a transition under the env's gradient policy:
        unchanged with :meth:`with_transition_gradients`, else with
        ``stop_gradient`` (a no-op in the computed values)."""
        return self._apply_transition_gradient_policy(obs, state)

    # -- identity: static configuration, so jit caches are shared ----------
    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlumeEnv) and self._identity == other._identity

    @property
    def structure(self) -> tuple:
        """The static structure: the env's type and every field but the
        default params and the settings. Envs of one structure run the same
        compiled programs for params of one pytree structure (what a vmapped
        sweep over params needs)."""
        return (type(self),) + tuple(
            getattr(self, f.name) for f in dataclasses.fields(self)
            if f.compare and f.name != "default_params")

    def __repr__(self) -> str:
        return (f"PlumeEnv(grid={self.grid.width}x{self.grid.height}, plume={self.plume}, "
                f"sensor={self.sensor}, actions={self.actions}, reward={self.reward}, "
                f"start={self.start}"
                f"{', transition_gradients=True' if self.transition_gradients else ''})")

    # -- keys ------------------------------------------------------------
    @staticmethod
    def step_keys(key: jax.Array) -> StepKeys:
        """The keys of one transition drawn from ``key``."""
        return StepKeys(*_derive_keys(key, _STEP_STREAM, 3))

    @staticmethod
    def reset_keys(key: jax.Array) -> ResetKeys:
        """The keys of one episode start drawn from ``key``."""
        return ResetKeys(*_derive_keys(key, _RESET_STREAM, 3))

    # -- gymnax API ------------------------------------------------------
    @property
    def name(self) -> str:
        return self.settings.get("id", "PlumeEnv")

    @property
    def num_actions(self) -> int:
        """The number of discrete actions, or (as gymnax's continuous envs do)
        the action dimension of a ``Box`` action model."""
        space = self.actions.action_space
        return space.n if isinstance(space, spaces.Discrete) else int(np.prod(space.shape))

    @property
    def action_names(self) -> list[str]:
        """Action names in id order (fixed per action model)."""
        return list(self.actions.action_names)

    @property
    def action_ids(self) -> dict[str, int]:
        """``name -> id``; agents look actions up here, never by literal ints."""
        return dict(self.actions.action_ids)

    def action_space(self, params: EnvParams | None = None) -> Any:
        """The gymnax action space."""
        return to_gymnax_space(self.actions.action_space)

    def observation_space(self, params: EnvParams | None = None) -> Any:
        """The gymnax observation space."""
        return to_gymnax_space(self.sensor.observation_space(self._params(params).sensor))

    def state_space(self, params: EnvParams | None = None) -> Any:
        """Not provided: raises ``NotImplementedError`` saying why.

        The state holds pytrees that its components own (the plume's state,
        the sensor's memory), whose structure and bounds differ from one
        component to the next and are declared by none of them. The state's
        shapes and dtypes are ``jax.eval_shape(env.reset, key, params)[1]``.
        """
        raise NotImplementedError(
            "PlumeEnv has no state_space: the state holds component-owned pytrees (plume "
            "state, sensor memory) without declared bounds; for its shapes and dtypes use "
            "jax.eval_shape(env.reset, key, params)[1]")

    def _params(self, params: EnvParams | None) -> EnvParams:
        return self.default_params if params is None else params

    def probe(self, plume_state: Any, params: EnvParams) -> PlumeProbe:
        """The sensor's read-only view of the plume for ``plume_state``."""
        return PlumeProbe(
            concentration=lambda points: self.plume.concentration(
                plume_state, points, self.grid, params.plume
            ),
            wind=lambda points: self.plume.wind(plume_state, points, params.plume),
            puffs=(lambda: self.plume.puff_centres(plume_state, params.plume))
            if self.plume.has_puffs else None,
            strayed=lambda points: self.plume.strayed(plume_state, points, params.plume),
        )

    def goal_location(self, plume_state: Any, params: EnvParams) -> jax.Array:
        """f32[2]; the goal is the source."""
        return self.plume.source_location(plume_state, params.plume)

    # -- per-agent pieces: the single-agent env calls them directly, the
    # -- multi-agent env (plume_jax.envs.multi_agent) vmaps them over its agents.
    def agent_start(self, k_start: jax.Array, k_sensor: jax.Array, plume_state: Any,
                    params: EnvParams) -> tuple[jax.Array, AgentState, Any]:
        """``(obs, agent, sensor_state)`` of one agent at an episode start."""
        goal = self.goal_location(plume_state, params)
        probe = self.probe(plume_state, params)
        agent = self.start.sample(k_start, self.grid, goal, params.goal_radius, params.start,
                                  probe=probe)
        obs, sensor_state = self.sensor.init(k_sensor, agent, probe, params.sensor)
        return obs, agent, sensor_state

    def agent_move(self, k_action: jax.Array, action: Any, agent: AgentState, plume_state: Any,
                   params: EnvParams) -> tuple[AgentState, jax.Array, jax.Array]:
        """``(agent, action_valid, executed_action)`` after one agent's action
        (an invalid action is executed as noop)."""
        moved = self.actions.process_action(k_action, action, agent, self.grid, params.actions,
                                            probe=self.probe(plume_state, params))
        return moved, self.actions.validate_action(action), self.actions.executed_action(action)

    def agent_outcome(self, k_sensor: jax.Array, prev: AgentState, agent: AgentState,
                      sensor_state: Any, plume_state: Any, params: EnvParams) -> dict[str, Any]:
        """One agent's goal test (the only one), reward and observation after a move.

        Returns a dict with ``obs``, ``sensor`` (new sensor state),
        ``reward``, ``goal_reached``, ``distance`` and ``goal``.
        """
        goal = self.goal_location(plume_state, params)
        distance = norm(agent.position - goal).astype(jnp.float32)
        goal_reached = distance <= params.goal_radius
        probe = self.probe(plume_state, params)
        # a reward that reads the plume (odour_gated_shaping) sees it at the step's end
        seen = {"probe": probe} if self.reward.reads_plume else {}
        reward = self.reward.compute(prev, agent, goal, goal_reached, params.reward, **seen)
        obs, sensor_state = self.sensor.observe(k_sensor, agent, probe, sensor_state,
                                                params.sensor)
        return {"obs": obs, "sensor": sensor_state, "reward": reward,
                "goal_reached": goal_reached, "distance": distance, "goal": goal}

    def _start_episode(self, k_start: jax.Array, k_sensor: jax.Array, plume_state: Any,
                       episode_count: Any, params: EnvParams) -> tuple[jax.Array, EnvState]:
        obs, agent, sensor_state = self.agent_start(k_start, k_sensor, plume_state, params)
        state = EnvState(
            agent=agent,
            plume=plume_state,
            sensor=sensor_state,
            step_count=jnp.asarray(0, jnp.int32),
            episode_count=jnp.asarray(episode_count, jnp.int32),
            total_reward=jnp.asarray(0.0, jnp.float32),
            goal_reached=jnp.asarray(False),
        )
        return obs, state

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """A fresh plume (``plume.init``) and a fresh episode."""
        keys = self.reset_keys(key)
        plume_state = self.plume.init(keys.plume, params.plume)
        return self._start_episode(keys.start, keys.sensor, plume_state, 1, params)

    def auto_reset(self, key: jax.Array, state: EnvState, params: EnvParams
                   ) -> tuple[jax.Array, EnvState]:
        """The cheap reset used inside ``step`` (see the module docstring)."""
        keys = self.reset_keys(key)
        plume_state = self.plume.reinit(keys.plume, state.plume, params.plume)
        return self._start_episode(keys.start, keys.sensor, plume_state, state.episode_count + 1,
                                   params)

    def step_env(self, key: jax.Array, state: EnvState, action: Any, params: EnvParams):
        """One transition without auto-reset.

        Returns ``(obs, state, reward, terminated, truncated, info)``.
        """
        keys = self.step_keys(key)
        plume_state = self.plume.advance(keys.plume, state.plume, params.plume)
        return self.agent_transition(keys, state, plume_state, action, params)

    def agent_transition(self, keys: StepKeys, state: EnvState, plume_state: Any, action: Any,
                         params: EnvParams):
        """The part of :meth:`step_env` after the plume's advance: the
        agent's move, goal test, reward and observation in ``plume_state``
        (the plume already advanced with ``keys.plume``). The returned state
        carries ``plume_state``; ``state.plume`` is not read.

        Returns ``(obs, state, reward, terminated, truncated, info)``.
        """
        agent, action_valid, executed = self.agent_move(keys.action, action, state.agent,
                                                        plume_state, params)
        out = self.agent_outcome(keys.sensor, state.agent, agent, state.sensor, plume_state,
                                 params)
        step_count = state.step_count + 1
        # the goal, or (a plume with a stray limit) straying from the plume
        terminated = out["goal_reached"] | self.plume.strayed(plume_state, agent.position,
                                                               params.plume)
        truncated = jnp.logical_and(step_count >= params.max_steps, jnp.logical_not(terminated))
        new_state = EnvState(
            agent=agent,
            plume=plume_state,
            sensor=out["sensor"],
            step_count=step_count,
            episode_count=state.episode_count,
            total_reward=state.total_reward + out["reward"],
            goal_reached=out["goal_reached"],
        )
        info = self.step_info(new_state, out, action_valid, executed, plume_state, params)
        obs, new_state = self.detach_transition(out["obs"], new_state)
        return obs, new_state, out["reward"], terminated, truncated, info

    def step_info(self, new_state: EnvState, out: dict[str, Any], action_valid: jax.Array,
                  executed: jax.Array, plume_state: Any, params: EnvParams) -> dict[str, Any]:
        """The info dict of a step (arrays; per agent where the state is)."""
        return {
            "step_count": new_state.step_count,
            "episode_count": new_state.episode_count,
            "total_reward": new_state.total_reward,
            "goal_reached": new_state.goal_reached,
            "agent_xy": new_state.agent.position,
            "agent_heading": new_state.agent.heading,
            "distance_to_goal": out["distance"],
            "source_location": self.plume.source_location(plume_state, params.plume),
            "goal_location": self.goal_location(plume_state, params),
            "action_valid": action_valid,
            "executed_action": executed,
            "discount": 1.0 - (new_state.goal_reached | self.plume.strayed(
                plume_state, new_state.agent.position, params.plume)).astype(jnp.float32),
        }

    def episode_done(self, terminated: jax.Array, truncated: jax.Array,
                     info: dict[str, Any]) -> jax.Array:
        """bool[]: whether ``step`` auto-resets after this transition."""
        return jnp.logical_or(terminated, truncated)

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        return jnp.logical_and(state.step_count >= params.max_steps,
                               jnp.logical_not(self.is_terminated(state, params)))

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """bool[]: the goal reached, or the agent strayed from a plume with a
        stray limit (:meth:`plume_jax.plumes.base.Plume.strayed`)."""
        return state.goal_reached | self.plume.strayed(state.plume, state.agent.position,
                                                       params.plume)

    @functools.partial(jax.jit, static_argnames=("self",))
    def step(self, key: jax.Array, state: EnvState, action: Any,
             params: EnvParams | None = None) -> Transition:
        """One step with gymnax-style auto-reset.

        Returns ``(obs, state, reward, terminated, truncated, info)`` (a
        :class:`~plume_jax.core.autoreset.Transition`); see the module docstring
        for what describes the old and the new episode. Under ``jax.vmap``
        (also nested, e.g. a vmapped sweep over params) the new episodes are
        computed only for the envs whose episode ended
        (:func:`~plume_jax.core.autoreset.vmappable_step`); the results are those
        of the speculative reset, :func:`~plume_jax.core.autoreset.step_then_reset`
        (keys, states, counts and flags exactly, floats up to rounding).
        """
        return vmappable_step(self)(key, state, action, self._params(params))

    @functools.partial(jax.jit, static_argnames=("self",))
    def step_speculative(self, key: jax.Array, state: EnvState, action: Any,
                         params: EnvParams | None = None) -> Transition:
        """:meth:`step` with the reset computed on every step and selected
        (:func:`~plume_jax.core.autoreset.step_then_reset`): under ``vmap`` every
        env draws a fresh start on every step. The reference :meth:`step` is
        tested against, the form to use where the batch is sharded over
        devices (gathering the ended envs would move data between them), and
        what ``jax.grad`` of :meth:`step` differentiates."""
        return step_then_reset(self, key, key, state, action, self._params(params))

    @functools.partial(jax.jit, static_argnames=("self", "max_resets"))
    def step_batch(self, keys: jax.Array, state: EnvState, action: Any,
                   params: EnvParams | None = None, max_resets: int | None = None
                   ) -> Transition:
        """``vmap(step)`` over a batch, resetting only the envs that ended,
        with the reset pool ``max_resets`` chosen by the caller.

        Returns what ``jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys,
        state, action, params)`` returns (whose batch rule is this same
        :func:`~plume_jax.core.autoreset.step_then_reset_batch`, with the
        default pool). The transition (``step_env``) runs for the whole
        batch, then the reset runs on at most ``max_resets`` envs, gathered
        from those whose episode ended, and is scattered back; each gets the
        reset :meth:`step_speculative` would give it (same key, same state),
        without paying for a reset of every env on every step (half or more
        of a cheap plume's step: ``python scripts/bench/throughput.py
        --reset-cost``). If more than ``max_resets`` envs end on the same
        step, a ``lax.cond`` falls back to resetting the whole batch. Keys,
        states, counts and flags are the same; floats are the same up to
        rounding, since XLA may compile the reset of a smaller batch with
        another reduction order (on the development CPU the single-agent
        presets gave bit-identical results; ``tests/envs/test_core_step_batch.py``).

        Args:
            keys: key[N], one per env, as for ``vmap(step)``.
            state: the batch of states (leading axis N).
            action: the batch of actions (leading axis N).
            params: shared by the batch (not batched).
            max_resets: static; how many resets the cheap branch computes,
                1..N; default ``max(1, N // 16)``.

        Under an outer ``vmap`` (e.g. a vmapped sweep) the ``cond`` turns
        into a select that computes both branches; use ``vmap(step)`` there.
        """
        return step_then_reset_batch(self, keys, keys, state, action, self._params(params),
                                     max_resets)

    @functools.partial(jax.jit, static_argnames=("self",))
    def reset(self, key: jax.Array, params: EnvParams | None = None):
        """``(obs, state)`` of a fresh episode with a fresh plume."""
        return self.reset_env(key, self._params(params))

    def render_field(self, state: EnvState, params: EnvParams | None = None) -> jax.Array:
        """f32[H, W], the concentration field for ``state`` (``field[y, x]``)."""
        params = self._params(params)
        return self.plume.field(state.plume, self.grid, params.plume)

    def observation_labels(self) -> list[str]:
        """What each index of the (flat) observation means."""
        return list(self.sensor.observation_labels())

    def describe(self) -> dict[str, Any]:
        """The JSON description policies are built from: action names and ids,
        the action space, the observation layout and the number of agents."""
        space = self.actions.action_space
        action_space = {"type": "discrete", "n": space.n} if isinstance(space, spaces.Discrete) \
            else {"type": "box", "shape": list(space.shape), "low": list(space.low),
                  "high": list(space.high)}
        return {
            "num_agents": self.num_agents,
            "action_names": self.action_names,
            "action_ids": self.action_ids,
            "action_space": action_space,
            "observation_labels": self.observation_labels(),
            "observation_shape": list(self.observation_space().shape),
            "actions_type": self.actions.type_name,
            "sensor_type": self.sensor.type_name,
        }

    def get_metadata(self) -> dict[str, Any]:
        """JSON description of the env: settings, action names, spaces."""
        return {
            "settings": self.settings,
            "grid_size": [self.grid.width, self.grid.height],
            "action_names": self.action_names,
            "actions": self.actions.get_metadata(),
            "plume": self.plume.get_metadata(),
            "sensor": self.sensor.get_metadata(),
            "reward": self.reward.get_metadata(),
            "start": self.start.get_metadata(),
        }

