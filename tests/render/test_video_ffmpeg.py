"""MP4 through imageio-ffmpeg's ffmpeg, started without ``os.fork``'s hooks
(issue 55: recording an mp4 printed JAX's ``RuntimeWarning: os.fork() was
called ... deadlock``, because imageio-ffmpeg starts ffmpeg with a
``preexec_fn``)."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("imageio_ffmpeg")
iio = pytest.importorskip("imageio.v3")

from plume_jax.render.video import write_video  # noqa: E402


def _frames() -> np.ndarray:
    rng = np.random.default_rng(0)
    return (rng.random((6, 30, 42, 3)) * 255).astype(np.uint8)


def test_writing_an_mp4_after_jax_started_gives_no_fork_warning(tmp_path):
    jnp.ones(3).block_until_ready()  # JAX's threads and its at-fork hook are up
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_video(tmp_path / "x.mp4", _frames(), fps=7.5)
    forks = [str(w.message) for w in caught if "fork" in str(w.message)]
    assert forks == []
    with warnings.catch_warnings():  # imageio's reader starts ffmpeg its own way (forking)
        warnings.simplefilter("ignore")
        assert iio.imread(tmp_path / "x.mp4").shape == (6, 30, 42, 3)


def test_the_mp4_is_the_one_imageio_writes(tmp_path):
    """Same command as imageio's FFMPEG writer with these settings, so the
    same bytes (what recordings looked like before is kept)."""
    imageio_v2 = pytest.importorskip("imageio.v2")
    frames = _frames()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # imageio's own start may warn, which is the point
        imageio_v2.mimwrite(tmp_path / "imageio.mp4", list(frames), format="FFMPEG", fps=7.5,
                            codec="libx264", macro_block_size=1, pixelformat="yuv420p")
    write_video(tmp_path / "ours.mp4", frames, fps=7.5)
    assert (tmp_path / "ours.mp4").read_bytes() == (tmp_path / "imageio.mp4").read_bytes()


def test_ffmpeg_failing_is_one_line_naming_the_file(tmp_path):
    target = tmp_path / "no_such_folder" / "x.mp4"
    with pytest.raises(OSError) as caught:
        write_video(target, _frames(), fps=5)
    message = str(caught.value)
    assert "\n" not in message and str(target) in message and "exit status" in message
