"""Episodes to GIF or MP4: one Gymnasium episode, or a jitted batch side by side.

Writing needs ``imageio`` (the ``video`` extra: ``pip install 'plume-jax[video]'``).
GIF output uses imageio's Pillow plugin and needs no ffmpeg; MP4 output
needs ``imageio-ffmpeg`` (or PyAV). Either missing raises ``ImportError``
saying what to install. Frames themselves come from the jittable renderer
(:mod:`plume_jax.render.frames`), which reads states only, so recording never
changes a trajectory.

- :func:`record_episode` runs one episode of a
  :class:`~plume_jax.gym.PlumeGymEnv` (any policy, or random actions) and
  writes it.
- :func:`rollout_frames` renders ``num_envs`` episodes of a functional
  policy inside one jitted ``lax.scan`` (of a host agent such as an SB3
  model: jitted steps, the agent acting on the host between them);
  :func:`record_batch` tiles them side by side (:func:`tile_frames`) and
  writes the result.
- :func:`write_video` writes any ``uint8[T, H, W, 3]`` frame stack.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.core.seeding import check_seed, seed_key
from plume_jax.render.frames import check_frame_size, render_frame

#: File extensions :func:`write_video` understands.
VIDEO_FORMATS = (".gif", ".mp4")


def _require_imageio() -> Any:
    try:
        import imageio.v3 as iio
    except ImportError as exc:
        raise ImportError(
            "writing videos needs imageio: pip install 'plume-jax[video]' (or pip install "
            "imageio); GIF output then needs nothing else, MP4 also needs imageio-ffmpeg"
        ) from exc
    return iio


def _check_frames(frames: Any) -> np.ndarray:
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or not len(frames):
        raise ValidationError.for_parameter(
            "frames", f"array of shape {frames.shape} and dtype {frames.dtype}",
            "a non-empty uint8[T, H, W, 3] stack of RGB frames")
    return frames


def _pad_even(frames: np.ndarray) -> np.ndarray:
    """H.264 needs even sizes: pad the bottom/right edge by one row/column if odd."""
    _, h, w, _ = frames.shape
    if h % 2 == 0 and w % 2 == 0:
        return frames
    return np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge")


def write_video(path: str | os.PathLike, frames: Any, fps: float = 10.0, *,
                loop: int = 0) -> Path:
    """Write ``frames`` (uint8[T, H, W, 3]) to ``path``; the format follows
    the extension: ``.gif`` (no ffmpeg needed; ``loop=0`` loops forever;
    Pillow stores identical consecutive frames once, with their durations
    added) or ``.mp4`` (H.264 through imageio-ffmpeg or PyAV; odd sizes are
    padded to even ones).

    Raises:
        ValidationError: bad frames, fps or extension.
        ImportError: imageio (or, for MP4, an ffmpeg backend) is missing.
    """
    path = Path(path)
    frames = _check_frames(frames)
    if isinstance(fps, bool) or not isinstance(fps, (int, float, np.integer, np.floating)) \
            or not 0 < float(fps) <= 1000:
        raise ValidationError.for_parameter("fps", fps, "a number in (0, 1000]")
    ext = path.suffix.lower()
    if ext not in VIDEO_FORMATS:
        raise ValidationError.for_parameter("path", str(path),
                                            f"a file name ending in one of {list(VIDEO_FORMATS)}")
    iio = _require_imageio()
    if ext == ".gif":
        # Pillow's GIF writer takes the frame duration in milliseconds.
        iio.imwrite(path, frames, extension=".gif", duration=1000.0 / float(fps), loop=loop)
        return path
    frames = _pad_even(frames)
    if importlib.util.find_spec("imageio_ffmpeg") is not None:
        _write_mp4_ffmpeg(path, frames, float(fps))
    elif importlib.util.find_spec("av") is not None:
        iio.imwrite(path, frames, plugin="pyav", codec="libx264", fps=float(fps))
    else:
        raise ImportError("writing MP4 needs an ffmpeg backend for imageio: pip install "
                          "imageio-ffmpeg (or av); GIF output needs neither")
    return path


def _write_mp4_ffmpeg(path: Path, frames: np.ndarray, fps: float) -> None:
    """H.264 MP4 through imageio-ffmpeg's ``ffmpeg`` binary, with the
    command imageio's FFMPEG writer built for the same settings (``libx264``,
    ``yuv420p``, ffmpeg's default quality), so the file is the same.

    ffmpeg is started here rather than through imageio: imageio-ffmpeg keeps
    a terminal's Ctrl-C away from ffmpeg with ``preexec_fn=os.setpgrp``, and
    any ``preexec_fn`` makes CPython run ``os.fork``'s hooks, where JAX warns
    ``RuntimeWarning: os.fork() was called ... deadlock`` (JAX is
    multithreaded). ``start_new_session=True`` keeps ffmpeg out of the
    terminal's process group as well, set up by the child itself after the
    fork (no Python code runs there, no hooks, no warning)."""
    import subprocess
    from fractions import Fraction

    import imageio_ffmpeg

    _, height, width, _ = frames.shape
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-f", "rawvideo", "-vcodec", "rawvideo",
               "-s", f"{width}x{height}", "-pix_fmt", "rgb24",
               "-r", str(Fraction(fps).limit_denominator()), "-i", "-", "-an",
               "-vcodec", "libx264", "-pix_fmt", "yuv420p", "-v", "warning",
               str(path)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, start_new_session=True)
    _, errors = process.communicate(np.ascontiguousarray(frames, dtype=np.uint8).tobytes())
    if process.returncode != 0:
        lines = errors.decode(errors="replace").strip().splitlines()
        raise OSError(f"ffmpeg could not write {path} (exit status {process.returncode}): "
                      f"{lines[-1] if lines else 'no message'}")


def tile_frames(frames: Any, columns: int | None = None, gap: int = 2,
                gap_value: int = 255) -> np.ndarray:
    """Lay a batch of videos side by side.

    Args:
        frames: uint8[N, T, H, W, 3], N videos of T frames.
        columns: videos per row (default: ``ceil(sqrt(N))``).
        gap: pixels between videos; ``gap_value`` their grey level.

    Returns:
        uint8[T, rows * (H + gap) - gap, columns * (W + gap) - gap, 3].
    """
    frames = np.asarray(frames)
    if frames.ndim != 5 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or not frames.shape[0]:
        raise ValidationError.for_parameter(
            "frames", f"array of shape {frames.shape} and dtype {frames.dtype}",
            "a uint8[N, T, H, W, 3] batch of videos with N >= 1")
    n, t, h, w, _ = frames.shape
    if columns is None:
        columns = int(np.ceil(np.sqrt(n)))
    if isinstance(columns, bool) or not isinstance(columns, (int, np.integer)) or columns < 1:
        raise ValidationError.for_parameter("columns", columns, "None or an integer >= 1")
    if isinstance(gap, bool) or not isinstance(gap, (int, np.integer)) or gap < 0:
        raise ValidationError.for_parameter("gap", gap, "an integer >= 0")
    columns = min(int(columns), n)
    rows = int(np.ceil(n / columns))
    out = np.full((t, rows * (h + gap) - gap, columns * (w + gap) - gap, 3), gap_value, np.uint8)
    for i in range(n):
        r, c = divmod(i, columns)
        out[:, r * (h + gap):r * (h + gap) + h, c * (w + gap):c * (w + gap) + w] = frames[i]
    return out


# ------------------------------------------------------------- one episode
def record_episode(env: Any, path: str | os.PathLike, policy: Callable[[Any], Any] | Any = None,
                   *, seed: int | None = None, options: dict | None = None,
                   max_steps: int | None = None, fps: float | None = None) -> dict[str, Any]:
    """Run one episode of a Gymnasium env (``PlumeGymEnv``) and write it.

    Args:
        env: a ``PlumeGymEnv`` (any render mode: frames are drawn with
            ``env.render("rgb_array")``), or a Gymnasium wrapper of one
            whose ``render_mode`` is ``"rgb_array"``.
        path: ``.gif`` or ``.mp4`` file.
        policy: ``policy(obs) -> action``, an agent with ``act(obs)`` (and
            optionally ``reset()``), or None for uniformly random actions
            from ``env.action_space`` (seeded with ``seed``).
        seed: passed to ``env.reset``.
        options: passed to ``env.reset``.
        max_steps: stop after this many steps even if the episode goes on.
        fps: frames per second (default ``env.metadata["render_fps"]``).

    Returns:
        ``{"path", "frames", "steps", "return", "terminated", "truncated"}``.
    """
    act = _as_callable(policy, env, seed)
    obs, _ = env.reset(seed=seed, options=options)
    frames = [_frame(env)]
    total, steps, terminated, truncated = 0.0, 0, False, False
    while not (terminated or truncated) and (max_steps is None or steps < max_steps):
        obs, reward, terminated, truncated, _ = env.step(act(obs))
        total += float(reward)
        steps += 1
        frames.append(_frame(env))
    fps = env.metadata.get("render_fps", 10) if fps is None else fps
    out = write_video(path, np.stack(frames), fps)
    return {"path": out, "frames": len(frames), "steps": steps, "return": total,
            "terminated": bool(terminated), "truncated": bool(truncated)}


def _frame(env: Any) -> np.ndarray:
    try:
        return np.asarray(env.unwrapped.render("rgb_array"))
    except TypeError:  # a render() without a mode argument
        return np.asarray(env.render())


def _as_callable(policy: Any, env: Any, seed: int | None) -> Callable[[Any], Any]:
    if policy is None:
        env.action_space.seed(seed)
        return lambda obs: env.action_space.sample()
    if hasattr(policy, "act"):
        if hasattr(policy, "reset"):
            policy.reset()
        return policy.act
    if callable(policy):
        return policy
    raise ValidationError.for_parameter("policy", policy,
                                        "None, a callable obs -> action, or an agent with act()")


# ----------------------------------------------------------- batch, jitted
class _RandomPolicy:
    """Uniform actions from the action model's space (functional form)."""

    def __init__(self, space: Any) -> None:
        self.space = space

    def __hash__(self) -> int:
        return hash((type(self), self.space))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _RandomPolicy) and other.space == self.space

    def init(self, key: jax.Array) -> tuple:
        return ()

    def act(self, carry: Any, obs: Any, key: jax.Array) -> tuple[jax.Array, Any]:
        return self.space.sample(key), carry


def _select(mask: jax.Array, new: Any, old: Any) -> Any:
    """Per-env choice between two batched pytrees (``mask`` bool[N])."""
    return jax.tree.map(
        lambda a, b: jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b), new, old)


def _draw(env: Any, params: Any, c: dict, scale: int) -> jax.Array:
    """The frames of every env of the batch ``c`` (uint8[N, H, W, 3])."""
    return jax.vmap(lambda p, a, t, v: render_frame(env, p, a, params, trail=t, trail_valid=v,
                                                    scale=scale))(
        c["state"].plume, c["state"].agent, c["trail"], c["valid"])


def _start(env: Any, params: Any, key: jax.Array, num_envs: int, trail_length: int
           ) -> tuple[dict, jax.Array, jax.Array]:
    """``(batch, policy key, run key)``: ``num_envs`` fresh episodes (the
    batch dict :func:`_advance` steps; ``carry`` is left to the caller)."""
    k_reset, k_policy, k_run = jax.random.split(key, 3)
    obs, state = jax.vmap(env.reset_env, in_axes=(0, None))(
        jax.random.split(k_reset, num_envs), params)
    trail = jnp.zeros((num_envs, trail_length, 2), jnp.float32).at[:, 0].set(state.agent.position)
    valid = jnp.zeros((num_envs, trail_length), bool).at[:, 0].set(True)
    zeros = jnp.zeros(num_envs, bool)
    c = {"obs": obs, "state": state, "carry": (), "done": zeros, "success": zeros,
         "length": jnp.zeros(num_envs, jnp.int32), "ret": jnp.zeros(num_envs, jnp.float32),
         "count": jnp.ones(num_envs, jnp.int32), "trail": trail, "valid": valid}
    return c, k_policy, k_run


def _advance(env: Any, params: Any, c: dict, actions: jax.Array, carry: Any,
             k_step: jax.Array, scale: int) -> tuple[dict, jax.Array]:
    """One step of every env of the batch under ``actions`` (``carry``: the
    policy's new carry); an ended episode holds its last state. Returns the
    new batch and its frames."""
    num_envs, trail_length = c["trail"].shape[:2]
    rows = jnp.arange(num_envs)
    obs, state, reward, terminated, truncated, _ = jax.vmap(
        env.step_env, in_axes=(0, 0, 0, None))(jax.random.split(k_step, num_envs),
                                               c["state"], actions, params)
    active = ~c["done"]
    slot = c["count"] % trail_length
    trail = c["trail"].at[rows, slot].set(
        jnp.where(active[:, None], state.agent.position, c["trail"][rows, slot]))
    valid = c["valid"].at[rows, slot].set(c["valid"][rows, slot] | active)
    out = {
        "obs": _select(active, obs, c["obs"]),
        "state": _select(active, state, c["state"]),
        "carry": _select(active, carry, c["carry"]),
        "done": c["done"] | terminated | truncated,
        "success": c["success"] | (active & terminated),
        "length": c["length"] + active.astype(jnp.int32),
        "ret": c["ret"] + jnp.where(active, reward, 0.0),
        "count": c["count"] + active.astype(jnp.int32),
        "trail": trail, "valid": valid,
    }
    return out, _draw(env, params, out, scale)


def _results(c: dict) -> tuple[jax.Array, ...]:
    return c["success"], c["done"], c["length"], c["ret"]


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_envs", "num_steps", "scale",
                                             "trail_length"))
def _rollout_frames(env: Any, params: Any, policy: Any, key: jax.Array, num_envs: int,
                    num_steps: int, scale: int, trail_length: int):
    init, k_policy, k_run = _start(env, params, key, num_envs, trail_length)
    init["carry"] = jax.vmap(policy.init)(jax.random.split(k_policy, num_envs))

    def body(c, step_key):
        k_act, k_step = jax.random.split(step_key)
        actions, carry = jax.vmap(policy.act)(c["carry"], c["obs"],
                                              jax.random.split(k_act, num_envs))
        return _advance(env, params, c, actions, carry, k_step, scale)

    final, frames = jax.lax.scan(body, init, jax.random.split(k_run, num_steps))
    frames = jnp.concatenate([_draw(env, params, init, scale)[None], frames], axis=0)
    return (jnp.swapaxes(frames, 0, 1), *_results(final))


_host_start = jax.jit(_start, static_argnames=("env", "num_envs", "trail_length"))
_host_advance = jax.jit(lambda env, params, c, actions, k_step, scale: _advance(
    env, params, c, actions, (), k_step, scale), static_argnames=("env", "scale"))
_host_draw = jax.jit(_draw, static_argnames=("env", "scale"))


def _host_rollout_frames(env: Any, params: Any, agent: Any, key: jax.Array, num_envs: int,
                         num_steps: int, scale: int, trail_length: int):
    """:func:`_rollout_frames` for a host agent (``act_batch(obs[N],
    episode_start=bool[N]) -> actions[N]``, e.g. an SB3 model): the env
    steps jitted, the agent acts on the host between steps. It stops once
    every episode has ended (the frames after would only repeat)."""
    c, _, k_run = _host_start(env, params, key, num_envs, trail_length)
    frames = [_host_draw(env, params, c, scale)]
    if hasattr(agent, "reset"):
        agent.reset()
    start = np.ones(num_envs, bool)
    for step_key in jax.random.split(k_run, num_steps):
        if bool(np.all(np.asarray(c["done"]))):
            break
        actions = jnp.asarray(agent.act_batch(np.asarray(c["obs"]), episode_start=start))
        start = np.zeros(num_envs, bool)
        c, frame = _host_advance(env, params, c, actions, jax.random.split(step_key)[1], scale)
        frames.append(frame)
    return (jnp.swapaxes(jnp.stack(frames), 0, 1), *_results(c))


def rollout_frames(env: Any, params: Any = None, policy: Any = None, key: Any = 0, *,
                   num_envs: int = 4, num_steps: int = 100, scale: int = 2,
                   trail_length: int = 50, until_done: bool = False
                   ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Render ``num_envs`` episodes in one jitted ``lax.scan``.

    Each env runs one episode from ``env.reset_env`` under ``policy``; once
    it ends (goal or ``max_steps``) its last frame is held until
    ``num_steps`` (with ``until_done``, the frames stop once every episode
    has ended). A host agent (``act_batch``, e.g. an SB3 model) acts on the
    host between jitted steps instead.

    Args:
        env: a ``PlumeEnv``.
        params: its params (default params if None).
        policy: a hashable functional policy (``init(key) -> carry``,
            ``act(carry, obs, key) -> (action, carry)``), a host agent
            (``act_batch(obs[N], episode_start=bool[N]) -> actions[N]``), or
            None for uniformly random actions.
        key: a PRNG key or an int seed in ``[0, 2**63)`` (every bit used,
            :func:`~plume_jax.core.seeding.seed_key`); the same key gives the same
            frames.
        num_envs: batch size (static).
        num_steps: steps per env (static).
        trail_length: recent positions drawn.
        scale: pixels per cell. The
            ``num_envs`` frames of one step must fit
            :data:`~plume_jax.render.frames.MAX_FRAME_PIXELS` (``ValidationError``
            otherwise, before anything is compiled).
        until_done: stop the frames at the step where the last episode
            ended (``1 + max(length)`` frames) instead of ``num_steps + 1``.

    Returns:
        ``(frames uint8[N, T, H * scale, W * scale, 3], summary)``, ``T =
        num_steps + 1`` (fewer with ``until_done``, or for a host agent)
        with ``summary`` NumPy arrays ``success``, ``done``, ``length``,
        ``return`` per env.
    """
    params = env.default_params if params is None else params
    policy = _RandomPolicy(env.actions.action_space) if policy is None else policy
    if isinstance(key, (int, np.integer, bool, np.bool_)):
        key = seed_key(check_seed(key, "key", none_ok=False))
    for name, value, low in (("num_envs", num_envs, 1), ("num_steps", num_steps, 0),
                             ("scale", scale, 1), ("trail_length", trail_length, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValidationError.for_parameter(name, value, f"an integer >= {low}")
    check_frame_size(env.grid, int(scale), frames=int(num_envs))
    rollout = _host_rollout_frames if hasattr(policy, "act_batch") else _rollout_frames
    frames, success, done, length, ret = jax.device_get(rollout(
        env, params, policy, key, int(num_envs), int(num_steps), int(scale), int(trail_length)))
    if until_done and np.all(done):
        frames = frames[:, :int(np.max(length)) + 1]
    return np.asarray(frames), {"success": np.asarray(success), "done": np.asarray(done),
                                "length": np.asarray(length), "return": np.asarray(ret)}


def record_batch(path: str | os.PathLike, env: Any, params: Any = None, policy: Any = None,
                 key: Any = 0, *, num_envs: int = 4, num_steps: int = 100, scale: int = 2,
                 trail_length: int = 50, columns: int | None = None, fps: float = 10.0,
                 until_done: bool = False) -> dict[str, Any]:
    """:func:`rollout_frames`, tiled side by side (:func:`tile_frames`) and
    written to ``path`` (``.gif`` needs no ffmpeg).

    Returns the rollout summary plus ``path`` and ``frames`` (frame count).
    """
    frames, summary = rollout_frames(env, params, policy, key, num_envs=num_envs,
                                     num_steps=num_steps, scale=scale, trail_length=trail_length,
                                     until_done=until_done)
    tiled = tile_frames(frames, columns=columns)
    out = write_video(path, tiled, fps)
    return {"path": out, "frames": int(tiled.shape[0]), **summary}
