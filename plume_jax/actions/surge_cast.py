"""Wind-relative moves: surge upwind, cast crosswind (moth-inspired)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from plume_jax.actions.base import (
    NamedDiscreteActions,
    cell_step,
    include_noop_setting,
    step_size_setting,
    wrap_angle,
)
from plume_jax.core.errors import ValidationError
from plume_jax.core.types import AgentState, Grid, NoParams, PlumeProbe
from plume_jax.core.vectors import squared_norm

HALF_PI = 0.5 * 3.141592653589793


@dataclasses.dataclass(frozen=True)
class SurgeCastActions(NamedDiscreteActions[NoParams]):
    """Two semantic moves defined by the wind at the agent: surge upwind, or
    cast crosswind (to either side).

    Action ids (fixed):

    ============  ==============================================
    include_noop  action_names (id order)
    ============  ==============================================
    True          noop, surge, cast_left, cast_right
    False         surge, cast_left, cast_right
    ============  ==============================================

    The wind is read through the plume probe (``probe.wind`` at the agent's
    position — the one wind interface every plume provides). With ``u`` the
    upwind direction (opposite to where the air moves):

    - ``surge``: move ``step_size`` cells toward ``u``;
    - ``cast_left``: toward ``u + 90°`` (left when facing upwind);
    - ``cast_right``: toward ``u - 90°``.

    The displacement is rounded to whole cells (positions stay on integer
    cells) and the result clamped into the grid; the heading becomes the
    direction of the intended move, wrapped into ``[0, 2π)``. In a calm
    (zero wind at the agent) there is no upwind: the agent's heading is used
    as the reference direction instead, so ``surge`` moves forward and the
    casts sideways. ``noop`` and invalid actions leave the agent unchanged.

    ``process_action`` needs the ``probe`` keyword (the env passes it); a
    call without one raises ``ValidationError`` at trace time.
    """

    step_size: int = step_size_setting("move")
    include_noop: bool = include_noop_setting()

    type_name = "surge_cast"
    modality = "wind_relative"
    orientation_dependent = False
    on_grid = True

    def moves(self) -> list[str]:
        return ["surge", "cast_left", "cast_right"]

    def upwind_direction(self, agent: AgentState, probe: PlumeProbe) -> jax.Array:
        """f32[], radians: the direction the wind comes from at the agent
        (the agent's heading in a calm)."""
        wind = jnp.asarray(probe.wind(agent.position), jnp.float32)
        calm = squared_norm(wind) <= 0.0
        upwind = jnp.arctan2(-wind[1], -wind[0])
        return jnp.where(calm, agent.heading, upwind).astype(jnp.float32)

    def process_action(self, key: jax.Array, action: Any, agent: AgentState, grid: Grid,
                       params: NoParams, probe: PlumeProbe | None = None) -> AgentState:
        """The agent after ``action``; pure, deterministic, in-bounds.
        ``key`` is unused; ``probe`` is required."""
        if probe is None:
            raise ValidationError.for_parameter(
                "probe", None, "a PlumeProbe: surge_cast actions are defined by the wind")
        _, one_hot = self._action_mask(action)
        upwind = self.upwind_direction(agent, probe)
        offset = (HALF_PI * self._is("cast_left", one_hot).astype(jnp.float32)
                  - HALF_PI * self._is("cast_right", one_hot).astype(jnp.float32))
        direction = wrap_angle(upwind + offset)
        moves = self._is("surge", one_hot) | self._is("cast_left", one_hot) | \
            self._is("cast_right", one_hot)
        moved = cell_step(agent.position, direction, self.step_size, grid)
        position = jnp.where(moves, moved, agent.position)
        heading = jnp.where(moves, direction, agent.heading)
        return agent.replace(position=position.astype(jnp.float32),
                             heading=jnp.asarray(heading, jnp.float32))

    def metadata_extras(self) -> dict[str, Any]:
        return {"wind_dependent": True, "calm_reference": "heading"}
