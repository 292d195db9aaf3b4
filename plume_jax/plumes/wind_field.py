"""The linearised travelling-gust wind field (``wind_model="linear_field"``):
a faster stand-in for the self-advected field of Farrell et al. (2002)
(:mod:`plume_jax.plumes.advected_field`, ``wind_model="field"``), and the
pieces both share (the boundary noise, the node layout, the settings).

The air velocity is the large-scale wind ``U(t)`` of
:mod:`plume_jax.plumes.wind` (uniform; any ``wind_kind``) plus a *gust*
field ``w(x, t)`` solved on a coarse grid of nodes spanning the domain:

- **Boundary.** At each of the four corners of the domain, each velocity
  component of ``w`` is an independent coloured noise: the output of
  Farrell's second-order filter ``ẍ + 2ζω ẋ + ω² x = g ξ(t)`` driven by
  white noise ``ξ``. Its stationary standard deviation is
  ``wind_gust_std`` (``σ``; the gain is ``g = 2σ √(ζ ω³)``), its damping
  ratio ``wind_gust_damping`` (``ζ``), its undamped natural frequency
  ``wind_gust_bandwidth`` (``ω``, radians per step). Along each edge the
  boundary values are the linear interpolation of its two corners.
- **Interior.** ``∂w/∂t = -(U·∇) w + ½ K ∇² w`` with
  ``K = wind_gust_diffusivity`` (cells² per step; Farrell's ``½ K``
  convention): the gusts are carried across the domain by the large-scale
  wind and smoothed as they go, so a gust that enters upwind travels with
  the puffs. Farrell et al. advect the field by itself (``(u·∇) u``, with
  ``u = U + w``; ``wind_model="field"``); advecting the gusts by ``U`` is
  the linearisation of their equation for gusts small against the mean
  wind. It keeps the configured mean wind exactly, where the self-advection
  adds about ``σ² / 2|U|`` (1.15 cells/step instead of 1 at Farrell's
  settings), and its interior cross-wind gusts are weaker (about half
  pompy's at Farrell's settings; see docs/plumes.md); it lets the
  meandering and switching wind kinds carry the gusts. Readings are
  bilinear, where the self-advected field reads a bicubic spline.

Numerics (units: cells and steps; one update per env step). The noise is
updated with the exact discretisation of the filter (its transition matrix
``exp(A)`` in closed form and the covariance that keeps its stationary law),
so its variance is ``σ²`` for any step, unlike an Euler update (Farrell's,
and pompy's) whose amplitude depends on the step and which at one step per
time unit diverges for Farrell's ``ζ = 0.1, ω = 0.2``. The interior uses
Farrell's explicit scheme (forward Euler, centred differences), stable when
``|U|² <= K <= 1 / (1/hx² + 1/hy²)`` with ``hx, hy`` the node spacings
(``FilamentPlume`` checks it when built; a sweep that leaves the range gets
a diverging field). Readings at points are bilinear in the nodes; points
outside the domain read the nearest boundary value.

Cost per step: ``O(nodes)`` for the field (a few hundred nodes) plus four
gathers per point read.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.settings import MAX_LENGTH, Checker, choice, integer, real, setting

#: The values of the static ``wind_model`` setting.
WIND_MODELS = ("uniform", "field", "linear_field")

#: ``name -> (checker, doc)`` of the wind-field settings: ``wind_model``,
#: ``wind_field_spacing`` and ``wind_field_substeps`` are static (fields of
#: the plume), the others dynamic (fields of its params).
_FIELD_DECLARATIONS: dict[str, tuple[Checker, str]] = {
    "wind_model": (choice(WIND_MODELS),
                   "uniform (the wind of wind_kind everywhere), field (a 2-D wind field driven "
                   "at the boundary by that wind plus coloured-noise gusts and advected by "
                   "itself, Farrell et al. 2002, as pompy computes it) or linear_field (that wind "
                   "plus gusts carried by it: the field linearised, faster, weaker gusts)"),
    "wind_field_spacing": (real(low=1.0, high=MAX_LENGTH),
                           f"field, linear_field: largest distance between the wind field's "
                           f"nodes, cells, in [1, {MAX_LENGTH:g}] (at most one node per cell; "
                           f"Farrell et al.: 5-10 m)"),
    "wind_field_substeps": (integer(low=1, high=64),
                            "field: explicit updates of the wind field per step, in [1, 64] "
                            "(linear_field: always 1)"),
    "wind_gust_std": (real(low=0.0, high=MAX_LENGTH),
                      f"field, linear_field: stationary std of each velocity component of the "
                      f"boundary noise at the corners, cells per step, in [0, {MAX_LENGTH:g}]"),
    "wind_gust_damping": (real(low=0.0, high=100.0, low_inclusive=False),
                          "field, linear_field: damping ratio of the boundary noise filter, in "
                          "(0, 100]"),
    "wind_gust_bandwidth": (real(low=0.0, high=math.pi, low_inclusive=False),
                            "field, linear_field: undamped natural frequency of the boundary "
                            "noise filter, radians per step, in (0, pi]"),
    "wind_gust_diffusivity": (real(low=0.0, high=MAX_LENGTH),
                              "field, linear_field: diffusivity K of the wind field (field: "
                              "du/dt = -(u.grad) u + K/2 lap u; linear_field: dw/dt = "
                              "-(U.grad) w + K/2 lap w), cells^2 per step; stable in "
                              "[wind_speed^2, 1 / (1/hx^2 + 1/hy^2)] for node spacings hx, hy"),
}

#: Names of the gust-field settings.
FIELD_SETTINGS = tuple(_FIELD_DECLARATIONS)


def field_setting(name: str, default: Any, doc: str | None = None) -> Any:
    """The field declaring gust-field setting ``name`` (one of
    :data:`FIELD_SETTINGS`) with the given default: a plume declares
    ``wind_model``, ``wind_field_spacing`` and ``wind_field_substeps`` as its
    own fields and the others as fields of its params."""
    check, standard_doc = _FIELD_DECLARATIONS[name]
    return setting(default, check, doc=standard_doc if doc is None else doc)


@chex.dataclass(frozen=True)
class GustState(Pytree):
    """Attributes:
        gusts: f32[ny, nx, 2], the gust velocity ``(wx, wy)`` at the nodes
            (the wind minus the large-scale wind), cells per step; node
            ``[j, i]`` sits at ``(i hx, j hy)``.
        noise: f32[2, 2, 2, 2], the corner filters' states
            ``[corner y (south, north), corner x (west, east), component,
            (value / σ, rate / (σ ω))]``: dimensionless, standard normal in
            the stationary law.
    """

    gusts: jax.Array
    noise: jax.Array


def noise_transition(damping: jax.Array, bandwidth: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(Φ, L)``, f32[2, 2] each: one step of the boundary filter in the
    normalised coordinates ``z = (x / σ, ẋ / (σ ω))``, ``z' = Φ z + L ξ``
    with ``ξ`` standard normal, exact for the continuous filter.

    ``Φ = D⁻¹ exp(A) D`` with ``A = [[0, 1], [-ω², -2ζω]]``, ``D = diag(1, ω)``,
    and ``exp(A) = e^{μ} (C I + S (A - μ I))`` with ``μ = -ζω``,
    ``δ² = ω² (ζ² - 1)``, ``C = cosh δ``, ``S = sinh δ / δ`` (``cos`` and
    ``sin β / β``, ``β² = -δ²``, when underdamped). In these coordinates the
    stationary covariance is the identity, so ``L`` is the Cholesky factor
    of ``I - Φ Φᵀ``.
    """
    zeta = jnp.asarray(damping, jnp.float32)
    omega = jnp.asarray(bandwidth, jnp.float32)
    mu = -zeta * omega
    q = jnp.square(omega) * (jnp.square(zeta) - 1.0)
    tiny = jnp.float32(1e-30)
    beta = jnp.sqrt(jnp.maximum(-q, tiny))
    gamma = jnp.sqrt(jnp.maximum(q, tiny))
    # e^μ C and e^μ S. Strongly overdamped (δ >= 1), as the two decaying modes
    # e^{μ ± δ}: e^μ and cosh δ alone under- and overflow there (ζ ω of 100s),
    # and the slow rate μ + δ = -ω / (ζ + √(ζ² - 1)) is written without the
    # cancellation. Below δ = 1 (then μ > -1 - π) the direct form is exact and
    # keeps the critically damped limit S -> 1.
    decay = jnp.exp(mu)
    slow = jnp.exp(-omega / (zeta + jnp.sqrt(jnp.maximum(jnp.square(zeta) - 1.0, 0.0))))
    fast = jnp.exp(mu - gamma)
    strong = gamma >= 1.0
    safe_gamma = jnp.minimum(gamma, 1.0)
    c = jnp.where(q < 0, decay * jnp.cos(beta),
                  jnp.where(strong, 0.5 * (slow + fast), decay * jnp.cosh(safe_gamma)))
    s = jnp.where(q < 0, decay * jnp.sin(beta) / beta,
                  jnp.where(strong, 0.5 * (slow - fast) / gamma,
                            decay * jnp.sinh(safe_gamma) / safe_gamma))
    phi = jnp.stack([jnp.stack([c - mu * s, omega * s]),
                     jnp.stack([-omega * s, c + mu * s])])
    q11 = 1.0 - (jnp.square(phi[0, 0]) + jnp.square(phi[0, 1]))
    q12 = -(phi[0, 0] * phi[1, 0] + phi[0, 1] * phi[1, 1])
    q22 = 1.0 - (jnp.square(phi[1, 0]) + jnp.square(phi[1, 1]))
    l11 = jnp.sqrt(jnp.maximum(q11, tiny))
    l21 = q12 / l11
    l22 = jnp.sqrt(jnp.maximum(q22 - jnp.square(l21), 0.0))
    chol = jnp.stack([jnp.stack([l11, jnp.zeros_like(l11)]), jnp.stack([l21, l22])])
    return phi.astype(jnp.float32), chol.astype(jnp.float32)


def node_counts(domain: tuple[int, int], spacing: float) -> tuple[int, int]:
    """``(nx, ny)``: nodes per axis so that neighbours are at most
    ``spacing`` cells apart over ``[0, W-1] x [0, H-1]``, at least 3 (one
    interior node)."""
    nx, ny = (max(3, math.ceil((side - 1) / spacing - 1e-9) + 1) for side in domain)
    return nx, ny


@dataclasses.dataclass(frozen=True)
class WindField:
    """Pure dynamics of the gust field on ``nodes = (nx, ny)`` nodes spanning
    a ``domain = (W, H)`` grid (see the module docstring). ``params`` is the
    owning plume's params: it must carry the dynamic settings of
    :data:`FIELD_SETTINGS` (``wind_gust_*``)."""

    nodes: tuple[int, int]
    domain: tuple[int, int]

    @classmethod
    def for_grid(cls, domain: tuple[int, int], spacing: float) -> "WindField":
        """The field with nodes at most ``spacing`` cells apart over ``domain``."""
        width, height = domain
        return cls(nodes=node_counts(domain, spacing), domain=(width, height))

    @property
    def spacing(self) -> tuple[float, float]:
        """``(hx, hy)``, the distance between neighbouring nodes, cells."""
        hx, hy = ((side - 1) / (n - 1) for side, n in zip(self.domain, self.nodes))
        return hx, hy

    @property
    def max_diffusivity(self) -> float:
        """The largest ``K`` the explicit update is stable for: ``1 / (1/hx² + 1/hy²)``."""
        hx, hy = self.spacing
        return 1.0 / (1.0 / hx**2 + 1.0 / hy**2)

    def check_stable(self, diffusivity: float, speed: float, name: str) -> None:
        """Raise ``ValidationError`` (naming ``name``) unless
        ``speed² <= diffusivity <= max_diffusivity``."""
        high = self.max_diffusivity
        if not speed**2 <= diffusivity <= high:
            hx, hy = self.spacing
            raise ValidationError.for_parameter(
                name, diffusivity,
                f"a value in [wind_speed^2, 1 / (1/hx^2 + 1/hy^2)] = [{speed**2:.4g}, {high:.4g}] "
                f"cells^2 per step, where the explicit update of the gust field (nodes "
                f"{hx:.3g} x {hy:.3g} cells apart) is stable; a larger wind_field_spacing "
                f"allows more diffusivity and faster winds")

    # -- dynamics --------------------------------------------------------------
    def _boundary(self, noise: jax.Array, params: Any) -> jax.Array:
        """f32[ny, nx, 2]: the bilinear interpolation of the corner values
        ``σ z`` over every node (on the boundary ring: linear along each edge)."""
        nx, ny = self.nodes
        corners = params.wind_gust_std * noise[..., 0]  # [2 (y), 2 (x), 2 (component)]
        fx = jnp.linspace(0.0, 1.0, nx, dtype=jnp.float32)[None, :, None]
        fy = jnp.linspace(0.0, 1.0, ny, dtype=jnp.float32)[:, None, None]
        south = corners[0, 0] * (1.0 - fx) + corners[0, 1] * fx
        north = corners[1, 0] * (1.0 - fx) + corners[1, 1] * fx
        return (south * (1.0 - fy) + north * fy).astype(jnp.float32)

    def init(self, key: jax.Array, params: Any, mean_velocity: jax.Array | None = None
             ) -> GustState:
        """Corner filters drawn from their stationary law; the gust field
        their bilinear interpolation (the plume's warm-up then lets the
        interior develop). ``mean_velocity`` is unused (the gusts ride on
        it): it is here for the interface
        :class:`~plume_jax.plumes.advected_field.AdvectedField` shares."""
        noise = jax.random.normal(key, (2, 2, 2, 2), jnp.float32)
        return GustState(gusts=self._boundary(noise, params), noise=noise)

    def advance(self, key: jax.Array, state: GustState, mean_velocity: jax.Array,
                params: Any) -> GustState:
        """One step: the corner filters move on, the boundary ring takes
        their new values, then the interior takes one explicit step of
        ``∂w/∂t = -(U·∇) w + ½ K ∇² w`` with ``U = mean_velocity`` f32[2]."""
        phi, chol = noise_transition(params.wind_gust_damping, params.wind_gust_bandwidth)
        xi = jax.random.normal(key, state.noise.shape, jnp.float32)
        noise = state.noise @ phi.T + xi @ chol.T
        boundary = self._boundary(noise, params)
        w = state.gusts
        hx, hy = self.spacing
        ring = jnp.ones(w.shape[:2], bool).at[1:-1, 1:-1].set(False)[..., None]
        w = jnp.where(ring, boundary, w)
        centre = w[1:-1, 1:-1]
        east, west = w[1:-1, 2:], w[1:-1, :-2]
        north, south = w[2:, 1:-1], w[:-2, 1:-1]
        u = jnp.asarray(mean_velocity, jnp.float32)
        advection = u[0] * (east - west) / (2.0 * hx) + u[1] * (north - south) / (2.0 * hy)
        laplacian = (east - 2.0 * centre + west) / hx**2 + (north - 2.0 * centre + south) / hy**2
        interior = centre - advection + 0.5 * params.wind_gust_diffusivity * laplacian
        gusts = w.at[1:-1, 1:-1].set(interior)
        return GustState(gusts=gusts.astype(jnp.float32), noise=noise.astype(jnp.float32))

    # -- readings --------------------------------------------------------------
    def at(self, state: GustState, points: jax.Array) -> jax.Array:
        """f32[..., 2]: the gust velocity at points f32[..., 2] (cells),
        bilinear in the nodes; outside the domain, the nearest boundary value."""
        nx, ny = self.nodes
        hx, hy = self.spacing
        points = jnp.asarray(points, jnp.float32)
        sx = jnp.clip(points[..., 0] / hx, 0.0, nx - 1.0)
        sy = jnp.clip(points[..., 1] / hy, 0.0, ny - 1.0)
        i0 = jnp.minimum(jnp.floor(sx), nx - 2.0)
        j0 = jnp.minimum(jnp.floor(sy), ny - 2.0)
        fx, fy = (sx - i0)[..., None], (sy - j0)[..., None]
        flat = state.gusts.reshape(-1, 2)
        base = (j0 * nx + i0).astype(jnp.int32)
        v00, v01 = flat[base], flat[base + 1]
        v10, v11 = flat[base + nx], flat[base + nx + 1]
        out = (1.0 - fy) * ((1.0 - fx) * v00 + fx * v01) + fy * ((1.0 - fx) * v10 + fx * v11)
        return out.astype(jnp.float32)

    def velocity(self, state: GustState, points: jax.Array, mean_velocity: jax.Array
                 ) -> jax.Array:
        """f32[..., 2]: the wind at points f32[..., 2]: ``mean_velocity``
        f32[2] plus the gusts there (:meth:`at`)."""
        return (jnp.asarray(mean_velocity, jnp.float32) + self.at(state, points)).astype(
            jnp.float32)

    def node_positions(self) -> jax.Array:
        """f32[ny, nx, 2], the ``(x, y)`` of every node, cells."""
        nx, ny = self.nodes
        hx, hy = self.spacing
        ys, xs = jnp.meshgrid(jnp.arange(ny, dtype=jnp.float32) * hy,
                              jnp.arange(nx, dtype=jnp.float32) * hx, indexing="ij")
        return jnp.stack([xs, ys], axis=-1)
