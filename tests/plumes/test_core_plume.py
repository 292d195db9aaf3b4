"""Gaussian plume invariants (hypothesis) and the concentration sensor."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from plume_jax.plumes import GaussianPlume
from plume_jax.core.types import Grid

GRID = Grid(width=40, height=30)
PLUME = GaussianPlume()
conc = jax.jit(lambda points, source, sigma: PLUME.concentration(
    (), points, GRID, PLUME.Params(source=source, sigma=sigma)))

coords = st.tuples(st.floats(0, 39, width=32), st.floats(0, 29, width=32))
sigmas = st.floats(0.5, 50.0, width=32)


def _c(point, source, sigma):
    return float(conc(jnp.asarray(point, jnp.float32), jnp.asarray(source, jnp.float32),
                      jnp.asarray(sigma, jnp.float32)))


@given(point=coords, source=coords, sigma=sigmas)
def test_bounded_non_negative_and_maximal_at_source(point, source, sigma):
    c = _c(point, source, sigma)
    assert 0.0 <= c <= 1.0
    assert _c(source, source, sigma) == 1.0
    assert c <= _c(source, source, sigma)


@given(source=coords, sigma=sigmas, dx=st.floats(-10, 10, width=32), dy=st.floats(-10, 10, width=32))
def test_symmetric_about_source(source, sigma, dx, dy):
    a = np.asarray(source) + [dx, dy]
    b = np.asarray(source) - [dx, dy]
    inside = lambda p: 0 <= p[0] <= 39 and 0 <= p[1] <= 29  # noqa: E731
    if inside(a) and inside(b):
        assert abs(_c(a, source, sigma) - _c(b, source, sigma)) <= 1e-6


@given(sigma=sigmas, angle=st.floats(0, 2 * np.pi), r1=st.floats(0, 12), r2=st.floats(0, 12))
def test_monotone_non_increasing_in_distance(sigma, angle, r1, r2):
    source = (20.0, 15.0)
    near, far = sorted([r1, r2])
    direction = np.asarray([np.cos(angle), np.sin(angle)])
    assert _c(source + near * direction, source, sigma) >= _c(source + far * direction, source, sigma)


# XLA on CPU flushes float32 subnormals to zero, so a coordinate of -1e-45 is
# the grid edge 0 there; draw none (hypothesis once found (0, -1.4e-45)).
_outside = st.floats(-100, 200, width=32, allow_subnormal=False)


@given(point=st.tuples(_outside, _outside), source=coords)
def test_zero_outside_the_grid(point, source):
    x, y = point
    if not (0 <= x <= 39 and 0 <= y <= 29):
        assert _c(point, source, 20.0) == 0.0


def test_subnormal_coordinate_outside_the_grid_is_flushed_to_the_edge():
    """The falsifying example of ``test_zero_outside_the_grid``: on CPU the
    subnormal y = -1.4e-45 is flushed to 0, a cell on the grid's edge (the
    source's own cell here), not a point outside it."""
    assert _c((0.0, -1.401298464324817e-45), (0.0, 0.0), 20.0) == _c((0.0, 0.0), (0.0, 0.0), 20.0)


def test_field_matches_concentration_and_is_indexed_y_x():
    params = PLUME.Params(source=jnp.asarray([30.0, 5.0]), sigma=jnp.asarray(4.0))
    field = np.asarray(PLUME.field((), GRID, params))
    assert field.shape == (30, 40) and field.dtype == np.float32
    assert np.unravel_index(np.argmax(field), field.shape) == (5, 30)
    assert field[7, 11] == np.float32(_c((11, 7), (30, 5), 4.0))


def test_concentration_at_batched_points():
    params = PLUME.Params(source=jnp.asarray([10.0, 10.0]), sigma=jnp.asarray(3.0))
    points = jnp.zeros((4, 5, 2)) + 10.0
    assert PLUME.concentration((), points, GRID, params).shape == (4, 5)
