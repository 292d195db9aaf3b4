"""Jittable rendering (layer 2): an RGB image of the plume, goal, agent and trail.

``render_frame`` is a pure function of ``(env, plume_state, agent, params)``
with ``env`` static, so it jits, vmaps over a batch of states, and can run
inside a ``lax.scan`` rollout. It never touches the environment state, so
rendering cannot change a trajectory.

Image layout: ``uint8[H * scale, W * scale, 3]``, north (large y) at the
top, east (large x) to the right. The concentration field is drawn with the
perceptual *viridis* colormap, normalised by ``vmax`` (or by the frame's
maximum when ``vmax`` is None). Overlays: the source (red disk), the goal
radius (white ring), the trail (light cells), the agent (orange disk) with a
line along its heading.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.core.types import AgentState, EnvState, Grid

#: The most pixels one render call draws (all frames of a batch together):
#: ``2**24``, e.g. one 4096 x 4096 image (a 1024 x 1024 grid at scale 4).
#: Drawing needs about 31 bytes of working memory per pixel (measured with
#: XLA's memory analysis on CPU), so this caps a call near 0.5 GB; larger
#: requests raise ``ValidationError`` before anything is allocated.
MAX_FRAME_PIXELS = 2**24

#: Viridis sampled at 17 evenly spaced points, RGB 0-255 (colormap data, CC0).
VIRIDIS_ANCHORS = (
    (68, 1, 84), (72, 24, 106), (71, 45, 123), (66, 64, 134), (59, 82, 139), (51, 99, 141),
    (44, 114, 142), (38, 130, 142), (33, 145, 140), (31, 160, 136), (40, 174, 128),
    (63, 188, 115), (94, 201, 98), (132, 212, 75), (173, 220, 48), (216, 226, 25),
    (253, 231, 37),
)
SOURCE_RGB = (228, 26, 28)
AGENT_RGB = (255, 127, 0)
RING_RGB = (255, 255, 255)
TRAIL_RGB = (240, 240, 240)


def check_frame_size(grid: Grid, scale: int, frames: int = 1, name: str = "scale") -> None:
    """``ValidationError`` (naming the parameter ``name``) unless ``frames``
    frames of ``grid`` at ``scale`` pixels per cell hold at most
    :data:`MAX_FRAME_PIXELS` pixels together."""
    pixels = frames * grid.width * scale * grid.height * scale
    if pixels > MAX_FRAME_PIXELS:
        what = f"{grid.width * scale}x{grid.height * scale}" + (
            f" times {frames} frames" if frames > 1 else "")
        raise ValidationError.for_parameter(
            name, scale,
            f"a scale that keeps a render call within {MAX_FRAME_PIXELS} pixels "
            f"(plume_jax.render.frames.MAX_FRAME_PIXELS); {grid.width}x{grid.height} cells at this "
            f"scale draw {what} = {pixels} pixels")


def viridis(values: jax.Array) -> jax.Array:
    """f32[..., 3] RGB in [0, 255] for values in [0, 1] (clipped)."""
    anchors = jnp.asarray(VIRIDIS_ANCHORS, jnp.float32)
    t = jnp.clip(values, 0.0, 1.0) * (len(VIRIDIS_ANCHORS) - 1)
    i = jnp.clip(jnp.floor(t).astype(jnp.int32), 0, len(VIRIDIS_ANCHORS) - 2)
    frac = (t - i)[..., None]
    return anchors[i] * (1.0 - frac) + anchors[i + 1] * frac


def trail_mask(trail: jax.Array, valid: jax.Array | None, height: int, width: int) -> jax.Array:
    """bool[H, W]: cells visited by ``trail`` (f32[T, 2] positions, valid bool[T])."""
    cells = jnp.round(trail).astype(jnp.int32)
    x = jnp.clip(cells[:, 0], 0, width - 1)
    y = jnp.clip(cells[:, 1], 0, height - 1)
    valid = jnp.ones(trail.shape[0], bool) if valid is None else valid
    return jnp.zeros((height, width), bool).at[y, x].max(valid)


def render_frame(
    env: Any,
    plume_state: Any,
    agent: AgentState,
    params: Any = None,
    *,
    trail: jax.Array | None = None,
    trail_valid: jax.Array | None = None,
    scale: int = 4,
    vmax: float | jax.Array | None = None,
) -> jax.Array:
    """Draw one frame.

    Args:
        env: a ``PlumeEnv`` (static).
        plume_state: the plume state to draw.
        agent: the agent to draw (position in cells, heading in radians), or
            several agents (leaves with a leading agent axis).
        params: ``EnvParams`` (default: ``env.default_params``).
        trail: optional f32[T, 2] past positions; ``trail_valid`` bool[T]
            marks which entries are real (for fixed-size buffers).
        scale: pixels per cell (static int >= 1).
        vmax: concentration mapped to the top of the colormap; None = the
            frame's maximum.

    Returns:
        uint8[H * scale, W * scale, 3].

    Raises:
        ValidationError: a scale that is not an integer >= 1, or a frame of
            more than :data:`MAX_FRAME_PIXELS` pixels (checked before
            anything is allocated).
    """
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValidationError.for_parameter("scale", scale, "an integer >= 1")
    grid = env.grid
    check_frame_size(grid, scale)
    params = env.default_params if params is None else params
    h, w = grid.height, grid.width
    field = env.plume.field(plume_state, grid, params.plume)
    top = jnp.max(field) if vmax is None else jnp.asarray(vmax, jnp.float32)
    rgb = viridis(field / jnp.maximum(top, 1e-12))
    if trail is not None:
        visited = trail_mask(jnp.asarray(trail, jnp.float32), trail_valid, h, w)
        rgb = jnp.where(visited[..., None], 0.35 * rgb + 0.65 * jnp.asarray(TRAIL_RGB, jnp.float32), rgb)
    rgb = jnp.repeat(jnp.repeat(rgb[::-1], scale, axis=0), scale, axis=1)  # north up

    # Pixel centres in cell coordinates (x east, y north).
    cols = (jnp.arange(w * scale, dtype=jnp.float32) + 0.5) / scale - 0.5
    rows = (h - 1) - ((jnp.arange(h * scale, dtype=jnp.float32) + 0.5) / scale - 0.5)
    px, py = jnp.meshgrid(cols, rows, indexing="xy")
    pixel = jnp.stack([px, py], axis=-1)
    half_pixel = 0.5 / scale

    goal = env.goal_location(plume_state, params)
    d_goal = jnp.linalg.norm(pixel - goal, axis=-1)
    ring = jnp.abs(d_goal - params.goal_radius) <= jnp.maximum(1.5 * half_pixel, 0.3)
    source = jnp.linalg.norm(pixel - env.plume.source_location(plume_state, params.plume), axis=-1) \
        <= jnp.maximum(0.8, 2.5 * half_pixel)

    def agent_mask(position, heading):
        rel = pixel - position
        direction = jnp.stack([jnp.cos(heading), jnp.sin(heading)])
        along = rel @ direction
        across = jnp.abs(rel @ jnp.stack([-direction[1], direction[0]]))
        line = (along >= 0.0) & (along <= 3.0) & (across <= jnp.maximum(0.3, 1.5 * half_pixel))
        body = jnp.linalg.norm(rel, axis=-1) <= jnp.maximum(1.2, 3.0 * half_pixel)
        return body | line

    # one agent (position f32[2]) or several (f32[A, 2], a multi-agent state)
    positions = jnp.reshape(agent.position, (-1, 2))
    headings = jnp.reshape(agent.heading, (-1,))
    agents_drawn = jnp.any(jax.vmap(agent_mask)(positions, headings), axis=0)

    def paint(image, mask, colour):
        return jnp.where(mask[..., None], jnp.asarray(colour, jnp.float32), image)

    rgb = paint(rgb, ring, RING_RGB)
    rgb = paint(rgb, source, SOURCE_RGB)
    rgb = paint(rgb, agents_drawn, AGENT_RGB)
    return jnp.clip(jnp.round(rgb), 0, 255).astype(jnp.uint8)


def render_state(env: Any, state: EnvState, params: Any = None, **kwargs: Any) -> jax.Array:
    """``render_frame`` for an ``EnvState`` (its plume and agent)."""
    return render_frame(env, state.plume, state.agent, params, **kwargs)
