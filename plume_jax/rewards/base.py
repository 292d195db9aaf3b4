"""The reward interface (layer 1)."""

from __future__ import annotations

import abc
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp

from plume_jax.settings import MAX_REWARD, Configurable, real, setting
from plume_jax.core.types import AgentState

ParamsT = TypeVar("ParamsT")


class Reward(Configurable, abc.ABC, Generic[ParamsT]):
    """A reward function: ``Reward[Params]``.

    Required: :meth:`compute`. Optional, with defaults: :meth:`potential`
    (0) and :meth:`discount` (1), the shaping potential ``Φ`` the reward adds
    as ``γ Φ(s') - Φ(s)`` and the ``γ`` it assumes (Ng, Harada & Russell
    1999: train with the same discount to keep the optimal policy); and
    ``shaped`` (False), whether ``Φ`` is not identically 0.

    ``goal_reached`` is computed once per step by the env (distance to the
    goal ``<= goal_radius``), the same value that terminates the episode;
    the potential of a terminal state is taken as 0.

    A reward whose :attr:`reads_plume` is True also takes the keyword
    ``probe`` (a :class:`~plume_jax.core.types.PlumeProbe` of the plume at
    the step's end: its concentration, puffs and stray rule); the env passes
    it to such a reward only, so a reward that does not read the plume
    keeps the five-argument ``compute``.
    """

    @property
    def shaped(self) -> bool:
        """Whether the reward adds potential-based shaping (``Φ`` not identically 0)."""
        return False

    @property
    def reads_plume(self) -> bool:
        """Whether :meth:`compute` reads the plume (keyword ``probe``); False by default."""
        return False

    @property
    def potential_based(self) -> bool:
        """Whether the reward is a goal reward plus potential-based shaping
        of :meth:`potential` under :meth:`discount` (its shaping then
        leaves the goal reward's optimal policy unchanged). True by default;
        False for a reward with terms that depend on the path
        (``odour_gated_shaping``)."""
        return True

    @abc.abstractmethod
    def compute(self, prev_agent: AgentState, next_agent: AgentState, goal: jax.Array,
                goal_reached: jax.Array, params: ParamsT) -> jax.Array:
        """f32[]: the reward of the step from ``prev_agent`` to ``next_agent``
        (``goal`` f32[2], cells; ``goal_reached`` bool[]; plus the keyword
        ``probe`` for a reward that :attr:`reads_plume`)."""

    def potential(self, agent: AgentState, goal: jax.Array, params: ParamsT) -> jax.Array:
        """f32[]: the shaping potential ``Φ`` of ``agent``; 0 (no shaping) by default."""
        return jnp.zeros((), jnp.float32)

    def discount(self, params: ParamsT) -> jax.Array:
        """f32[] in ``(0, 1]``: the ``γ`` the shaping assumes; 1 by default
        (without shaping any discount keeps the optimal policy)."""
        return jnp.ones((), jnp.float32)

    def get_metadata(self) -> dict[str, Any]:
        """JSON: type, static settings, dynamic setting names, then any extras."""
        return {"type": self.type_name, "parameters": self.static_settings(),
                "dynamic_parameters": self.dynamic_setting_names(), **self.metadata_extras()}


def goal_reward_setting(default: float = 1.0) -> Any:
    """The ``goal_reward`` setting (paid on the step that reaches the goal)."""
    return setting(default, real(low=-MAX_REWARD, high=MAX_REWARD),
                   doc=f"reward for reaching the goal, in [-{MAX_REWARD:g}, {MAX_REWARD:g}]")
