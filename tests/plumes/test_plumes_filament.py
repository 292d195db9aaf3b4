"""FilamentPlume: the physics it claims, and the costs it promises.

Validation (one compiled run: 2 wind settings x 6 plumes x 300 steps after a
120-step warm-up on an 80x40 grid, release 1 puff/step, wind 1 cell/step;
see ``physics`` below; docs/plumes.md has the measured numbers):

- mass flux ``U ∫ C̄ dy`` at four downwind distances equals the emission
  rate ``release_rate · puff_mass`` (within 3 %);
- the time-averaged cross-wind profile is Gaussian (max deviation < 8 % of
  its peak) with variance ``r0² + 2 (growth + dispersion) x / U`` (within
  10 %), growing with distance ``x``;
- intermittency (fraction of time above 0.05) on the centreline falls with
  distance in a meandering wind;
- with zero wind and zero dispersion every puff stays at the source.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.plumes import FilamentPlume
from plume_jax.core.types import Grid

GRID = Grid(width=80, height=40)
SOURCE = (6.0, 20.0)
RELEASE, MASS, R0, GROWTH, DISPERSION, SPEED = 1.0, 2.0, 1.0, 0.03, 0.3, 1.0
XS = np.array([8.0, 20.0, 35.0, 55.0])       # transect distances downwind
DY = 1.0
YS = np.arange(-18.0, 18.0 + DY / 2, DY)     # cross-wind offsets
CENTRELINE = np.array([2.0, 8.0, 20.0, 35.0, 55.0, 70.0])
ENVS, STEPS = 6, 300


def build(**values):
    cfg = {"source": list(SOURCE), "capacity": 128, "warmup_steps": 120, "release_rate": RELEASE,
           "puff_mass": MASS, "puff_radius": R0, "growth": GROWTH, "dispersion": DISPERSION,
           "wind_kind": "meander", "wind_speed": SPEED, "wind_direction": 0.0,
           "wind_direction_std": 0.0, "wind_correlation_time": 30.0}
    cfg.update(values)
    return FilamentPlume.build(cfg, GRID, "plume")[:2]


@pytest.fixture(scope="module")
def physics():
    """Concentration samples of two plumes compiled once: a meander with
    std 0 (a constant wind) and one with std 0.3 rad; the transects also
    through the 3-D kernel (same puffs)."""
    plume, params = build()
    plume3d = build(kernel="3d")[0]
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), params)
    batch = batch.replace(wind_direction_std=jnp.asarray([0.0, 0.3], jnp.float32))
    transect = np.stack(np.meshgrid(SOURCE[0] + XS, SOURCE[1] + YS, indexing="ij"), -1)
    centre = np.stack([SOURCE[0] + CENTRELINE, np.full_like(CENTRELINE, SOURCE[1])], -1)
    points = jnp.asarray(np.concatenate([transect.reshape(-1, 2), centre]), jnp.float32)

    @jax.jit
    def run(key, p):
        def one(k):
            k0, k1 = jax.random.split(k)
            state = plume.init(k0, p)
            released0 = state.released

            def body(s, kk):
                s = plume.advance(kk, s, p)
                return s, (plume.concentration(s, points, GRID, p),
                           plume3d.concentration(s, points[:XS.size * YS.size], GRID, p))

            state, samples = jax.lax.scan(body, state, jax.random.split(k1, STEPS))
            return samples, state.released - released0

        return jax.vmap(one)(jax.random.split(key, ENVS))

    out = jax.vmap(run, in_axes=(None, 0))(jax.random.key(0), batch)
    (samples, samples3d), released = (np.asarray(x) for x in out[0]), np.asarray(out[1])
    n_t = XS.size * YS.size
    return {
        "transect": samples[0, :, :, :n_t].reshape(-1, XS.size, YS.size),
        "transect_3d": samples3d[0].reshape(-1, XS.size, YS.size),
        "centre_meander": samples[1, :, :, n_t:].reshape(-1, CENTRELINE.size),
        "released": released,
    }


def test_mass_flux_equals_the_emission_rate(physics):
    mean = physics["transect"].mean(0)
    flux = SPEED * mean.sum(-1) * DY
    np.testing.assert_allclose(flux, RELEASE * MASS, rtol=0.03)


def test_3d_kernel_flux_is_the_emission_through_the_plane(physics):
    """3-D puffs: the plane holds ``m / (√(2π) r)`` of each, so
    ``U ∫ C̄ dy · √(2π) r(x / U)`` is the emission rate; and it falls off
    faster than the 2-D plume's flux (constant)."""
    mean = physics["transect_3d"].mean(0)
    flux = SPEED * mean.sum(-1) * DY
    radius = np.sqrt(R0**2 + 2 * GROWTH * XS / SPEED)
    np.testing.assert_allclose(flux * np.sqrt(2 * np.pi) * radius, RELEASE * MASS, rtol=0.03)
    assert np.all(np.diff(flux) < 0)


def test_crosswind_profile_is_gaussian_and_widens_with_distance(physics):
    mean = physics["transect"].mean(0)
    variances = []
    for i, x in enumerate(XS):
        m = mean[i]
        total = m.sum() * DY
        centre = (m * YS).sum() * DY / total
        var = (m * (YS - centre) ** 2).sum() * DY / total
        predicted = R0**2 + 2 * (GROWTH + DISPERSION) * x / SPEED
        assert abs(centre) < 0.5
        assert var == pytest.approx(predicted, rel=0.10), (x, var, predicted)
        gauss = total / math.sqrt(2 * math.pi * var) * np.exp(-(YS - centre) ** 2 / (2 * var))
        assert np.abs(gauss - m).max() < 0.08 * m.max(), x
        variances.append(var)
    assert np.all(np.diff(variances) > 0)


def test_emission_rate_counts_released_puffs(physics):
    released = physics["released"]  # per env, over STEPS steps
    n = released.size * STEPS
    rate = released.sum() / n
    assert rate == pytest.approx(RELEASE, abs=4 * math.sqrt(RELEASE / n))
    # mass released per step equals the emission rate release_rate * puff_mass
    assert rate * MASS == pytest.approx(RELEASE * MASS, rel=4 * math.sqrt(1 / n))


def test_intermittency_falls_with_distance(physics):
    intermittency = (physics["centre_meander"] > 0.05).mean(0)
    assert np.all(np.diff(intermittency) < 0), intermittency
    assert intermittency[0] > 0.9 and intermittency[-1] < 0.7


def test_zero_wind_and_zero_dispersion_puffs_stay_put():
    plume, params = build(wind_kind="constant", wind_speed=0.0, dispersion=0.0,
                          warmup_steps=30, capacity=32, release_rate=0.5)
    state = jax.jit(plume.init)(jax.random.key(1), params)
    assert int(state.active.sum()) > 5
    active = np.asarray(state.active)
    np.testing.assert_array_equal(np.asarray(state.positions)[active], np.tile(SOURCE, (active.sum(), 1)))
    # puffs still grow: r² = r0² + 2 growth age
    ages = np.asarray(state.ages)[active]
    np.testing.assert_allclose(np.asarray(plume.radii(state.ages, params))[active] ** 2,
                               R0**2 + 2 * GROWTH * ages, rtol=1e-5)
    # the kernels are normalised: the field holds exactly the puffs' mass
    field = np.asarray(jax.jit(plume.field, static_argnums=1)(state, GRID, params))
    assert field.sum() == pytest.approx(float(plume.mass_in(state, params)), rel=1e-4)


def test_ring_buffer_overwrites_the_oldest_puffs():
    plume, params = build(wind_kind="constant", wind_speed=0.0, capacity=16, release_rate=3.0,
                          warmup_steps=60, max_release=12)
    state = jax.jit(plume.init)(jax.random.key(2), params)
    assert int(state.head) == int(state.released) % 16
    assert bool(np.all(np.asarray(state.active)))  # full, nothing lost
    # with ~3 puffs per step, 16 slots hold only the last few steps' puffs
    assert float(state.ages.max()) < 12.0


def test_puffs_that_leave_the_domain_are_deactivated():
    plume, params = build(wind_kind="constant", wind_speed=3.0, capacity=96, warmup_steps=80)
    state = jax.jit(plume.init)(jax.random.key(3), params)
    active = np.asarray(state.active)
    # the ring has not wrapped (80 puffs < 96 slots) yet puffs older than the
    # transit time (~(80 - 6) / 3 + margin) are gone
    assert int(state.released) < 96
    assert 0 < active.sum() < int(state.released)
    margin = 3 * np.asarray(plume.radii(state.ages, params))[active]
    x = np.asarray(state.positions)[active, 0]
    assert np.all(x <= GRID.width - 1 + margin)
    assert float(np.asarray(state.ages)[active].max()) < 40


def test_capped_release_law_and_sub_step_jitter():
    plume, params = build(wind_kind="constant", capacity=64, warmup_steps=0, release_rate=2.0)
    state = plume.empty(jax.random.key(0), params)
    step = jax.jit(plume.advance)
    state = step(jax.random.key(5), state, params)
    new = np.asarray(state.active)
    ages = np.asarray(state.ages)[new]
    assert np.all((ages >= 0) & (ages < 1))
    # each new puff sits at source + age * U (no dispersion noise for the fraction)
    x = np.asarray(state.positions)[new]
    np.testing.assert_allclose(x[:, 0], SOURCE[0] + ages * SPEED, atol=1e-5)


@pytest.fixture(scope="module")
def env_small():
    return plume_jax.make("PlumeNav-Filament-v0", grid_size=[48, 32], source=[4, 16],
                          capacity=48, warmup_steps=40, max_steps=20,
                          start={"min_distance": 5.0, "max_distance": 30.0})


def test_step_never_runs_the_warm_up_and_reinit_is_o1(env_small):
    """``reset`` scans the warm-up; ``step`` (auto-reset included) does not,
    and ``reinit`` touches no puff array."""
    env, params = env_small
    key = jax.random.key(0)
    _, state = env.reset(key, params)
    reset_jaxpr = jax.make_jaxpr(env.reset_env)(key, params)
    step_jaxpr = jax.make_jaxpr(env.step)(key, state, 0, params)
    assert "scan" in str(reset_jaxpr)
    assert "length=40" in str(reset_jaxpr)
    assert "scan" not in str(step_jaxpr) and "while" not in str(step_jaxpr)
    reinit = jax.make_jaxpr(env.plume.reinit)(key, state.plume, params.plume)
    big = [e for e in reinit.jaxpr.eqns for v in e.outvars if np.prod(v.aval.shape) >= 48]
    assert big == []
    out = env.plume.reinit(key, state.plume, params.plume)
    assert out.positions is state.plume.positions and out.ages is state.plume.ages


def test_no_grid_sized_work_per_step():
    """A big grid: no intermediate of ``step`` has H*W elements."""
    env, params = plume_jax.make("PlumeNav-Filament-v0", grid_size=[400, 300], capacity=32,
                                 warmup_steps=2)
    key = jax.random.key(0)
    state = jax.eval_shape(env.reset_env, key, params)[1]
    jaxpr = jax.make_jaxpr(env.step)(key, state, 0, params)
    sizes = [int(np.prod(v.aval.shape)) for e in jaxpr.jaxpr.eqns for v in e.outvars]
    inner = str(jaxpr)
    assert max(sizes) < 400 * 300
    assert "300,400" not in inner and "400,300" not in inner


def test_auto_reset_keeps_the_developed_plume(env_small):
    env, params = env_small
    obs, state = env.reset(jax.random.key(1), params)
    released = int(state.plume.released)
    for i in range(20):  # max_steps = 20: the last step auto-resets
        obs, state, r, term, trunc, info = env.step(jax.random.key(i + 2), state, 0, params)
    assert bool(trunc) or bool(term)
    assert int(state.step_count) == 0 and int(state.episode_count) == 2
    assert int(state.plume.released) > released  # puffs kept running, no warm-up rerun
    assert int(state.plume.active.sum()) > 10


def test_settings_validation_and_metadata():
    with pytest.raises(plume_jax.ValidationError, match="plume.capacity"):
        FilamentPlume.build({"capacity": 0}, GRID, "plume")
    with pytest.raises(plume_jax.ValidationError, match="plume.wind_kind"):
        FilamentPlume.build({"wind_kind": "gale"}, GRID, "plume")
    plume, _ = build()
    meta = plume.get_metadata()
    assert meta["type"] == "filament" and "domain" not in meta["parameters"]
    assert meta["parameters"]["capacity"] == 128


def test_hashed_dispersion_noise_statistics():
    """The cheap keyed-hash increments: right mean and variance, uniform,
    uncorrelated across puffs, axes and keys, and a function of the key."""
    from plume_jax.plumes.sampling import uniform_pairs

    draw = jax.jit(uniform_pairs, static_argnums=1)
    a = np.asarray(draw(jax.random.key(0), 50000))
    b = np.asarray(draw(jax.random.key(1), 50000))
    assert a.shape == (50000, 2) and np.all(np.abs(a) < 1)
    assert np.abs(a.mean(0)).max() < 0.01 and np.abs(a.var(0) - 1 / 3).max() < 0.005
    counts = np.histogram(a[:, 0], bins=20, range=(-1, 1))[0]
    assert counts.min() > 0.9 * counts.mean() and counts.max() < 1.1 * counts.mean()
    for x, y in [(a[:, 0], a[:, 1]), (a[1:, 0], a[:-1, 0]), (a[:, 0], b[:, 0])]:
        assert abs(np.corrcoef(x, y)[0, 1]) < 0.02
    np.testing.assert_array_equal(a, np.asarray(draw(jax.random.key(0), 50000)))


def test_switch_once_does_not_switch_during_the_warm_up():
    plume, params = build(wind_kind="switch_once", wind_switch_time=10.0,
                          wind_switch_angle=0.5, warmup_steps=40, capacity=48)
    state = jax.jit(plume.init)(jax.random.key(0), params)
    model = plume.large_scale_wind
    assert int(state.wind.clock) == 0
    assert float(model.direction(state.wind, params)) == 0.0
    # the developed plume lies along the first direction: puffs on the source's row
    active = np.asarray(state.active)
    # (a switch 10 steps into the warm-up would give a mean offset near 10)
    assert np.abs(np.asarray(state.positions)[active, 1] - SOURCE[1]).mean() < 5.0
    advance = jax.jit(plume.advance)
    for i in range(10):
        state = advance(jax.random.key(i), state, params)
    assert float(model.direction(state.wind, params)) == pytest.approx(0.5)


@pytest.mark.parametrize("kernel", ["2d", "3d"])
def test_kernel_sum_equals_the_plain_formula(kernel):
    """The concentration (its puff sum written as a product with ones and
    its squared distances elementwise, for speed on CPU) is the sum of the
    active puffs' Gaussian kernels, computed here in float64 NumPy."""
    plume, params = build(kernel=kernel, warmup_steps=80, capacity=64)
    state = jax.jit(plume.init)(jax.random.key(7), params)
    points = np.stack(np.meshgrid(np.arange(0.0, 80.0, 3.5), np.arange(0.0, 40.0, 2.5)),
                      -1).reshape(-1, 2)
    got = np.asarray(jax.jit(plume.concentration, static_argnums=2)(
        state, jnp.asarray(points, jnp.float32), GRID, params))
    r2 = R0 ** 2 + 2 * GROWTH * np.asarray(state.ages, np.float64)
    peak = MASS / ((2 * math.pi) ** 1.5 * r2 ** 1.5) if kernel == "3d" else \
        MASS / (2 * math.pi * r2)
    weight = np.where(np.asarray(state.active), peak, 0.0)
    d2 = ((points[:, None, :] - np.asarray(state.positions, np.float64)[None]) ** 2).sum(-1)
    want = (weight * np.exp(-0.5 * d2 / r2)).sum(-1)
    assert int(state.active.sum()) > 20 and want.max() > 1e-3
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-7 * want.max())
