"""The self-advected wind field (``wind_model="field"``, pompy's
``WindModel``), its spline readings, and vertical puff dispersion
(``vertical_dispersion``, pompy's ``model_z_disp``).

Statistical checks allow 4 standard errors of their own sample sizes.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.interpolate

import plume_jax
from plume_jax.plumes import FilamentPlume
from plume_jax.plumes.advected_field import AdvectedField
from plume_jax.plumes.spline import bicubic_at, cardinal_coefficients
from plume_jax.core.types import Grid

Z = 4.0  # allowed standard errors

GRID = Grid(width=49, height=33)
SOURCE = (6.0, 16.0)


def build(**values):
    cfg = {"source": list(SOURCE), "capacity": 32, "warmup_steps": 0, "wind_kind": "constant",
           "wind_model": "field", "wind_speed": 0.9, "wind_direction": 0.0, "kernel": "3d",
           "wind_gust_std": 0.5, "wind_gust_damping": 0.7, "wind_gust_bandwidth": 0.1,
           "wind_gust_diffusivity": 3.0, "wind_field_spacing": 6.0, "wind_field_substeps": 1}
    cfg.update(values)
    return FilamentPlume.build(cfg, GRID, "plume")[:2]


# -- the spline ----------------------------------------------------------------------
def test_spline_is_pompys_rect_bivariate_spline():
    """The readings are the spline scipy's RectBivariateSpline (pompy's
    interpolation, defaults kx = ky = 3, s = 0) fits through the nodes."""
    nx, ny, hx, hy = 9, 6, 7.5, 4.25
    values = np.random.default_rng(0).normal(size=(ny, nx))
    xs, ys = np.arange(nx) * hx, np.arange(ny) * hy
    reference = scipy.interpolate.RectBivariateSpline(xs, ys, values.T)
    px = np.random.default_rng(1).uniform(0.0, xs[-1], 64)
    py = np.random.default_rng(2).uniform(0.0, ys[-1], 64)
    ours = jax.jit(bicubic_at)(jnp.asarray(values[..., None], jnp.float32), px / hx,
                               py / hy)[:, 0]
    np.testing.assert_allclose(np.asarray(ours, np.float64), reference.ev(px, py), atol=2e-5)


def test_spline_interpolates_nodes_reproduces_bicubics_and_clips_outside():
    """The spline passes through the nodes, reproduces any bicubic exactly
    (the not-a-knot spline of a cubic is the cubic), and reads points
    outside the nodes' range at the nearest point of their edge."""
    nx, ny = 7, 5
    jj, ii = np.meshgrid(np.arange(ny, dtype=np.float64), np.arange(nx, dtype=np.float64),
                         indexing="ij")

    def bicubic(x, y):
        return (0.3 - x + 0.2 * x**2 - 0.05 * x**3) * (1.0 + 0.5 * y - 0.1 * y**3)

    values = jnp.asarray(bicubic(ii, jj)[..., None], jnp.float32)
    inside_x = np.random.default_rng(3).uniform(0, nx - 1, 50)
    inside_y = np.linspace(0, ny - 1, 50)
    sx = np.concatenate([ii.ravel(), inside_x, [-3.0, 40.0]])
    sy = np.concatenate([jj.ravel(), inside_y, [2.0, -1.0]])
    expected = bicubic(np.clip(sx, 0, nx - 1), np.clip(sy, 0, ny - 1))
    got = np.asarray(jax.jit(bicubic_at)(values, sx, sy)[:, 0], np.float64)
    np.testing.assert_allclose(got, expected, atol=2e-4)
    np.testing.assert_allclose(got[:nx * ny], expected[:nx * ny], atol=1e-5)  # the nodes
    with pytest.raises(ValueError, match="at least 4 nodes"):
        cardinal_coefficients(3)


# -- the field -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def farrell_field():
    env, params = plume_jax.make("PlumeNav-Filament-Farrell-v0")
    return env.plume.gust_field, params.plume


def test_field_layout_shapes_and_dtypes(farrell_field):
    field, p = farrell_field
    assert field == AdvectedField(nodes=(17, 13), domain=(128, 96), substeps=4)
    u = jnp.asarray([1.0, 0.0])
    state = jax.eval_shape(field.init, jax.random.key(0), p, u)
    assert state.velocity.shape == (2, 15, 19) and state.velocity.dtype == jnp.float32
    assert state.noise.shape == (2, 2, 2, 2) and state.noise.dtype == jnp.float32
    after = jax.eval_shape(field.advance, jax.random.key(0), state, u, p)
    assert jax.tree.map(lambda a: (a.shape, a.dtype), after) == jax.tree.map(
        lambda a: (a.shape, a.dtype), state)
    out = jax.eval_shape(field.velocity, state, jnp.zeros((3, 5, 2)), u)
    assert out.shape == (3, 5, 2) and out.dtype == jnp.float32
    # at least 4 nodes per axis, the fewest a cubic spline takes
    assert AdvectedField.for_grid((10, 3), 50.0).nodes == (4, 4)


@pytest.fixture(scope="module")
def small_field():
    """The field of :func:`build`'s plume, its params and its jitted advance
    (one compilation: the gust settings are dynamic)."""
    plume, params = build()
    return plume.gust_field, params, jax.jit(plume.gust_field.advance)


def run_small_field(small_field, gust_std: float, steps: int):
    """The small field's state after ``steps`` steps with ``wind_gust_std``
    set, in a uniform 0.9 cells/step wind toward +x."""
    field, params, advance = small_field
    params = params.replace(wind_gust_std=jnp.float32(gust_std))
    u = jnp.asarray([0.9, 0.0])
    state = field.init(jax.random.key(0), params, u)
    for k in jax.random.split(jax.random.key(1), steps):
        state = advance(k, state, u, params)
    return state


def test_uniform_boundary_keeps_a_uniform_wind_exactly(small_field):
    """With no gusts (σ = 0) a uniform wind is a steady state of
    ``∂u/∂t = -(u·∇)u + ½K∇²u``: every node keeps it to float precision."""
    field = small_field[0]
    state = run_small_field(small_field, 0.0, 20)
    expected = np.asarray([0.9, 0.0])[:, None, None] * np.ones(
        (2, field.nodes[1] + 2, field.nodes[0] + 2))
    np.testing.assert_allclose(np.asarray(state.velocity), expected, atol=1e-6)


def test_extreme_gust_std_keeps_the_field_finite(small_field):
    """Regression: wind_gust_std = 1e6 (accepted) made the self-advected field
    overflow to NaN within a few steps (the settings-bounds property test
    found it): each component is now clipped to ``min(hx, hy) / (2 dt)``, the
    fastest wind the nodes carry stably."""
    v = np.asarray(run_small_field(small_field, 1e6, 10).velocity)
    assert np.isfinite(v).all() and np.abs(v).max() <= min(small_field[0].spacing) / 2 + 1e-4


def test_same_key_same_field_vmap_matches_loop_and_keys_matter():
    plume, params = build()
    field, u = plume.gust_field, jnp.asarray([0.9, 0.0])

    def run(key):
        k0, k1 = jax.random.split(key)
        state = field.init(k0, params, u)
        for k in jax.random.split(k1, 2):
            state = field.advance(k, state, u, params)
        return state

    keys = jax.random.split(jax.random.key(4), 3)
    one = jax.jit(run)
    a, b = one(keys[0]), one(keys[0])
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    batched = jax.jit(jax.vmap(run))(keys)
    for i, k in enumerate(keys):
        np.testing.assert_allclose(np.asarray(batched.velocity[i]), np.asarray(one(k).velocity),
                                   atol=1e-5)
    assert not np.allclose(np.asarray(batched.velocity[0]), np.asarray(batched.velocity[1]))


@pytest.fixture(scope="module")
def vertical_plume():
    """A plume in the field with vertical dispersion, its params, its jitted
    advance (one compilation for the tests below: dispersion is dynamic) and
    a state after 40 steps from empty."""
    plume, params = build(vertical_dispersion=True, capacity=64, dispersion=0.5)
    advance = jax.jit(plume.advance)
    state = plume.empty(jax.random.key(8), params)
    for k in jax.random.split(jax.random.key(9), 40):
        state = advance(k, state, params)
    return plume, params, advance, state


def test_puffs_and_sensors_read_the_field(vertical_plume):
    """Without dispersion a puff's step is the field's reading at its centre
    (after the field's update), which is also what ``plume.wind`` reports."""
    plume, params, advance, state = vertical_plume
    still = params.replace(dispersion=jnp.float32(0.0))
    after = advance(jax.random.key(7), state, still)
    wind = np.asarray(plume.wind(after, state.positions, still))
    direct = np.asarray(plume.gust_field.velocity(after.gusts, state.positions, None))
    np.testing.assert_array_equal(wind, direct)
    active = np.asarray(after.active & state.active)
    assert active.sum() > 10
    np.testing.assert_allclose(np.asarray(after.positions)[active],
                               (np.asarray(state.positions) + wind)[active], atol=1e-4)
    assert (np.asarray(after.positions) - np.asarray(state.positions))[active].std(0).max() > 0.01


def test_bad_field_settings_are_rejected_naming_the_setting():
    # spacing 6 on 49 x 33: nodes 6 x 5.33 cells apart, 1/(1/36 + 1/28.4) = 15.9 per substep
    with pytest.raises(plume_jax.ValidationError, match="plume.wind_gust_diffusivity"):
        build(wind_gust_diffusivity=40.0, wind_field_substeps=2)
    build(wind_gust_diffusivity=40.0, wind_field_substeps=3)  # more substeps: stable
    with pytest.raises(plume_jax.ValidationError, match=r"wind_speed\^2 / substeps"):
        build(wind_gust_diffusivity=0.3, wind_speed=0.9, wind_field_substeps=2)
    with pytest.raises(plume_jax.ValidationError, match="plume.wind_field_substeps"):
        build(wind_field_substeps=0)
    with pytest.raises(plume_jax.ValidationError, match="plume.vertical_dispersion"):
        build(vertical_dispersion=True, kernel="2d")
    with pytest.raises(plume_jax.ValidationError, match="plume.vertical_dispersion"):
        build(vertical_dispersion=1)


# -- vertical dispersion ---------------------------------------------------------------
def test_vertical_dispersion_random_walk_and_kernel(vertical_plume):
    """Heights start at 0 and take increments of variance ``2 dispersion``
    per step; the 3-D kernel is evaluated at the puff's height. Off, the
    state holds no heights."""
    plume, params, _, state = vertical_plume
    active = np.asarray(state.active)
    ages, heights = np.asarray(state.ages)[active], np.asarray(state.heights)[active]
    steps = np.floor(ages)  # a puff released with age u < 1 has taken floor(age) increments
    assert np.all(heights[steps == 0] == 0.0)
    scaled = heights[steps > 0] / np.sqrt(2.0 * 0.5 * steps[steps > 0])
    n = scaled.size
    assert n > 20 and abs(scaled.var() - 1.0) < Z * math.sqrt(2.0 / n) + 0.05
    # the kernel: the 3-D Gaussian at the puff's height
    point = jnp.asarray([[20.0, 16.0]])
    r2 = np.square(np.asarray(plume.radii(state.ages, params), np.float64))
    d2 = np.square(np.asarray(state.positions, np.float64) - np.asarray(point)).sum(-1)
    h2 = np.square(np.asarray(state.heights, np.float64))
    expected = np.where(np.asarray(state.active),
                        2.0 / ((2 * math.pi) ** 1.5 * r2**1.5) * np.exp(-0.5 * (d2 + h2) / r2),
                        0.0).sum()
    got = float(plume.concentration(state, point, GRID, params)[0])
    assert got == pytest.approx(expected, rel=1e-4)
    flat, flat_params = build(wind_model="uniform")
    assert flat.empty(jax.random.key(8), flat_params).heights == ()


# -- long physics checks -----------------------------------------------------------------
@pytest.mark.slow
def test_farrell_field_stays_bounded_and_matches_pompys_wind():
    """16 independent runs of 8000 steps of the Farrell preset's field: every
    node stays finite and within 20 cells/step (the boundary noise alone
    reaches 8-9 in long runs; pompy's scheme, uncapped, overflows in about a
    quarter of such runs), and at 50 cells downwind of the source the mean
    wind and the cross-wind gust std are within 10 % of pompy's (1.140 and
    0.394: benchmarks/pompy_validation.json, 12 finite pompy runs)."""
    env, params = plume_jax.make("PlumeNav-Filament-Farrell-v0")
    field, p = env.plume.gust_field, params.plume
    u = jnp.asarray([1.0, 0.0])
    probe = jnp.asarray([66.0, 48.0])

    @jax.jit
    def run(key):
        k0, k1 = jax.random.split(key)
        state = field.init(k0, p, u)
        state, _ = jax.lax.scan(lambda s, k: (field.advance(k, s, u, p), None), state,
                                jax.random.split(k0, 500))

        def body(s, k):
            s = field.advance(k, s, u, p)
            return s, (field.velocity(s, probe, u), jnp.abs(s.velocity).max())

        _, (v, peak) = jax.lax.scan(body, state, jax.random.split(k1, 8000))
        return v[:, 0].mean(), v[:, 1].std(), peak.max()

    mean, gust, peak = (np.asarray(x) for x in jax.vmap(run)(
        jax.random.split(jax.random.key(0), 16)))
    assert np.all(np.isfinite(peak)) and peak.max() < 20.0
    assert abs(mean.mean() / 1.140 - 1.0) < 0.10
    assert abs(gust.mean() / 0.394 - 1.0) < 0.10
