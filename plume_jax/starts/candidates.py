"""Fixed-cost rejection sampling of start cells from candidate points.

A start draws ``candidates`` uint32 words at once, turns them into
candidate points and keeps the first acceptable one (:func:`pick_candidate`):
the cost is fixed (no loop whose length depends on the draw), so sampling
is cheap under ``vmap``, where every lane would wait for the slowest, and
inside ``step``, whose auto-reset may draw a start on every step (the
speculative reset of an unbatched step).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.settings import integer, setting
from plume_jax.starts.base import ParamsT, StartDistribution
from plume_jax.core.types import AgentState, Grid, PlumeProbe
from plume_jax.core.vectors import norm, squared_norm


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


def unit_floats(bits: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Two f32 values in ``[0, 1)`` from bits 0-14 and 15-29 of uint32 words
    (bits 30-31 stay free for ``cardinal_heading_from_bits``)."""
    mask = jnp.uint32(0x7FFF)
    scale = jnp.float32(1.0 / 32768.0)
    u1 = (bits & mask).astype(jnp.float32) * scale
    u2 = ((bits >> jnp.uint32(15)) & mask).astype(jnp.float32) * scale
    return u1, u2


def farthest_corner(grid: Grid, goal: jax.Array) -> jax.Array:
    """f32[2], the grid corner farthest from ``goal``."""
    corners = jnp.asarray(
        [[0, 0], [grid.width - 1, 0], [0, grid.height - 1], [grid.width - 1, grid.height - 1]],
        jnp.float32,
    )
    return corners[jnp.argmax(squared_norm(corners - goal))]


def farthest_distance(grid: Grid, source: Any) -> float:
    """The distance (cells) from ``source`` to the farthest grid corner."""
    corners = [(0, 0), (grid.width - 1, 0), (0, grid.height - 1), (grid.width - 1, grid.height - 1)]
    return max(math.dist(source, c) for c in corners)


def pick_candidate(points: jax.Array, bits: jax.Array, grid: Grid, goal: jax.Array,
                   goal_radius: jax.Array) -> AgentState:
    """The start from float candidate points f32[K, 2] (one random word each).

    Candidates are rounded to cells. The first one that lies in the grid
    and outside the goal region wins; failing that, the first one that is
    outside the goal region once clamped into the grid; failing that, the
    grid corner farthest from the goal. The heading is a cardinal direction
    from the chosen candidate's random word.
    """
    position, first = first_acceptable(jnp.round(points), grid, goal, goal_radius)
    return AgentState(position=position, heading=cardinal_heading_from_bits(bits[first]))


def first_acceptable(points: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array
                     ) -> tuple[jax.Array, jax.Array]:
    """``(position f32[2], index i32[])`` of candidate points f32[K, 2]: the
    first one inside the grid and outside the goal region; failing that, the
    first one outside the goal region once clamped into the grid; failing
    that, the grid corner farthest from the goal (index 0). Clamping keeps
    points that are whole numbers whole."""
    clamped = grid.clamp(points)
    inside = grid.contains(points) & (norm(points - goal) > goal_radius)
    clamped_ok = norm(clamped - goal) > goal_radius
    score = 2 * inside.astype(jnp.int32) + clamped_ok.astype(jnp.int32)
    first = jnp.argmax(score)
    position = jnp.where(score[first] > 0, clamped[first], farthest_corner(grid, goal))
    return position.astype(jnp.float32), first


def check_snap(settings: dict[str, Any], on_grid: bool) -> None:
    """Raise ``ValidationError`` for continuous starts (``snap: false``)
    with an action model that keeps the agent on cells (``on_grid``)."""
    if on_grid and not settings["snap"]:
        raise ValidationError.for_parameter(
            "start.snap", False, "true (the action model keeps the agent on cells)")


def any_heading_start(key: jax.Array, points: jax.Array, snap: bool, grid: Grid,
                      goal: jax.Array, goal_radius: jax.Array) -> AgentState:
    """The agent at the :func:`first_acceptable` of candidate points
    f32[K, 2] (rounded to cells with ``snap``), heading uniform in
    ``[0, 2π)`` drawn with ``key``."""
    position, _ = first_acceptable(jnp.round(points) if snap else points, grid, goal,
                                   goal_radius)
    heading = jax.random.uniform(key, (), jnp.float32, 0.0, 2.0 * math.pi)
    return AgentState(position=position,
                      heading=jnp.mod(heading, 2.0 * math.pi).astype(jnp.float32))


@dataclasses.dataclass(frozen=True)
class CandidateStart(StartDistribution[ParamsT]):
    """A start sampled from ``candidates`` points drawn at once (see the
    module docstring); a subclass says how a random word becomes a point."""

    candidates: int = setting(8, integer(low=1, high=1024),
                              doc="candidate points drawn per sample (a fixed-cost rejection "
                                  "sampler), in [1, 1024]")

    @abc.abstractmethod
    def candidate_points(self, bits: jax.Array, grid: Grid, goal: jax.Array, params: ParamsT,
                         probe: PlumeProbe | None) -> jax.Array:
        """f32[candidates, 2]: a candidate point per uint32 word of ``bits``
        (bits 0-29 only: 30-31 choose the heading)."""

    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: ParamsT, probe: PlumeProbe | None = None) -> AgentState:
        """The first acceptable candidate (see :func:`pick_candidate`)."""
        bits = jax.random.bits(key, (self.candidates,), jnp.uint32)
        points = self.candidate_points(bits, grid, goal, params, probe)
        return pick_candidate(points, bits, grid, goal, goal_radius)
