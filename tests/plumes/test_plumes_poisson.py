"""PoissonPlume and the hits sensor: the hit-rate laws against an
independent SciPy evaluation, hit statistics, otto's initialisation
protocol, and the cheap per-episode source draw."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

import plume_jax
from plume_jax.core.errors import ValidationError
from plume_jax.plumes import PoissonPlume
from plume_jax.plumes.sampling import capped_poisson_pmf
from plume_jax.plumes.special import k0
from plume_jax.sensors import HitsSensor
from plume_jax.core.types import AgentState, Grid, PlumeProbe


def test_k0_matches_scipy_to_float32_precision():
    x = np.concatenate([np.geomspace(1e-4, 2.0, 3000), np.linspace(2.0, 85.0, 8000)])
    x = x.astype(np.float32)
    ours = np.asarray(jax.jit(k0)(jnp.asarray(x)), np.float64)
    ref = special.k0(x.astype(np.float64))
    rel = np.abs(ours - ref) / ref
    assert rel.max() < 1e-6, (rel.max(), x[rel.argmax()])
    assert float(k0(0.0)) == math.inf and math.isnan(float(k0(-1.0)))
    grad = jax.grad(lambda v: k0(v))(jnp.float32(1.5))
    assert float(grad) == pytest.approx(-special.k1(1.5), rel=1e-5)  # K0' = -K1


def plume_for(grid, **values):
    return PoissonPlume.build(values, grid, "plume")[:2]


BENCHMARKS = [
    ((19, 19), {"model": "isotropic", "lambda_over_dx": 1.0, "r_dt": 1.0}, (9, 9)),
    ((53, 53), {"model": "isotropic", "lambda_over_dx": 3.0, "r_dt": 2.0}, (26, 26)),
    ((81, 41), {"model": "windy", "wind_speed": 2.0, "tau": 37.5, "r_bar": 2.5}, (15, 20)),
]


@pytest.mark.parametrize("size,law,source", BENCHMARKS, ids=["iso19", "iso53", "windy81x41"])
def test_hit_rate_matches_an_independent_evaluation_over_the_domain(size, law, source):
    grid = Grid(*size)
    plume, params = plume_for(grid, source_mode="fixed", source=list(source), **law)
    state = plume.init(jax.random.key(0), params)
    field = np.asarray(jax.jit(plume.field, static_argnums=1)(state, grid, params), np.float64)
    ys, xs = np.mgrid[0:size[1], 0:size[0]]
    dx, dy = (xs - source[0]).astype(np.float64), (ys - source[1]).astype(np.float64)
    d = np.maximum(np.hypot(dx, dy), 0.5)
    if law["model"] == "isotropic":
        lam = law["lambda_over_dx"]
        ref = law["r_dt"] / np.log(2 * lam) * special.k0(d / lam)
        rel = np.abs(field - ref) / ref
        assert rel.max() < 2e-6, rel.max()
    else:
        v, tau, r = law["wind_speed"], law["tau"], law["r_bar"]
        lam = math.sqrt(tau / (1 + v * v * tau / 4))
        exponent = v * dx / 2 - d / lam
        ref = r / d * np.exp(exponent)
        rel = np.abs(field - ref) / ref
        # float32 rounding of an exponent of size |e| costs ~|e| ulps
        assert np.all(rel < 2.5e-7 * (4 + np.abs(exponent))), rel.max()
        # downwind of the source hits are far likelier than upwind
        assert field[source[1], source[0] + 10] > 1e6 * field[source[1], source[0] - 10]


def test_zero_outside_the_grid_and_windy_wind():
    grid = Grid(19, 19)
    plume, params = plume_for(grid, source_mode="fixed", source=[9, 9])
    state = plume.init(jax.random.key(0), params)
    pts = jnp.asarray([[-0.5, 3.0], [3.0, 18.5], [19.0, 2.0], [4.0, 4.0]], jnp.float32)
    c = np.asarray(plume.concentration(state, pts, grid, params))
    assert np.all(c[:3] == 0.0) and c[3] > 0.0
    assert np.all(np.asarray(plume.wind(state, pts, params)) == 0.0)
    windy, wparams = plume_for(grid, model="windy", source_mode="fixed", source=[9, 9],
                               wind_speed=2.0, wind_direction=math.pi / 2)
    np.testing.assert_allclose(np.asarray(windy.wind(state, pts[:1], wparams)), [[0.0, 2.0]],
                               atol=1e-6)


def probe_at_rate(mean: float) -> PlumeProbe:
    return PlumeProbe(concentration=lambda p: jnp.full(jnp.shape(p)[:-1], mean, jnp.float32))


def draw_hits(sensor, params, mean, n, first=False, seed=0):
    probe = probe_at_rate(mean)
    agent = AgentState.at([1.0, 1.0])
    keys = jax.random.split(jax.random.key(seed), n)
    if first:
        fn = jax.vmap(lambda k: sensor.init(k, agent, probe, params)[0])
    else:
        fn = jax.vmap(lambda k: sensor.observe(k, agent, probe, (), params)[0])
    return np.asarray(jax.jit(fn)(keys))[:, 0]


@pytest.mark.parametrize("mean", [0.61, 2.5])
def test_hit_counts_have_poisson_mean_and_variance(mean):
    sensor, params, _ = HitsSensor.build({"h_max": 40}, Grid(4, 4), "sensor")
    hits = draw_hits(sensor, params, mean, 40000)
    n = hits.size
    assert hits.mean() == pytest.approx(mean, abs=4 * math.sqrt(mean / n))
    # var of the sample variance of a Poisson law: (mu + 2 mu^2) / n
    assert hits.var() == pytest.approx(mean, abs=4 * math.sqrt((mean + 2 * mean**2) / n))


@pytest.mark.parametrize("mean", [150.0, 1e4])
def test_hit_law_above_mean_80_with_many_classes_is_not_nan(mean):
    """Regression: with more than ~90 classes and a mean above ~88, float32
    exp(-mean) underflowed while mean^k / k! overflowed, the law was NaN
    and the draws were far too low (mean 150 gave hits around 39)."""
    pmf = np.asarray(capped_poisson_pmf(mean, 1023))
    assert np.all(np.isfinite(pmf)) and pmf.sum() == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(pmf[:-1], stats.poisson.pmf(np.arange(1023), mean), atol=1e-5)
    sensor, params, _ = HitsSensor.build({"h_max": 1024}, Grid(4, 4), "sensor")
    hits = draw_hits(sensor, params, mean, 2000)
    assert hits.mean() == pytest.approx(min(mean, 1023.0), rel=0.02)


def test_hits_are_capped_into_h_max_classes():
    sensor, params, _ = HitsSensor.build({"h_max": 3}, Grid(4, 4), "sensor")
    hits = draw_hits(sensor, params, 1.7, 20000, seed=1)
    counts = np.bincount(hits.astype(int), minlength=3)
    assert counts.size == 3
    expected = stats.poisson.pmf([0, 1], 1.7).tolist()
    expected.append(1 - sum(expected))
    np.testing.assert_allclose(np.asarray(capped_poisson_pmf(1.7, 2)), expected, rtol=1e-6)
    assert stats.chisquare(counts, np.asarray(expected) * hits.size).pvalue > 1e-4
    binary, bparams, _ = HitsSensor.build({"h_max": 2}, Grid(4, 4), "sensor")
    hit = draw_hits(binary, bparams, 0.61, 20000, seed=2)
    assert set(np.unique(hit)) <= {0.0, 1.0}
    assert hit.mean() == pytest.approx(1 - math.exp(-0.61), abs=0.015)


def test_nonzero_first_hit_is_drawn_given_a_hit():
    sensor, params, _ = HitsSensor.build({"h_max": 4, "nonzero_first": True}, Grid(4, 4),
                                         "sensor")
    first = draw_hits(sensor, params, 0.8, 20000, first=True, seed=3)
    later = draw_hits(sensor, params, 0.8, 20000, first=False, seed=3)
    assert first.min() >= 1.0 and later.min() == 0.0
    p = stats.poisson.pmf([1, 2], 0.8) / (1 - math.exp(-0.8))
    expected = np.append(p, 1 - p.sum()) * first.size
    counts = np.bincount(first.astype(int), minlength=4)[1:]
    assert stats.chisquare(counts, expected).pvalue > 1e-4
    # a zero rate has no law given a hit: the draw is 1
    assert draw_hits(sensor, params, 0.0, 4, first=True).tolist() == [1.0] * 4


def test_otto_protocol_draws_the_source_from_the_posterior():
    grid = Grid(11, 11)
    plume, params = plume_for(grid, source_mode="otto", observer=[5, 5], lambda_over_dx=1.0,
                              r_dt=1.0)
    n = 40000
    sources = np.asarray(jax.jit(jax.vmap(lambda k: plume.init(k, params).source))(
        jax.random.split(jax.random.key(0), n)))
    np.testing.assert_array_equal(sources, np.round(sources))
    index = (sources[:, 1] * 11 + sources[:, 0]).astype(int)
    counts = np.bincount(index, minlength=121)
    ys, xs = np.divmod(np.arange(121), 11)
    d = np.maximum(np.hypot(xs - 5, ys - 5), 0.5)
    mu = 1.0 / np.log(2.0) * special.k0(d)
    weights = -np.expm1(-mu)
    weights[5 * 11 + 5] = 0.0  # never at the observer: the episode would start solved
    assert counts[5 * 11 + 5] == 0
    expected = weights / weights.sum() * n
    assert stats.chisquare(counts[weights > 0], expected[weights > 0]).pvalue > 1e-4
    # the stored table is the cumulative posterior
    table = np.asarray(plume.posterior_table(params))
    np.testing.assert_allclose(np.diff(table, prepend=0.0), weights, atol=2e-6)  # f32 cumsum


def test_uniform_and_fixed_sources():
    grid = Grid(5, 4)
    plume, params = plume_for(grid, source_mode="uniform")
    sources = np.asarray(jax.jit(jax.vmap(lambda k: plume.init(k, params).source))(
        jax.random.split(jax.random.key(1), 4000)))
    counts = np.bincount((sources[:, 1] * 5 + sources[:, 0]).astype(int), minlength=20)
    assert counts.size == 20 and stats.chisquare(counts).pvalue > 1e-4
    fixed, fparams = plume_for(grid, source_mode="fixed", source=[3, 1])
    state = fixed.init(jax.random.key(2), fparams)
    np.testing.assert_array_equal(np.asarray(state.source), [3, 1])
    assert state.table.shape == (0,)
    with pytest.raises(ValidationError, match="plume.source"):
        plume_for(grid, source_mode="otto", source=[3, 1])
    _, _, resolved = PoissonPlume.build({"source_mode": "otto"}, grid, "plume")
    assert resolved["source"] is None and resolved["observer"] == (2.0, 1.0)


def test_reinit_draws_a_new_source_without_grid_sized_work():
    grid = Grid(61, 47)
    plume, params = plume_for(grid, source_mode="otto", observer=[30, 23])
    key = jax.random.key(0)
    state = plume.init(key, params)
    jaxpr = jax.make_jaxpr(plume.reinit)(key, state, params)
    # the table passes straight through; nothing grid-sized is computed
    sizes = [int(np.prod(v.aval.shape)) for e in jaxpr.jaxpr.eqns for v in e.outvars]
    assert max(sizes) < 61 * 47
    reinit = jax.jit(plume.reinit)
    sources = {tuple(np.asarray(reinit(jax.random.key(i), state, params).source))
               for i in range(20)}
    assert len(sources) > 3
    assert plume.reinit(key, state, params).table is state.table


def test_auto_reset_in_a_compiled_scan_does_no_grid_sized_work():
    """In a scan of vmapped steps, the stored table is only passed through
    (XLA removes ``where(done, table, table)``): no op of the loop produces
    an array of the table's size."""
    env, params = plume_jax.make("PlumeNav-Poisson-Iso19x19-v0", grid_size=[101, 101],
                                 observer=[50, 50], start={"position": [50, 50]})
    batch = 4
    keys = jax.random.split(jax.random.key(0), batch)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

    def run(state, key):
        def body(s, k):
            _, s, r, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(k, batch), s, jnp.zeros((batch,), jnp.int32), params)
            return s, r.sum()

        return jax.lax.scan(body, state, jax.random.split(key, 5))

    hlo = jax.jit(run, donate_argnums=0).lower(state, jax.random.key(1)).compile().as_text()
    shape = f"f32[{batch},{101 * 101}]"
    producers = set()
    for line in hlo.splitlines():
        m = re.match(r"\s*(ROOT\s+)?%\S+\s*=\s*" + re.escape(shape) + r"\S*\s+(\w[\w-]*)\(", line)
        if m:
            producers.add(m.group(2))
    assert "parameter" in producers  # the pattern does find the table
    assert producers <= {"parameter", "get-tuple-element", "copy", "bitcast"}, producers


def test_episode_ends_on_entering_the_source_cell():
    env, params = plume_jax.make(
        "PlumeNav-Poisson-Iso19x19-v0", plume={"source_mode": "fixed", "source": [9, 10],
                                               "observer": None},
        start={"type": "fixed", "position": [9, 8]}, sensor={"nonzero_first": False})
    _, state = env.reset(jax.random.key(0), params)
    north = env.action_ids["move_north"]
    _, state, reward, terminated, truncated, info = env.step(jax.random.key(1), state, north, params)
    assert not bool(terminated) and float(reward) == -1.0
    _, state, reward, terminated, truncated, info = env.step(jax.random.key(2), state, north, params)
    assert bool(terminated) and bool(info["goal_reached"]) and float(reward) == 0.0


@pytest.mark.parametrize("preset,grid,law,h_max,max_steps,observer", [
    ("PlumeNav-Poisson-Iso19x19-v0", [19, 19], {"lambda_over_dx": 1.0, "r_dt": 1.0}, 3, 642,
     [9, 9]),
    ("PlumeNav-Poisson-Iso53x53-v0", [53, 53], {"lambda_over_dx": 3.0, "r_dt": 2.0}, 4, 2188,
     [26, 26]),
    ("PlumeNav-Poisson-Windy81x41-v0", [81, 41],
     {"wind_speed": 2.0, "tau": 37.5, "r_bar": 2.5}, 2, 10000, [65, 20]),
])
def test_benchmark_presets(preset, grid, law, h_max, max_steps, observer):
    env, _ = plume_jax.make(preset)
    s = env.settings
    assert s["grid_size"] == grid and s["goal_radius"] == 0.0 and s["max_steps"] == max_steps
    assert all(s["plume"][k] == v for k, v in law.items())
    assert s["plume"]["source_mode"] == "otto" and list(s["plume"]["observer"]) == observer
    assert s["sensor"] == {"type": "hits", "h_max": h_max, "nonzero_first": True, "gain": 1.0}
    assert s["start"]["type"] == "fixed" and list(s["start"]["position"]) == observer
    assert env.action_names == ["move_north", "move_south", "move_east", "move_west"]


@pytest.mark.parametrize("preset", ["PlumeNav-Poisson-Iso19x19-v0",
                                    "PlumeNav-Poisson-Iso53x53-v0"])
def test_isotropic_presets_hit_classes_follow_otto_rule(preset):
    """Regression: the presets had one hit class fewer than the literature
    (19x19: 2, 53x53: 3). otto's automatic rule, used by the benchmark:
    N_hits = ceil(mu1 + sqrt(mu1)) + 1, mu1 the mean hits one cell from the
    source."""
    env, params = plume_jax.make(preset)
    mu1 = float(env.plume.hit_rate(jnp.asarray([1.0, 0.0]), params.plume))
    assert env.settings["sensor"]["h_max"] == math.ceil(mu1 + math.sqrt(mu1)) + 1


def test_windy_preset_length_matches_otto_benchmark():
    """Regression: the windy preset set tau = 150, the paper's dimensionless
    tau_bar = V^2 tau, giving lambda = 0.99669 cells instead of
    otto-benchmark's sqrt((tau_bar / V^2) / (1 + tau_bar / 4)) = 0.98693."""
    env, params = plume_jax.make("PlumeNav-Poisson-Windy81x41-v0")
    tau_bar, v_bar = 150.0, 2.0
    expected = math.sqrt((tau_bar / v_bar ** 2) / (1.0 + tau_bar / 4.0))
    assert float(env.plume.windy_length(params.plume)) == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(0.98693, abs=1e-5)


def test_otto_first_observation_is_a_hit_in_the_env():
    env, params = plume_jax.make("PlumeNav-Poisson-Iso19x19-v0")
    keys = jax.random.split(jax.random.key(0), 256)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    obs = np.asarray(obs)
    # never the zero class; both non-zero classes (1 and >= 2) occur
    assert np.all(obs >= 1.0) and set(np.unique(obs)) == {1.0, 2.0}
    assert not np.any(np.all(np.asarray(state.plume.source) == 9.0, axis=-1))
