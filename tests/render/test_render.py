"""The jittable renderer and the PNG writer."""

from __future__ import annotations

import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.render.png import encode_png
from plume_jax.render.frames import AGENT_RGB, SOURCE_RGB, render_frame, render_state, viridis
from plume_jax.core.types import AgentState


@pytest.fixture(scope="module")
def env_params():
    # source in the north-east, so "north up" is checkable
    return plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[20, 10], source=[16, 8], sigma=3.0,
                          goal_radius=1.0)


@pytest.fixture(scope="module")
def jitted():
    return jax.jit(render_frame, static_argnums=0, static_argnames=("scale",))


def test_shape_dtype_and_north_up(env_params, jitted):
    env, params = env_params
    agent = AgentState.at([2, 1], 0.0)
    image = np.asarray(jitted(env, (), agent, params, scale=3))
    assert image.shape == (30, 60, 3) and image.dtype == np.uint8
    # source (16, 8): row = (H-1-8)*scale + 1 = 4, col = 16*3 + 1 = 49
    assert tuple(image[4, 49]) == SOURCE_RGB
    # agent (2, 1): row = (9-1)*3 + 1 = 25, col = 7
    assert tuple(image[25, 7]) == AGENT_RGB


def test_heading_line_points_along_heading(env_params, jitted):
    env, params = env_params
    east = np.asarray(jitted(env, (), AgentState.at([8, 4], 0.0), params, scale=4))
    north = np.asarray(jitted(env, (), AgentState.at([8, 4], np.pi / 2), params, scale=4))
    row, col = (9 - 4) * 4 + 2, 8 * 4 + 2
    # 2.5 cells east of the agent vs 2.5 cells north of it
    assert tuple(east[row, col + 10]) == AGENT_RGB and tuple(north[row, col + 10]) != AGENT_RGB
    assert tuple(north[row - 10, col]) == AGENT_RGB and tuple(east[row - 10, col]) != AGENT_RGB


def test_trail_brightens_visited_cells(env_params, jitted):
    env, params = env_params
    agent = AgentState.at([2, 1], 0.0)
    trail = jnp.asarray([[10, 2], [11, 2], [12, 2]], jnp.float32)
    valid = jnp.asarray([True, True, False])
    plain = np.asarray(jitted(env, (), agent, params, scale=2))
    drawn = np.asarray(jitted(env, (), agent, params, trail=trail, trail_valid=valid, scale=2))
    row = (9 - 2) * 2
    assert drawn[row, 20].sum() > plain[row, 20].sum()  # (10, 2)
    assert drawn[row, 22].sum() > plain[row, 22].sum()  # (11, 2)
    np.testing.assert_array_equal(drawn[row, 24], plain[row, 24])  # (12, 2) not valid


def test_render_state_vmaps_over_a_batch(env_params):
    env, params = env_params
    _, states = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(0), 3), params)
    frames = jax.vmap(lambda s: render_state(env, s, params, scale=1))(states)
    assert frames.shape == (3, 10, 20, 3) and frames.dtype == jnp.uint8


def test_viridis_endpoints():
    rgb = np.asarray(viridis(jnp.asarray([0.0, 1.0, -5.0, 7.0])))
    np.testing.assert_allclose(rgb[0], (68, 1, 84))
    np.testing.assert_allclose(rgb[1], (253, 231, 37))
    np.testing.assert_allclose(rgb[2], rgb[0])
    np.testing.assert_allclose(rgb[3], rgb[1])


def test_bad_scale_is_rejected(env_params):
    env, params = env_params
    with pytest.raises(ValueError, match="scale=0"):
        render_frame(env, (), AgentState.at([1, 1]), params, scale=0)


def test_png_round_trips_through_pillow():
    from PIL import Image

    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (7, 5, 3), dtype=np.uint8)
    decoded = np.asarray(Image.open(io.BytesIO(encode_png(image))))
    np.testing.assert_array_equal(decoded, image)


def test_png_rejects_wrong_shape_or_dtype():
    with pytest.raises(ValueError, match="uint8"):
        encode_png(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        encode_png(np.zeros((4, 4, 3), np.float32))
