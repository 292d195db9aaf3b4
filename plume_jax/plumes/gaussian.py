"""Static isotropic Gaussian plume."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from plume_jax.settings import Configurable, Setting, grid_position, real
from plume_jax.types import Grid


@chex.dataclass(frozen=True)
class GaussianPlumeParams:
    """Attributes:
        source: f32[2], ``(x, y)`` of the source in cells.
        sigma: f32[], width of the plume in cells (> 0).
        wind_speed: f32[] >= 0, speed of the (constant, uniform) wind,
            cells per step.
        wind_direction: f32[], direction the air moves toward, radians
            (0 = east, counter-clockwise positive).

    The wind fields default to a calm wind (0.0) so params built by hand
    with only ``source`` and ``sigma`` stay valid; ``make`` always sets all
    four as float32 arrays.
    """

    source: jax.Array
    sigma: jax.Array
    wind_speed: jax.Array = 0.0
    wind_direction: jax.Array = 0.0


@dataclasses.dataclass(frozen=True)
class GaussianPlume(Configurable):
    """Time-invariant plume ``C(p) = exp(-|p - source|² / (2 σ²))``.

    Concentration is dimensionless in ``[0, 1]``: 1 at the source, falling
    monotonically and isotropically with distance, and 0 outside the grid.
    The plume has no state (``plume_state == ()``). It carries a constant,
    uniform wind (``wind_speed``, ``wind_direction``; calm by default) for
    wind sensors and wind-relative actions; the concentration does not depend
    on it.
    """

    type_name = "gaussian"
    SETTINGS = {
        "source": Setting(None, grid_position(none_means_centre=True),
                          doc="(x, y) of the source, cells; default: grid centre"),
        "sigma": Setting(20.0, real(low=0.0, low_inclusive=False),
                         doc="plume width (standard deviation), cells"),
        "wind_speed": Setting(0.0, real(low=0.0), doc="constant wind speed, cells per step"),
        "wind_direction": Setting(0.0, real(),
                                  doc="direction the wind blows toward, radians (0 = east, CCW)"),
    }
    Params = GaussianPlumeParams

    def init(self, key: jax.Array, params: GaussianPlumeParams) -> tuple:
        """The (empty) plume state."""
        return ()

    def reinit(self, key: jax.Array, plume_state: tuple, params: GaussianPlumeParams) -> tuple:
        """Plume state for the next episode: the same empty state."""
        return ()

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
        d2 = jnp.sum(jnp.square(points - params.source), axis=-1)
        c = jnp.exp(-d2 / (2.0 * jnp.square(params.sigma)))
        return jnp.where(grid.contains(points), c, 0.0).astype(jnp.float32)

    def wind(self, plume_state: tuple, points: jax.Array, params: GaussianPlumeParams) -> jax.Array:
        """f32[..., 2], the air velocity ``(vx, vy)`` (cells/step) at points
        f32[..., 2]: the same constant vector everywhere."""
        points = jnp.asarray(points, jnp.float32)
        velocity = params.wind_speed * jnp.stack(
            [jnp.cos(params.wind_direction), jnp.sin(params.wind_direction)])
        return jnp.broadcast_to(velocity.astype(jnp.float32), points.shape)

    def field(self, plume_state: tuple, grid: Grid, params: GaussianPlumeParams) -> jax.Array:
        """f32[H, W], the concentration at every cell centre, ``field[y, x]``."""
        return self.concentration(plume_state, cell_centres(grid), grid, params)


def cell_centres(grid: Grid) -> jax.Array:
    """f32[H, W, 2], the ``(x, y)`` of every cell, indexed ``[y, x]``."""
    ys, xs = jnp.meshgrid(
        jnp.arange(grid.height, dtype=jnp.float32),
        jnp.arange(grid.width, dtype=jnp.float32),
        indexing="ij",
    )
    return jnp.stack([xs, ys], axis=-1)
