"""Goal rewards: paid on reaching the goal, with or without a cost per step."""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Protocol, TypeVar

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.rewards.base import Reward, goal_reward_setting
from plume_jax.settings import MAX_REWARD, real, setting
from plume_jax.core.types import AgentState


@chex.dataclass(frozen=True)
class SparseGoalParams(Pytree):
    """Attributes: goal_reward: f32[], paid on the step that reaches the goal."""

    goal_reward: jax.Array = goal_reward_setting()


class _GoalRewardParams(Protocol):
    @property
    def goal_reward(self) -> jax.Array: ...


#: The params of a goal reward: they hold ``goal_reward``.
GoalParamsT = TypeVar("GoalParamsT", bound=_GoalRewardParams)


class GoalReward(Reward[GoalParamsT]):
    """``goal_reward`` on the step that reaches the goal, :meth:`step_reward`
    on every other step."""

    @abc.abstractmethod
    def step_reward(self, params: GoalParamsT) -> Any:
        """f32[] (or a Python float): the reward of a step that does not reach the goal."""

    def compute(self, prev_agent: AgentState, next_agent: AgentState, goal: jax.Array,
                goal_reached: jax.Array, params: GoalParamsT) -> jax.Array:
        return jnp.where(goal_reached, params.goal_reward,
                         self.step_reward(params)).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class SparseGoalReward(GoalReward[SparseGoalParams]):
    """``goal_reward`` on the step that reaches the goal, 0 otherwise."""

    type_name = "sparse"
    Params = SparseGoalParams

    def step_reward(self, params: SparseGoalParams) -> float:
        return 0.0


@chex.dataclass(frozen=True)
class StepPenaltyParams(Pytree):
    """Attributes:
        goal_reward: f32[], paid on the step that reaches the goal.
        step_penalty: f32[] >= 0, subtracted on every other step.
    """

    goal_reward: jax.Array = goal_reward_setting()
    step_penalty: jax.Array = setting(0.01, real(low=0.0, high=MAX_REWARD),
                                      doc=f"cost of every non-goal step, in [0, {MAX_REWARD:g}]")


@dataclasses.dataclass(frozen=True)
class StepPenaltyReward(GoalReward[StepPenaltyParams]):
    """``goal_reward`` on reaching the goal, ``-step_penalty`` on every other step."""

    type_name = "step_penalty"
    Params = StepPenaltyParams

    def step_reward(self, params: StepPenaltyParams) -> jax.Array:
        return -params.step_penalty
