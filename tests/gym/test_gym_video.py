"""Video helpers (plume_jax.render.video) and Gymnasium's RecordVideo on PlumeGymEnv."""

from __future__ import annotations

import importlib.util
import sys

import gymnasium
import numpy as np
import pytest

import plume_jax
from plume_jax.core.errors import ValidationError
from plume_jax.gym import PlumeGymEnv
from plume_jax.render.video import record_batch, record_episode, rollout_frames, tile_frames, write_video

OVERRIDES = {"grid_size": [32, 32], "sigma": 6.0, "goal_radius": 2.0, "max_steps": 60}
# One set of static rollout arguments for every batch test: one compilation.
ROLLOUT = {"num_envs": 3, "num_steps": 70, "scale": 1, "trail_length": 50}
# imageio-ffmpeg and moviepy start ffmpeg with a fork; harmless here.
no_fork_warning = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


@pytest.fixture(scope="module")
def core():
    return plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)


def _frames(t=3, h=6, w=5):
    return (np.arange(t * h * w * 3) % 256).astype(np.uint8).reshape(t, h, w, 3)


def test_gif_is_written_without_ffmpeg(tmp_path, monkeypatch):
    iio = pytest.importorskip("imageio.v3")
    # GIF goes through Pillow: hide any ffmpeg backend to prove it is not needed.
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    frames = np.repeat(_frames(4, 8, 8), 1, axis=0)
    path = write_video(tmp_path / "clip.gif", frames, fps=5)
    back = iio.imread(path)
    assert back.shape[:3] == (4, 8, 8)
    np.testing.assert_array_equal(back[..., :3], frames)  # 4 frames of few colours: lossless


@no_fork_warning
def test_mp4_is_written_when_an_ffmpeg_backend_exists(tmp_path):
    iio = pytest.importorskip("imageio.v3")
    if importlib.util.find_spec("imageio_ffmpeg") is None and importlib.util.find_spec("av") is None:
        pytest.skip("no ffmpeg backend for imageio (imageio-ffmpeg or av) installed")
    path = write_video(tmp_path / "clip.mp4", _frames(5, 7, 9), fps=10)
    assert iio.imread(path).shape[:3] == (5, 8, 10)  # padded to even sizes for H.264


def test_missing_imageio_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio", None)
    monkeypatch.setitem(sys.modules, "imageio.v3", None)
    with pytest.raises(ImportError, match=r"plume-jax\[video\]"):
        write_video(tmp_path / "clip.gif", _frames())


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValidationError, match="path"):
        write_video(tmp_path / "clip.avi", _frames())
    with pytest.raises(ValidationError, match="frames"):
        write_video(tmp_path / "clip.gif", _frames().astype(np.float32))
    with pytest.raises(ValidationError, match="fps"):
        write_video(tmp_path / "clip.gif", _frames(), fps=0)


def test_tile_frames_layout():
    batch = np.stack([np.full((2, 4, 3, 3), 10 * (i + 1), np.uint8) for i in range(5)])
    tiled = tile_frames(batch, columns=3, gap=1, gap_value=255)
    assert tiled.shape == (2, 2 * 5 - 1, 3 * 4 - 1, 3)
    assert tiled[0, 0, 0, 0] == 10 and tiled[0, 0, 4, 0] == 20 and tiled[0, 5, 0, 0] == 40
    assert tiled[0, 4, 0, 0] == 255  # the gap row
    assert tiled[0, 5, 8, 0] == 255  # the empty sixth cell
    assert tile_frames(batch).shape == (2, 2 * 6 - 2, 3 * 5 - 2, 3)  # ceil(sqrt(5)) = 3 columns


def test_record_episode_writes_a_gif_and_keeps_the_trajectory(core, tmp_path):
    iio = pytest.importorskip("imageio.v3")
    recorded, plain = PlumeGymEnv(*core, render_scale=2), PlumeGymEnv(*core)
    actions = iter([1, 3, 3, 2, 4] * 20)
    summary = record_episode(recorded, tmp_path / "ep.gif", lambda obs: next(actions), seed=4,
                             max_steps=12)
    assert summary["steps"] == 12 and summary["frames"] == 13
    assert iio.imread(tmp_path / "ep.gif").shape[:3] == (13, 64, 64)
    plain.reset(seed=4)
    for a in [1, 3, 3, 2, 4, 1, 3, 3, 2, 4, 1, 3]:
        obs, *_ = plain.step(a)
    assert recorded.env_state.agent.position.tolist() == plain.env_state.agent.position.tolist()


def test_record_episode_accepts_agents_and_random_actions(core, tmp_path):
    pytest.importorskip("imageio")

    class Agent:
        resets = 0

        def reset(self):
            Agent.resets += 1

        def act(self, obs):
            return 1

    genv = PlumeGymEnv(*core)
    out = record_episode(genv, tmp_path / "a.gif", Agent(), seed=0, max_steps=3)
    assert Agent.resets == 1 and out["steps"] == 3
    first = record_episode(genv, tmp_path / "r1.gif", seed=5, max_steps=5)
    again = record_episode(genv, tmp_path / "r2.gif", seed=5, max_steps=5)
    assert (tmp_path / "r1.gif").read_bytes() == (tmp_path / "r2.gif").read_bytes()
    assert first["steps"] == again["steps"] == 5


def test_rollout_frames_are_deterministic_and_hold_after_the_end(core):
    env, params = core
    frames, summary = rollout_frames(env, params, None, 3, **ROLLOUT)
    again, _ = rollout_frames(env, params, None, 3, **ROLLOUT)
    assert frames.shape == (3, 71, 32, 32, 3) and frames.dtype == np.uint8
    np.testing.assert_array_equal(frames, again)
    assert summary["done"].all()  # max_steps is 60 < 70
    for i in range(3):
        end = summary["length"][i]
        np.testing.assert_array_equal(frames[i, end], frames[i, -1])


def test_rollout_frames_int_seed_above_2_32_keeps_its_high_bits(core):
    # an int key went through jax.random.key, which keeps the low 32 bits only
    from plume_jax.core.seeding import seed_key
    env, params = core
    big, _ = rollout_frames(env, params, None, 2**32 + 3, **ROLLOUT)
    as_key, _ = rollout_frames(env, params, None, seed_key(2**32 + 3), **ROLLOUT)
    small, _ = rollout_frames(env, params, None, 3, **ROLLOUT)
    np.testing.assert_array_equal(big, as_key)
    assert not np.array_equal(big, small)


@pytest.mark.parametrize("key", [-1, 2**64, True])
def test_rollout_frames_bad_int_seed_is_one_clear_error(core, key):
    env, params = core
    with pytest.raises(ValidationError, match=r"key=.*an integer in \[0, 2\*\*63\)"):
        rollout_frames(env, params, None, key, **ROLLOUT)


def test_rollout_frames_render_the_functional_trajectory(core):
    """The first frame of each env equals render_state of its reset state."""
    import jax

    from plume_jax.gym._common import compiled_render  # jitted render_frame

    env, params = core
    frames, _ = rollout_frames(env, params, None, 9, **ROLLOUT)
    k_reset = jax.random.split(jax.random.key(9), 3)[0]
    _, state = jax.jit(jax.vmap(env.reset_env, in_axes=(0, None)))(jax.random.split(k_reset, 3),
                                                                    params)
    for i in range(3):
        agent = jax.tree.map(lambda x: x[i], state.agent)
        trail = np.zeros((50, 2), np.float32)
        trail[0] = np.asarray(agent.position)
        valid = np.zeros(50, bool)
        valid[0] = True
        plume = jax.tree.map(lambda x: x[i], state.plume)
        want = compiled_render(env, 1, plume, agent, params, trail, valid)
        np.testing.assert_array_equal(frames[i, 0], np.asarray(want))


def test_record_batch_tiles_episodes_into_one_gif(core, tmp_path):
    iio = pytest.importorskip("imageio.v3")
    env, params = core
    out = record_batch(tmp_path / "batch.gif", env, params, key=1, columns=2, **ROLLOUT)
    assert out["frames"] == 71 and out["success"].shape == (3,)
    gif = iio.imread(tmp_path / "batch.gif")
    # Pillow merges identical consecutive frames (the held ends) into longer ones.
    assert 1 < gif.shape[0] <= 71 and gif.shape[1:3] == (2 * 32 + 2, 2 * 32 + 2)


@no_fork_warning
def test_gymnasium_record_video_writes_a_file(core, tmp_path):
    if importlib.util.find_spec("moviepy") is None:
        pytest.skip("gymnasium's RecordVideo needs moviepy, which is not installed")
    env = gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", render_mode="rgb_array",
                         **OVERRIDES)
    folder = tmp_path / "videos"
    recorded = gymnasium.wrappers.RecordVideo(env, str(folder), episode_trigger=lambda e: True,
                                              disable_logger=True)
    plain = PlumeGymEnv(*core)
    obs, _ = recorded.reset(seed=2)
    want, _ = plain.reset(seed=2)
    for a in [1, 3, 2, 4, 1, 1, 3, 0]:
        obs, *_ = recorded.step(a)
        want, *_ = plain.step(a)
        np.testing.assert_array_equal(obs, want)  # recording does not change the run
    recorded.close()
    videos = list(folder.glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 0


def test_rollout_frames_refuses_a_batch_of_frames_over_the_render_limit(core):
    env, params = core  # 32 x 32 cells at scale 64: 2048 x 2048 pixels a frame
    with pytest.raises(ValidationError, match="times 5 frames"):
        rollout_frames(env, params, None, 0, num_envs=5, num_steps=2, scale=64)
