"""A fixed start position and heading."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import chex
import jax

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.settings import angle, grid_position, setting
from plume_jax.starts.base import StartDistribution
from plume_jax.core.types import AgentState, Grid, PlumeProbe


@chex.dataclass(frozen=True)
class FixedStartParams(Pytree):
    """Attributes:
        position: f32[2], ``(x, y)`` start cell.
        heading: f32[], start heading in radians.
    """

    position: jax.Array = setting((0.0, 0.0), grid_position(), doc="(x, y) start cell")
    heading: jax.Array = setting(0.0, angle(), doc="start heading, radians")


@dataclasses.dataclass(frozen=True)
class FixedStart(StartDistribution[FixedStartParams]):
    """Always the same position and heading (``make`` checks it lies outside the goal)."""

    type_name = "fixed"
    Params = FixedStartParams

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict[str, Any], on_grid: bool) -> None:
        """The position must lie outside the goal region, and on an integer
        cell when the action model keeps the agent on cells."""
        position = settings["position"]
        if math.dist(position, source) <= goal_radius:
            raise ValidationError.for_parameter(
                "start.position", list(position),
                f"a cell farther than goal_radius={goal_radius} from the source {list(source)}")
        if on_grid and any(float(v) != int(v) for v in position):
            raise ValidationError.for_parameter(
                "start.position", list(position),
                "integer cell coordinates (the action model keeps the agent on cells)")

    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: FixedStartParams, probe: PlumeProbe | None = None) -> AgentState:
        return AgentState(position=params.position, heading=params.heading)
