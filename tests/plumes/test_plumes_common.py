"""Invariants every plume model keeps: determinism given the key, jit and
vmap over params, concentration non-negative and zero outside the domain,
``field`` equal to ``concentration`` at the cells; and every realistic-plume
preset resets, steps and renders."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plume_jax
from tests.preset_sets import per_preset
from plume_jax.plumes import PLUMES, save_movie
from plume_jax.plumes.gaussian import cell_centres
from plume_jax.render.frames import render_frame
from plume_jax.core.types import Grid

GRID = Grid(width=20, height=14)


@pytest.fixture(scope="module")
def movie_path(tmp_path_factory):
    rng = np.random.default_rng(0)
    frames = rng.random((5, 7, 10)).astype(np.float32)
    path = tmp_path_factory.mktemp("common") / "m.npz"
    save_movie(path, frames, fps=5.0, source=[2, 3])
    return str(path)


#: case -> (config, a dynamic param to sweep, two values for it); a case is a
#: plume type, or ``type-variant`` for a variant of one
def configs(movie_path):
    return {
        "gaussian": ({"source": [6, 7], "sigma": 3.0}, "sigma", (2.0, 5.0)),
        "filament": ({"source": [2, 7], "capacity": 24, "warmup_steps": 15, "wind_speed": 0.8,
                      "release_rate": 1.5}, "release_rate", (0.5, 3.0)),
        "filament-field": ({"source": [2, 7], "capacity": 24, "warmup_steps": 15,
                            "wind_speed": 0.8, "wind_model": "field", "kernel": "3d",
                            "vertical_dispersion": True, "wind_field_substeps": 2,
                            "wind_gust_std": 0.6, "wind_gust_diffusivity": 5.0},
                           "wind_gust_std", (0.2, 1.5)),
        "poisson": ({"source_mode": "otto", "observer": [10, 7], "lambda_over_dx": 2.0},
                    "lambda_over_dx", (1.0, 3.0)),
        "movie": ({"path": movie_path, "dt": 0.1, "random_start": True}, "scale", (0.5, 2.0)),
        "singh": ({"source": [2, 7], "capacity": 96, "warmup_steps": 15, "wind_speed": 5.0,
                   "wind_kind": "switch_many", "switch_period": 0.2, "switch_jitter": 0.05,
                   "birth_rate": 0.4, "puff_radius": 0.3, "growth": 2.0},
                  "birth_rate", (0.2, 1.0)),
    }


@pytest.fixture(scope="module", params=sorted(PLUMES) + ["filament-field"])
def plume_case(request, movie_path):
    cfg, name, values = configs(movie_path)[request.param]
    plume, params, _ = PLUMES[request.param.split("-")[0]].build(cfg, GRID, "plume")

    def run(key, p, points):
        """init, 3 advances, then at ``points``: the concentration and wind;
        the field; the source; and the concentration at the cell centres
        (read in the same call: one compiled program serves every test)."""
        k0, k1 = jax.random.split(key)
        state = plume.init(k0, p)
        state = jax.lax.fori_loop(0, 3, lambda i, s: plume.advance(jax.random.fold_in(k1, i), s, p),
                                  state)
        n = points.shape[0]
        where = jnp.concatenate([points, cell_centres(GRID).reshape(-1, 2)])
        conc = plume.concentration(state, where, GRID, p)
        return (conc[:n], plume.field(state, GRID, p), plume.source_location(state, p),
                plume.wind(state, points, p), conc[n:])

    return request.param, plume, params, name, values, jax.jit(run)


def test_every_plume_type_is_covered():
    assert sorted(PLUMES) == ["filament", "gaussian", "movie", "poisson", "singh"]


#: 16 points, as many as the property test draws (one compiled program)
POINTS = jnp.asarray([[0.0, 0.0], [19.0, 13.0], [5.5, 6.25], [10.0, 7.0], [2.0, 7.0],
                      [-0.5, 3.0], [20.5, 3.0], [4.0, -2.0], [4.0, 14.2], [19.0, 0.0],
                      [0.0, 13.0], [7.0, 7.0], [12.25, 9.75], [15.5, 2.5], [-3.0, -3.0],
                      [25.0, 20.0]], jnp.float32)


def test_determinism_given_the_key(plume_case):
    _, plume, params, _, _, run = plume_case
    a = run(jax.random.key(7), params, POINTS)
    b = run(jax.random.key(7), params, POINTS)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_stochastic_plumes_depend_on_the_key(plume_case):
    kind, _, params, _, _, run = plume_case
    a = run(jax.random.key(1), params, POINTS)[1]
    b = run(jax.random.key(2), params, POINTS)[1]
    if kind == "gaussian":
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    else:
        assert not np.array_equal(np.asarray(a), np.asarray(b))


def test_vmap_over_params_matches_one_at_a_time(plume_case):
    _, _, params, name, values, run = plume_case
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), params)
    batch = batch.replace(**{name: jnp.asarray(values, jnp.float32)})
    key = jax.random.key(11)
    together = jax.vmap(run, in_axes=(None, 0, None))(key, batch, POINTS)
    for i, v in enumerate(values):
        single = run(key, params.replace(**{name: jnp.asarray(v, jnp.float32)}), POINTS)
        for x, y in zip(together, single):
            np.testing.assert_allclose(np.asarray(x)[i], np.asarray(y), rtol=2e-5, atol=1e-6)
    assert not np.allclose(np.asarray(together[1])[0], np.asarray(together[1])[1])


def test_field_is_concentration_at_the_cells(plume_case):
    _, plume, params, _, _, run = plume_case
    _, field, _, _, conc = run(jax.random.key(5), params, POINTS)
    assert field.shape == (14, 20) and field.dtype == jnp.float32
    assert conc.shape == (14 * 20,)
    np.testing.assert_allclose(np.asarray(field), np.asarray(conc).reshape(14, 20), rtol=1e-5,
                               atol=1e-7)


# a fixed number of points keeps one compiled program; XLA on CPU flushes
# subnormal floats to zero, so they are left out of the draw
COORD = {"width": 32, "allow_subnormal": False}


@settings(max_examples=25, deadline=None)
@given(points=st.lists(st.tuples(st.floats(-30, 50, **COORD), st.floats(-30, 40, **COORD)),
                       min_size=16, max_size=16), seed=st.integers(0, 2**30))
def test_non_negative_finite_and_zero_outside_the_domain(plume_case, points, seed):
    _, _, params, _, _, run = plume_case
    pts = jnp.asarray(points, jnp.float32)
    c, field, source, wind, _ = (np.asarray(x) for x in run(jax.random.key(seed), params,
                                                            pts))
    assert c.shape == (len(points),) and np.all(np.isfinite(c)) and np.all(c >= 0.0)
    assert np.all(np.isfinite(field)) and np.all(field >= 0.0)
    p = np.asarray(points, np.float32)
    outside = (p[:, 0] < 0) | (p[:, 0] > 19) | (p[:, 1] < 0) | (p[:, 1] > 13)
    assert np.all(c[outside] == 0.0)
    assert wind.shape == (len(points), 2) and np.all(np.isfinite(wind))
    assert np.all((source >= 0) & (source <= [19, 13]))


NEW_PRESETS = sorted(p for p in plume_jax.PRESETS
                     if any(k in p for k in ("Filament", "Poisson", "Movie")))


def test_new_presets_are_registered_and_described():
    assert len(NEW_PRESETS) == 12
    for pid in NEW_PRESETS:
        assert len(plume_jax.PRESETS[pid]["description"]) > 60


@pytest.mark.parametrize("preset", per_preset(NEW_PRESETS))
def test_preset_resets_steps_and_renders(preset):
    env, params = plume_jax.make(preset)
    n = env.action_space(params).n

    @jax.jit
    def episode(key):  # one compiled program: reset, a step, a frame
        obs, state = env.reset(key, params)
        obs, state, rewards, *_ = env.step(key, state, jax.random.randint(key, (), 0, n), params)
        return obs, rewards, state, render_frame(env, state.plume, state.agent, params, scale=2)

    obs, rewards, state, image = episode(jax.random.key(0))
    space = env.observation_space(params)
    assert np.all(np.asarray(obs) >= space.low) and np.all(np.asarray(obs) <= space.high)
    assert np.all(np.isfinite(np.asarray(rewards)))
    assert image.shape == (2 * env.grid.height, 2 * env.grid.width, 3)
    assert image.dtype == jnp.uint8 and int(np.asarray(image).std()) > 0
    field = np.asarray(env.render_field(state, params))
    assert field.shape == env.grid.shape and field.max() > 0
