"""Starts in a box downwind of the source."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.settings import MAX_LENGTH, angle, boolean, real, setting
from plume_jax.starts.candidates import CandidateStart, unit_floats
from plume_jax.core.types import Grid, PlumeProbe
from plume_jax.core.vectors import squared_norm


@chex.dataclass(frozen=True)
class DownwindStartParams(Pytree):
    """Attributes:
        min_distance: f32[] >= 0, nearest downwind distance from the source, cells.
        max_distance: f32[] >= min_distance, farthest downwind distance, cells.
        half_width: f32[] >= 0, largest crosswind offset either side, cells.
        direction: f32[], radians: the downwind direction used when
            ``use_plume_wind`` is False or the wind at the source is calm.
    """

    min_distance: jax.Array = setting(5.0, real(low=0.0, high=MAX_LENGTH), at_most="max_distance",
                                      doc=f"nearest downwind distance, cells, in "
                                          f"[0, {MAX_LENGTH:g}]")
    max_distance: jax.Array = setting(30.0, real(low=0.0, high=MAX_LENGTH, low_inclusive=False),
                                      doc=f"farthest downwind distance, cells, in "
                                          f"(0, {MAX_LENGTH:g}]")
    half_width: jax.Array = setting(3.0, real(low=0.0, high=MAX_LENGTH),
                                    doc=f"largest crosswind offset, cells, in [0, {MAX_LENGTH:g}]")
    direction: jax.Array = setting(0.0, angle(),
                                   doc="downwind direction, radians (without plume wind or in a "
                                       "calm)")


def downwind_direction(goal: jax.Array, direction: jax.Array, probe: PlumeProbe | None
                       ) -> jax.Array:
    """f32[], radians: where the air at ``goal`` moves toward (``probe.wind``),
    or ``direction`` without a probe or in a calm."""
    if probe is None:
        return jnp.asarray(direction, jnp.float32)
    wind = jnp.reshape(jnp.asarray(probe.wind(goal), jnp.float32), (2,))
    calm = squared_norm(wind) <= 0.0
    return jnp.where(calm, direction, jnp.arctan2(wind[1], wind[0])).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class DownwindStart(CandidateStart[DownwindStartParams]):
    """Uniform over a box downwind of the source; cardinal heading.

    The downwind direction ``θ`` is where the air at the source moves
    toward, read through the plume probe (``probe.wind(source)``, e.g. the
    Gaussian plume's ``wind_direction``) when ``use_plume_wind`` is True; it
    is the start's own ``direction`` param when ``use_plume_wind`` is False,
    when the wind at the source is calm, or when no probe is given. Each of
    ``candidates`` draws is
    ``source + a (cos θ, sin θ) + c (-sin θ, cos θ)`` with
    ``a ~ U(min_distance, max_distance)`` and ``c ~ U(-half_width, half_width)``,
    rounded to the nearest cell; the first inside the grid and outside the
    goal region is used (see :func:`~plume_jax.starts.candidates.pick_candidate` for the fallbacks: a
    clamped candidate — the grid edge in that direction — then the farthest
    corner). ``make`` checks ``min_distance <= max_distance`` and
    ``max_distance > goal_radius``.
    """

    use_plume_wind: bool = setting(True, boolean(),
                                   doc="take the downwind direction from the plume's wind")

    type_name = "downwind"
    Params = DownwindStartParams

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict[str, Any], on_grid: bool) -> None:
        """The box must reach outside the goal region."""
        if math.hypot(settings["max_distance"], settings["half_width"]) <= goal_radius:
            raise ValidationError.for_parameter(
                "start.max_distance", settings["max_distance"],
                f"a distance that reaches outside goal_radius={goal_radius}")

    def downwind_direction(self, goal: jax.Array, params: DownwindStartParams,
                           probe: PlumeProbe | None) -> jax.Array:
        """f32[], radians: the direction the start box extends from the source."""
        return downwind_direction(goal, params.direction, probe if self.use_plume_wind else None)

    def candidate_points(self, bits: jax.Array, grid: Grid, goal: jax.Array,
                         params: DownwindStartParams, probe: PlumeProbe | None) -> jax.Array:
        """``source + a (cos θ, sin θ) + c (-sin θ, cos θ)``."""
        u1, u2 = unit_floats(bits)
        along = params.min_distance + u1 * (params.max_distance - params.min_distance)
        cross = (2.0 * u2 - 1.0) * params.half_width
        theta = self.downwind_direction(goal, params, probe)
        downwind = jnp.stack([jnp.cos(theta), jnp.sin(theta)])
        crosswind = jnp.stack([-jnp.sin(theta), jnp.cos(theta)])
        return goal + along[:, None] * downwind + cross[:, None] * crosswind
