"""Potential-based shaping of the distance to the goal."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.rewards.base import Reward, goal_reward_setting
from plume_jax.settings import MAX_REWARD, real, setting
from plume_jax.core.types import AgentState
from plume_jax.core.vectors import norm


@chex.dataclass(frozen=True)
class PotentialShapingParams(Pytree):
    """Attributes:
        goal_reward: f32[], paid on the step that reaches the goal.
        gamma: f32[] in ``(0, 1]``, the discount the shaping is consistent with.
        scale: f32[] >= 0, reward per cell of distance (``Φ = -scale * d``).
    """

    goal_reward: jax.Array = goal_reward_setting()
    gamma: jax.Array = setting(0.99, real(low=0.0, high=1.0, low_inclusive=False),
                               doc="discount factor the shaping is consistent with; use it in "
                                   "training; in (0, 1]")
    scale: jax.Array = setting(0.01, real(low=0.0, high=MAX_REWARD),
                               doc=f"shaping reward per cell of distance, in [0, {MAX_REWARD:g}]")


@dataclasses.dataclass(frozen=True)
class PotentialShapingReward(Reward[PotentialShapingParams]):
    """Sparse goal reward plus potential-based distance shaping.

    ``r = goal_reward * [goal reached] + γ Φ(s') - Φ(s)`` with
    ``Φ(s) = -scale * |position - goal|`` and ``Φ(s') = 0`` when ``s'``
    reaches the goal (terminal). Over an episode the discounted shaping
    terms telescope to ``γ^T Φ(s_T) - Φ(s_0)``, so with the same ``γ`` in
    training the optimal policy is that of the sparse reward (Ng, Harada &
    Russell 1999); only learning speed changes.
    """

    type_name = "potential_shaping"
    Params = PotentialShapingParams
    shaped = True

    def potential(self, agent: AgentState, goal: jax.Array,
                  params: PotentialShapingParams) -> jax.Array:
        """f32[], ``Φ = -scale * |position - goal|``."""
        return (-params.scale * norm(agent.position - goal)).astype(jnp.float32)

    def discount(self, params: PotentialShapingParams) -> jax.Array:
        """f32[], ``gamma``."""
        return jnp.asarray(params.gamma, jnp.float32)

    def compute(self, prev_agent: AgentState, next_agent: AgentState, goal: jax.Array,
                goal_reached: jax.Array, params: PotentialShapingParams) -> jax.Array:
        phi_next = jnp.where(goal_reached, 0.0, self.potential(next_agent, goal, params))
        shaping = params.gamma * phi_next - self.potential(prev_agent, goal, params)
        base = jnp.where(goal_reached, params.goal_reward, 0.0)
        return (base + shaping).astype(jnp.float32)

    def metadata_extras(self) -> dict[str, Any]:
        return {"potential": "-scale * distance"}
