"""Reward functions (layer 1).

A reward is a frozen dataclass with a pure
``compute(prev_agent, next_agent, goal, goal_reached, params) -> f32[]``.
``goal_reached`` is computed once per step by the env (distance to the goal
``<= goal_radius``) and is the same value that terminates the episode.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from plume_jax.settings import Configurable, Setting, real
from plume_jax.types import AgentState


@chex.dataclass(frozen=True)
class SparseGoalParams:
    """Attributes: goal_reward: f32[], paid on the step that reaches the goal."""

    goal_reward: jax.Array


@dataclasses.dataclass(frozen=True)
class SparseGoalReward(Configurable):
    """``goal_reward`` on the step that reaches the goal, 0 otherwise."""

    type_name = "sparse"
    SETTINGS = {
        "goal_reward": Setting(1.0, real(), doc="reward for reaching the goal"),
    }
    Params = SparseGoalParams

    def compute(self, prev_agent: AgentState, next_agent: AgentState, goal: jax.Array,
                goal_reached: jax.Array, params: SparseGoalParams) -> jax.Array:
        return jnp.where(goal_reached, params.goal_reward, 0.0).astype(jnp.float32)


@chex.dataclass(frozen=True)
class StepPenaltyParams:
    """Attributes:
        goal_reward: f32[], paid on the step that reaches the goal.
        step_penalty: f32[] >= 0, subtracted on every other step.
    """

    goal_reward: jax.Array
    step_penalty: jax.Array


@dataclasses.dataclass(frozen=True)
class StepPenaltyReward(Configurable):
    """``goal_reward`` on reaching the goal, ``-step_penalty`` on every other step."""

    type_name = "step_penalty"
    SETTINGS = {
        "goal_reward": Setting(1.0, real(), doc="reward for reaching the goal"),
        "step_penalty": Setting(0.01, real(low=0.0), doc="cost of every non-goal step"),
    }
    Params = StepPenaltyParams

    def compute(self, prev_agent: AgentState, next_agent: AgentState, goal: jax.Array,
                goal_reached: jax.Array, params: StepPenaltyParams) -> jax.Array:
        return jnp.where(goal_reached, params.goal_reward, -params.step_penalty).astype(jnp.float32)


REWARDS = {cls.type_name: cls for cls in (SparseGoalReward, StepPenaltyReward)}
