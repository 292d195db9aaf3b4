"""Start-position distributions (layer 1).

A start distribution is a frozen dataclass with a pure
``sample(key, grid, goal, goal_radius, params, probe=None) -> AgentState``
(``probe``, a :class:`plume_jax.types.PlumeProbe` passed by the env, is read
by ``downwind``; the others ignore it) and a classmethod
``check_compatible(grid, source, goal_radius, settings, on_grid)`` that
``make`` calls to refuse configurations it cannot sample. Start positions
lie on integer cells inside the grid and outside the goal region (distance
to the goal ``> goal_radius``), so no episode starts solved.

============  ==============================================================
type name     start position
============  ==============================================================
``uniform``   (near-)uniform over the cells outside the goal region
``fixed``     always the same position and heading
``annulus``   uniform (by area) in ``r_min <= distance to source <= r_max``
``downwind``  a box downwind of the source (wind from the plume or a param)
============  ==============================================================
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.errors import ValidationError
from plume_jax.settings import Configurable, Setting, boolean, grid_position, integer, real
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

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict, on_grid: bool) -> None:
        """Nothing beyond ``make``'s own check that the goal leaves a cell free."""

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

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict, on_grid: bool) -> None:
        """The position must lie outside the goal region, and on an integer
        cell when the action model keeps the agent on cells."""
        position = settings["position"]
        if math.dist(position, source) <= goal_radius:
            raise ValidationError.for_parameter(
                "start.position", list(position),
                f"a cell farther than goal_radius={goal_radius} from the source {list(source)}")
        if on_grid and any(float(v) != int(v) for v in position):
            raise ValidationError.for_parameter(
                "start.position", list(position),
                "integer cell coordinates (the action model keeps the agent on cells)")

    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: FixedStartParams, probe: PlumeProbe | None = None) -> AgentState:
        return AgentState(position=params.position, heading=params.heading)


def _unit_floats(bits: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Two f32 values in ``[0, 1)`` from bits 0-14 and 15-29 of uint32 words
    (bits 30-31 stay free for ``cardinal_heading_from_bits``)."""
    mask = jnp.uint32(0x7FFF)
    scale = jnp.float32(1.0 / 32768.0)
    u1 = (bits & mask).astype(jnp.float32) * scale
    u2 = ((bits >> jnp.uint32(15)) & mask).astype(jnp.float32) * scale
    return u1, u2


def pick_candidate(points: jax.Array, bits: jax.Array, grid: Grid, goal: jax.Array,
                   goal_radius: jax.Array) -> AgentState:
    """The start from float candidate points f32[K, 2] (one random word each).

    Candidates are rounded to cells. The first one that lies in the grid
    and outside the goal region wins; failing that, the first one that is
    outside the goal region once clamped into the grid; failing that, the
    grid corner farthest from the goal. The heading is a cardinal direction
    from the chosen candidate's random word.
    """
    cells = jnp.round(points)
    clamped = grid.clamp(cells)
    inside = grid.contains(cells) & (jnp.linalg.norm(cells - goal, axis=-1) > goal_radius)
    clamped_ok = jnp.linalg.norm(clamped - goal, axis=-1) > goal_radius
    score = 2 * inside.astype(jnp.int32) + clamped_ok.astype(jnp.int32)
    first = jnp.argmax(score)
    position = jnp.where(score[first] > 0, clamped[first], farthest_corner(grid, goal))
    return AgentState(position=position.astype(jnp.float32),
                      heading=cardinal_heading_from_bits(bits[first]))


def _farthest_distance(grid: Grid, source: Any) -> float:
    corners = [(0, 0), (grid.width - 1, 0), (0, grid.height - 1), (grid.width - 1, grid.height - 1)]
    return max(math.dist(source, c) for c in corners)


@chex.dataclass(frozen=True)
class AnnulusStartParams:
    """Attributes:
        r_min: f32[] >= 0, inner radius around the source, cells.
        r_max: f32[] >= r_min, outer radius, cells.
    """

    r_min: jax.Array
    r_max: jax.Array


@dataclasses.dataclass(frozen=True)
class AnnulusStart(Configurable):
    """Uniform by area over the annulus ``r_min <= |p - source| <= r_max``;
    cardinal heading.

    Each of ``candidates`` draws takes a radius ``sqrt(U(r_min², r_max²))``
    and an angle ``U(0, 2π)`` around the goal (the source) and is rounded to
    the nearest cell, so the start's distance to the source lies within
    ``[r_min - √2/2, r_max + √2/2]``. The first candidate inside the grid
    and outside the goal region is used (see :func:`pick_candidate` for the
    rare fallbacks: a clamped candidate, then the farthest corner). ``make``
    checks ``r_min <= r_max``, ``r_max > goal_radius`` and that the annulus
    reaches into the grid.
    """

    candidates: int = 8

    type_name = "annulus"
    SETTINGS = {
        "candidates": Setting(8, integer(low=1, high=1024), static=True,
                              doc="candidate points drawn per sample"),
        "r_min": Setting(10.0, real(low=0.0), doc="inner radius around the source, cells"),
        "r_max": Setting(30.0, real(low=0.0, low_inclusive=False),
                         doc="outer radius around the source, cells"),
    }
    Params = AnnulusStartParams

    @classmethod
    def build(cls, values, grid, prefix):
        component, params, resolved = super().build(values, grid, prefix)
        if resolved["r_min"] > resolved["r_max"]:
            raise ValidationError.for_parameter(
                f"{prefix}.r_min", resolved["r_min"], f"a radius <= r_max={resolved['r_max']}")
        return component, params, resolved

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict, on_grid: bool) -> None:
        """The annulus must reach outside the goal region and into the grid."""
        if settings["r_max"] <= goal_radius:
            raise ValidationError.for_parameter(
                "start.r_max", settings["r_max"],
                f"a radius > goal_radius={goal_radius} (the annulus must reach outside the goal)")
        far = _farthest_distance(grid, source)
        if settings["r_min"] > far:
            raise ValidationError.for_parameter(
                "start.r_min", settings["r_min"],
                f"a radius <= {far:.2f}, the distance from the source {list(source)} to the "
                "farthest grid corner (the annulus must reach into the grid)")

    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: AnnulusStartParams, probe: PlumeProbe | None = None) -> AgentState:
        bits = jax.random.bits(key, (self.candidates,), jnp.uint32)
        u1, u2 = _unit_floats(bits)
        r2_min, r2_max = jnp.square(params.r_min), jnp.square(params.r_max)
        radius = jnp.sqrt(r2_min + u1 * (r2_max - r2_min))
        angle = 2.0 * jnp.pi * u2
        points = goal + radius[:, None] * jnp.stack([jnp.cos(angle), jnp.sin(angle)], axis=-1)
        return pick_candidate(points, bits, grid, goal, goal_radius)


@chex.dataclass(frozen=True)
class DownwindStartParams:
    """Attributes:
        min_distance: f32[] >= 0, nearest downwind distance from the source, cells.
        max_distance: f32[] >= min_distance, farthest downwind distance, cells.
        half_width: f32[] >= 0, largest crosswind offset either side, cells.
        direction: f32[], radians: the downwind direction used when
            ``use_plume_wind`` is False or the wind at the source is calm.
    """

    min_distance: jax.Array
    max_distance: jax.Array
    half_width: jax.Array
    direction: jax.Array


@dataclasses.dataclass(frozen=True)
class DownwindStart(Configurable):
    """Uniform over a box downwind of the source; cardinal heading.

    The downwind direction ``θ`` is where the air at the source moves
    toward, read through the plume probe (``probe.wind(source)``, e.g. the
    Gaussian plume's ``wind_direction``) when ``use_plume_wind`` is True; it
    is the start's own ``direction`` param when ``use_plume_wind`` is False,
    when the wind at the source is calm, or when no probe is given. Each of
    ``candidates`` draws is
    ``source + a (cos θ, sin θ) + c (-sin θ, cos θ)`` with
    ``a ~ U(min_distance, max_distance)`` and ``c ~ U(-half_width, half_width)``,
    rounded to the nearest cell; the first inside the grid and outside the
    goal region is used (see :func:`pick_candidate` for the fallbacks: a
    clamped candidate — the grid edge in that direction — then the farthest
    corner). ``make`` checks ``min_distance <= max_distance`` and
    ``max_distance > goal_radius``.
    """

    candidates: int = 8
    use_plume_wind: bool = True

    type_name = "downwind"
    SETTINGS = {
        "candidates": Setting(8, integer(low=1, high=1024), static=True,
                              doc="candidate points drawn per sample"),
        "use_plume_wind": Setting(True, boolean(), static=True,
                                  doc="take the downwind direction from the plume's wind"),
        "min_distance": Setting(5.0, real(low=0.0), doc="nearest downwind distance, cells"),
        "max_distance": Setting(30.0, real(low=0.0, low_inclusive=False),
                                doc="farthest downwind distance, cells"),
        "half_width": Setting(3.0, real(low=0.0), doc="largest crosswind offset, cells"),
        "direction": Setting(0.0, real(),
                             doc="downwind direction, radians (without plume wind or in a calm)"),
    }
    Params = DownwindStartParams

    @classmethod
    def build(cls, values, grid, prefix):
        component, params, resolved = super().build(values, grid, prefix)
        if resolved["min_distance"] > resolved["max_distance"]:
            raise ValidationError.for_parameter(
                f"{prefix}.min_distance", resolved["min_distance"],
                f"a distance <= max_distance={resolved['max_distance']}")
        return component, params, resolved

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict, on_grid: bool) -> None:
        """The box must reach outside the goal region."""
        if math.hypot(settings["max_distance"], settings["half_width"]) <= goal_radius:
            raise ValidationError.for_parameter(
                "start.max_distance", settings["max_distance"],
                f"a distance that reaches outside goal_radius={goal_radius}")

    def downwind_direction(self, goal: jax.Array, params: DownwindStartParams,
                           probe: PlumeProbe | None) -> jax.Array:
        """f32[], radians: the direction the start box extends from the source."""
        if probe is None or not self.use_plume_wind:
            return jnp.asarray(params.direction, jnp.float32)
        wind = jnp.reshape(jnp.asarray(probe.wind(goal), jnp.float32), (2,))
        calm = jnp.sum(jnp.square(wind)) <= 0.0
        return jnp.where(calm, params.direction, jnp.arctan2(wind[1], wind[0])).astype(jnp.float32)

    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: DownwindStartParams, probe: PlumeProbe | None = None) -> AgentState:
        bits = jax.random.bits(key, (self.candidates,), jnp.uint32)
        u1, u2 = _unit_floats(bits)
        along = params.min_distance + u1 * (params.max_distance - params.min_distance)
        cross = (2.0 * u2 - 1.0) * params.half_width
        theta = self.downwind_direction(goal, params, probe)
        downwind = jnp.stack([jnp.cos(theta), jnp.sin(theta)])
        crosswind = jnp.stack([-jnp.sin(theta), jnp.cos(theta)])
        points = goal + along[:, None] * downwind + cross[:, None] * crosswind
        return pick_candidate(points, bits, grid, goal, goal_radius)


STARTS = {cls.type_name: cls for cls in (UniformStart, FixedStart, AnnulusStart, DownwindStart)}
