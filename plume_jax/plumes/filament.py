"""Turbulent puff (filament) plume in the style of Farrell et al. (2002).

Odour leaves the source as discrete puffs. Each puff is carried by the
(meandering) wind, wanders about the plume centreline (centre-relative
dispersion) and spreads (its radius grows with age); the concentration at a
point is the sum of the puffs' Gaussian kernels. Meander moves the whole
puff train, so a fixed point sees odour in bursts: the intermittency that
makes olfactory search hard.

Model (units: cells and steps, one env step = one time unit)
-----------------------------------------------------------
- Release: ``n ~ Poisson(release_rate)`` puffs per step at the source
  (capped at ``max_release``; the cap removes ``P(n > max_release)`` of the
  law, below 1e-6 with the defaults). A puff released during a step starts
  at ``source + u·U`` with age ``u``, ``u ~ U(0, 1)``, so a fast wind does
  not bunch puffs at step boundaries.
- Transport: ``x' = x + U + ξ`` with ``U`` the wind at the puff (updated
  first, then applied): with ``wind_model="uniform"`` the wind of
  :mod:`plume_jax.plumes.wind`, the same everywhere; with
  ``wind_model="field"`` the self-advected wind field of
  :mod:`plume_jax.plumes.advected_field` (Farrell et al.'s, as pompy
  computes it) read at the puff's centre, so puffs released together stay
  in the same gust as it travels downwind; with ``"linear_field"`` its
  faster linearisation, :mod:`plume_jax.plumes.wind_field`; ``ξ`` an
  independent zero-mean increment per puff and axis of variance
  ``2 dispersion`` (uniform on ``±√(6 dispersion)``: a puff's displacement
  after a few steps is Gaussian by the central limit theorem, and the
  uniform increments come from a cheap keyed hash, see
  :func:`plume_jax.plumes.sampling.uniform_pairs`, instead of a Threefry
  normal per puff, which cost two thirds of a step).
- Vertical dispersion (``vertical_dispersion``, static, ``3d`` kernel only;
  pompy's ``model_z_disp``): each puff's height above the sampling plane
  ``z`` (0 at release) takes the same independent increments as ``x`` and
  ``y`` (variance ``2 dispersion`` per step; the wind has no vertical
  component), and the ``3d`` kernel is evaluated at the puff's height:
  times ``exp(-z² / (2 r²))``. Off (the default), puffs stay centred in the
  plane. Nothing bounds ``z`` (no ground: odour that wanders below the
  plane is lost, as in pompy).
- Growth: radius ``r(age) = √(puff_radius² + 2 growth age)`` (Fickian growth
  of each puff by the eddies smaller than it).
- Kernel (``kernel``, static): ``2d``,
  ``c(p) = Σ_i m / (2π r_i²) · exp(-|p - x_i|² / (2 r_i²))`` with
  ``m = puff_mass`` — a normalised 2-D Gaussian, so each puff carries mass
  ``m`` in the plane and the source emits ``release_rate · puff_mass`` per
  step through it; or ``3d``, ``m / ((2π)^{3/2} r_i³) · exp(...)`` — Farrell's
  3-D Gaussian puff of mass ``m`` centred in the sampling plane, which holds
  ``m / (√(2π) r)`` of it (mass per cell³; the rest lies above and below, so
  the in-plane concentration falls faster downwind, as ``r⁻³``; with
  ``vertical_dispersion``, times ``exp(-z_i² / (2 r_i²))``).
- Buffer: ``capacity`` (static) slots used as a ring: new puffs overwrite the
  oldest slots; a puff whose centre leaves the domain by more than
  ``3 r`` is deactivated (it contributes nothing) until its slot is reused.
  Size ``capacity`` above ``release_rate`` times the transit time so that
  puffs leave the domain before they are overwritten.

Cost per step is ``O(capacity)`` (no grid-sized work); ``concentration`` at
``M`` points is ``O(M · capacity)``; only ``field`` (rendering) is
``O(H · W · capacity)``.

``init`` warms the plume up with ``warmup_steps`` scanned steps so an
episode starts with a developed plume; ``reinit`` (the auto-reset path)
keeps the developed puffs (and gust field) running and only restarts the
wind's episode clock, so the warm-up never runs inside ``step``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any
import chex
import jax
import jax.numpy as jnp

from plume_jax.plumes.base import Plume, cell_centres
from plume_jax.plumes.sampling import capped_poisson, uniform_pairs
from plume_jax.plumes.wind import WindModel, WindState, broadcast_wind, wind_setting
from plume_jax.plumes.advected_field import AdvectedField
from plume_jax.plumes.wind_field import WindField, field_setting
from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.settings import (
    MAX_LENGTH,
    MAX_SCALE,
    MIN_LENGTH,
    boolean,
    choice,
    grid_domain,
    grid_position,
    integer,
    real,
    setting,
)
from plume_jax.core.types import Grid
from plume_jax.core.vectors import squared_norm, sum_last

#: A puff stays active while its centre is within this many radii of the domain.
EXIT_RADII = 3.0
#: The largest ``max_release`` (and ``release_rate``): above it the capped
#: Poisson law of the releases would overflow float32.
MAX_RELEASE = 64
#: The values of the static ``kernel`` setting.
KERNELS = ("2d", "3d")


@chex.dataclass(frozen=True)
class FilamentParams(Pytree):
    """Attributes (all f32[]; see :class:`FilamentPlume` for meanings):
        source: f32[2], ``(x, y)`` of the source, cells.
        release_rate: mean puffs released per step.
        puff_mass: mass carried by each puff.
        puff_radius: radius of a new puff, cells.
        growth: puff growth, cells² per step (``r² = r0² + 2 growth age``).
        dispersion: centre-relative diffusivity of puff centres, cells² per step.
        wind_*: the wind (see :mod:`plume_jax.plumes.wind`); ``wind_gust_*``
            the wind field of ``wind_model="field"`` or ``"linear_field"``
            (see :mod:`plume_jax.plumes.advected_field` and
            :mod:`plume_jax.plumes.wind_field`; unused otherwise).
    """

    source: jax.Array = setting(None, grid_position(none_means_centre=True),
                                doc="(x, y) of the source, cells; default: grid centre")
    release_rate: jax.Array = setting(
        1.0, real(low=0.0, high=MAX_RELEASE),
        doc=f"mean puffs released per step, in [0, {MAX_RELEASE}] (at most max_release are "
            "released in one step)")
    puff_mass: jax.Array = setting(2.0, real(low=0.0, high=MAX_SCALE),
                                   doc=f"mass of each puff, in [0, {MAX_SCALE:g}]")
    puff_radius: jax.Array = setting(1.0, real(low=MIN_LENGTH, high=MAX_LENGTH),
                                     doc=f"radius (std) of a new puff, cells, in "
                                         f"[{MIN_LENGTH:g}, {MAX_LENGTH:g}]")
    growth: jax.Array = setting(0.03, real(low=0.0, high=MAX_LENGTH),
                                doc=f"puff growth rate, cells^2 per step: r^2 = r0^2 + 2 growth "
                                    f"age, in [0, {MAX_LENGTH:g}]")
    dispersion: jax.Array = setting(0.3, real(low=0.0, high=MAX_LENGTH),
                                    doc=f"centre-relative diffusivity of puff centres, cells^2 "
                                        f"per step, in [0, {MAX_LENGTH:g}]")
    wind_speed: jax.Array = wind_setting("wind_speed", 1.0)
    wind_direction: jax.Array = wind_setting("wind_direction", 0.0)
    wind_direction_std: jax.Array = wind_setting("wind_direction_std", 0.25)
    wind_correlation_time: jax.Array = wind_setting("wind_correlation_time", 50.0)
    wind_switch_time: jax.Array = wind_setting("wind_switch_time", 100.0)
    wind_switch_angle: jax.Array = wind_setting("wind_switch_angle", 0.5)
    wind_switch_rate: jax.Array = wind_setting("wind_switch_rate", 0.02)
    wind_gust_std: jax.Array = field_setting("wind_gust_std", 1.6)
    wind_gust_damping: jax.Array = field_setting("wind_gust_damping", 0.1)
    wind_gust_bandwidth: jax.Array = field_setting("wind_gust_bandwidth", 0.2)
    wind_gust_diffusivity: jax.Array = field_setting("wind_gust_diffusivity", 10.0)


@chex.dataclass(frozen=True)
class FilamentState(Pytree):
    """Attributes:
        positions: f32[capacity, 2], puff centres ``(x, y)``, cells.
        ages: f32[capacity], puff ages, steps.
        active: bool[capacity], whether each slot holds a live puff.
        head: i32[], the next slot to (over)write.
        released: i32[], puffs released since ``init`` (warm-up included).
        wind: the (large-scale, uniform) wind state.
        gusts: the wind field: an
            :class:`~plume_jax.plumes.advected_field.AdvectedState` with
            ``wind_model="field"``, a
            :class:`~plume_jax.plumes.wind_field.GustState` with
            ``"linear_field"``; ``()`` otherwise.
        heights: f32[capacity], puff heights above the sampling plane, cells,
            with ``vertical_dispersion``; ``()`` otherwise.
    """

    positions: jax.Array
    ages: jax.Array
    active: jax.Array
    head: jax.Array
    released: jax.Array
    wind: WindState
    gusts: Any = ()  # AdvectedState | GustState, or () with no gust field
    heights: Any = ()  # f32[capacity], or () without vertical dispersion


@dataclasses.dataclass(frozen=True)
class FilamentPlume(Plume[FilamentParams, FilamentState]):
    """A turbulent plume of Gaussian puffs released at the source, carried by
    a (meandering) wind (see the module docstring for the model).

    Static: ``capacity`` (puff slots), ``warmup_steps`` (scanned at ``init``),
    ``max_release`` (cap on puffs per step), ``kernel``,
    ``vertical_dispersion``, ``wind_kind``, ``wind_model``,
    ``wind_field_spacing`` and ``wind_field_substeps``.
    Dynamic: everything else. Concentration is in mass per cell²; with the
    defaults a new puff peaks at ``puff_mass / (2π puff_radius²) ≈ 0.32`` and the
    time-averaged concentration next to the source is about 1.
    """

    capacity: int = setting(256, integer(low=1, high=1 << 20),
                            doc="number of puff slots (a ring buffer), in [1, 2**20]")
    warmup_steps: int = setting(160, integer(low=0, high=1 << 20),
                                doc="steps simulated at init so episodes start with a developed "
                                    "plume, in [0, 2**20]")
    max_release: int = setting(8, integer(low=1, high=MAX_RELEASE),
                               doc=f"cap on the puffs released in one step, in [1, {MAX_RELEASE}]")
    kernel: str = setting("2d", choice(KERNELS),
                          doc="puff kernel: 2d (m / (2 pi r^2) exp(-d^2 / 2r^2), the puff's mass "
                              "in the plane) or 3d (m / ((2 pi)^1.5 r^3) exp(-d^2 / 2r^2), a 3-D "
                              "puff centred in the plane, Farrell et al. 2002)")
    vertical_dispersion: bool = setting(
        False, boolean(),
        doc="3d kernel only: puffs also disperse vertically (their height above the sampling "
            "plane takes the centre-relative increments; pompy's model_z_disp), which thins "
            "the in-plane odour downwind; false: puffs stay centred in the plane")
    wind_kind: str = wind_setting("wind_kind", "meander")
    wind_model: str = field_setting("wind_model", "uniform")
    wind_field_spacing: float = field_setting("wind_field_spacing", 8.0)
    wind_field_substeps: int = field_setting("wind_field_substeps", 4)
    #: ``(width, height)`` of the domain, set by ``build`` from the grid; puffs
    #: leaving it are deactivated. ``()`` (a hand-built plume) never deactivates.
    domain: tuple = grid_domain()

    type_name = "filament"
    Params = FilamentParams
    has_puffs = True

    @classmethod
    def validate(cls, resolved: dict, grid: Grid, prefix: str) -> dict:
        """With a wind field (``wind_model`` ``"field"`` or
        ``"linear_field"``), its explicit update must be stable:
        ``wind_speed² <= wind_gust_diffusivity <= 1 / (1/hx² + 1/hy²)``;
        ``vertical_dispersion`` needs the ``3d`` kernel (a ``2d`` puff's
        kernel is its whole mass in the plane, whatever its height)."""
        if resolved["wind_model"] != "uniform":
            field = cls.wind_field_of(resolved["wind_model"], (grid.width, grid.height),
                                      resolved["wind_field_spacing"],
                                      resolved["wind_field_substeps"])
            field.check_stable(resolved["wind_gust_diffusivity"], resolved["wind_speed"],
                               f"{prefix}.wind_gust_diffusivity")
        if resolved["vertical_dispersion"] and resolved["kernel"] != "3d":
            raise ValidationError.for_parameter(
                f"{prefix}.vertical_dispersion", True,
                f"false with kernel {resolved['kernel']!r} (vertical dispersion changes only the "
                f"3d kernel: set kernel to '3d')")
        return resolved

    @staticmethod
    def wind_field_of(wind_model: str, domain: tuple[int, int], spacing: float,
                      substeps: int) -> AdvectedField | WindField:
        """The wind field of ``wind_model`` ``"field"`` (``substeps`` updates
        per step) or ``"linear_field"`` over ``domain``, nodes at most
        ``spacing`` cells apart."""
        if wind_model == "field":
            return AdvectedField.for_grid(domain, spacing, substeps)
        return WindField.for_grid(domain, spacing)

    @property
    def large_scale_wind(self) -> WindModel:
        """The dynamics of the uniform wind of this plume's ``wind_kind`` (with
        ``wind_model="field"``, the large-scale wind the gusts ride on)."""
        return WindModel(self.wind_kind)

    @property
    def gust_field(self) -> AdvectedField | WindField | None:
        """The wind field of ``wind_model="field"`` or ``"linear_field"``
        (None with ``uniform``)."""
        if self.wind_model == "uniform":
            return None
        if not self.domain:
            raise ValidationError.for_parameter(
                "wind_model", self.wind_model,
                "'uniform' for a plume built without a grid (the wind field spans the grid: "
                "build the plume with FilamentPlume.build(values, grid, prefix))")
        return self.wind_field_of(self.wind_model, self.domain, self.wind_field_spacing,
                                  self.wind_field_substeps)

    # -- state ---------------------------------------------------------------
    def empty(self, key: jax.Array, params: FilamentParams) -> FilamentState:
        """A plume with no puffs yet and a fresh wind (no warm-up)."""
        n = self.capacity
        field = self.gust_field
        gusts: Any = ()  # the gust field's state, () without one
        if field is not None:
            key, k_field = jax.random.split(key)
        wind = self.large_scale_wind.init(key, params)
        if field is not None:
            gusts = field.init(k_field, params, self.large_scale_wind.velocity(wind, params))
        return FilamentState(
            positions=jnp.broadcast_to(jnp.asarray(params.source, jnp.float32), (n, 2)),
            ages=jnp.zeros((n,), jnp.float32),
            active=jnp.zeros((n,), bool),
            head=jnp.zeros((), jnp.int32),
            released=jnp.zeros((), jnp.int32),
            wind=wind,
            gusts=gusts,
            heights=jnp.zeros((n,), jnp.float32) if self.vertical_dispersion else (),
        )

    def init(self, key: jax.Array, params: FilamentParams) -> FilamentState:
        """A developed plume: ``warmup_steps`` steps of :meth:`advance` from
        :meth:`empty`, in one ``lax.scan``. The wind's episode clock runs
        from ``-warmup_steps`` to 0 meanwhile, so a ``switch_once`` wind
        blows from its first direction during the whole warm-up and switches
        ``wind_switch_time`` steps into the episode."""
        k_wind, k_run = jax.random.split(key)
        state = self.empty(k_wind, params)
        # the wind's episode clock reaches 0 as the warm-up ends, so a
        # switch_once switch never happens during the warm-up
        state = state.replace(wind=state.wind.replace(
            clock=jnp.asarray(-self.warmup_steps, jnp.int32)))
        if self.warmup_steps > 0:
            def body(s, k):
                return self.advance(k, s, params), None

            state, _ = jax.lax.scan(body, state, jax.random.split(k_run, self.warmup_steps))
        return state.replace(wind=state.wind.replace(clock=jnp.zeros((), jnp.int32)))

    def reinit(self, key: jax.Array, plume_state: FilamentState, params: FilamentParams
               ) -> FilamentState:
        """The plume for the next episode under auto-reset: the developed
        puffs keep running; only the wind's episode clock restarts (and a
        ``switch_once`` wind starts from the direction it switched to). No
        warm-up, no randomness: ``O(1)``."""
        return plume_state.replace(wind=self.large_scale_wind.reinit(plume_state.wind, params))

    def sharing_conflict(self) -> None:
        """None: :meth:`reinit` keeps the puffs and gusts running and only
        restarts the wind's episode clock (a ``switch_once`` wind keeps its
        direction across it), so one realisation can serve several agents."""
        return None

    def radii(self, ages: jax.Array, params: FilamentParams) -> jax.Array:
        """f32[...], the radius of puffs of the given ages."""
        return jnp.sqrt(jnp.square(params.puff_radius) + 2.0 * params.growth * ages)

    def advance(self, key: jax.Array, plume_state: FilamentState, params: FilamentParams
                ) -> FilamentState:
        """One step: the wind (and gust field) moves on, puffs move with the
        wind at their centres and age, puffs that left the domain (by more
        than ``3 r``) are deactivated, then new puffs are released into the
        ring, overwriting the oldest slots."""
        field = self.gust_field
        gusts: Any = plume_state.gusts
        if field is not None:
            key, k_field = jax.random.split(key)
        if self.vertical_dispersion:
            key, k_height = jax.random.split(key)
        k_wind, k_count, k_jitter, k_disp = jax.random.split(key, 4)
        n = self.capacity
        wind = self.large_scale_wind.advance(k_wind, plume_state.wind, params)
        velocity = self.large_scale_wind.velocity(wind, params)
        source = jnp.asarray(params.source, jnp.float32)
        release_velocity = velocity
        puff_velocity = velocity
        if field is not None:
            assert gusts is not None  # a wind field keeps its state
            gusts = field.advance(k_field, gusts, velocity, params)
            puff_velocity = field.velocity(gusts, plume_state.positions, velocity)
            release_velocity = field.velocity(gusts, source, velocity)
        # uniform increments of variance 2 dispersion per axis (sqrt(6 D) U(-1, 1));
        # summed over steps they are Gaussian by the central limit theorem
        step = jnp.sqrt(6.0 * params.dispersion) * uniform_pairs(k_disp, n)
        positions = plume_state.positions + puff_velocity + step
        ages = plume_state.ages + 1.0
        active = plume_state.active
        if self.domain:
            upper = jnp.asarray([self.domain[0] - 1, self.domain[1] - 1], jnp.float32)
            margin = EXIT_RADII * self.radii(ages, params)[:, None]
            within = (positions >= -margin) & (positions <= upper + margin)
            inside = within[:, 0] & within[:, 1]
            active = active & inside
        # release: the next `count` slots of the ring (the oldest puffs) are overwritten
        count = capped_poisson(k_count, params.release_rate, self.max_release)
        offset = jnp.mod(jnp.arange(n, dtype=jnp.int32) - plume_state.head, n)
        new = offset < count
        jitter = jax.random.uniform(k_jitter, (self.max_release,), jnp.float32)
        u = jitter[jnp.minimum(offset, self.max_release - 1)]
        positions = jnp.where(new[:, None], source + u[:, None] * release_velocity, positions)
        ages = jnp.where(new, u, ages)
        active = active | new
        heights = plume_state.heights
        if self.vertical_dispersion:
            # the same increments as x and y (variance 2 dispersion); new puffs at height 0
            rise = jnp.sqrt(6.0 * params.dispersion) * uniform_pairs(k_height, n)[:, 0]
            heights = jnp.where(new, 0.0, heights + rise).astype(jnp.float32)
        return plume_state.replace(
            positions=positions.astype(jnp.float32), ages=ages.astype(jnp.float32),
            active=active, head=jnp.mod(plume_state.head + count, n).astype(jnp.int32),
            released=plume_state.released + count, wind=wind, gusts=gusts, heights=heights)

    # -- readings ------------------------------------------------------------
    def source_location(self, plume_state: FilamentState, params: FilamentParams) -> jax.Array:
        """f32[2], the source position."""
        return jnp.asarray(params.source, jnp.float32)

    def puff_centres(self, plume_state: FilamentState, params: FilamentParams
                     ) -> tuple[jax.Array, jax.Array]:
        """``(positions f32[capacity, 2], active bool[capacity])``: the puff
        centres, cells, and the live slots."""
        return plume_state.positions, plume_state.active

    def _kernel_sum(self, plume_state: FilamentState, points: jax.Array,
                    params: FilamentParams) -> jax.Array:
        """f32[M] at points f32[M, 2] (no grid masking)."""
        r2 = jnp.square(self.radii(plume_state.ages, params))
        if self.kernel == "3d":
            peak = params.puff_mass / ((2.0 * math.pi) ** 1.5 * r2 * jnp.sqrt(r2))
        else:
            peak = params.puff_mass / (2.0 * math.pi * r2)
        if self.vertical_dispersion:
            peak = peak * jnp.exp(-0.5 * jnp.square(plume_state.heights) / r2)
        weight = jnp.where(plume_state.active, peak, 0.0)
        d2 = squared_norm(points[:, None, :] - plume_state.positions[None, :, :])
        return sum_last(weight * jnp.exp(-0.5 * d2 / r2))

    def concentration(self, plume_state: FilamentState, points: jax.Array, grid: Grid,
                      params: FilamentParams) -> jax.Array:
        """f32[...] at float points f32[..., 2]: the sum of the puff kernels,
        ``>= 0``; 0 outside the grid. ``O(points · capacity)``."""
        points = jnp.asarray(points, jnp.float32)
        flat = jnp.reshape(points, (-1, 2))
        c = self._kernel_sum(plume_state, flat, params).reshape(points.shape[:-1])
        return jnp.where(grid.contains(points), c, 0.0).astype(jnp.float32)

    def wind(self, plume_state: FilamentState, points: jax.Array, params: FilamentParams
             ) -> jax.Array:
        """f32[..., 2], the wind velocity at points, cells/step: the uniform
        wind, or the wind field's reading at the points (``wind_model``
        ``"field"`` or ``"linear_field"``)."""
        velocity = broadcast_wind(self.large_scale_wind.velocity(plume_state.wind, params),
                                  points)
        field = self.gust_field
        if field is None:
            return velocity
        return field.velocity(plume_state.gusts, points, velocity).astype(jnp.float32)

    def field(self, plume_state: FilamentState, grid: Grid, params: FilamentParams) -> jax.Array:
        """f32[H, W], the concentration at every cell, ``field[y, x]``
        (rendering only: ``O(H · W · capacity)``, computed a block of rows
        at a time to bound memory)."""
        rows = cell_centres(grid)  # [H, W, 2]
        block = max(1, (1 << 22) // max(1, grid.width * self.capacity))
        out = jax.lax.map(lambda row: self._kernel_sum(plume_state, row, params), rows,
                          batch_size=min(block, grid.height))
        return out.astype(jnp.float32)

    def mass_in(self, plume_state: FilamentState, params: FilamentParams) -> jax.Array:
        """f32[], the total mass of the active puffs (with ``kernel="3d"`` the
        plane holds ``m / (√(2π) r)`` of a puff's mass ``m``)."""
        return jnp.sum(jnp.where(plume_state.active, params.puff_mass, 0.0))
