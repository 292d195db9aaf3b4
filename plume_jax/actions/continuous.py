"""Continuous forward speed and turn rate."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp

from plume_jax.actions.base import ActionModel, unit, wrap_angle
from plume_jax.settings import MAX_LENGTH, real, setting
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, Grid, NoParams, PlumeProbe


@dataclasses.dataclass(frozen=True)
class ContinuousActions(ActionModel[NoParams]):
    """A ``Box`` action ``(forward_speed, turn_rate)``; continuous positions.

    The action is f32[2]:

    - index 0, ``forward_speed``: cells per step, in ``[min_speed, max_speed]``
      (a negative ``min_speed`` allows reversing);
    - index 1, ``turn_rate``: radians per step, in
      ``[-max_turn_rate, max_turn_rate]``, counter-clockwise positive.

    One step turns first, then moves: ``heading' = wrap(heading + turn_rate)``
    into ``[0, 2π)``, ``position' = clamp(position + forward_speed *
    (cos heading', sin heading'))``. Positions are not snapped to cells.

    An action outside the box (wrong shape, non-numeric, non-finite or out of
    bounds) is invalid and executed as the no-op ``(0, 0)``: the agent is
    unchanged (clip actions yourself if your policy can leave the box). The
    bounds are static (they define the action space).

    There are no discrete action ids: ``action_names`` and ``action_ids``
    are empty; ``executed_action`` is 0 for a valid action and -1 for an
    invalid one (replaced by the no-op).
    """

    min_speed: float = setting(0.0, real(low=-MAX_LENGTH, high=MAX_LENGTH), below="max_speed",
                               doc=f"lowest forward speed, cells/step (negative allows reversing), "
                                   f"in [-{MAX_LENGTH:g}, {MAX_LENGTH:g}]")
    max_speed: float = setting(1.0, real(low=0.0, high=MAX_LENGTH, low_inclusive=False),
                               doc=f"highest forward speed, cells/step, in (0, {MAX_LENGTH:g}]")
    max_turn_rate: float = setting(1.0, real(low=0.0, high=math.pi, low_inclusive=False),
                                   doc="largest |turn rate|, radians/step, in (0, pi]")

    type_name = "continuous"
    modality = "continuous_velocity"
    orientation_dependent = True
    on_grid = False
    #: Names of the action vector's components, in index order.
    action_components = ("forward_speed", "turn_rate")

    @functools.cached_property
    def action_space(self) -> Box:
        """``Box(low=(min_speed, -max_turn_rate), high=(max_speed, max_turn_rate))``."""
        return Box(low=(float(self.min_speed), -float(self.max_turn_rate)),
                   high=(float(self.max_speed), float(self.max_turn_rate)), shape=(2,))

    def executed_action(self, action: Any) -> jax.Array:
        """i32[]: 0 when ``action`` is executed as given, -1 when it was
        invalid and replaced by the no-op."""
        return jnp.where(self.validate_action(action), 0, -1).astype(jnp.int32)

    def _vector(self, action: Any) -> jax.Array:
        """f32[2], the action when valid, else zeros (static dispatch on
        shape and dtype, so non-arrays never reach jnp)."""
        valid = self.validate_action(action)
        if isinstance(action, jax.Array):
            ok_type = action.shape == (2,) and (jnp.issubdtype(action.dtype, jnp.floating)
                                                or jnp.issubdtype(action.dtype, jnp.integer))
        else:
            ok_type = bool(valid)
        if not ok_type:
            return jnp.zeros(2, jnp.float32)
        vector = jnp.asarray(action).astype(jnp.float32)
        return jnp.where(valid, vector, 0.0)

    def process_action(self, key: jax.Array, action: Any, agent: AgentState, grid: Grid,
                       params: NoParams, probe: PlumeProbe | None = None) -> AgentState:
        """The agent after ``action``; pure, deterministic, in-bounds.
        ``key`` and ``probe`` are unused."""
        speed, turn = self._vector(action)
        valid = self.validate_action(action)
        heading = jnp.where(valid, wrap_angle(agent.heading + turn), agent.heading)
        position = grid.clamp(agent.position + speed * unit(heading))
        return agent.replace(position=position.astype(jnp.float32),
                             heading=jnp.asarray(heading, jnp.float32))

    def metadata_parameters(self) -> dict[str, Any]:
        """The names of the action vector's components."""
        return {"action_components": list(self.action_components)}
