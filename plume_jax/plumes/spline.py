"""Interpolating cubic splines on evenly spaced nodes, as weights.

The not-a-knot interpolating cubic spline through values ``f_0 .. f_{n-1}``
at nodes ``0, 1, .., n-1`` (index units) is linear in the values: on the
interval ``[k, k+1]`` it is ``Σ_p t^p Σ_i C[k, p, i] f_i`` with
``t = s - k``. :func:`cardinal_coefficients` computes ``C`` once (numpy,
at trace time; it depends only on ``n``), :func:`spline_weights` turns a
position into the weights ``w_i`` of the node values (jnp, jittable), and a
tensor-product spline over a 2-D grid of nodes is ``Σ_j Σ_i wy_j wx_i
f_{j, i}``.

This is the spline that FITPACK's ``regrid`` (scipy's
``RectBivariateSpline`` with its defaults ``kx = ky = 3, s = 0``) fits: with
``s = 0`` its interior knots are the nodes except the second and the
second-to-last, which is the not-a-knot condition.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

#: The fewest nodes a cubic spline needs (FITPACK: more nodes than its degree).
MIN_NODES = 4


@functools.lru_cache(maxsize=None)
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
    k = np.arange(n - 1)
    coeffs = np.stack([
        values[k],
        values[k + 1] - values[k] - second[k] / 3.0 - second[k + 1] / 6.0,
        second[k] / 2.0,
        (second[k + 1] - second[k]) / 6.0,
    ], axis=1)
    return coeffs.astype(np.float32)


def spline_weights(s: jax.Array, n: int) -> jax.Array:
    """f32[..., n]: the weights of the ``n`` node values in the spline's
    value at positions ``s`` f32[...] (index units, clipped to
    ``[0, n - 1]``)."""
    coeffs = jnp.asarray(cardinal_coefficients(n))
    s = jnp.clip(jnp.asarray(s, jnp.float32), 0.0, n - 1.0)
    k = jnp.minimum(jnp.floor(s), n - 2.0)
    t = (s - k)[..., None]
    rows = coeffs[k.astype(jnp.int32)]  # [..., 4, n]
    return rows[..., 0, :] + t * (rows[..., 1, :] + t * (rows[..., 2, :] + t * rows[..., 3, :]))
