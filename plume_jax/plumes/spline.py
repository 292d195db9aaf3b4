"""Interpolating cubic splines on evenly spaced nodes.

The not-a-knot interpolating cubic spline through values ``f_0 .. f_{n-1}``
at nodes ``0, 1, .., n-1`` (index units) is linear in the values: on the
interval ``[k, k+1]`` it is ``Σ_p t^p Σ_i C[k, p, i] f_i`` with
``t = s - k``; :func:`cardinal_coefficients` computes ``C`` once (numpy,
at trace time; it depends only on ``n``). On each interval the spline is
the cubic Hermite interpolant of its values and slopes at the two ends, and
a tensor-product spline on each cell that of its values, slopes and cross
slopes at the four corners; so :func:`bicubic_at` makes one pass over the
nodes (the slopes ``D f``, ``f Dᵀ``, ``D f Dᵀ`` with :func:`slope_matrix`
``D``) and then reads each point from its cell's four corners.

This is the spline that FITPACK's ``regrid`` (scipy's
``RectBivariateSpline`` with its defaults ``kx = ky = 3, s = 0``) fits: with
``s = 0`` its interior knots are the nodes except the second and the
second-to-last, which is the not-a-knot condition.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: The fewest nodes a cubic spline needs (FITPACK: more nodes than its degree).
MIN_NODES = 4


@functools.cache
def cardinal_coefficients(n: int) -> np.ndarray:
    """f32[n - 1, 4, n]: ``C[k, p, i]``, the coefficient of ``t^p`` on the
    interval ``[k, k + 1]`` contributed by the value at node ``i``, for the
    not-a-knot cubic spline on ``n >= 4`` nodes spaced 1 apart.

    Second derivatives ``M`` solve ``M_{k-1} + 4 M_k + M_{k+1} = 6 (f_{k-1} -
    2 f_k + f_{k+1})`` inside and ``M_0 - 2 M_1 + M_2 = 0``,
    ``M_{n-3} - 2 M_{n-2} + M_{n-1} = 0`` (a continuous third derivative at
    the second and second-to-last nodes); then on ``[k, k+1]``
    ``S = f_k + t (f_{k+1} - f_k - M_k / 3 - M_{k+1} / 6) + t² M_k / 2 +
    t³ (M_{k+1} - M_k) / 6``."""
    if n < MIN_NODES:
        raise ValueError(f"a cubic spline needs at least {MIN_NODES} nodes, got {n}")
    lhs = np.zeros((n, n))
    rhs = np.zeros((n, n))
    lhs[0, :3] = (1.0, -2.0, 1.0)
    lhs[-1, -3:] = (1.0, -2.0, 1.0)
    for k in range(1, n - 1):
        lhs[k, k - 1:k + 2] = (1.0, 4.0, 1.0)
        rhs[k, k - 1:k + 2] = (6.0, -12.0, 6.0)
    second = np.linalg.solve(lhs, rhs)  # [n (M_k), n (f_i)]
    values = np.eye(n)
    seg = np.arange(n - 1)
    coeffs = np.stack([
        values[seg],
        values[seg + 1] - values[seg] - second[seg] / 3.0 - second[seg + 1] / 6.0,
        second[seg] / 2.0,
        (second[seg + 1] - second[seg]) / 6.0,
    ], axis=1)
    return coeffs.astype(np.float32)


@functools.cache
def slope_matrix(n: int) -> np.ndarray:
    """f32[n, n]: ``D`` with ``(D f)_k`` the slope (per node spacing) at node
    ``k`` of the not-a-knot spline through ``f`` on ``n >= 4`` nodes."""
    coeffs = cardinal_coefficients(n).astype(np.float64)
    last = coeffs[-1, 1] + 2.0 * coeffs[-1, 2] + 3.0 * coeffs[-1, 3]
    return np.concatenate([coeffs[:, 1], last[None]]).astype(np.float32)


def _hermite(t: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The cubic Hermite basis at ``t`` in [0, 1]: value at 0, value at 1,
    slope at 0, slope at 1."""
    t2, t3 = t * t, t * t * t
    return 2 * t3 - 3 * t2 + 1, 3 * t2 - 2 * t3, t3 - 2 * t2 + t, t3 - t2


def bicubic_at(values: jax.Array, sx: jax.Array, sy: jax.Array) -> jax.Array:
    """f32[..., C]: the not-a-knot bicubic spline through ``values``
    f32[ny, nx, C] (node ``[j, i]`` at index position ``(i, j)``) at index
    positions ``sx, sy`` f32[...] (clipped to the nodes' range)."""
    ny, nx = values.shape[:2]
    dx, dy = jnp.asarray(slope_matrix(nx)), jnp.asarray(slope_matrix(ny))
    fx = jnp.einsum("ki,jic->jkc", dx, values)
    fy = jnp.einsum("kj,jic->kic", dy, values)
    fxy = jnp.einsum("kj,jic->kic", dy, fx)
    table = jnp.stack([values, fx, fy, fxy], axis=2).reshape(ny * nx, 4, -1)  # [nodes, 4, C]
    sx = jnp.clip(jnp.asarray(sx, jnp.float32), 0.0, nx - 1.0)
    sy = jnp.clip(jnp.asarray(sy, jnp.float32), 0.0, ny - 1.0)
    i0 = jnp.minimum(jnp.floor(sx), nx - 2.0)
    j0 = jnp.minimum(jnp.floor(sy), ny - 2.0)
    ax0, ax1, bx0, bx1 = (h[..., None] for h in _hermite(sx - i0))
    ay0, ay1, by0, by1 = (h[..., None] for h in _hermite(sy - j0))
    base = (j0 * nx + i0).astype(jnp.int32)
    out: Any = 0.0
    for corner, (wx_value, wx_slope), (wy_value, wy_slope) in (
            (base, (ax0, bx0), (ay0, by0)), (base + 1, (ax1, bx1), (ay0, by0)),
            (base + nx, (ax0, bx0), (ay1, by1)), (base + nx + 1, (ax1, bx1), (ay1, by1))):
        g = table[corner]  # [..., 4, C]
        out = out + (wx_value * wy_value * g[..., 0, :] + wx_slope * wy_value * g[..., 1, :]
                     + wx_value * wy_slope * g[..., 2, :] + wx_slope * wy_slope * g[..., 3, :])
    return out.astype(jnp.float32)
