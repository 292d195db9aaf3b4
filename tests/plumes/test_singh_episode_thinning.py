"""The Singh plume's per-episode sparsity (``episode_keep_min``, their
training's ``birthx``): each episode's readings leave out a random fraction
``1 - U(episode_keep_min, 1)`` of the puffs; the puffs move as without it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from plume_jax.core.types import Grid
from plume_jax.plumes.singh import SinghPlume

ARENA = Grid(13, 21)


def build(**values):
    plume, params, _ = SinghPlume.build({"source": [2.0, 10.0], "capacity": 1024,
                                         "warmup_steps": 200, **values}, ARENA, "plume")
    return plume, params


@pytest.fixture(scope="module")
def plumes():
    """The same plume with and without thinning (keep_min 0.3), jitted."""
    full, full_params = build()
    thin, thin_params = build(episode_keep_min=0.3)
    return {"full": (full, full_params, jax.jit(full.init), jax.jit(full.reinit)),
            "thin": (thin, thin_params, jax.jit(thin.init), jax.jit(thin.reinit))}


def _fields(state):
    return {k: np.asarray(getattr(state, k)) for k in state.keys() if k != "dropped"}


def test_without_thinning_no_puff_is_dropped(plumes):
    plume, params, init, reinit = plumes["full"]
    state = init(jax.random.key(0), params)
    assert not np.any(np.asarray(state.dropped))
    assert not np.any(np.asarray(reinit(jax.random.key(1), state, params).dropped))


def test_thinning_leaves_the_puffs_as_they_were(plumes):
    (_, fp, finit, freinit), (_, tp, tinit, treinit) = plumes["full"], plumes["thin"]
    full, thin = finit(jax.random.key(4), fp), tinit(jax.random.key(4), tp)
    for name, value in _fields(full).items():
        np.testing.assert_array_equal(value, _fields(thin)[name], err_msg=name)
    full, thin = freinit(jax.random.key(5), full, fp), treinit(jax.random.key(5), thin, tp)
    for name, value in _fields(full).items():
        np.testing.assert_array_equal(value, _fields(thin)[name], err_msg=name)


def test_each_episode_drops_a_fraction_drawn_from_keep_min_to_one(plumes):
    plume, params, init, reinit = plumes["thin"]
    state = init(jax.random.key(0), params)
    fractions = []
    for i in range(40):
        state = reinit(jax.random.key(10 + i), state, params)
        fractions.append(float(np.mean(np.asarray(state.dropped))))
    fractions = np.asarray(fractions)
    # dropped fraction 1 - keep, keep ~ U(0.3, 1): within [0, 0.7], mean 0.35
    assert fractions.min() >= 0.0 and fractions.max() <= 0.75
    assert fractions.std() > 0.1
    assert abs(fractions.mean() - 0.35) < 0.08


def test_readings_count_only_the_kept_puffs(plumes):
    """Concentration, puff centres and the stray distance are those of the
    plume whose dropped puffs are not live."""
    plume, params, init, _ = plumes["thin"]
    state = init(jax.random.key(2), params)
    dropped = np.asarray(state.dropped) & np.asarray(state.active)
    assert dropped.sum() > 0
    without = state.replace(active=state.active & ~state.dropped,
                            dropped=jnp.zeros_like(state.dropped))
    xs, ys = np.meshgrid(np.linspace(2.0, 8.0, 25), np.linspace(9.0, 11.0, 9))
    points = jnp.asarray(np.stack([xs, ys], -1), jnp.float32)
    np.testing.assert_array_equal(np.asarray(plume.concentration(state, points, ARENA, params)),
                                  np.asarray(plume.concentration(without, points, ARENA, params)))
    full = plume.concentration(state.replace(dropped=jnp.zeros_like(state.dropped)), points,
                               ARENA, params)
    assert float(jnp.sum(full)) > float(jnp.sum(plume.concentration(state, points, ARENA,
                                                                    params)))
    live = np.asarray(plume.puff_centres(state, params)[1])
    np.testing.assert_array_equal(live, np.asarray(without.active))
    np.testing.assert_array_equal(
        np.asarray(plume.nearest_puff_distance(state, points, params)),
        np.asarray(plume.nearest_puff_distance(without, points, params)))


def test_episode_keep_min_is_checked():
    from plume_jax.core.errors import ValidationError

    with pytest.raises(ValidationError, match="episode_keep_min"):
        build(episode_keep_min=1.5)
