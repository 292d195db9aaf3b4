"""The puff plume of Singh et al. (2023), "Emergent behaviour and neural
dynamics in artificial agents tracking odour plumes" (Nature Machine
Intelligence 5, 58-70), as their simulator computes it.

Units: metres and seconds, with one grid cell = 1 m (the Singh2023 presets
use a 13 x 21 grid: x from -2 to 10 m and y from -10 to 10 m around a source
at (2, 10)). One env step is ``substeps`` simulator steps of
``substep_seconds`` (their 0.01 s Euler step under their 25 fps env: 4 x
0.01 s = 0.04 s).

Model, per simulator step, in this order (their ``manual_integrator``):

- Advection: every puff moves by the wind times ``substep_seconds`` plus a
  cross-wind jump along the **world y axis** (whatever the wind direction,
  as theirs), of standard deviation ``crosswind_noise * substep_seconds``
  (their ``N(0, 0.5) * 0.01``). The jumps are uniform with that variance
  (from a keyed hash, as the filament plume's: the displacement after a few
  steps is Gaussian by the central limit theorem); theirs are Gaussian.
- Growth: the radius grows linearly, ``growth`` metres per second.
- Trim: a puff whose centre leaves the box ``(-trim_upwind, trim_downwind)``
  x ``(-trim_crosswind, trim_crosswind)`` around the source is dropped.
- Births: ``Poisson(birth_rate)`` new puffs at the source, radius
  ``puff_radius`` (first moved on the next step). A sparse plume (their
  puffs dropped at random, a thinned Poisson process) is a lower
  ``birth_rate``.
- Per-episode sparsity (their training's ``birthx``): each episode's
  readings leave out a random fraction of the puffs, each slot dropped with
  probability ``1 - keep``, ``keep ~ U(episode_keep_min, 1)`` drawn at the
  episode's start (``init``, ``reinit``). The puffs themselves move as
  without it (the draw comes from the reset's key folded with a salt);
  ``episode_keep_min`` 1 (the default) drops none.

Concentration (their ``load_plume`` and ``get_concentration_at_tidx``): each
puff counts ``(puff_radius / r)^3`` (1 at birth) at points inside the
axis-aligned square of half-side ``r`` around its centre (strict), with
``r = puff_radius + diffusion (radius - puff_radius)``: ``diffusion`` is their
diffusion multiplier (0.5 halves the growth, their evaluation plumes); the
reading is the sum over puffs; 0 outside the grid.

Wind (uniform, ``wind_speed`` m/s toward ``wind_direction`` plus an offset):

- ``constant``: no offset.
- ``switch_once``: the offset turns by ``switch_angle`` (their 45 degrees,
  counter-clockwise) ``switch_time`` seconds after the episode starts;
  under auto-reset the next episode starts from the switched direction and
  switches back (the wind takes only these two directions).
- ``switch_many``: every ``switch_period`` seconds (each switch moved by a
  whole number of simulator steps drawn uniformly in
  ``[-switch_jitter, switch_jitter)``) the offset is **set** to
  ``N(0, switch_std)`` clipped to ``+-switch_max`` (theirs: every 3 s +- 0.3 s,
  N(0, 30 deg) clipped at +-60 deg). With ``wind_record`` set, no draws:
  the offset replays a recorded history instead, ``record[clock + start]``
  (``singh2023_switch_many``: the wind of their switch-many evaluation
  dataset, made by their own generator with their seed,
  ``plume_jax/data/singh2023_switch_many_wind.npz``, whose ``provenance``
  says how; its clock 0 is their evaluation's first start time, 60.00 s,
  and a warm-up of 1500 env steps starts the plume at their 0 s).

``init`` warms the plume up for ``warmup_steps`` env steps (20 s by
default: a puff takes 20 s to cross 10 m at 0.5 m/s), with the wind's clock
running from ``-warmup`` to 0, so a ``switch_once`` switch never happens
during the warm-up. ``reinit`` keeps the puffs and only restarts the clock.

:meth:`SinghPlume.strayed` is the episode-ending test of their env: the agent
is farther than ``stray_limit`` metres from every puff centre (0 turns it
off). Their env measures it on a random sample of at most 300 puffs; this one
on all of them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import pathlib

import chex
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.core.types import Grid
from plume_jax.core.vectors import squared_norm
from plume_jax.plumes.base import Plume
from plume_jax.plumes.sampling import capped_poisson, uniform_pairs
from plume_jax.settings import (
    MAX_LENGTH,
    MAX_SCALE,
    MIN_LENGTH,
    choice,
    grid_position,
    integer,
    real,
    setting,
)

#: The wind kinds of the Singh plume (static: each is its own code path).
SINGH_WIND_KINDS = ("constant", "switch_once", "switch_many")
#: Recorded wind histories a ``switch_many`` plume may replay (``wind_record``;
#: "" draws its own), each ``plume_jax/data/<name>_wind.npz``.
WIND_RECORDS = ("", "singh2023_switch_many")
_DATA = pathlib.Path(__file__).resolve().parent.parent / "data"


@functools.lru_cache(maxsize=None)
def wind_record(name: str) -> tuple[np.ndarray, int]:
    """``(offsets f32[L], start)``: a recorded wind history, the direction
    (radians, counter-clockwise) of each simulator step, and the step the
    plume's clock 0 reads (``plume_jax/data/<name>_wind.npz``: the steps at
    which the direction changes and the directions; its ``provenance``)."""
    with np.load(_DATA / f"{name}_wind.npz", allow_pickle=False) as f:
        steps, degrees = np.asarray(f["steps"]), np.asarray(f["degrees"])
        offsets = np.zeros(int(f["length"]), np.float64)
        for step, value in zip(steps, degrees):
            offsets[int(step):] = np.radians(value)
        return offsets.astype(np.float32), int(f["episode_start_step"])


#: The largest number of puffs released in one simulator step.
MAX_RELEASE = 64
#: A clock value never reached (a switch that does not happen).
NEVER = 2**30


@chex.dataclass(frozen=True)
class SinghParams(Pytree):
    """Attributes (f32[]; see :class:`SinghPlume` and the module docstring):
        source: f32[2], ``(x, y)`` of the source, metres (= cells).
        substep_seconds: the simulator step, s.
        wind_speed: m/s; wind_direction: radians (0 = east, counter-clockwise).
        crosswind_noise: s.d. of the cross-wind velocity jumps, m/s.
        birth_rate: mean puffs born per simulator step.
        puff_radius: radius of a new puff, m; growth: radius growth, m/s.
        diffusion: multiplier of the grown radius in the concentration.
        trim_upwind, trim_downwind, trim_crosswind: the box puffs live in, m.
        switch_time, switch_angle: ``switch_once``.
        switch_period, switch_jitter, switch_std, switch_max: ``switch_many``.
        stray_limit: the episode ends farther than this from every puff, m (0: never).
        episode_keep_min: each episode keeps a fraction ``U(episode_keep_min, 1)``
            of the puffs (their per-episode ``birthx``; 1: all).
    """

    source: jax.Array = setting(None, grid_position(none_means_centre=True),
                                doc="(x, y) of the source, metres (= cells); default: grid centre")
    substep_seconds: jax.Array = setting(
        0.01, real(low=1e-4, high=10.0), doc="simulator step, seconds, in [1e-4, 10]")
    wind_speed: jax.Array = setting(0.5, real(low=0.0, high=100.0),
                                    doc="wind speed, m/s, in [0, 100]")
    wind_direction: jax.Array = setting(0.0, real(low=-math.pi, high=math.pi),
                                        doc="base direction the air moves toward, radians "
                                            "(0 = east, counter-clockwise), in [-pi, pi]")
    crosswind_noise: jax.Array = setting(
        0.5, real(low=0.0, high=100.0),
        doc="s.d. of the cross-wind (world y) velocity jumps of the puffs, m/s, in [0, 100]")
    birth_rate: jax.Array = setting(
        1.0, real(low=0.0, high=MAX_RELEASE),
        doc=f"mean puffs born per simulator step, in [0, {MAX_RELEASE}] (at most max_release "
            f"in one step)")
    puff_radius: jax.Array = setting(0.01, real(low=MIN_LENGTH, high=10.0),
                                     doc=f"radius of a new puff, metres, in [{MIN_LENGTH:g}, 10]")
    growth: jax.Array = setting(0.01, real(low=0.0, high=10.0),
                                doc="puff radius growth, metres per second, in [0, 10]")
    diffusion: jax.Array = setting(
        1.0, real(low=0.0, high=MAX_SCALE),
        doc="multiplier of the grown radius in the concentration (0.5: their evaluation "
            f"plumes), in [0, {MAX_SCALE:g}]")
    trim_upwind: jax.Array = setting(2.0, real(low=0.0, high=MAX_LENGTH),
                                     doc="puffs are dropped this far upwind (-x) of the source, "
                                         f"metres, in [0, {MAX_LENGTH:g}]")
    trim_downwind: jax.Array = setting(10.0, real(low=0.0, high=MAX_LENGTH),
                                       doc="puffs are dropped this far downwind (+x) of the "
                                           f"source, metres, in [0, {MAX_LENGTH:g}]")
    trim_crosswind: jax.Array = setting(10.0, real(low=0.0, high=MAX_LENGTH),
                                        doc="puffs are dropped this far either side (y) of the "
                                            f"source, metres, in [0, {MAX_LENGTH:g}]")
    switch_time: jax.Array = setting(2.5, real(low=0.0, high=1e6),
                                     doc="switch_once: seconds after the episode start of the "
                                         "switch, in [0, 1e6]")
    switch_angle: jax.Array = setting(math.pi / 4, real(low=-math.pi, high=math.pi),
                                      doc="switch_once: the turn, radians (counter-clockwise), "
                                          "in [-pi, pi]")
    switch_period: jax.Array = setting(3.0, real(low=1e-3, high=1e6),
                                       doc="switch_many: seconds between switches, in [1e-3, 1e6]")
    switch_jitter: jax.Array = setting(0.3, real(low=0.0, high=1e6),
                                       doc="switch_many: each switch moves by U[-jitter, jitter) "
                                           "seconds, in [0, 1e6]")
    switch_std: jax.Array = setting(math.pi / 6, real(low=0.0, high=math.pi),
                                    doc="switch_many: s.d. of the new direction about "
                                        "wind_direction, radians, in [0, pi]")
    switch_max: jax.Array = setting(math.pi / 3, real(low=0.0, high=math.pi),
                                    doc="switch_many: the new direction is clipped to "
                                        "+-switch_max, radians, in [0, pi]")
    stray_limit: jax.Array = setting(2.0, real(low=0.0, high=MAX_LENGTH),
                                     doc="the episode ends when the agent is farther than this "
                                         "from every puff centre, metres (0: never), in "
                                         f"[0, {MAX_LENGTH:g}]")
    episode_keep_min: jax.Array = setting(
        1.0, real(low=0.0, high=1.0),
        doc="each episode keeps a random fraction U(episode_keep_min, 1) of the puffs in its "
            "readings (concentration, puff centres, stray distance; their birthx); 1: all, "
            "in [0, 1]")


@chex.dataclass(frozen=True)
class SinghState(Pytree):
    """Attributes:
        positions: f32[capacity, 2], puff centres, metres (= cells).
        radii: f32[capacity], puff radii (before ``diffusion``), metres.
        active: bool[capacity], whether each slot holds a live puff.
        head: i32[], the next slot to (over)write.
        released: i32[], puffs born since ``init`` (warm-up included).
        overwritten: i32[], live puffs overwritten by births (0 while
            ``capacity`` suffices).
        offset: f32[], the wind's direction relative to ``wind_direction``.
        target: f32[], ``switch_once``: the offset the next switch sets.
        clock: i32[], simulator steps since the episode started.
        next_switch: i32[], the clock of the next switch.
        next_base: i32[], ``switch_many``: the un-jittered clock of the next switch.
        dropped: bool[capacity], slots whose puffs this episode's readings
            leave out (``episode_keep_min``; drawn at each episode start, a
            slot's later puffs share its draw).
    """

    positions: jax.Array
    radii: jax.Array
    active: jax.Array
    head: jax.Array
    released: jax.Array
    overwritten: jax.Array
    offset: jax.Array
    target: jax.Array
    clock: jax.Array
    next_switch: jax.Array
    next_base: jax.Array
    dropped: jax.Array


#: Folded into a reset's key for the episode's dropped puffs, so that the
#: puffs' own draws are those of a plume without them.
_DROP_SALT = 0x5EED


def _seconds_to_steps(seconds: jax.Array, params: SinghParams) -> jax.Array:
    """i32[]: ``seconds`` as a whole number of simulator steps (rounded)."""
    return jnp.round(seconds / params.substep_seconds).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class SinghPlume(Plume[SinghParams, SinghState]):
    """Singh et al. (2023)'s puff plume (see the module docstring).

    Static: ``capacity`` (puff slots), ``substeps`` (simulator steps per env
    step), ``warmup_steps`` (env steps simulated at ``init``),
    ``max_release`` (cap on births per simulator step) and ``wind_kind``.
    """

    capacity: int = setting(3072, integer(low=1, high=1 << 20),
                            doc="number of puff slots (a ring buffer), in [1, 2**20]")
    substeps: int = setting(4, integer(low=1, high=1000),
                            doc="simulator steps per env step, in [1, 1000]")
    warmup_steps: int = setting(500, integer(low=0, high=1 << 20),
                                doc="env steps simulated at init, in [0, 2**20]")
    max_release: int = setting(8, integer(low=1, high=MAX_RELEASE),
                               doc=f"cap on the puffs born in one simulator step, in "
                                   f"[1, {MAX_RELEASE}]")
    wind_kind: str = setting("constant", choice(SINGH_WIND_KINDS),
                             doc="wind: constant, switch_once or switch_many")
    wind_record: str = setting("", choice(WIND_RECORDS),
                               doc="switch_many: '' draws its switches; singh2023_switch_many "
                                   "replays Singh et al.'s evaluation wind history (their seed)")

    type_name = "singh"
    Params = SinghParams
    has_puffs = True

    @classmethod
    def validate(cls, resolved: dict, grid: Grid, prefix: str) -> dict:
        """``switch_jitter`` must stay below half of ``switch_period`` (the
        switches keep their order)."""
        if resolved.get("wind_record") and resolved.get("wind_kind") != "switch_many":
            raise ValidationError.for_parameter(
                f"{prefix}.wind_record", resolved["wind_record"],
                "'' unless wind_kind is switch_many (a recorded history replaces its draws)")
        if resolved["switch_jitter"] * 2.0 >= resolved["switch_period"]:
            raise ValidationError.for_parameter(
                f"{prefix}.switch_jitter", resolved["switch_jitter"],
                f"less than half of switch_period={resolved['switch_period']}")
        return resolved

    # -- state ---------------------------------------------------------------
    def _empty(self, params: SinghParams) -> SinghState:
        n = self.capacity
        zero = jnp.zeros((), jnp.int32)
        return SinghState(
            positions=jnp.broadcast_to(jnp.asarray(params.source, jnp.float32), (n, 2)),
            radii=jnp.full((n,), params.puff_radius, jnp.float32),
            active=jnp.zeros((n,), bool), head=zero, released=zero, overwritten=zero,
            offset=jnp.zeros((), jnp.float32), target=jnp.asarray(params.switch_angle, jnp.float32),
            clock=zero, next_switch=zero, next_base=zero, dropped=jnp.zeros((n,), bool))

    def _start_clock(self, key: jax.Array, state: SinghState, clock: jax.Array,
                     params: SinghParams) -> SinghState:
        """``state`` with the wind's clock at ``clock`` and its next switch
        scheduled: ``switch_once`` ``switch_time`` after clock 0,
        ``switch_many`` at ``clock`` plus a jitter (theirs switches at t = 0 too)."""
        if self.wind_kind == "switch_once":
            nxt = _seconds_to_steps(params.switch_time, params)
            return state.replace(clock=clock, next_switch=nxt, next_base=nxt)
        if self.wind_kind == "switch_many":
            jitter = self._jitter(key, params)
            return state.replace(clock=clock, next_base=clock, next_switch=clock + jitter)
        return state.replace(clock=clock)

    def _jitter(self, key: jax.Array, params: SinghParams, shape: tuple = ()) -> jax.Array:
        """i32[shape]: switch shifts, uniform over the whole steps in ``[-j, j)``
        (``j = switch_jitter`` in steps; 0 when ``j`` is 0)."""
        j = _seconds_to_steps(params.switch_jitter, params)
        return jax.random.randint(key, shape, -j, jnp.maximum(j, -j + 1), jnp.int32)

    def init(self, key: jax.Array, params: SinghParams) -> SinghState:
        """A developed plume: ``warmup_steps`` env steps from an empty one,
        the wind's clock running from ``-warmup_steps * substeps`` to 0."""
        k_clock, k_run = jax.random.split(key)
        start = jnp.asarray(-self.warmup_steps * self.substeps, jnp.int32)
        state = self._start_clock(k_clock, self._empty(params), start, params)
        if self.warmup_steps > 0:
            def body(s, k):
                return self.advance(k, s, params), None

            state, _ = jax.lax.scan(body, state, jax.random.split(k_run, self.warmup_steps))
        return state.replace(dropped=self._drop(key, params))

    def _drop(self, key: jax.Array, params: SinghParams) -> jax.Array:
        """bool[capacity]: an episode's dropped slots, each with probability
        ``1 - keep``, ``keep ~ U(episode_keep_min, 1)`` (their per-episode
        ``birthx``: a fraction of the puff numbers dropped at random); none
        when ``episode_keep_min`` is 1. From ``key`` folded with a salt."""
        k_keep, k_slots = jax.random.split(jax.random.fold_in(key, _DROP_SALT))
        keep = jax.random.uniform(k_keep, (), jnp.float32, params.episode_keep_min, 1.0)
        return jax.random.uniform(k_slots, (self.capacity,), jnp.float32) >= keep

    def _live(self, plume_state: SinghState) -> jax.Array:
        """bool[capacity]: the puffs the readings count (live, not dropped)."""
        return plume_state.active & ~plume_state.dropped

    def reinit(self, key: jax.Array, plume_state: SinghState, params: SinghParams) -> SinghState:
        """The next episode under auto-reset: the puffs keep running, the
        wind's clock restarts at 0 (``switch_once``: from the direction it
        switched to, switching back; ``switch_many``: the schedule goes on)."""
        s = plume_state.replace(dropped=self._drop(key, params))
        if self.wind_kind == "switch_once":
            back = jnp.where(s.offset == 0.0, params.switch_angle, 0.0).astype(jnp.float32)
            nxt = _seconds_to_steps(params.switch_time, params)
            return s.replace(clock=jnp.zeros((), jnp.int32), next_switch=nxt, next_base=nxt,
                             target=back)
        return s.replace(clock=jnp.zeros((), jnp.int32), next_switch=s.next_switch - s.clock,
                         next_base=s.next_base - s.clock)

    def sharing_conflict(self) -> None:
        """None: ``reinit`` keeps the puffs and only restarts the wind's clock."""
        return None

    # -- dynamics ------------------------------------------------------------
    def _wind_step(self, state: SinghState, normal: jax.Array, jitter: jax.Array,
                   params: SinghParams) -> SinghState:
        """The wind of the simulator step at ``state.clock`` (a switch when due)."""
        due = state.clock >= state.next_switch
        if self.wind_kind == "switch_once":
            return state.replace(offset=jnp.where(due, state.target, state.offset),
                                 next_switch=jnp.where(due, NEVER, state.next_switch))
        if self.wind_kind == "switch_many" and self.wind_record:
            offsets, start = wind_record(self.wind_record)
            index = jnp.clip(state.clock + start, 0, offsets.shape[0] - 1)
            return state.replace(offset=jnp.asarray(offsets)[index])
        if self.wind_kind == "switch_many":
            new = jnp.clip(normal * params.switch_std, -params.switch_max, params.switch_max)
            base = state.next_base + jnp.where(due, _seconds_to_steps(params.switch_period,
                                                                      params), 0)
            return state.replace(offset=jnp.where(due, new, state.offset).astype(jnp.float32),
                                 next_base=base,
                                 next_switch=jnp.where(due, base + jitter, state.next_switch))
        return state

    def _velocity(self, state: SinghState, params: SinghParams) -> jax.Array:
        """f32[2], the wind, metres per second."""
        theta = params.wind_direction + state.offset
        return params.wind_speed * jnp.stack([jnp.cos(theta), jnp.sin(theta)])

    def advance(self, key: jax.Array, plume_state: SinghState, params: SinghParams
                ) -> SinghState:
        """One env step: ``substeps`` simulator steps (wind, advection with
        cross-wind jumps, growth, trim, births)."""
        n, m = self.capacity, self.substeps
        k_noise, k_birth, k_normal, k_jitter = jax.random.split(key, 4)
        # uniform jumps in (-1, 1): variance 1/3, scaled to the noise's s.d.
        columns = -(-m // 2)
        jumps = uniform_pairs(k_noise, n * columns).reshape(n, 2 * columns)[:, :m].T
        births = capped_poisson(k_birth, jnp.full((m,), params.birth_rate, jnp.float32),
                                self.max_release)
        normals = jax.random.normal(k_normal, (m,), jnp.float32)
        jitters = self._jitter(k_jitter, params, (m,))
        source = jnp.asarray(params.source, jnp.float32)
        dt = params.substep_seconds
        low = source - jnp.stack([params.trim_upwind, params.trim_crosswind])
        high = source + jnp.stack([params.trim_downwind, params.trim_crosswind])
        slots = jnp.arange(n, dtype=jnp.int32)

        def substep(s: SinghState, xs):
            jump, count, normal, jitter = xs
            s = self._wind_step(s, normal, jitter, params)
            drift = self._velocity(s, params) * dt
            cross = math.sqrt(3.0) * params.crosswind_noise * dt * jump
            positions = s.positions + drift + jnp.stack([jnp.zeros_like(cross), cross], -1)
            radii = s.radii + params.growth * dt
            inside = jnp.all((positions > low) & (positions < high), axis=-1)
            active = s.active & inside
            new = jnp.mod(slots - s.head, n) < count
            overwritten = s.overwritten + jnp.sum(new & active).astype(jnp.int32)
            positions = jnp.where(new[:, None], source, positions)
            radii = jnp.where(new, params.puff_radius, radii)
            return s.replace(
                positions=positions.astype(jnp.float32), radii=radii.astype(jnp.float32),
                active=active | new, head=jnp.mod(s.head + count, n).astype(jnp.int32),
                released=s.released + count, overwritten=overwritten,
                clock=s.clock + 1), None

        state, _ = jax.lax.scan(substep, plume_state, (jumps, births, normals, jitters))
        return state

    # -- readings ------------------------------------------------------------
    def source_location(self, plume_state: SinghState, params: SinghParams) -> jax.Array:
        """f32[2], the source position."""
        return jnp.asarray(params.source, jnp.float32)

    def _reading_radii(self, plume_state: SinghState, params: SinghParams) -> jax.Array:
        """f32[capacity], the radii the concentration uses (``diffusion`` applied)."""
        return params.puff_radius + params.diffusion * (plume_state.radii - params.puff_radius)

    def concentration(self, plume_state: SinghState, points: jax.Array, grid: Grid,
                      params: SinghParams) -> jax.Array:
        """f32[...] at points f32[..., 2]: the sum of ``(puff_radius / r)^3``
        over the live puffs whose square of half-side ``r`` contains the point
        (strictly); 0 outside the grid. ``O(points x capacity)``."""
        points = jnp.asarray(points, jnp.float32)
        flat = jnp.reshape(points, (-1, 2))
        r = self._reading_radii(plume_state, params)
        weight = jnp.where(self._live(plume_state), (params.puff_radius / r) ** 3, 0.0)
        gap = jnp.abs(flat[:, None, :] - plume_state.positions[None, :, :])
        inside = jnp.all(gap < r[None, :, None], axis=-1)
        c = jnp.sum(jnp.where(inside, weight[None, :], 0.0), axis=-1).reshape(points.shape[:-1])
        return jnp.where(grid.contains(points), c, 0.0).astype(jnp.float32)

    def wind(self, plume_state: SinghState, points: jax.Array, params: SinghParams
             ) -> jax.Array:
        """f32[..., 2], the (uniform) wind at points, metres (= cells) per env step."""
        points = jnp.asarray(points, jnp.float32)
        step = self._velocity(plume_state, params) * params.substep_seconds * self.substeps
        return jnp.broadcast_to(step.astype(jnp.float32), points.shape)

    def puff_centres(self, plume_state: SinghState, params: SinghParams
                     ) -> tuple[jax.Array, jax.Array]:
        """``(positions f32[capacity, 2], live bool[capacity])``: the puff
        centres, metres (= cells), and the live slots this episode counts."""
        return plume_state.positions, self._live(plume_state)

    def nearest_puff_distance(self, plume_state: SinghState, points: jax.Array,
                              params: SinghParams) -> jax.Array:
        """f32[...] at points f32[..., 2]: the distance to the nearest live
        puff centre (``inf`` without one)."""
        points = jnp.asarray(points, jnp.float32)
        d2 = squared_norm(points[..., None, :] - plume_state.positions)
        d2 = jnp.where(self._live(plume_state), d2, jnp.inf)
        return jnp.sqrt(jnp.min(d2, axis=-1)).astype(jnp.float32)

    def strayed(self, plume_state: SinghState, points: jax.Array, params: SinghParams
                ) -> jax.Array:
        """bool[...]: whether points f32[..., 2] lie farther than
        ``stray_limit`` from every live puff (never with ``stray_limit`` 0 or
        without puffs: their env then reads the stray distance as 0)."""
        d = self.nearest_puff_distance(plume_state, points, params)
        return (params.stray_limit > 0.0) & jnp.isfinite(d) & (d > params.stray_limit)
