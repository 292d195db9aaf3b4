"""Reward functions (layer 1).

A reward is a frozen dataclass with pure methods:

- ``compute(prev_agent, next_agent, goal, goal_reached, params) -> f32[]``;
- ``potential(agent, goal, params) -> f32[]``: the shaping potential ``Φ``
  this reward adds as ``γ Φ(s') - Φ(s)`` (0 for unshaped rewards);
- ``discount(params) -> f32[]``: the ``γ`` that shaping assumes (1 for
  unshaped rewards); train with the same discount to keep the optimal
  policy unchanged (Ng, Harada & Russell 1999).

``goal_reached`` is computed once per step by the env (distance to the goal
``<= goal_radius``) and is the same value that terminates the episode; the
potential of a terminal state is taken as 0, so the discounted shaping terms
of an episode that reaches the goal sum to ``-Φ(s_0)``, whatever the path.

=================  ========================================================
type name          reward per step
=================  ========================================================
``sparse``         ``goal_reward`` on reaching the goal, else 0
``step_penalty``   ``goal_reward`` on reaching the goal, else ``-step_penalty``
``potential_shaping``  ``goal_reward`` on reaching the goal, plus
                   ``γ Φ(s') - Φ(s)`` with ``Φ = -scale * distance to goal``
``weighted_sum``   ``Σ_i weights[i] * component_i``
=================  ========================================================
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.errors import ValidationError
from plume_jax.sensors.base import component_list, resolve_component, static_config
from plume_jax.settings import Configurable, Setting, real, resolve_settings
from plume_jax.types import AgentState


class _Unshaped:
    """``potential`` 0 and ``discount`` 1: rewards without shaping."""

    def potential(self, agent: AgentState, goal: jax.Array, params: Any) -> jax.Array:
        """f32[], always 0 (no shaping)."""
        return jnp.zeros((), jnp.float32)

    def discount(self, params: Any) -> jax.Array:
        """f32[], 1 (no shaping, so any discount keeps the optimal policy)."""
        return jnp.ones((), jnp.float32)

    def get_metadata(self) -> dict[str, Any]:
        config = static_config(self)
        config.pop("type")
        return {"type": self.type_name, "parameters": config,
                "dynamic_parameters": [n for n, s in self.SETTINGS.items() if not s.static]}


@chex.dataclass(frozen=True)
class SparseGoalParams:
    """Attributes: goal_reward: f32[], paid on the step that reaches the goal."""

    goal_reward: jax.Array


@dataclasses.dataclass(frozen=True)
class SparseGoalReward(_Unshaped, Configurable):
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
class StepPenaltyReward(_Unshaped, Configurable):
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


@chex.dataclass(frozen=True)
class PotentialShapingParams:
    """Attributes:
        goal_reward: f32[], paid on the step that reaches the goal.
        gamma: f32[] in ``(0, 1]``, the discount the shaping is consistent with.
        scale: f32[] >= 0, reward per cell of distance (``Φ = -scale * d``).
    """

    goal_reward: jax.Array
    gamma: jax.Array
    scale: jax.Array


@dataclasses.dataclass(frozen=True)
class PotentialShapingReward(Configurable):
    """Sparse goal reward plus potential-based distance shaping.

    ``r = goal_reward * [goal reached] + γ Φ(s') - Φ(s)`` with
    ``Φ(s) = -scale * |position - goal|`` and ``Φ(s') = 0`` when ``s'``
    reaches the goal (terminal). Over an episode the discounted shaping
    terms telescope to ``γ^T Φ(s_T) - Φ(s_0)``, so with the same ``γ`` in
    training the optimal policy is that of the sparse reward (Ng, Harada &
    Russell 1999); only learning speed changes.
    """

    type_name = "potential_shaping"
    SETTINGS = {
        "goal_reward": Setting(1.0, real(), doc="reward for reaching the goal"),
        "gamma": Setting(0.99, real(low=0.0, high=1.0, low_inclusive=False),
                         doc="discount factor the shaping is consistent with; use it in training"),
        "scale": Setting(0.01, real(low=0.0), doc="shaping reward per cell of distance"),
    }
    Params = PotentialShapingParams

    def potential(self, agent: AgentState, goal: jax.Array,
                  params: PotentialShapingParams) -> jax.Array:
        """f32[], ``Φ = -scale * |position - goal|``."""
        return (-params.scale * jnp.linalg.norm(agent.position - goal)).astype(jnp.float32)

    def discount(self, params: PotentialShapingParams) -> jax.Array:
        """f32[], ``gamma``."""
        return jnp.asarray(params.gamma, jnp.float32)

    def compute(self, prev_agent: AgentState, next_agent: AgentState, goal: jax.Array,
                goal_reached: jax.Array, params: PotentialShapingParams) -> jax.Array:
        phi_next = jnp.where(goal_reached, 0.0, self.potential(next_agent, goal, params))
        shaping = params.gamma * phi_next - self.potential(prev_agent, goal, params)
        base = jnp.where(goal_reached, params.goal_reward, 0.0)
        return (base + shaping).astype(jnp.float32)

    def get_metadata(self) -> dict[str, Any]:
        return {"type": self.type_name, "parameters": {},
                "dynamic_parameters": list(self.SETTINGS), "potential": "-scale * distance"}


def _reward_table():
    return REWARDS


@chex.dataclass(frozen=True)
class WeightedSumParams:
    """Attributes:
        components: tuple of the component rewards' params, in order.
        weights: f32[n], the weight of each component.
    """

    components: tuple
    weights: jax.Array


@dataclasses.dataclass(frozen=True)
class WeightedSumReward(Configurable):
    """``Σ_i weights[i] * component_i`` over a static list of rewards.

    ``components`` is a list of reward configs (``{"type": ..., ...}``);
    ``weights`` (dynamic, one per component, default all 1) may be swept.
    The potential is ``Σ w_i Φ_i`` and the discount that of the shaped
    components, which must all use the same ``gamma`` (checked when built);
    the sum is then itself potential-based shaping of the weighted base
    rewards.
    """

    components: tuple = ()

    type_name = "weighted_sum"
    SETTINGS = {
        "components": Setting([{"type": "step_penalty"},
                               {"type": "potential_shaping", "goal_reward": 0.0}],
                              component_list(_reward_table, "reward"), static=True,
                              doc="the reward configs to combine"),
        "weights": Setting(None, lambda name, value, grid: value,
                           doc="one weight per component (default: all 1.0)"),
    }
    Params = WeightedSumParams

    @classmethod
    def build(cls, values, grid, prefix):
        resolved = resolve_settings(prefix, cls.SETTINGS, values, grid)
        components, params = [], []
        for i, entry in enumerate(resolved["components"]):
            comp, comp_params, _ = resolve_component(f"{prefix}.components[{i}]", entry,
                                                     REWARDS, "reward", grid)
            components.append(comp)
            params.append(comp_params)
        n = len(components)
        weights = resolved["weights"]
        allowed = f"a list of {n} finite real numbers (one per component), or null for all 1.0"
        if weights is None:
            weights = [1.0] * n
        if isinstance(weights, (str, bytes)) or not hasattr(weights, "__len__") \
                or len(weights) != n:
            raise ValidationError.for_parameter(f"{prefix}.weights", weights, allowed)
        try:
            weights = [real()(f"{prefix}.weights", w, grid) for w in weights]
        except ValidationError:
            raise ValidationError.for_parameter(f"{prefix}.weights", resolved["weights"],
                                                allowed) from None
        resolved["weights"] = weights
        gammas = sorted({_gamma_of(entry) for entry in resolved["components"]} - {None})
        if len(gammas) > 1:
            raise ValidationError.for_parameter(
                f"{prefix}.components", resolved["components"],
                f"shaped components that share one gamma (got {gammas}); the sum is "
                "potential-based only under one discount")
        component = cls(components=tuple(components))
        return component, WeightedSumParams(components=tuple(params),
                                            weights=jnp.asarray(weights, jnp.float32)), resolved

    def compute(self, prev_agent: AgentState, next_agent: AgentState, goal: jax.Array,
                goal_reached: jax.Array, params: WeightedSumParams) -> jax.Array:
        total = jnp.zeros((), jnp.float32)
        for i, (comp, p) in enumerate(zip(self.components, params.components)):
            total = total + params.weights[i] * comp.compute(prev_agent, next_agent, goal,
                                                             goal_reached, p)
        return total.astype(jnp.float32)

    def potential(self, agent: AgentState, goal: jax.Array, params: WeightedSumParams) -> jax.Array:
        """f32[], ``Σ w_i Φ_i``."""
        total = jnp.zeros((), jnp.float32)
        for i, (comp, p) in enumerate(zip(self.components, params.components)):
            total = total + params.weights[i] * comp.potential(agent, goal, p)
        return total.astype(jnp.float32)

    def discount(self, params: WeightedSumParams) -> jax.Array:
        """f32[], the gamma of the first shaped component (1 when none is shaped)."""
        for comp, p in zip(self.components, params.components):
            if _is_shaped(comp):
                return comp.discount(p)
        return jnp.ones((), jnp.float32)

    def get_metadata(self) -> dict[str, Any]:
        return {"type": self.type_name,
                "parameters": {"components": [static_config(c) for c in self.components]},
                "dynamic_parameters": ["weights"],
                "components": [c.get_metadata() for c in self.components]}


def _is_shaped(component: Any) -> bool:
    if isinstance(component, PotentialShapingReward):
        return True
    if isinstance(component, WeightedSumReward):
        return any(_is_shaped(c) for c in component.components)
    return False


def _gamma_of(entry: dict) -> float | None:
    """The gamma of a resolved reward config (None when unshaped)."""
    if entry["type"] == PotentialShapingReward.type_name:
        return entry["gamma"]
    if entry["type"] == WeightedSumReward.type_name:
        gammas = {_gamma_of(e) for e in entry["components"]} - {None}
        return min(gammas) if gammas else None
    return None


REWARDS = {cls.type_name: cls for cls in (SparseGoalReward, StepPenaltyReward,
                                          PotentialShapingReward, WeightedSumReward)}
