"""Starts in a band downwind of the source, Gaussian across it, any heading."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.core.types import AgentState, Grid, PlumeProbe
from plume_jax.settings import MAX_LENGTH, angle, boolean, integer, real, setting
from plume_jax.starts.base import StartDistribution
from plume_jax.starts.candidates import any_heading_start, check_snap
from plume_jax.starts.downwind import downwind_direction


@chex.dataclass(frozen=True)
class DownwindBandParams(Pytree):
    """Attributes (f32[], cells):
        min_distance, max_distance: the band's extent downwind of the source.
        along_std: s.d. of a Gaussian shift along the wind.
        cross_std: s.d. of the Gaussian offset across the wind.
        direction: radians, the downwind direction without plume wind (or in a calm).
    """

    min_distance: jax.Array = setting(4.0, real(low=0.0, high=MAX_LENGTH), at_most="max_distance",
                                      doc=f"nearest downwind distance, cells, in "
                                          f"[0, {MAX_LENGTH:g}]")
    max_distance: jax.Array = setting(8.0, real(low=0.0, high=MAX_LENGTH, low_inclusive=False),
                                      doc=f"farthest downwind distance, cells, in "
                                          f"(0, {MAX_LENGTH:g}]")
    along_std: jax.Array = setting(0.0, real(low=0.0, high=MAX_LENGTH),
                                   doc=f"s.d. of a Gaussian shift along the wind, cells, in "
                                       f"[0, {MAX_LENGTH:g}]")
    cross_std: jax.Array = setting(0.5, real(low=0.0, high=MAX_LENGTH),
                                   doc=f"s.d. of the offset across the wind, cells, in "
                                       f"[0, {MAX_LENGTH:g}]")
    direction: jax.Array = setting(0.0, angle(),
                                   doc="downwind direction, radians (without plume wind or in a "
                                       "calm)")


@dataclasses.dataclass(frozen=True)
class DownwindBandStart(StartDistribution[DownwindBandParams]):
    """A point ``source + a (cos θ, sin θ) + c (-sin θ, cos θ)`` with
    ``a ~ U(min_distance, max_distance) + N(0, along_std²)`` and
    ``c ~ N(0, cross_std²)``, heading uniform in ``[0, 2π)`` (Singh et al.
    2023's training starts: a few metres downwind in the plume, facing
    anywhere). ``θ`` is where the air at the source moves toward
    (``probe.wind``) with ``use_plume_wind``, else ``direction``.

    ``snap`` rounds the point to the nearest cell (every start of an
    on-cell action model must); off, positions are continuous (the Singh2023
    presets, 1 cell = 1 m). Of ``candidates`` draws the first inside the
    grid and outside the goal region is used; failing that, the first one
    outside the goal once clamped into the grid; failing that, the grid
    corner farthest from the goal.
    """

    use_plume_wind: bool = setting(True, boolean(),
                                   doc="take the downwind direction from the plume's wind")
    snap: bool = setting(True, boolean(),
                         doc="round starts to the nearest cell (false: continuous positions, "
                             "for continuous action models)")
    candidates: int = setting(8, integer(low=1, high=1024),
                              doc="candidate points drawn per sample, in [1, 1024]")

    type_name = "downwind_band"
    Params = DownwindBandParams

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict[str, Any], on_grid: bool) -> None:
        """Snapped starts for on-cell action models; the band must reach
        outside the goal region."""
        check_snap(settings, on_grid)
        reach = settings["max_distance"] + 3.0 * (settings["along_std"] + settings["cross_std"])
        if reach <= goal_radius:
            raise ValidationError.for_parameter(
                "start.max_distance", settings["max_distance"],
                f"a distance that reaches outside goal_radius={goal_radius}")

    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: DownwindBandParams, probe: PlumeProbe | None = None) -> AgentState:
        k_along, k_shift, k_cross, k_heading = jax.random.split(key, 4)
        n = self.candidates
        goal = jnp.asarray(goal, jnp.float32)
        u = jax.random.uniform(k_along, (n,), jnp.float32)
        along = (params.min_distance + u * (params.max_distance - params.min_distance)
                 + params.along_std * jax.random.normal(k_shift, (n,), jnp.float32))
        cross = params.cross_std * jax.random.normal(k_cross, (n,), jnp.float32)
        theta = downwind_direction(goal, params.direction, probe if self.use_plume_wind else None)
        downwind = jnp.stack([jnp.cos(theta), jnp.sin(theta)])
        crosswind = jnp.stack([-jnp.sin(theta), jnp.cos(theta)])
        points = goal + along[:, None] * downwind + cross[:, None] * crosswind
        return any_heading_start(k_heading, points, self.snap, grid, goal, goal_radius)
