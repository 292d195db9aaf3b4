"""MoviePlume and the movie files: time mapping (fps vs step duration),
wrap and clamp, exact interpolation at frame and pixel centres, loaders
round-tripping every format, metadata, normalisation, the bundled movie."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.core.errors import ValidationError
from plume_jax.plumes import MoviePlume, load_movie, save_movie
from plume_jax.plumes.movie_files import BUNDLED_MOVIE
from plume_jax.core.types import Grid

T, HM, WM = 6, 5, 7
GRID = Grid(width=WM, height=HM)  # one cell per pixel


def linear_movie() -> np.ndarray:
    """frames[t, y, x] = 100 t + 10 y + x: linear, so bilinear/linear
    interpolation must reproduce it exactly."""
    t, y, x = np.meshgrid(np.arange(T), np.arange(HM), np.arange(WM), indexing="ij")
    return (100.0 * t + 10.0 * y + x).astype(np.float32)


@pytest.fixture(scope="module")
def movie_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("movies") / "linear.npz"
    save_movie(path, linear_movie(), fps=4.0, source=[1, 2], wind_velocity=[8.0, 0.0])
    return path


def build(path, grid=GRID, **values):
    return MoviePlume.build({"path": str(path), "normalise": "none", **values}, grid, "plume")


def read(plume, params, grid, step, points, start=None):
    state = plume.init(jax.random.key(0), params)
    state = state.replace(step=jnp.asarray(step, jnp.int32))
    if start is not None:
        state = state.replace(start_frame=jnp.asarray(start, jnp.float32))
    return np.asarray(plume.concentration(state, jnp.asarray(points, jnp.float32), grid, params))


@pytest.mark.parametrize("fps,dt,start", [(4.0, 0.25, 0.0), (4.0, 0.1, 0.0), (10.0, 0.05, 1.5),
                                          (2.0, 1.0, 0.0)])
def test_frame_position_follows_simulated_time(movie_file, fps, dt, start):
    plume, params, resolved = build(movie_file, fps=fps, dt=dt, start_frame=start, loop="clamp")
    assert resolved["fps"] == fps and resolved["dt"] == dt
    for step in range(0, 12):
        state = plume.init(jax.random.key(0), params).replace(step=jnp.asarray(step))
        expected = min(start + step * dt * fps, T - 1)
        assert float(plume.frame_position(state, params)) == pytest.approx(expected, abs=1e-5)


def test_dt_defaults_to_one_frame_per_step(movie_file):
    plume, params, resolved = build(movie_file)
    assert resolved["fps"] == 4.0 and resolved["dt"] == 0.25
    frames = linear_movie()
    for step in range(T):
        np.testing.assert_array_equal(read(plume, params, GRID, step, [[3.0, 2.0]]),
                                      [frames[step, 2, 3]])


def test_interpolation_is_exact_at_frame_and_pixel_centres(movie_file):
    plume, params, _ = build(movie_file)
    cells = np.stack(np.meshgrid(np.arange(WM), np.arange(HM), indexing="xy"), -1)
    frames = linear_movie()
    field = jax.jit(plume.field, static_argnums=1)
    for step in range(T):
        state = plume.init(jax.random.key(0), params).replace(step=jnp.asarray(step))
        np.testing.assert_array_equal(np.asarray(field(state, GRID, params)), frames[step])
        np.testing.assert_array_equal(read(plume, params, GRID, step, cells), frames[step])


def test_bilinear_in_space_and_linear_in_time(movie_file):
    plume, params, _ = build(movie_file, fps=4.0, dt=0.125)  # half a frame per step
    pts = np.asarray([[0.5, 0.5], [2.25, 3.75], [5.9, 0.1], [6.0, 4.0]], np.float32)
    for step in range(0, 9):
        f = step * 0.5
        expected = 100.0 * f + 10.0 * pts[:, 1] + pts[:, 0]
        np.testing.assert_allclose(read(plume, params, GRID, step, pts), expected, rtol=1e-6)
    # a coarser grid maps onto the same movie corner to corner
    coarse = Grid(4, 3)
    c_plume, c_params, _ = build(movie_file, grid=coarse)
    pts = np.asarray([[0.0, 0.0], [3.0, 2.0], [1.5, 1.0]], np.float32)
    px, py = pts[:, 0] * (WM - 1) / 3, pts[:, 1] * (HM - 1) / 2
    np.testing.assert_allclose(read(c_plume, c_params, coarse, 1, pts), 100 + 10 * py + px,
                               rtol=1e-6)


def test_wrap_and_clamp_at_the_end(movie_file):
    frames = linear_movie()
    wrap, wparams, _ = build(movie_file, loop="wrap")
    clamp, cparams, _ = build(movie_file, loop="clamp")
    p = [[3.0, 2.0]]
    assert read(wrap, wparams, GRID, T + 2, p) == frames[2, 2, 3]
    assert read(clamp, cparams, GRID, T + 2, p) == frames[T - 1, 2, 3]
    # half-way between the last frame and (wrapped) the first
    half, hparams, _ = build(movie_file, loop="wrap", dt=0.125)
    value = read(half, hparams, GRID, 2 * (T - 1) + 1, p)
    assert value == pytest.approx(0.5 * (frames[T - 1, 2, 3] + frames[0, 2, 3]))
    state = half.init(jax.random.key(0), hparams).replace(step=jnp.asarray(10 * T + 3))
    assert float(half.frame_position(state, hparams)) == pytest.approx((5 * T + 1.5) % T)


def test_nearest_frame_without_time_interpolation(movie_file):
    plume, params, _ = build(movie_file, interpolate=False, dt=0.1)  # 0.4 frame per step
    frames = linear_movie()
    for step, frame in [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (14, 0)]:  # 5.6 -> 6 -> wraps to 0
        assert read(plume, params, GRID, step, [[1.0, 1.0]])[0] == frames[frame, 1, 1]


def test_zero_outside_the_grid_and_metadata_wind_and_source(movie_file):
    plume, params, resolved = build(movie_file)
    pts = [[-0.1, 1.0], [1.0, 4.2], [7.0, 0.0], [1.0, 1.0]]
    c = read(plume, params, GRID, 0, pts)
    assert np.all(c[:3] == 0.0) and c[3] == 11.0
    assert resolved["source"] == (1.0, 2.0)
    # wind_velocity 8 px/s, dt 0.25 s, one cell per pixel: 2 cells per step toward east
    assert resolved["wind_speed"] == pytest.approx(2.0) and resolved["wind_direction"] == 0.0
    state = plume.init(jax.random.key(0), params)
    np.testing.assert_allclose(np.asarray(plume.wind(state, jnp.zeros((2, 2)), params)),
                               [[2.0, 0.0], [2.0, 0.0]], atol=1e-6)


def test_flip_y_stride_and_frame_range(tmp_path):
    frames = linear_movie()
    path = tmp_path / "m.npz"
    save_movie(path, frames[:, ::-1, :], fps=4.0, source=[2, 0])  # stored north-up
    plume, params, resolved = build(path, flip_y=True)
    np.testing.assert_array_equal(np.asarray(params.frames), frames)
    assert resolved["source"] == (2.0, 4.0)  # row 0 of the file is the north edge
    sub, sparams, sres = build(path, grid=Grid(4, 3), flip_y=True, spatial_stride=2,
                               frame_range=[1, 4])
    np.testing.assert_array_equal(np.asarray(sparams.frames), frames[1:4, ::-1][:, ::2, ::2][:, ::-1])
    assert sres["frame_range"] == [1, 4] and sub.frame_range == (1, 4)


def test_normalisation_options(tmp_path):
    frames = linear_movie() - 50.0  # some negative values
    path = tmp_path / "n.npz"
    save_movie(path, frames, fps=1.0, source=[0, 0])
    _, p_none, _ = MoviePlume.build({"path": str(path), "normalise": "none"}, GRID, "plume")
    _, p_max, _ = MoviePlume.build({"path": str(path), "normalise": "max"}, GRID, "plume")
    _, p_99, _ = MoviePlume.build({"path": str(path), "normalise": "p99"}, GRID, "plume")
    clipped = np.clip(frames, 0, None)
    np.testing.assert_array_equal(np.asarray(p_none.frames), clipped)
    np.testing.assert_allclose(np.asarray(p_max.frames), clipped / clipped.max(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(p_99.frames), clipped / np.percentile(clipped, 99),
                               rtol=1e-6)
    assert float(p_none.frames.min()) == 0.0


def round_trip(path, frames, **meta):
    save_movie(path, frames, **meta)
    loaded, got = load_movie(path)
    np.testing.assert_array_equal(loaded, frames)
    assert loaded.dtype == np.float32 and not loaded.flags.writeable
    return got


def test_npz_and_npy_round_trip(tmp_path):
    frames = np.random.default_rng(0).random((4, 3, 5)).astype(np.float32)
    meta = round_trip(tmp_path / "a.npz", frames, fps=15.0, source=[1.5, 2.0], note="x")
    assert meta == {"fps": 15.0, "source": [1.5, 2.0], "note": "x"}
    assert round_trip(tmp_path / "a.npy", frames) == {}
    with pytest.raises(ValidationError, match="metadata"):
        save_movie(tmp_path / "b.npy", frames, fps=1.0)
    # float16 storage halves the file and is read back as float32
    save_movie(tmp_path / "h.npz", frames, dtype=np.float16)
    np.testing.assert_allclose(load_movie(tmp_path / "h.npz")[0], frames, rtol=1e-3)


def test_hdf5_round_trip_and_partial_read(tmp_path):
    pytest.importorskip("h5py")
    frames = np.random.default_rng(1).random((6, 4, 5)).astype(np.float32)
    meta = round_trip(tmp_path / "a.h5", frames, fps=15.0, source=[1, 2])
    assert meta == {"fps": 15.0, "source": [1, 2]}
    # frame-last layout (as MATLAB exports often are) and a partial read
    save_movie(tmp_path / "yxt.hdf5", np.transpose(frames, (1, 2, 0)), dataset="conc")
    loaded, _ = load_movie(tmp_path / "yxt.hdf5", "conc", layout="yxt", frame_range=(2, 5),
                           spatial_stride=2)
    np.testing.assert_array_equal(loaded, frames[2:5, ::2, ::2])
    with pytest.raises(ValidationError, match="dataset"):
        load_movie(tmp_path / "yxt.hdf5", "nope", layout="yxt")


def test_zarr_round_trip(tmp_path):
    pytest.importorskip("zarr")
    frames = np.random.default_rng(2).random((3, 4, 2)).astype(np.float32)
    meta = round_trip(tmp_path / "a.zarr", frames, fps=30.0)
    assert meta == {"fps": 30.0}
    loaded, _ = load_movie(tmp_path / "a.zarr", "frames", frame_range=(1, 3))
    np.testing.assert_array_equal(loaded, frames[1:3])


def test_loader_errors(tmp_path):
    with pytest.raises(ValidationError, match="path"):
        load_movie(tmp_path / "missing.npz")
    with pytest.raises(ValidationError, match="path"):
        load_movie(tmp_path / "movie.avi")
    np.save(tmp_path / "flat.npy", np.zeros((3, 4), np.float32))
    with pytest.raises(ValidationError, match="3-D"):
        load_movie(tmp_path / "flat.npy")
    np.save(tmp_path / "nan.npy", np.full((2, 2, 2), np.nan, np.float32))
    with pytest.raises(ValidationError, match="finite"):
        load_movie(tmp_path / "nan.npy")
    with pytest.raises(ValidationError, match="layout"):
        load_movie(tmp_path / "nan.npy", layout="tzx")


def test_settings_errors_name_the_field(tmp_path, movie_file):
    np.save(tmp_path / "plain.npy", linear_movie())
    with pytest.raises(ValidationError, match=r"plume\.fps"):
        MoviePlume.build({"path": str(tmp_path / "plain.npy")}, GRID, "plume")
    with pytest.raises(ValidationError, match=r"plume\.path"):
        MoviePlume.build({"path": str(tmp_path / "none.npz")}, GRID, "plume")
    with pytest.raises(ValidationError, match=r"plume\.frame_range"):
        MoviePlume.build({"path": str(movie_file), "frame_range": [3, 1]}, GRID, "plume")
    with pytest.raises(ValidationError, match=r"plume\.source"):
        MoviePlume.build({"path": str(tmp_path / "plain.npy"), "fps": 1.0}, GRID, "plume")
    plume, _, resolved = MoviePlume.build(
        {"path": str(tmp_path / "plain.npy"), "fps": 2.0, "source": [1, 1]}, GRID, "plume")
    assert resolved["wind_speed"] == 0.0 and resolved["dt"] == 0.5


def test_random_start_draws_per_episode(movie_file):
    plume, params, _ = build(movie_file, random_start=True)
    starts = {float(plume.reinit(jax.random.key(i), None, params).start_frame) for i in range(8)}
    assert len(starts) == 8 and all(0.0 <= s < T for s in starts)
    fixed, fparams, _ = build(movie_file, start_frame=2.0)
    assert float(fixed.reinit(jax.random.key(3), None, fparams).start_frame) == 2.0


def test_bundled_movie_and_preset():
    frames, meta = load_movie(BUNDLED_MOVIE)
    assert BUNDLED_MOVIE.stat().st_size < 2_000_000
    assert frames.shape == (160, 64, 128) and meta["fps"] == 10.0
    env, params = plume_jax.make("PlumeNav-Movie-v0")
    s = env.settings["plume"]
    assert s["path"] is None and s["fps"] == 10.0 and s["dt"] == pytest.approx(0.1)
    assert s["source"] == (12.0, 32.0)
    assert s["wind_speed"] == pytest.approx(1.0) and s["wind_direction"] == 0.0
    assert float(params.plume.frames.max()) == 1.0
    assert env.get_metadata()["plume"]["file"].endswith("filament_movie.npz")
    # the config round trip pins the movie settings
    from plume_jax.envs.config_files import config_text
    assert "type: movie" in config_text(env)
    assert math.isclose(float(params.plume.dt * params.plume.fps), 1.0, rel_tol=1e-6)


def test_docs_loading_example_runs(tmp_path):
    """The "Loading measured plumes" example of docs/plumes.md, on a small
    synthetic recording stored north-up in the same layout."""
    from tests.docs_blocks import tagged

    code = tagged("movie-plif")[0]
    rng = np.random.default_rng(0)
    frames = rng.random((4, 27, 51)).astype(np.float32)  # (T, H, W), row 0 = north
    suffix = ".h5"
    try:
        import h5py  # noqa: F401
    except ImportError:
        suffix = ".npz"
    path = tmp_path / f"plif{suffix}"
    save_movie(path, frames)
    namespace: dict = {}
    exec(compile(code.replace('"plif_recording.h5"', repr(str(path))), "docs/plumes.md movie", "exec"),
         namespace)
    env, params = namespace["env"], namespace["params"]
    assert (env.grid.width, env.grid.height) == (406, 216)
    np.testing.assert_allclose(np.asarray(params.plume.frames),
                               frames[:, ::-1] / np.percentile(frames, 99), rtol=1e-6)
    assert env.settings["plume"]["source"] == (0.0, 108.0)
    obs, state = env.reset(jax.random.key(0), params)
    assert bool(env.observation_space(params).contains(obs))
