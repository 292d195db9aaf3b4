"""Heading-relative moves on the grid: forward, turn left, turn right."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.actions.base import (
    NamedDiscreteActions,
    cell_step,
    include_noop_setting,
    step_size_setting,
    wrap_angle,
)
from plume_jax.core.pytree import Pytree
from plume_jax.settings import real, setting
from plume_jax.core.types import AgentState, Grid, PlumeProbe


@chex.dataclass(frozen=True)
class OrientedGridParams(Pytree):
    """Attributes:
        turn_angle_deg: f32[], degrees turned by ``turn_left`` / ``turn_right``
            (in ``(0, 180]``).
    """

    turn_angle_deg: jax.Array = setting(90.0, real(low=0.0, high=180.0, low_inclusive=False),
                                        doc="degrees turned by turn_left / turn_right, in (0, 180]")


@dataclasses.dataclass(frozen=True)
class OrientedGridActions(NamedDiscreteActions[OrientedGridParams]):
    """Egocentric moves: step forward along the heading, or turn in place.

    Action ids (fixed):

    ============  =====================================================
    include_noop  action_names (id order)
    ============  =====================================================
    True          noop, forward, turn_left, turn_right
    False         forward, turn_left, turn_right
    ============  =====================================================

    - ``forward``: move ``step_size`` cells along ``heading``; the
      displacement ``step_size * (cos h, sin h)`` is rounded to whole cells,
      so positions stay on integer cells (with the default 90° turns and a
      cardinal start heading the move is exactly one cardinal step), then
      clamped into the grid. The heading is unchanged.
    - ``turn_left`` / ``turn_right``: heading ``+`` / ``-`` ``turn_angle_deg``
      (counter-clockwise positive), wrapped into ``[0, 2π)``; no movement.
    - ``noop`` and invalid actions leave the agent unchanged.
    """

    step_size: int = step_size_setting("forward move")
    include_noop: bool = include_noop_setting()

    type_name = "oriented_grid"
    modality = "orientation_relative"
    orientation_dependent = True
    Params = OrientedGridParams
    on_grid = True

    def moves(self) -> list[str]:
        return ["forward", "turn_left", "turn_right"]

    def process_action(self, key: jax.Array, action: Any, agent: AgentState, grid: Grid,
                       params: OrientedGridParams, probe: PlumeProbe | None = None) -> AgentState:
        """The agent after ``action``; pure, deterministic, in-bounds.
        ``key`` and ``probe`` are unused."""
        _, one_hot = self._action_mask(action)
        turn = jnp.deg2rad(params.turn_angle_deg).astype(jnp.float32)
        sign = self._is("turn_left", one_hot).astype(jnp.float32) - \
            self._is("turn_right", one_hot).astype(jnp.float32)
        turned = jnp.where(sign != 0.0, wrap_angle(agent.heading + sign * turn), agent.heading)
        moved = cell_step(agent.position, agent.heading, self.step_size, grid)
        position = jnp.where(self._is("forward", one_hot), moved, agent.position)
        return agent.replace(position=position.astype(jnp.float32),
                             heading=jnp.asarray(turned, jnp.float32))
