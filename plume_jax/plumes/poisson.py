"""The Poisson detection model of the infotaxis literature.

Odour arrives at the agent as discrete *hits*: in each step the number of
hits is Poisson with mean ``μ(p)``, the mean encounter rate that the
steady 2-D advection-diffusion equation gives at ``p`` for a source that
emits particles of finite lifetime (Vergassola, Villermaux & Shraiman,
Nature 2007; the ``otto`` package of Loisy & Eloy 2022; Loisy & Heinonen
2023). Lengths are in grid cells (``dx = 1``), times in steps.

- ``model="isotropic"`` (no mean wind)::

      μ(d) = R·dt / ln(2 λ/dx) · K0(d / (λ/dx))

  with ``d`` the distance to the source, ``λ/dx = lambda_over_dx`` the
  dispersion length in cells and ``R·dt = r_dt`` the emission scale.
- ``model="windy"`` (mean wind ``V̄`` toward ``wind_direction``; the
  searcher moves in a plane through the source of a 3-D flow)::

      μ = R̄ / d · exp(V̄ Δx / 2 - d / λ̄),   λ̄ = sqrt(τ / (1 + V̄² τ / 4))

  with ``Δx`` the downwind displacement of ``p`` from the source (positive
  downwind), ``τ = tau`` the particle lifetime and ``R̄ = r_bar`` (the
  effective diffusivity is the unit, ``D = 1``: ``τ`` is in ``dx² / D``).
  The papers' dimensionless lifetime is ``τ̄ = V̄² τ / D``: their
  "windy-medium-detections" case has ``τ̄ = 150``, i.e. ``tau = 37.5``
  here with ``V̄ = 2`` (``λ̄ = 0.98693`` cells).

``K0`` is :func:`plume_jax.plumes.special.k0`. Both laws diverge at the
source; ``d`` is floored at ``MIN_DISTANCE`` = 0.5 cells, which only touches
points inside the source cell (whose visit ends the episode). The plume's
``concentration`` is ``μ`` itself (mean hits per step, unbounded above),
zero outside the grid: a hits sensor (``sensor type "hits"``) draws the
Poisson counts and caps them into ``h_max`` classes.

The source may be drawn per episode (``source_mode``), so it lives in the
plume state:

- ``"fixed"``: always ``source``;
- ``"uniform"``: a uniformly random cell;
- ``"otto"``: the initialisation protocol of ``otto``: the agent starts at
  ``observer`` (use a ``fixed`` start there), its first observation is a
  non-zero hit (use the hits sensor's ``nonzero_first``), and the source is
  drawn from the posterior that observation implies under a uniform prior
  over the other cells. Drawing the source with probability proportional
  to ``P(h >= 1 | source) = 1 - exp(-μ(observer - source))`` and the first
  hit from ``P(h | source, h >= 1)`` (the sensor's job) gives exactly the
  joint law of otto's protocol (first hit from its marginal given
  ``h >= 1``, then the source from ``P(source | h)``).

``init`` computes the posterior's cumulative table over the cells once
(``O(H · W)``) and keeps it in the state; ``reinit`` (auto-reset) draws a
new source from that table by binary search (``O(log(H · W))``) and leaves
the table untouched, so the per-step reset branch does no grid-sized work.
The table belongs to the params given to ``init``: after changing
``lambda_over_dx``, ``r_dt``, ``tau``, ``r_bar``, ``wind_speed`` or
``wind_direction``, call ``reset`` again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.plumes.base import Plume, cell_centres
from plume_jax.plumes.special import k0
from plume_jax.plumes.wind import broadcast_wind, constant_wind, wind_setting
from plume_jax.core.pytree import Pytree
from plume_jax.settings import (
    MAX_LENGTH,
    MAX_SCALE,
    MIN_LENGTH,
    choice,
    domain_grid,
    grid_centre,
    grid_domain,
    grid_position,
    optional,
    real,
    setting,
    to_leaf,
)
from plume_jax.core.types import Grid
from plume_jax.core.vectors import norm

#: Distances are floored at this many cells (the laws diverge at the source).
MIN_DISTANCE = 0.5


def _centre_if_none(value: Any, grid: Grid) -> jax.Array:
    """The params leaf of a position that may be None: the grid centre then."""
    return to_leaf(grid_centre(grid) if value is None else value)


@chex.dataclass(frozen=True)
class PoissonPlumeParams(Pytree):
    """Attributes (f32):
        source: f32[2], the source for ``source_mode="fixed"`` (the grid
            centre, unused, in the other modes).
        observer: f32[2], the cell of the first (non-zero) hit for
            ``source_mode="otto"`` (the grid centre, unused, otherwise).
        lambda_over_dx: isotropic dispersion length ``λ/dx``, cells.
        r_dt: isotropic emission scale ``R·dt``.
        wind_speed: windy mean wind ``V̄``, cells per step.
        wind_direction: windy: where the mean wind blows toward, radians.
        tau: windy particle lifetime ``τ``, in ``dx² / D`` (the papers'
            ``τ̄ = V̄² τ``).
        r_bar: windy emission scale ``R̄``.
    """

    source: jax.Array = setting(
        None, optional(grid_position()), leaf=_centre_if_none,
        doc="(x, y) of the source for source_mode='fixed', cells; default: grid centre")
    observer: jax.Array = setting(
        None, optional(grid_position()), leaf=_centre_if_none,
        doc="cell of the first non-zero hit for source_mode='otto' (the agent's start); "
            "default: grid centre")
    lambda_over_dx: jax.Array = setting(
        1.0, real(low=0.5, high=MAX_LENGTH, low_inclusive=False),
        doc=f"isotropic dispersion length lambda/dx, cells, in (0.5, {MAX_LENGTH:g}] (the law's "
            "ln(2 lambda/dx) must be positive)")
    r_dt: jax.Array = setting(1.0, real(low=0.0, high=MAX_SCALE),
                              doc=f"isotropic emission scale R*dt, in [0, {MAX_SCALE:g}]")
    wind_speed: jax.Array = wind_setting("wind_speed", 2.0,
                                         doc=f"windy mean wind V, cells per step, in "
                                             f"[0, {MAX_LENGTH:g}]")
    wind_direction: jax.Array = wind_setting(
        "wind_direction", 0.0, doc="windy: direction the mean wind blows toward, radians")
    tau: jax.Array = setting(
        37.5, real(low=MIN_LENGTH, high=MAX_SCALE),
        doc=f"windy particle lifetime tau in dx^2/D, in [{MIN_LENGTH:g}, {MAX_SCALE:g}] (the "
            "papers' dimensionless tau_bar is V^2 tau: 150 for V = 2, tau = 37.5)")
    r_bar: jax.Array = setting(2.5, real(low=0.0, high=MAX_SCALE),
                               doc=f"windy emission scale R, in [0, {MAX_SCALE:g}]")


@chex.dataclass(frozen=True)
class PoissonPlumeState(Pytree):
    """Attributes:
        source: f32[2], this episode's source cell.
        table: f32[H*W] (``source_mode="otto"``; shape ``(0,)`` otherwise):
            the cumulative, unnormalised posterior over the cells in
            row-major ``(y, x)`` order.
    """

    source: jax.Array
    table: jax.Array


@dataclasses.dataclass(frozen=True)
class PoissonPlume(Plume[PoissonPlumeParams, PoissonPlumeState]):
    """Poisson hit-rate plume of the infotaxis literature (isotropic or
    windy; see the module docstring for the laws and the source modes).

    ``concentration`` is the mean number of hits per step ``μ`` (zero
    outside the grid); ``wind`` is the mean wind ``V̄`` toward
    ``wind_direction`` for ``model="windy"`` and calm for ``"isotropic"``.
    The plume does not change within an episode.
    """

    model: str = setting("isotropic", choice(("isotropic", "windy")),
                         doc="hit-rate law: isotropic (K0) or windy (3-D, mean wind)")
    source_mode: str = setting("uniform", choice(("fixed", "uniform", "otto")),
                               doc="fixed source, uniform random cell, or otto's posterior after "
                                   "a first hit at the observer")
    #: ``(width, height)`` of the grid, set by ``build`` (the source draws need it).
    domain: tuple = grid_domain()

    type_name = "poisson"
    Params = PoissonPlumeParams

    @classmethod
    def validate(cls, resolved: dict[str, Any], grid: Grid, prefix: str) -> dict[str, Any]:
        """``source`` is only accepted with ``source_mode="fixed"`` (where it
        defaults to the grid centre; in the other modes the source is drawn
        and the setting resolves to None); ``observer`` is the grid centre
        by default with ``source_mode="otto"`` and None (unused) otherwise."""
        mode = resolved["source_mode"]
        if mode != "fixed" and resolved["source"] is not None:
            raise ValidationError.for_parameter(
                f"{prefix}.source", list(resolved["source"]),
                f"None (no fixed source) with source_mode={mode!r}: the source is drawn per "
                "episode; set source_mode='fixed' to fix it")
        centre = grid_centre(grid)
        source = (resolved["source"] or centre) if mode == "fixed" else None
        observer = (resolved["observer"] or centre) if mode == "otto" else None
        return {**resolved, "source": source, "observer": observer}

    # -- the law ---------------------------------------------------------------
    def windy_length(self, params: PoissonPlumeParams) -> jax.Array:
        """f32[], ``λ̄ = sqrt(τ / (1 + V̄² τ / 4))``, cells."""
        return jnp.sqrt(params.tau / (1.0 + jnp.square(params.wind_speed) * params.tau / 4.0))

    def windy_exponent(self, displacement: jax.Array, params: PoissonPlumeParams) -> jax.Array:
        """f32[...], ``V̄ Δx / 2 - d / λ̄`` (``d`` floored), computed without
        cancellation as ``-κ d - (V̄/2)(d - Δx)`` with
        ``κ = 1/λ̄ - V̄/2 = (1/τ) / (sqrt(1/τ + V̄²/4) + V̄/2) >= 0`` and
        ``d - Δx = c² / (d + Δx)`` downwind (``c`` the crosswind offset): far
        downwind both ``V̄ Δx / 2`` and ``d / λ̄`` are large and nearly equal,
        and their float32 difference would lose most of its digits."""
        displacement = jnp.asarray(displacement, jnp.float32)
        theta = params.wind_direction
        cos, sin = jnp.cos(theta), jnp.sin(theta)
        along = displacement[..., 0] * cos + displacement[..., 1] * sin
        across = -displacement[..., 0] * sin + displacement[..., 1] * cos
        raw = jnp.sqrt(jnp.square(along) + jnp.square(across))
        d = jnp.maximum(raw, MIN_DISTANCE)
        half_v = params.wind_speed / 2.0
        inv_tau = 1.0 / params.tau
        kappa = inv_tau / (jnp.sqrt(inv_tau + jnp.square(half_v)) + half_v)
        behind = jnp.where(along >= 0.0,
                           jnp.square(across) / jnp.maximum(raw + along, 1e-30), raw - along)
        return -kappa * d - half_v * ((d - raw) + behind)

    def hit_rate(self, displacement: jax.Array, params: PoissonPlumeParams) -> jax.Array:
        """f32[...], ``μ`` at displacements ``point - source`` f32[..., 2]
        (no grid masking)."""
        displacement = jnp.asarray(displacement, jnp.float32)
        d = jnp.maximum(norm(displacement), MIN_DISTANCE)
        if self.model == "isotropic":
            lam = params.lambda_over_dx
            mu = params.r_dt / jnp.log(2.0 * lam) * k0(d / lam)
        else:
            mu = params.r_bar / d * jnp.exp(self.windy_exponent(displacement, params))
        return jnp.maximum(mu, 0.0).astype(jnp.float32)

    # -- state -------------------------------------------------------------------
    def _grid(self) -> Grid:
        return domain_grid(self, "plume")

    def posterior_table(self, params: PoissonPlumeParams) -> jax.Array:
        """f32[H*W]: cumulative weights ``1 - exp(-μ(observer - cell))`` over
        the cells in row-major ``(y, x)`` order, zero weight at the
        observer's own cell."""
        grid = self._grid()
        cells = cell_centres(grid).reshape(-1, 2)
        observer = jnp.round(jnp.asarray(params.observer, jnp.float32))
        weights = -jnp.expm1(-self.hit_rate(observer - cells, params))
        weights = jnp.where(jnp.all(cells == observer, axis=-1), 0.0, weights)
        return jnp.cumsum(weights).astype(jnp.float32)

    def _draw_source(self, key: jax.Array, table: jax.Array, params: PoissonPlumeParams
                     ) -> jax.Array:
        grid = self._grid()
        if self.source_mode == "fixed":
            return jnp.asarray(params.source, jnp.float32)
        if self.source_mode == "uniform":
            index = jax.random.randint(key, (), 0, grid.width * grid.height)
        else:
            u = jax.random.uniform(key, (), jnp.float32) * table[-1]
            index = jnp.searchsorted(table, u, side="right")
            index = jnp.minimum(index, table.shape[0] - 1)
        return jnp.stack([index % grid.width, index // grid.width]).astype(jnp.float32)

    def init(self, key: jax.Array, params: PoissonPlumeParams) -> PoissonPlumeState:
        """This episode's source (and, for ``"otto"``, the posterior table)."""
        if self.source_mode == "otto":
            table = self.posterior_table(params)
        else:
            table = jnp.zeros((0,), jnp.float32)
        return PoissonPlumeState(source=self._draw_source(key, table, params), table=table)

    def reinit(self, key: jax.Array, plume_state: PoissonPlumeState,
               params: PoissonPlumeParams) -> PoissonPlumeState:
        """A new source for the next episode from the stored table: no
        grid-sized work."""
        return plume_state.replace(source=self._draw_source(key, plume_state.table, params))

    def sharing_conflict(self) -> str | None:
        """None with ``source_mode="fixed"``; otherwise the source is drawn
        anew at each episode start, which would move the other agents'
        goal in the middle of their episodes."""
        if self.source_mode == "fixed":
            return None
        return (f"its source is drawn anew at each episode start (source_mode="
                f"{self.source_mode!r}), which would move the goal in the middle of the other "
                f"agents' episodes; use source_mode='fixed'")

    def advance(self, key: jax.Array, plume_state: PoissonPlumeState,
                params: PoissonPlumeParams) -> PoissonPlumeState:
        """The law does not change within an episode."""
        return plume_state

    # -- readings ------------------------------------------------------------------
    def source_location(self, plume_state: PoissonPlumeState, params: PoissonPlumeParams
                        ) -> jax.Array:
        """f32[2], this episode's source cell."""
        return plume_state.source

    def concentration(self, plume_state: PoissonPlumeState, points: jax.Array, grid: Grid,
                      params: PoissonPlumeParams) -> jax.Array:
        """f32[...], the mean hits per step ``μ`` at points f32[..., 2]; 0
        outside the grid."""
        points = jnp.asarray(points, jnp.float32)
        mu = self.hit_rate(points - plume_state.source, params)
        return jnp.where(grid.contains(points), mu, 0.0).astype(jnp.float32)

    def wind(self, plume_state: PoissonPlumeState, points: jax.Array,
             params: PoissonPlumeParams) -> jax.Array:
        """f32[..., 2]: ``V̄`` toward ``wind_direction`` (windy), calm (isotropic)."""
        if self.model == "isotropic":
            return broadcast_wind(jnp.zeros((2,), jnp.float32), points)
        return constant_wind(params.wind_speed, params.wind_direction, points)

