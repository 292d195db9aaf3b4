"""The linearised wind field (``wind_model="linear_field"``) and the 3-D puff
kernel: what they conserve, that they are exact where they claim to be,
deterministic per key, and read by the puffs and by every consumer of the
wind.

Statistical tests use tolerances from their own sample sizes: independent
chains (or independent draws) give a standard error, and each check allows
4 of them.
"""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import plume_jax
from tests.chains import run_chains
from plume_jax.plumes import FilamentPlume
from plume_jax.plumes.wind_field import WindField, node_counts, noise_transition
from plume_jax.core.types import Grid

Z = 4.0  # allowed standard errors


@chex.dataclass(frozen=True)
class GustParams:
    wind_gust_std: jax.Array
    wind_gust_damping: jax.Array
    wind_gust_bandwidth: jax.Array
    wind_gust_diffusivity: jax.Array


def gust_params(std=0.7, damping=0.3, bandwidth=0.15, diffusivity=2.0) -> GustParams:
    return GustParams(**{k: jnp.asarray(v, jnp.float32) for k, v in dict(
        wind_gust_std=std, wind_gust_damping=damping, wind_gust_bandwidth=bandwidth,
        wind_gust_diffusivity=diffusivity).items()})


@pytest.mark.parametrize("damping,bandwidth", [(0.1, 0.2), (0.7, 0.05), (1.0, 0.3), (3.0, 0.5),
                                               (1.5, 2.0), (100.0, math.pi), (100.0, 0.01),
                                               (1e-6, 3.14)])
def test_noise_transition_is_the_exact_exponential(damping, bandwidth):
    """Φ = D⁻¹ expm(A) D (under-, critically and over-damped) and L Lᵀ = I - Φ Φᵀ."""
    phi, chol = (np.asarray(x, np.float64) for x in noise_transition(damping, bandwidth))
    a = np.array([[0.0, 1.0], [-bandwidth**2, -2.0 * damping * bandwidth]])
    d = np.diag([1.0, bandwidth])
    np.testing.assert_allclose(phi, np.linalg.inv(d) @ scipy.linalg.expm(a) @ d, atol=2e-6)
    np.testing.assert_allclose(chol @ chol.T, np.eye(2) - phi @ phi.T, atol=2e-6)
    assert chol[0, 1] == 0.0


@pytest.mark.slow
def test_strongly_damped_gust_noise_stays_finite():
    """Regression: damping 100 with bandwidth π (both accepted) gave NaN
    observations on the Gusty/Farrell presets: e^{-ζω} underflowed to 0 and
    cosh δ overflowed to inf in float32, and 0 × inf is NaN."""
    phi, chol = noise_transition(jnp.float32(100.0), jnp.float32(math.pi))
    assert np.isfinite(np.asarray(phi)).all() and np.isfinite(np.asarray(chol)).all()
    env, params = plume_jax.make("PlumeNav-Filament-Gusty-v0", grid_size=[32, 24],
                                 plume={"wind_gust_damping": 100.0,
                                        "wind_gust_bandwidth": math.pi, "warmup_steps": 4,
                                        "source": [4.0, 12.0]},
                                 start={"min_distance": 2.0, "max_distance": 10.0})
    obs, state = env.reset(jax.random.key(0), params)
    obs, *_ = env.step(jax.random.key(1), state, 1, params)
    assert np.isfinite(np.asarray(obs)).all()


# -- the boundary noise --------------------------------------------------------
SMALL = WindField.for_grid((17, 17), 8.0)  # 3 x 3 nodes: the corners and one interior node
CHAINS = 2048


@pytest.fixture(scope="module")
def corner_noise():
    """f32[chains, times, 8]: the corner values of independent chains at lags
    0, 1, 10, 40 and 200 after the first advance from a stationary start."""
    p = gust_params()
    lags = (0, 1, 10, 40, 200)
    values = run_chains(lambda k: SMALL.init(k, p),
                        lambda k, s: SMALL.advance(k, s, jnp.asarray([1.0, 0.0]), p),
                        lambda s: s.noise[..., 0].reshape(-1),
                        steps=max(lags) + 1, chains=CHAINS, key=jax.random.key(3))
    values = np.asarray(values, np.float64)[:, np.asarray(lags)]
    return lags, p, float(p.wind_gust_std) * values


def test_boundary_noise_has_the_configured_mean_and_variance(corner_noise):
    """At every lag, the 8 corner components of 2048 chains are independent
    draws of the stationary law: mean 0 and variance ``wind_gust_std²``
    (the exact update keeps the law; an Euler update would not)."""
    lags, p, x = corner_noise
    sigma2 = float(p.wind_gust_std) ** 2
    for i, lag in enumerate(lags):
        sample = x[:, i].ravel()
        n = sample.size
        assert abs(sample.mean()) < Z * math.sqrt(sigma2 / n), lag
        # the variance of a normal sample: standard error sigma² sqrt(2 / (n - 1))
        assert abs(sample.var(ddof=1) - sigma2) < Z * sigma2 * math.sqrt(2 / (n - 1)), lag


def test_boundary_noise_has_the_filters_autocorrelation(corner_noise):
    """Correlation at lag k: ``e^{-ζωk} (cos βk + ζω/β sin βk)``, ``β = ω√(1-ζ²)``."""
    lags, p, x = corner_noise
    zeta, omega = float(p.wind_gust_damping), float(p.wind_gust_bandwidth)
    beta = omega * math.sqrt(1 - zeta**2)
    for i, lag in enumerate(lags[1:], start=1):
        expected = math.exp(-zeta * omega * lag) * (
            math.cos(beta * lag) + zeta * omega / beta * math.sin(beta * lag))
        a, b = x[:, 0].ravel(), x[:, i].ravel()
        corr = np.corrcoef(a, b)[0, 1]
        assert abs(corr - expected) < Z * (1 - expected**2) / math.sqrt(a.size - 3) + 1e-3, (
            lag, corr, expected)


# -- the field -------------------------------------------------------------------
LONG = WindField.for_grid((65, 33), 4.0)  # 17 x 9 nodes


@pytest.fixture(scope="module")
def middle_row():
    """f32[chains, steps, nx]: the cross-wind gust on the middle row, mean wind
    1 cell/step toward +x, low-bandwidth gusts."""
    p = gust_params(std=1.0, damping=1.0, bandwidth=0.05, diffusivity=2.0)
    rows = run_chains(lambda k: LONG.init(k, p),
                      lambda k, s: LONG.advance(k, s, jnp.asarray([1.0, 0.0]), p),
                      lambda s: s.gusts[4, :, 1], steps=1200, chains=12, key=jax.random.key(0))
    return np.asarray(rows, np.float64)[:, 200:]


def test_gusts_travel_downwind_with_the_mean_wind(middle_row):
    """The gust at a node 40 cells downwind repeats the upwind one 40 steps
    later: their cross-correlation peaks at a lag of distance / U."""
    a, b = middle_row[:, :, 2], middle_row[:, :, 12]
    distance = 10 * LONG.spacing[0]
    lags = np.arange(0, 80)
    corr = np.array([np.mean((a[:, :a.shape[1] - k] - a.mean()) * (b[:, k:] - b.mean()))
                     for k in lags]) / (a.std() * b.std())
    assert abs(int(lags[np.argmax(corr)]) - distance) <= 0.15 * distance
    assert corr.max() > 0.8 and corr[0] < corr.max() - 0.3


def test_node_layout_and_interpolation_are_exact_at_the_nodes():
    assert node_counts((128, 96), 8.0) == (17, 13)
    assert node_counts((10, 3), 50.0) == (3, 3)  # at least one interior node
    p = gust_params()
    state = jax.jit(LONG.advance)(jax.random.key(1), LONG.init(jax.random.key(0), p),
                                  jnp.asarray([1.0, 0.0]), p)
    nodes = LONG.node_positions()
    np.testing.assert_allclose(np.asarray(LONG.at(state, nodes)), np.asarray(state.gusts),
                               atol=1e-6)
    # bilinear between nodes, and the nearest boundary value outside the domain
    mid = (nodes[3, 5] + nodes[4, 6]) / 2
    expected = (state.gusts[3, 5] + state.gusts[3, 6] + state.gusts[4, 5] + state.gusts[4, 6]) / 4
    np.testing.assert_allclose(np.asarray(LONG.at(state, mid)), np.asarray(expected), atol=1e-6)
    np.testing.assert_allclose(np.asarray(LONG.at(state, jnp.asarray([-30.0, 500.0]))),
                               np.asarray(state.gusts[-1, 0]), atol=1e-6)


# -- in the filament plume ---------------------------------------------------------
GRID = Grid(width=49, height=33)
SOURCE = (6.0, 16.0)


def build(**values):
    cfg = {"source": list(SOURCE), "capacity": 32, "warmup_steps": 0, "wind_kind": "constant",
           "wind_model": "linear_field", "wind_speed": 0.9, "wind_direction": 0.6,
           "wind_gust_std": 0.5, "wind_gust_damping": 0.7, "wind_gust_bandwidth": 0.1,
           "wind_gust_diffusivity": 3.0, "wind_field_spacing": 6.0}
    cfg.update(values)
    return FilamentPlume.build(cfg, GRID, "plume")[:2]


@pytest.fixture(scope="module")
def plume_wind():
    """f32[chains, steps, nodes, 2]: the plume's wind (``plume.wind``, what
    sensors read) at every node of its field, after each advance."""
    plume, params = build()
    nodes = plume.gust_field.node_positions().reshape(-1, 2)
    wind = run_chains(lambda k: plume.init(k, params), lambda k, s: plume.advance(k, s, params),
                      lambda s: plume.wind(s, nodes, params), steps=600, chains=32,
                      key=jax.random.key(2))
    return plume, params, np.asarray(wind, np.float64)


def test_mean_wind_over_the_domain_and_time_is_the_configured_wind(plume_wind):
    """Averaged over every node and step, each chain's wind is the configured
    ``wind_speed`` toward ``wind_direction`` (within 4 standard errors of the
    32 independent chain means), and it is a gusty wind, not a constant one."""
    plume, params, wind = plume_wind
    speed, direction = float(params.wind_speed), float(params.wind_direction)
    expected = np.array([speed * math.cos(direction), speed * math.sin(direction)])
    chain_means = wind.mean(axis=(1, 2))  # [chains, 2]
    se = chain_means.std(axis=0, ddof=1) / math.sqrt(chain_means.shape[0])
    assert np.all(np.abs(chain_means.mean(0) - expected) < Z * se), (chain_means.mean(0), se)
    interior = wind.reshape(*wind.shape[:2], *plume.gust_field.nodes[::-1], 2)[:, :, 1:-1, 1:-1]
    assert interior.std(axis=(0, 1)).min() > 0.05


@pytest.fixture(scope="module")
def warm_plume():
    """``(plume, params, init)``: a 25-step warm-up and its jitted ``init``,
    compiled once and shared (what the tests vary is dynamic: params)."""
    plume, params = build(warmup_steps=25)
    return plume, params, jax.jit(plume.init)


def test_same_key_same_field_bit_for_bit_and_keys_matter(warm_plume):
    plume, params, init = warm_plume
    a, b, c = init(jax.random.key(4), params), init(jax.random.key(4), params), \
        init(jax.random.key(5), params)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(np.asarray(a.gusts.gusts), np.asarray(c.gusts.gusts))


def test_puffs_move_with_the_field_at_their_centres(warm_plume):
    """Without centre-relative dispersion, each puff's step is the wind
    (large-scale plus gusts, after their update) at its centre."""
    plume, params, init = warm_plume
    params = params.replace(dispersion=jnp.float32(0.0), release_rate=jnp.float32(0.0))
    state = init(jax.random.key(6), params.replace(release_rate=jnp.float32(1.0)))
    after = jax.jit(plume.advance)(jax.random.key(7), state, params)
    expected = np.asarray(state.positions) + np.asarray(plume.wind(after, state.positions, params))
    active = np.asarray(after.active)
    assert active.sum() > 10
    np.testing.assert_allclose(np.asarray(after.positions)[active], expected[active], atol=1e-4)
    # the gusts make the steps differ from puff to puff
    steps = (np.asarray(after.positions) - np.asarray(state.positions))[active]
    assert steps.std(axis=0).max() > 0.01


def test_sensors_and_starts_read_the_local_wind():
    """Through the env's probe, a world-frame wind sensor reads the field at
    the agent, which differs from the wind elsewhere."""
    env, p = plume_jax.make(
        "PlumeNav-Filament-Gusty-v0", grid_size=[48, 32], source=[4, 16], capacity=32,
        warmup_steps=40, wind_field_spacing=6.0, sensor={"type": "wind", "frame": "world"},
        start={"type": "fixed", "position": [30, 20]})
    obs, state = jax.jit(env.reset)(jax.random.key(0), p)
    probe = env.probe(state.plume, p)
    np.testing.assert_allclose(np.asarray(obs), np.asarray(probe.wind(jnp.asarray([30.0, 20.0]))),
                               atol=1e-6)
    winds = np.asarray(probe.wind(jnp.asarray([[2.0, 2.0], [30.0, 20.0], [45.0, 30.0]])))
    assert np.abs(winds[0] - winds[2]).max() > 1e-3


def test_unstable_diffusivity_is_rejected_naming_the_setting():
    # spacing 6 on 49 x 33: nodes 6 x 5.33 cells apart, stable up to 1/(1/36 + 1/28.4) = 15.9
    with pytest.raises(plume_jax.ValidationError, match="plume.wind_gust_diffusivity"):
        build(wind_gust_diffusivity=20.0)
    with pytest.raises(plume_jax.ValidationError, match=r"wind_speed\^2"):
        build(wind_gust_diffusivity=0.5, wind_speed=0.9)
    with pytest.raises(plume_jax.ValidationError, match="plume.wind_model"):
        build(wind_model="turbulent")
    with pytest.raises(plume_jax.ValidationError, match="plume.wind_field_spacing"):
        build(wind_field_spacing=0.5)  # more nodes than cells
    # uniform wind: the field's settings are not checked
    plume, params = build(wind_model="uniform", wind_gust_diffusivity=1e4)
    assert plume.gust_field is None
    # a field needs the grid: a plume made by hand (no domain) says so
    with pytest.raises(plume_jax.ValidationError, match="wind_model"):
        FilamentPlume(wind_model="field").init(jax.random.key(0), params)


def test_field_steps_run_no_loop_and_reinit_keeps_the_field():
    env, params = plume_jax.make("PlumeNav-Filament-Gusty-v0", grid_size=[48, 32],
                                 source=[4, 16], capacity=16, warmup_steps=3,
                                 wind_field_spacing=6.0)
    key = jax.random.key(0)
    state = jax.eval_shape(env.reset_env, key, params)[1]
    step = str(jax.make_jaxpr(env.step)(key, state, 0, params))
    assert "scan" not in step and "while" not in step
    _, state = env.reset(key, params)
    again = env.plume.reinit(key, state.plume, params.plume)
    assert again.gusts is state.plume.gusts


# -- the 3-D kernel ------------------------------------------------------------------
def test_3d_kernel_is_a_3d_gaussian_sampled_in_its_plane():
    """Zero wind, zero dispersion: puffs sit at the source; the plane holds
    ``m / (√(2π) r)`` of each puff's mass and the peak is ``m / ((2π)^1.5 r³)``."""
    grid = Grid(width=41, height=41)
    values = {"source": [20, 20], "wind_kind": "constant", "wind_speed": 0.0, "dispersion": 0.0,
              "warmup_steps": 12, "capacity": 16, "release_rate": 0.5, "puff_mass": 3.0}
    plume3, params = FilamentPlume.build({**values, "kernel": "3d"}, grid, "plume")[:2]
    plume2, _ = FilamentPlume.build(values, grid, "plume")[:2]
    state = jax.jit(plume3.init)(jax.random.key(1), params)
    active = np.asarray(state.active)
    r = np.asarray(plume3.radii(state.ages, params), np.float64)[active]
    field3 = np.asarray(jax.jit(plume3.field, static_argnums=1)(state, grid, params), np.float64)
    assert field3.sum() == pytest.approx((3.0 / (math.sqrt(2 * math.pi) * r)).sum(), rel=1e-4)
    peak = plume3.concentration(state, jnp.asarray([20.0, 20.0]), grid, params)
    assert float(peak) == pytest.approx((3.0 / ((2 * math.pi) ** 1.5 * r**3)).sum(), rel=1e-5)
    field2 = np.asarray(jax.jit(plume2.field, static_argnums=1)(state, grid, params), np.float64)
    assert field2.sum() == pytest.approx(3.0 * active.sum(), rel=1e-4)
