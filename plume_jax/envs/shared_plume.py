"""Several single-agent episodes per plume realisation (layer 2).

:class:`SharedPlumeBatch` runs a batch of ``N`` independent single-agent
episodes of a :class:`~plume_jax.envs.plume_env.PlumeEnv` in ``N / k`` plume
realisations, ``k = agents_per_plume``: each plume is advanced once per
step and read by its ``k`` agents, so the plume's advance (most of a
filament plume's step) costs ``k`` times less per env step. With ``k = 1``
it is :meth:`PlumeEnv.step_batch` (same keys, states, observations and
flags).

Layout: agent ``i`` belongs to realisation ``i // k``; the agents of one
realisation are contiguous. Observations, rewards, flags and ``info`` have
the flat leading axis ``N``, as ``step_batch``'s do.

Episodes. Every agent runs its own single-agent episode: its own start,
reward, termination, truncation and step count. When an agent's episode
ends only that agent restarts (its start drawn anew, on the realisation's
current plume; the reset is computed only for the agents that ended, as in
``step_batch``). The plume goes on: an agent's episode end never restarts
the plume. The first agent of each realisation (``i % k == 0``, the
*lead*) keeps the plume's episode bookkeeping: when its episode ends the
plume gets ``plume.reinit`` as in a single env (for a filament plume this
only restarts the wind's episode clock: the puffs and gusts run on). So:

- the lead agent's episodes have the law of a single env's episodes;
- every other agent starts its episodes at whatever point the plume has
  reached: a plume that has been running (the stationary regime). A single
  env's first episode after ``reset`` starts on a plume fresh from its
  ``init`` (a filament plume's ``warmup_steps`` steps from empty, wind clock
  at 0); its later episodes start, like these, on a plume that has kept
  running. After :meth:`SharedPlumeBatch.reset` all ``k`` agents start
  together on one freshly initialised plume;
- time-dependent wind follows the lead's episodes: a ``switch_once`` wind
  switches ``wind_switch_time`` steps into each of the lead's episodes; the
  other agents see those switches at whatever step of their own episodes
  they fall (possibly never, possibly more than once in one episode);
- the ``k`` episodes of one realisation are correlated (same puffs, same
  gusts, same wind): docs/plumes.md, "Several agents per plume
  realisation", says what that means for statistics and how to choose ``k``.

Plumes whose ``reinit`` changes what an agent reads (a Poisson plume that
draws its source per episode, a movie plume that restarts its movie) refuse
``k > 1`` (``Plume.sharing_conflict``); a static plume such as the Gaussian
may share, which changes nothing but the (already negligible) cost.

Keys: the batch takes one key per agent, as ``step_batch``. Each agent's
move, sensor and start draw from its own key (:meth:`PlumeEnv.step_keys`,
:meth:`PlumeEnv.reset_keys`); realisation ``p``'s advance, ``init`` and
``reinit`` draw from the plume key of its lead's key (agent ``p * k``).

Under ``jax.vmap`` (a sweep over params) the reset's ``lax.cond`` becomes
a select that computes both branches, as for ``step_batch``: it works, at
the cost of a reset for every agent on every step.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.autoreset import (Transition, check_max_resets, ended_step_info, reset_where)
from plume_jax.envs.plume_env import PlumeEnv
from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.core.types import EnvParams, EnvState


@chex.dataclass(frozen=True)
class SharedPlumeState(Pytree):
    """A batch of ``N = num_plumes * k`` episodes over ``num_plumes`` plumes.

    Attributes:
        plume: the plume states, leading axis ``num_plumes``.
        episodes: the agents' single-env states (:class:`EnvState`, leading
            axis ``N``) with ``plume=()``: agent ``i`` reads ``plume[i // k]``.
    """

    plume: Any
    episodes: EnvState


class _AgentRestart(NamedTuple):
    """What :func:`~plume_jax.core.autoreset.reset_where` calls to restart ended
    agents: ``auto_reset(key, (episode, realisation), params)`` starts a new
    episode of one agent on its realisation's (already reinit-ed) plume."""

    env: PlumeEnv
    plume: Any  # the plume states, leading axis num_plumes

    def auto_reset(self, key: jax.Array, view: tuple[EnvState, jax.Array], params: EnvParams
                   ) -> tuple[Any, tuple[EnvState, jax.Array]]:
        episode, realisation = view
        plume_state = jax.tree.map(lambda x: x[realisation], self.plume)
        obs, state = _start_on(self.env, key, plume_state, episode.episode_count + 1, params)
        return obs, (state, realisation)


def _start_on(env: PlumeEnv, key: jax.Array, plume_state: Any, episode_count: Any,
              params: EnvParams) -> tuple[Any, EnvState]:
    """``(obs, state)`` of one agent's new episode on ``plume_state`` (start
    and sensor drawn from ``key`` as in ``env.reset``), the state without
    its plume (``plume=()``)."""
    keys = env.reset_keys(key)
    obs, state = env._start_episode(keys.start, keys.sensor, plume_state, episode_count, params)
    return obs, state.replace(plume=())


def check_agents_per_plume(agents_per_plume: Any, env: Any = None,
                           num_envs: int | None = None) -> int:
    """``agents_per_plume`` as an int, or ``ValidationError``: a positive
    integer, dividing ``num_envs`` (when given), and 1 for a plume that
    cannot be shared (``env.plume.sharing_conflict()``) or an env that is
    not a single-agent :class:`PlumeEnv`."""
    if isinstance(agents_per_plume, (bool, np.bool_)) or \
            not isinstance(agents_per_plume, (int, np.integer)) or agents_per_plume < 1:
        raise ValidationError.for_parameter("agents_per_plume", agents_per_plume,
                                            "a positive integer")
    k = int(agents_per_plume)
    if num_envs is not None and num_envs % k:
        raise ValidationError.for_parameter(
            "agents_per_plume", k, f"a divisor of the batch size {num_envs}")
    if env is not None and k > 1:
        if env.is_multi_agent:
            raise ValidationError.for_parameter(
                "agents_per_plume", k,
                "1 for a multi-agent env (it shares its plume among its agents already)")
        conflict = env.plume.sharing_conflict()
        if conflict:
            raise ValidationError.for_parameter(
                "agents_per_plume", k, f"1 for the {env.plume.type_name} plume: {conflict}")
    return k


@dataclasses.dataclass(frozen=True)
class SharedPlumeBatch:
    """Batches of single-agent episodes of ``env``, ``agents_per_plume`` per
    plume realisation (see the module docstring).

    Attributes:
        env: a single-agent :class:`~plume_jax.envs.plume_env.PlumeEnv`.
        agents_per_plume: ``k``, static; a positive integer dividing every
            batch size used; ``k > 1`` needs a plume that can be shared.

    Hashable, so its jitted methods compile once per ``(env, k)``.
    """

    env: PlumeEnv
    agents_per_plume: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.env, PlumeEnv):
            raise ValidationError.for_parameter("env", type(self.env).__name__,
                                                "a plume_jax PlumeEnv")
        object.__setattr__(self, "agents_per_plume",
                           check_agents_per_plume(self.agents_per_plume, self.env))

    def _params(self, params: EnvParams | None) -> EnvParams:
        return self.env.default_params if params is None else params

    def _groups(self, keys: jax.Array) -> tuple[int, int]:
        """``(num_plumes, k)`` of a batch of keys, or ``ValidationError``."""
        num_envs = keys.shape[0]
        k = check_agents_per_plume(self.agents_per_plume, num_envs=num_envs)
        return num_envs // k, k

    @staticmethod
    def _check_batch(keys: jax.Array, state: SharedPlumeState, action: Any) -> None:
        """``ValidationError`` unless ``keys`` and every leaf of ``action``
        have one entry per episode of ``state`` (static shapes: checked
        while tracing, nothing read back from the device)."""
        expected = jax.tree.leaves(state.episodes)[0].shape[0]
        if jnp.ndim(keys) < 1 or keys.shape[0] != expected:
            raise ValidationError.for_parameter(
                "keys", f"a key batch of shape {tuple(jnp.shape(keys))}",
                f"{expected} keys, one per episode of the state")
        for leaf in jax.tree.leaves(action):
            if jnp.ndim(leaf) < 1 or jnp.shape(leaf)[0] != expected:
                raise ValidationError.for_parameter(
                    "action", f"an action batch of shape {tuple(jnp.shape(leaf))}",
                    f"a leading axis of {expected}, one action per episode of the state")

    def _grouped(self, tree: Any, num_plumes: int, k: int) -> Any:
        return jax.tree.map(lambda x: jnp.reshape(x, (num_plumes, k) + x.shape[1:]), tree)

    def _flat(self, tree: Any) -> Any:
        return jax.tree.map(lambda x: jnp.reshape(x, (-1,) + x.shape[2:]), tree)

    def _lead_keys(self, keys: jax.Array) -> jax.Array:
        """key[num_plumes]: each realisation's lead agent's key."""
        return keys[::self.agents_per_plume]

    @functools.partial(jax.jit, static_argnames=("self",))
    def reset(self, keys: jax.Array, params: EnvParams | None = None
              ) -> tuple[Any, SharedPlumeState]:
        """``(obs, state)``: ``num_plumes`` fresh plumes (``plume.init`` with
        each lead's key) and a fresh episode for every agent on its plume.

        Args:
            keys: key[N], one per agent (``N`` a multiple of ``k``).
        Returns:
            obs with leading axis ``N`` and a :class:`SharedPlumeState`;
            with ``k = 1`` what ``vmap(env.reset)(keys)`` returns.
        """
        env, params = self.env, self._params(params)
        num_plumes, k = self._groups(keys)
        plume = jax.vmap(lambda key: env.plume.init(env.reset_keys(key).plume, params.plume))(
            self._lead_keys(keys))

        obs, episodes = jax.vmap(jax.vmap(
            lambda key, plume_state: _start_on(env, key, plume_state, 1, params),
            in_axes=(0, None)))(self._grouped(keys, num_plumes, k), plume)
        return self._flat(obs), SharedPlumeState(plume=plume, episodes=self._flat(episodes))

    @functools.partial(jax.jit, static_argnames=("self", "max_resets"))
    def step(self, keys: jax.Array, state: SharedPlumeState, action: Any,
             params: EnvParams | None = None, max_resets: int | None = None) -> Transition:
        """One step of every agent, with auto-reset of the agents whose
        episode ended.

        Each plume advances once (its lead's plume key); each agent moves,
        is rewarded and observes in its plume's advanced state
        (:meth:`PlumeEnv.agent_transition`, its own action and sensor keys).
        Where a lead's episode ended its plume gets ``plume.reinit``; then
        the agents that ended start new episodes on their plumes (computed
        for at most ``max_resets`` of them, falling back to all, as in
        ``step_batch``).

        Args:
            keys: key[N], one per agent.
            state: a :class:`SharedPlumeState` of ``N`` agents.
            action: the ``N`` agents' actions (leading axis ``N``).
            params: shared by the batch.
            max_resets: static; the reset pool, ``1..N``; default ``max(1, N // 16)``.
        Returns:
            a :class:`~plume_jax.core.autoreset.Transition` with leading axis ``N``
            on obs, reward, flags and info (``info["final_observation"]`` the
            observation that ended an episode) and the new
            :class:`SharedPlumeState`.
        """
        env, params = self.env, self._params(params)
        self._check_batch(keys, state, action)
        num_plumes, k = self._groups(keys)
        max_resets = check_max_resets(max_resets, keys.shape[0])

        lead_keys = self._lead_keys(keys)
        plume = jax.vmap(lambda key, p: env.plume.advance(env.step_keys(key).plume, p,
                                                          params.plume))(lead_keys, state.plume)
        # each agent reads its realisation's plume: with k = 1 the plume
        # itself (so the program is step_batch's), else a broadcast
        agent_plume = plume if k == 1 else jax.tree.map(
            lambda x: jnp.repeat(x, k, axis=0, total_repeat_length=x.shape[0] * k), plume)

        def one_agent(key, episode, plume_state, agent_action):
            obs, stepped, *rest = env.agent_transition(env.step_keys(key), episode, plume_state,
                                                       agent_action, params)
            return (obs, stepped.replace(plume=()), *rest)

        obs, stepped, reward, terminated, truncated, info = jax.vmap(one_agent)(
            keys, state.episodes, agent_plume, action)
        done = jax.vmap(env.episode_done)(terminated, truncated, info)

        lead_done = done[::k]
        reinit = jax.vmap(lambda key, p: env.plume.reinit(env.reset_keys(key).plume, p,
                                                          params.plume))(lead_keys, plume)
        plume = jax.tree.map(
            lambda new, old: jnp.where(jnp.reshape(lead_done, (-1,) + (1,) * (old.ndim - 1)),
                                       new, old), reinit, plume)
        realisation = jnp.arange(keys.shape[0], dtype=jnp.int32) // k
        obs_next, (episodes, _) = reset_where(_AgentRestart(env, plume), done, keys, obs,
                                              (stepped, realisation), params, max_resets)
        return Transition(obs_next, SharedPlumeState(plume=plume, episodes=episodes), reward,
                          terminated, truncated,
                          ended_step_info(info, terminated, truncated, obs))

    def env_states(self, state: SharedPlumeState) -> EnvState:
        """The ``N`` agents' single-env states (leading axis ``N``), each
        with a copy of its realisation's plume state: what ``step_batch``
        carries (with ``k = 1``, the same states)."""
        k = self.agents_per_plume
        plume = jax.tree.map(lambda x: jnp.repeat(x, k, axis=0), state.plume)
        return state.episodes.replace(plume=plume)
