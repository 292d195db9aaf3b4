"""The self-advected 2-D wind field of Farrell et al. (2002), as their
reference implementation pompy (``WindModel``) computes it
(``wind_model="field"``).

The wind ``u(x, t) = (u, v)`` is solved on ``nodes = (nx, ny)`` nodes that
span the domain ``[0, W-1] x [0, H-1]`` (node ``[j, i]`` at
``(i hx, j hy)``) plus a ring of boundary nodes one spacing outside it:

- **Boundary.** The ring holds the large-scale wind ``U(t)`` (of
  :mod:`plume_jax.plumes.wind`; any ``wind_kind``) plus coloured noise: at
  each of the ring's four corners, each component is an independent
  second-order filter ``ẍ + 2ζω ẋ + ω² x = g ξ`` of stationary std
  ``wind_gust_std`` (``σ``), damping ``wind_gust_damping`` (``ζ``) and
  natural frequency ``wind_gust_bandwidth`` (``ω``, radians per step),
  updated exactly (:func:`plume_jax.plumes.wind_field.noise_transition`);
  along each edge, the linear interpolation of its two corners.
- **Interior.** ``∂u/∂t = -(u·∇) u + ½ K ∇² u`` with
  ``K = wind_gust_diffusivity`` (cells² per step): the field is carried by
  itself. The nonlinear term turns part of the boundary's gust energy into
  a faster mean flow (about ``σ² / 2|U|`` more than ``U`` at Farrell's
  settings: a mean wind of 1.15 cells/step for ``U = 1``, ``σ = 1.6``) and
  keeps cross-wind gusts strong deep inside the domain.
- **Readings.** At points: the not-a-knot bicubic spline through the
  interior nodes (:mod:`plume_jax.plumes.spline`; pompy's
  ``RectBivariateSpline``), with points outside the domain read at the
  nearest point of its edge.

Numerics (units: cells and steps). ``substeps`` forward-Euler steps of
``dt = 1 / substeps`` per env step with centred differences, pompy's scheme,
with one change that keeps the field bounded. pompy's centred differences
are not: where gusts make the cell Reynolds number ``|u| h / (½K)`` large
(above 2 the scheme loses its maximum principle; at Farrell's settings
``σ = 1.6``, ``K = 10`` on 8-cell nodes gusts reach 4-6 and the number 6-10)
grid-scale wiggles grow, and pompy's own field blows up (to overflow) in
about one run in four within 8000 steps, at time steps of 0.1 and 0.025
alike; the same scheme here blew up in every run at one step per env step
and in over a third of runs at ten. Here the diffusivity of each node and axis is
raised from ``½ K`` to ``|u| h / 4`` where that is larger, capping the cell
Reynolds number at :data:`CELL_REYNOLDS_CAP` = 4 (at 2 the scheme would be
monotone but its extra diffusion takes 10 % off the mean wind). With 4
substeps this reproduces pompy's runs that stay finite: mean wind within
2 % and cross-wind gust std within 3 % at 10-100 cells downwind of the
source (docs/plumes.md), and no run of 64 x 8500 steps diverged (the
largest speed in them was 11 cells per step). The update is stable while
``|U|² dt <= K`` and ``K dt (1/hx² + 1/hy²) <= 1`` (``FilamentPlume``
checks both when built) and the wind's Courant number ``|u| dt / h`` is at
most 1/2 (then the raised diffusivity keeps its diffusion number in range
too); each component is clipped to that speed, ``min(hx, hy) / (2 dt)``
(15.8 cells per step at the presets' 8-cell nodes and 4 substeps,
never reached in the validation runs), so no accepted setting, however
gusty, makes the field diverge.
pompy's noise update is Euler-Maruyama, whose amplitude depends on its
step and which diverges at one step per time unit for ``ζ = 0.1,
ω = 0.2``; here the noise is exact at any step, the law pompy's approaches
as its step shrinks.

Cost per env step: the field update is ``O(substeps · nx · ny)`` (a few
hundred nodes); a reading at ``P`` points is ``O(nx · ny · (nx + ny) + P)``
(the spline's slopes at every node, then a gather of each point's cell).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.plumes.spline import MIN_NODES, bicubic_at
from plume_jax.plumes.wind_field import WindField, noise_transition

#: The largest cell Reynolds number ``|u| h / ν`` the interior update allows
#: (per node and axis, ``ν`` is raised above ``½ K`` where it would be larger).
CELL_REYNOLDS_CAP = 4.0


@chex.dataclass(frozen=True)
class AdvectedState(Pytree):
    """Attributes:
        velocity: f32[2, ny + 2, nx + 2], the wind components ``u, v`` at
            the nodes, cells per step: ``[:, j + 1, i + 1]`` is interior node
            ``(i hx, j hy)``; rows and columns 0 and -1 are the boundary ring
            (components first: the update runs along rows of nodes).
        noise: f32[2, 2, 2, 2], the ring corners' filter states
            ``[corner y (south, north), corner x (west, east), component,
            (value / σ, rate / (σ ω))]``, standard normal when stationary.
    """

    velocity: jax.Array
    noise: jax.Array


@dataclasses.dataclass(frozen=True)
class AdvectedField:
    """Pure dynamics of the self-advected wind on ``nodes = (nx, ny)``
    interior nodes spanning a ``domain = (W, H)`` grid (see the module
    docstring). ``params`` is the owning plume's params, carrying the
    ``wind_gust_*`` settings."""

    nodes: tuple[int, int]
    domain: tuple[int, int]
    substeps: int = 1

    @classmethod
    def for_grid(cls, domain: tuple[int, int], spacing: float, substeps: int = 1
                 ) -> AdvectedField:
        """The field with interior nodes at most ``spacing`` cells apart over
        ``domain`` (at least :data:`~plume_jax.plumes.spline.MIN_NODES` per
        axis, the fewest a cubic spline takes), updated in ``substeps``
        explicit steps per env step."""
        nodes = WindField.for_grid(domain, spacing).nodes
        nx, ny = (max(MIN_NODES, int(n)) for n in nodes)
        return cls(nodes=(nx, ny), domain=(int(domain[0]), int(domain[1])),
                   substeps=substeps)

    @property
    def _grid(self) -> WindField:
        return WindField(nodes=self.nodes, domain=self.domain)

    @property
    def spacing(self) -> tuple[float, float]:
        """``(hx, hy)``, the distance between neighbouring nodes, cells."""
        return self._grid.spacing

    @property
    def max_diffusivity(self) -> float:
        """The largest ``K`` the explicit update is stable for:
        ``substeps / (1/hx² + 1/hy²)``."""
        return self.substeps * self._grid.max_diffusivity

    def check_stable(self, diffusivity: float, speed: float, name: str) -> None:
        """Raise ``ValidationError`` (naming ``name``) unless
        ``speed² / substeps <= diffusivity <= max_diffusivity``."""
        low, high = speed**2 / self.substeps, self.max_diffusivity
        if not low <= diffusivity <= high:
            hx, hy = self.spacing
            raise ValidationError.for_parameter(
                name, diffusivity,
                f"a value in [wind_speed^2 / substeps, substeps / (1/hx^2 + 1/hy^2)] = "
                f"[{low:.4g}, {high:.4g}] cells^2 per step, where the explicit update of the "
                f"wind field (nodes {hx:.3g} x {hy:.3g} cells apart, {self.substeps} substeps "
                f"per step) is stable; more wind_field_substeps or a larger wind_field_spacing "
                f"allow more diffusivity")

    def node_positions(self) -> jax.Array:
        """f32[ny, nx, 2], the ``(x, y)`` of every interior node, cells."""
        return self._grid.node_positions()

    # -- dynamics ------------------------------------------------------------
    def _ring(self, noise: jax.Array, mean_velocity: jax.Array, params: Any,
              limit: float = float("inf")) -> jax.Array:
        """f32[2, ny + 2, nx + 2]: the bilinear interpolation of the corner
        winds ``U + σ z``, each clipped to ``±limit`` (on the ring: linear
        along each edge)."""
        nx, ny = self.nodes
        corners = jnp.clip(jnp.asarray(mean_velocity, jnp.float32)[:, None, None] + jnp.moveaxis(
            params.wind_gust_std * noise[..., 0], -1, 0), -limit, limit)  # [component, y, x]
        fx = jnp.linspace(0.0, 1.0, nx + 2, dtype=jnp.float32)
        fy = jnp.linspace(0.0, 1.0, ny + 2, dtype=jnp.float32)[:, None]
        south = corners[:, :1, :1] * (1.0 - fx) + corners[:, :1, 1:] * fx  # [2, 1, nx + 2]
        north = corners[:, 1:, :1] * (1.0 - fx) + corners[:, 1:, 1:] * fx
        return (south * (1.0 - fy) + north * fy).astype(jnp.float32)

    def init(self, key: jax.Array, params: Any, mean_velocity: jax.Array) -> AdvectedState:
        """Corner filters drawn from their stationary law; every node the wind
        ``mean_velocity`` f32[2] plus their interpolation (the plume's
        warm-up lets the interior develop)."""
        noise = jax.random.normal(key, (2, 2, 2, 2), jnp.float32)
        return AdvectedState(velocity=self._ring(noise, mean_velocity, params), noise=noise)

    def advance(self, key: jax.Array, state: AdvectedState, mean_velocity: jax.Array,
                params: Any) -> AdvectedState:
        """One env step, in ``substeps`` substeps of ``dt = 1 / substeps``:
        the corner filters move on, the ring takes ``U`` plus their new values
        (``U = mean_velocity`` f32[2]), then the interior takes one explicit
        step of ``∂u/∂t = -(u·∇) u + ½ K ∇² u``."""
        dt = 1.0 / self.substeps
        phi, chol = noise_transition(params.wind_gust_damping, params.wind_gust_bandwidth * dt)
        xi = jax.random.normal(key, (self.substeps, *state.noise.shape), jnp.float32)
        for x in xi:  # unrolled: a handful of small updates, no loop in the step
            state = self._substep(state, x, phi, chol, dt, mean_velocity, params)
        return state

    def _substep(self, state: AdvectedState, xi: jax.Array, phi: jax.Array, chol: jax.Array,
                 dt: float, mean_velocity: jax.Array, params: Any) -> AdvectedState:
        noise = state.noise @ phi.T + xi @ chol.T
        hx, hy = self.spacing
        # the fastest wind the nodes carry stably: a Courant number of 1/2
        limit = min(hx, hy) / (2.0 * dt)
        ring = self._ring(noise, mean_velocity, params, limit)
        w = state.velocity
        is_ring = jnp.ones(w.shape[1:], bool).at[1:-1, 1:-1].set(False)
        w = jnp.where(is_ring, ring, w)
        centre = w[:, 1:-1, 1:-1]
        east, west = w[:, 1:-1, 2:], w[:, 1:-1, :-2]
        north, south = w[:, 2:, 1:-1], w[:, :-2, 1:-1]
        advection = (centre[:1] * (east - west) / (2.0 * hx)
                     + centre[1:] * (north - south) / (2.0 * hy))
        # ½K, raised per node and axis to keep the cell Reynolds number |u| h / ν
        # at most CELL_REYNOLDS_CAP (see the module docstring)
        half_k = 0.5 * params.wind_gust_diffusivity
        nu_x = jnp.maximum(half_k, hx * jnp.abs(centre[:1]) / CELL_REYNOLDS_CAP)
        nu_y = jnp.maximum(half_k, hy * jnp.abs(centre[1:]) / CELL_REYNOLDS_CAP)
        diffusion = (nu_x * (east - 2.0 * centre + west) / hx**2
                     + nu_y * (north - 2.0 * centre + south) / hy**2)
        interior = jnp.clip(centre + dt * (diffusion - advection), -limit, limit)
        velocity = w.at[:, 1:-1, 1:-1].set(interior)
        return AdvectedState(velocity=velocity.astype(jnp.float32),
                             noise=noise.astype(jnp.float32))

    # -- readings ------------------------------------------------------------
    def velocity(self, state: AdvectedState, points: jax.Array,
                 mean_velocity: jax.Array) -> jax.Array:
        """f32[..., 2]: the wind at points f32[..., 2] (cells): the bicubic
        spline through the interior nodes (``mean_velocity`` is already in
        the field and unused; it is here for the interface
        :class:`~plume_jax.plumes.wind_field.WindField` shares)."""
        del mean_velocity
        hx, hy = self.spacing
        points = jnp.asarray(points, jnp.float32)
        interior = jnp.moveaxis(state.velocity[:, 1:-1, 1:-1], 0, -1)  # [ny, nx, 2]
        return bicubic_at(interior, points[..., 0] / hx, points[..., 1] / hy)
