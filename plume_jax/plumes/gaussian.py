"""Static isotropic Gaussian plume."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from plume_jax.plumes.base import Plume, cell_centres
from plume_jax.plumes.wind import constant_wind, wind_setting
from plume_jax.core.pytree import Pytree
from plume_jax.settings import MAX_LENGTH, MIN_LENGTH, grid_position, real, setting
from plume_jax.core.types import Grid
from plume_jax.core.vectors import squared_norm

__all__ = ["GaussianPlume", "GaussianPlumeParams", "cell_centres"]


@chex.dataclass(frozen=True)
class GaussianPlumeParams(Pytree):
    """Attributes:
        source: f32[2], ``(x, y)`` of the source in cells.
        sigma: f32[], width of the plume in cells (> 0).
        wind_speed: f32[] >= 0, speed of the (constant, uniform) wind,
            cells per step.
        wind_direction: f32[], direction the air moves toward, radians
            (0 = east, counter-clockwise positive).

    Every field defaults to its setting's default (the wind to a calm wind),
    so params built by hand with only ``source`` and ``sigma`` stay valid;
    ``make`` always sets all four as float32 arrays.
    """

    source: jax.Array = setting(None, grid_position(none_means_centre=True),
                                doc="(x, y) of the source, cells; default: grid centre")
    sigma: jax.Array = setting(20.0, real(low=MIN_LENGTH, high=MAX_LENGTH),
                               doc=f"plume width (standard deviation), cells, in "
                                   f"[{MIN_LENGTH:g}, {MAX_LENGTH:g}]")
    wind_speed: jax.Array = wind_setting("wind_speed", 0.0)
    wind_direction: jax.Array = wind_setting("wind_direction", 0.0)


@dataclasses.dataclass(frozen=True)
class GaussianPlume(Plume[GaussianPlumeParams, tuple]):
    """Time-invariant plume ``C(p) = exp(-|p - source|² / (2 σ²))``.

    Concentration is dimensionless in ``[0, 1]``: 1 at the source, falling
    monotonically and isotropically with distance, and 0 outside the grid.
    The plume has no state (``plume_state == ()``). It carries a constant,
    uniform wind (``wind_speed``, ``wind_direction``; calm by default) for
    wind sensors and wind-relative actions; the concentration does not depend
    on it.
    """

    type_name = "gaussian"
    Params = GaussianPlumeParams

    def init(self, key: jax.Array, params: GaussianPlumeParams) -> tuple:
        """The (empty) plume state."""
        return ()

    def sharing_conflict(self) -> None:
        """None: a static plume with no state can serve any number of agents."""
        return None

    def advance(self, key: jax.Array, plume_state: tuple, params: GaussianPlumeParams) -> tuple:
        """A static plume does not change."""
        return plume_state

    def source_location(self, plume_state: tuple, params: GaussianPlumeParams) -> jax.Array:
        """f32[2], the source position."""
        return params.source

    def concentration(
        self, plume_state: tuple, points: jax.Array, grid: Grid, params: GaussianPlumeParams
    ) -> jax.Array:
        """f32[...] at float points f32[..., 2]; 0 outside the grid."""
        points = jnp.asarray(points, jnp.float32)
        d2 = squared_norm(points - params.source)
        c = jnp.exp(-d2 / (2.0 * jnp.square(params.sigma)))
        return jnp.where(grid.contains(points), c, 0.0).astype(jnp.float32)

    def wind(self, plume_state: tuple, points: jax.Array, params: GaussianPlumeParams) -> jax.Array:
        """f32[..., 2], the air velocity ``(vx, vy)`` (cells/step) at points
        f32[..., 2]: the same constant vector everywhere."""
        return constant_wind(params.wind_speed, params.wind_direction, points)
