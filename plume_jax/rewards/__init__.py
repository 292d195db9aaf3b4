"""Reward functions (layer 1).

The interface every reward implements is :class:`plume_jax.rewards.base.Reward`:

- ``compute(prev_agent, next_agent, goal, goal_reached, params) -> f32[]``
  (a reward whose ``reads_plume`` is True also gets the keyword ``probe``,
  the plume at the step's end);
- ``potential(agent, goal, params) -> f32[]``: the shaping potential ``Φ``
  this reward adds as ``γ Φ(s') - Φ(s)`` (0 for unshaped rewards);
- ``discount(params) -> f32[]``: the ``γ`` that shaping assumes (1 for
  unshaped rewards); train with the same discount to keep the optimal
  policy unchanged (Ng, Harada & Russell 1999).

``goal_reached`` is computed once per step by the env (distance to the goal
``<= goal_radius``) and is the same value that terminates the episode; the
potential of a terminal state is taken as 0, so the discounted shaping terms
of an episode that reaches the goal sum to ``-Φ(s_0)``, whatever the path.

=======================  =====================================================
type name                reward per step
=======================  =====================================================
``sparse``               ``goal_reward`` on reaching the goal, else 0
``step_penalty``         ``goal_reward`` on reaching the goal, else
                         ``-step_penalty``
``potential_shaping``    ``goal_reward`` on reaching the goal, plus
                         ``γ Φ(s') - Φ(s)`` with ``Φ = -scale * distance to goal``
``weighted_sum``         ``Σ_i weights[i] * component_i``
``odour_gated_shaping``  ``scale`` x distance gained (only losses off the
                         plume), ``-off_plume_penalty`` off the plume, and a
                         penalty on straying from it (Singh et al. 2023's
                         terms; reads the plume, not potential-based)
=======================  =====================================================
"""

from plume_jax.rewards.base import Reward
from plume_jax.rewards.goal import (
    SparseGoalParams,
    SparseGoalReward,
    StepPenaltyParams,
    StepPenaltyReward,
)
from plume_jax.rewards.odour_gated import OdourGatedShapingParams, OdourGatedShapingReward
from plume_jax.rewards.shaping import PotentialShapingParams, PotentialShapingReward
from plume_jax.rewards.weighted_sum import WeightedSumParams, WeightedSumReward
from plume_jax.settings import type_table

REWARDS: dict[str, type[Reward]] = type_table(SparseGoalReward, StepPenaltyReward,
                                              PotentialShapingReward, WeightedSumReward,
                                              OdourGatedShapingReward)

__all__ = [
    "OdourGatedShapingParams",
    "OdourGatedShapingReward",
    "PotentialShapingParams",
    "PotentialShapingReward",
    "REWARDS",
    "Reward",
    "SparseGoalParams",
    "SparseGoalReward",
    "StepPenaltyParams",
    "StepPenaltyReward",
    "WeightedSumParams",
    "WeightedSumReward",
]
