"""Starts in an annulus around the source."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.settings import MAX_LENGTH, real, setting
from plume_jax.starts.candidates import CandidateStart, farthest_distance, unit_floats
from plume_jax.core.types import Grid, PlumeProbe


@chex.dataclass(frozen=True)
class AnnulusStartParams(Pytree):
    """Attributes:
        r_min: f32[] >= 0, inner radius around the source, cells.
        r_max: f32[] >= r_min, outer radius, cells.
    """

    r_min: jax.Array = setting(10.0, real(low=0.0, high=MAX_LENGTH), at_most="r_max",
                               doc=f"inner radius around the source, cells, in [0, {MAX_LENGTH:g}]")
    r_max: jax.Array = setting(30.0, real(low=0.0, high=MAX_LENGTH, low_inclusive=False),
                               doc=f"outer radius around the source, cells, in "
                                   f"(0, {MAX_LENGTH:g}]")


@dataclasses.dataclass(frozen=True)
class AnnulusStart(CandidateStart[AnnulusStartParams]):
    """Uniform by area over the annulus ``r_min <= |p - source| <= r_max``;
    cardinal heading.

    Each of ``candidates`` draws takes a radius ``sqrt(U(r_min², r_max²))``
    and an angle ``U(0, 2π)`` around the goal (the source) and is rounded to
    the nearest cell, so the start's distance to the source lies within
    ``[r_min - √2/2, r_max + √2/2]``. The first candidate inside the grid
    and outside the goal region is used (see :func:`~plume_jax.starts.candidates.pick_candidate` for the
    rare fallbacks: a clamped candidate, then the farthest corner). ``make``
    checks ``r_min <= r_max``, ``r_max > goal_radius`` and that the annulus
    reaches into the grid.
    """

    type_name = "annulus"
    Params = AnnulusStartParams

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict[str, Any], on_grid: bool) -> None:
        """The annulus must reach outside the goal region and into the grid."""
        if settings["r_max"] <= goal_radius:
            raise ValidationError.for_parameter(
                "start.r_max", settings["r_max"],
                f"a radius > goal_radius={goal_radius} (the annulus must reach outside the goal)")
        far = farthest_distance(grid, source)
        if settings["r_min"] > far:
            raise ValidationError.for_parameter(
                "start.r_min", settings["r_min"],
                f"a radius <= {far:.2f}, the distance from the source {list(source)} to the "
                "farthest grid corner (the annulus must reach into the grid)")

    def candidate_points(self, bits: jax.Array, grid: Grid, goal: jax.Array,
                         params: AnnulusStartParams, probe: PlumeProbe | None) -> jax.Array:
        """Radius ``sqrt(U(r_min², r_max²))``, angle ``U(0, 2π)`` around the goal."""
        u1, u2 = unit_floats(bits)
        r2_min, r2_max = jnp.square(params.r_min), jnp.square(params.r_max)
        radius = jnp.sqrt(r2_min + u1 * (r2_max - r2_min))
        angle = 2.0 * jnp.pi * u2
        return goal + radius[:, None] * jnp.stack([jnp.cos(angle), jnp.sin(angle)], axis=-1)
