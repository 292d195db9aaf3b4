"""A weighted sum of rewards."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.rewards.base import Reward
from plume_jax.rewards.shaping import PotentialShapingReward
from plume_jax.settings import MAX_REWARD, nested, nested_params, real_list, setting
from plume_jax.core.types import AgentState, Grid, PlumeProbe


def reward_table() -> dict[str, type]:
    """The registered rewards (imported lazily: the table is built after the modules)."""
    from plume_jax.rewards import REWARDS

    return REWARDS


@chex.dataclass(frozen=True)
class WeightedSumParams(Pytree):
    """Attributes:
        components: tuple of the component rewards' params, in order.
        weights: f32[n], the weight of each component.
    """

    components: tuple = nested_params(empty=())
    weights: jax.Array = setting(None, real_list(low=-MAX_REWARD, high=MAX_REWARD),
                                 doc=f"one weight per component, each in [-{MAX_REWARD:g}, "
                                     f"{MAX_REWARD:g}] (default: all 1.0)")


@dataclasses.dataclass(frozen=True)
class WeightedSumReward(Reward[WeightedSumParams]):
    """``Σ_i weights[i] * component_i`` over a static list of rewards.

    ``components`` is a list of reward configs (``{"type": ..., ...}``);
    ``weights`` (dynamic, one per component, default all 1) may be swept.
    The potential is ``Σ w_i Φ_i`` and the discount that of the shaped
    components, which must all use the same ``gamma`` (checked when built);
    the sum is then itself potential-based shaping of the weighted base
    rewards.
    """

    components: tuple = nested([{"type": "step_penalty"},
                                {"type": "potential_shaping", "goal_reward": 0.0}],
                               reward_table, "reward", many=True,
                               doc="the reward configs to combine")

    type_name = "weighted_sum"
    Params = WeightedSumParams

    @classmethod
    def validate(cls, resolved: dict[str, Any], grid: Grid, prefix: str) -> dict[str, Any]:
        """One weight per component (all 1.0 by default), and one ``gamma``
        across the shaped components."""
        n = len(resolved["components"])
        weights = [1.0] * n if resolved["weights"] is None else resolved["weights"]
        if len(weights) != n:
            raise ValidationError.for_parameter(
                f"{prefix}.weights", resolved["weights"],
                f"a list of {n} finite real numbers (one per component), or null for all 1.0")
        gammas = sorted({g for entry in resolved["components"]
                         if (g := _gamma_of(entry)) is not None})
        if len(gammas) > 1:
            raise ValidationError.for_parameter(
                f"{prefix}.components", resolved["components"],
                f"shaped components that share one gamma (got {gammas}); the sum is "
                "potential-based only under one discount")
        return {**resolved, "weights": weights}

    @property
    def shaped(self) -> bool:
        """Whether any component is shaped."""
        return any(c.shaped for c in self.components)

    @property
    def reads_plume(self) -> bool:
        """Whether any component reads the plume."""
        return any(c.reads_plume for c in self.components)

    @property
    def potential_based(self) -> bool:
        """Whether every component is potential-based."""
        return all(c.potential_based for c in self.components)

    def compute(self, prev_agent: AgentState, next_agent: AgentState, goal: jax.Array,
                goal_reached: jax.Array, params: WeightedSumParams,
                probe: PlumeProbe | None = None) -> jax.Array:
        """f32[]; ``probe`` goes to the components that read the plume."""
        total = jnp.zeros((), jnp.float32)
        for i, (comp, p) in enumerate(zip(self.components, params.components)):
            seen = {"probe": probe} if comp.reads_plume else {}
            total = total + params.weights[i] * comp.compute(prev_agent, next_agent, goal,
                                                             goal_reached, p, **seen)
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
            if comp.shaped:
                return comp.discount(p)
        return jnp.ones((), jnp.float32)

    def metadata_extras(self) -> dict[str, Any]:
        return {"components": [c.get_metadata() for c in self.components]}


def _gamma_of(entry: dict) -> float | None:
    """The gamma of a resolved reward config (None when unshaped)."""
    if entry["type"] == PotentialShapingReward.type_name:
        return entry["gamma"]
    if entry["type"] == WeightedSumReward.type_name:
        gammas = {g for e in entry["components"] if (g := _gamma_of(e)) is not None}
        return min(gammas) if gammas else None
    return None
