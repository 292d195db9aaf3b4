"""Start-position distributions (layer 1).

A start distribution is a frozen dataclass with a pure
``sample(key, grid, goal, goal_radius, params) -> AgentState``. Start
positions lie on integer cells inside the grid and outside the goal region
(distance to the goal ``> goal_radius``), so no episode starts solved.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from plume_jax.settings import Configurable, Setting, grid_position, integer, real
from plume_jax.types import AgentState, Grid, NoParams, PlumeProbe


def cells_from_bits(bits: jax.Array, grid: Grid) -> jax.Array:
    """f32[..., 2] integer cells from uint32 random words.

    x comes from bits 0-14 and y from bits 15-29 of each word, each scaled
    to the grid by a multiply-shift: exactly uniform when the side is a
    power of two, otherwise each cell's probability is within ``side / 2**15``
    relative of uniform (grids are at most 32768 cells a side). One word per
    cell keeps the speculative auto-reset cheap.
    """
    mask = jnp.uint32(0x7FFF)
    x = ((bits & mask) * jnp.uint32(grid.width)) >> jnp.uint32(15)
    y = (((bits >> jnp.uint32(15)) & mask) * jnp.uint32(grid.height)) >> jnp.uint32(15)
    return jnp.stack([x, y], axis=-1).astype(jnp.float32)


def cardinal_heading_from_bits(bits: jax.Array) -> jax.Array:
    """f32[...], one of 0, π/2, π, 3π/2 from bits 30-31 of uint32 words
    (disjoint from the bits ``cells_from_bits`` reads)."""
    return (bits >> jnp.uint32(30)).astype(jnp.float32) * (jnp.pi / 2)


def farthest_corner(grid: Grid, goal: jax.Array) -> jax.Array:
    """f32[2], the grid corner farthest from ``goal``."""
    corners = jnp.asarray(
        [[0, 0], [grid.width - 1, 0], [0, grid.height - 1], [grid.width - 1, grid.height - 1]],
        jnp.float32,
    )
    return corners[jnp.argmax(jnp.sum(jnp.square(corners - goal), axis=-1))]


@dataclasses.dataclass(frozen=True)
class UniformStart(Configurable):
    """(Near-)uniform over the grid cells outside the goal region; cardinal heading.

    Sampling draws ``candidates`` cells at once and keeps the first one
    outside the goal region (a fixed-cost, vmap-friendly rejection sampler).
    If all are inside (probability ``p**candidates`` with ``p`` the goal's
    share of the grid) the cell farthest from the goal is used; ``make``
    refuses configurations where the goal covers the whole grid.
    """

    candidates: int = 8

    type_name = "uniform"
    SETTINGS = {
        "candidates": Setting(8, integer(low=1, high=1024), static=True,
                              doc="cells drawn per sample by the rejection sampler"),
    }
    Params = NoParams

    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: NoParams, probe: PlumeProbe | None = None) -> AgentState:
        bits = jax.random.bits(key, (self.candidates,), jnp.uint32)
        cells = cells_from_bits(bits, grid)
        outside = jnp.linalg.norm(cells - goal, axis=-1) > goal_radius
        first = jnp.argmax(outside)
        position = jnp.where(jnp.any(outside), cells[first], farthest_corner(grid, goal))
        return AgentState(position=position, heading=cardinal_heading_from_bits(bits[first]))


@chex.dataclass(frozen=True)
class FixedStartParams:
    """Attributes:
        position: f32[2], ``(x, y)`` start cell.
        heading: f32[], start heading in radians.
    """

    position: jax.Array
    heading: jax.Array


@dataclasses.dataclass(frozen=True)
class FixedStart(Configurable):
    """Always the same position and heading (``make`` checks it lies outside the goal)."""

    type_name = "fixed"
    SETTINGS = {
        "position": Setting((0.0, 0.0), grid_position(), doc="(x, y) start cell"),
        "heading": Setting(0.0, real(), doc="start heading, radians"),
    }
    Params = FixedStartParams

    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: FixedStartParams, probe: PlumeProbe | None = None) -> AgentState:
        return AgentState(position=params.position, heading=params.heading)


STARTS = {cls.type_name: cls for cls in (UniformStart, FixedStart)}
