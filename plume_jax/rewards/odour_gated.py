"""Distance shaping gated by the odour, with penalties off the plume and for
straying from it (Singh et al. 2023's reward terms)."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.core.types import AgentState, PlumeProbe
from plume_jax.core.vectors import norm, squared_norm
from plume_jax.rewards.base import Reward
from plume_jax.settings import MAX_REWARD, real, setting


@chex.dataclass(frozen=True)
class OdourGatedShapingParams(Pytree):
    """Attributes (defaults: Singh et al.'s values, their code/plume_env.py,
    on their 1 m cells and 300-step episodes):
        scale: f32[] >= 0, reward per cell of distance to the goal gained
            on the plume (5).
        threshold: f32[] >= 0, the concentration at or below which the
            agent is off the plume (1e-4, their odour threshold).
        off_plume_penalty: f32[] >= 0, paid on every step that ends off the
            plume (5 x their tick 10/300 = 1/6).
        stray_scale: f32[] >= 0, on the step where the agent strays from
            the plume (the plume's own stray rule, which ends the episode):
            ``stray_scale`` x its distance to the goal plus its distance to
            the nearest live puff is paid (5).
        overshoot_factor: f32[] >= 1, the stray penalty's multiplier when
            the agent is west of the goal (x below the goal's: upwind of the
            source in a wind blowing east, their ``x < 0``) (2).
    """

    scale: jax.Array = setting(5.0, real(low=0.0, high=MAX_REWARD),
                               doc=f"reward per cell of distance gained on the plume, in "
                                   f"[0, {MAX_REWARD:g}]")
    threshold: jax.Array = setting(1e-4, real(low=0.0, high=1e6),
                                   doc="concentration at or below which the agent is off the "
                                       "plume, in [0, 1e6]")
    off_plume_penalty: jax.Array = setting(5.0 * 10.0 / 300.0, real(low=0.0, high=MAX_REWARD),
                                           doc=f"paid each step that ends off the plume, in "
                                               f"[0, {MAX_REWARD:g}]")
    stray_scale: jax.Array = setting(5.0, real(low=0.0, high=MAX_REWARD),
                                     doc="on straying: this x the distance to the goal (cells) "
                                         f"plus the distance to the nearest puff is paid; in "
                                         f"[0, {MAX_REWARD:g}]")
    overshoot_factor: jax.Array = setting(2.0, real(low=1.0, high=100.0),
                                          doc="the stray penalty's multiplier west of the goal "
                                              "(x below the goal's), in [1, 100]")


@dataclasses.dataclass(frozen=True)
class OdourGatedShapingReward(Reward[OdourGatedShapingParams]):
    """Distance shaping that pays only on the plume, plus penalties off it.

    With ``d`` the distance to the goal (cells), ``c`` the concentration at
    the step's end position and ``off = c <= threshold``, the reward of a
    step is

    ``scale (d_prev - d_next)``, or only its negative part when ``off``;
    ``- off_plume_penalty`` when ``off``;
    ``- overshoot x (stray_scale d_next + nearest-puff distance)`` on the
    step where the agent strays from the plume (the plume's stray rule, the
    one that ends the episode; ``overshoot`` is ``overshoot_factor`` west of
    the goal, else 1).

    It pays no goal reward: combine it with ``step_penalty`` in a
    ``weighted_sum`` (Singh et al.'s reward is ``step_penalty`` with
    ``goal_reward`` 101 and ``step_penalty`` 10/300, plus this reward at its
    defaults). Off the plume is judged on the plume's concentration, where
    their env judged it on the agent's odour observation (the concentration
    times its per-episode gain, noise-free in their runs): the two differ
    only for concentrations within a factor of the gain (0.5-1.5) of the
    threshold. The terms depend on the path, so this is not
    potential-based shaping: it changes which policy is optimal, as theirs
    did. Without puffs the nearest-puff distance is 0; a plume without a
    stray rule never pays the stray penalty.
    """

    type_name = "odour_gated_shaping"
    Params = OdourGatedShapingParams

    @property
    def reads_plume(self) -> bool:
        """True: the concentration, the puffs and the stray rule at the step's end."""
        return True

    @property
    def potential_based(self) -> bool:
        """False: the gate and the penalties depend on the path."""
        return False

    def compute(self, prev_agent: AgentState, next_agent: AgentState, goal: jax.Array,
                goal_reached: jax.Array, params: OdourGatedShapingParams,
                probe: PlumeProbe | None = None) -> jax.Array:
        """f32[] (``probe``: the plume at the step's end; required)."""
        if probe is None:
            raise TypeError("odour_gated_shaping reads the plume: compute() needs probe=")
        position = next_agent.position
        d_next = norm(position - goal)
        gained = params.scale * (norm(prev_agent.position - goal) - d_next)
        off = probe.concentration(position) <= params.threshold
        reward = jnp.where(off, jnp.minimum(gained, 0.0) - params.off_plume_penalty, gained)
        overshoot = jnp.where(position[0] < goal[0], params.overshoot_factor, 1.0)
        stray_penalty = overshoot * (params.stray_scale * d_next + _nearest_puff(probe, position))
        reward = reward - jnp.where(probe.strayed(position), stray_penalty, 0.0)
        return reward.astype(jnp.float32)

    def metadata_extras(self) -> dict[str, Any]:
        return {"gate": "concentration at the step's end <= threshold"}


def _nearest_puff(probe: PlumeProbe, position: jax.Array) -> jax.Array:
    """f32[]: the distance from ``position`` to the nearest live puff centre
    (0 without puffs)."""
    if probe.puffs is None:
        return jnp.zeros((), jnp.float32)
    centres, live = probe.puffs()
    d2 = jnp.where(live, squared_norm(centres - position), jnp.inf)
    nearest = jnp.sqrt(jnp.min(d2))
    return jnp.where(jnp.isfinite(nearest), nearest, 0.0).astype(jnp.float32)
