"""Special functions that ``jax.scipy.special`` lacks.

``k0`` is the modified Bessel function of the second kind of order zero,
``K0(x)``, for ``x > 0``, from the polynomial approximations of Abramowitz &
Stegun, *Handbook of Mathematical Functions* (1964), 9.8.1 (for ``I0``),
9.8.5 (``0 < x <= 2``) and 9.8.6 (``x >= 2``). Their stated absolute errors
(1.6e-7 for ``I0 / I0``-scaled terms, 1e-8 and 1.9e-7 for the ``K0`` parts)
are at float32 resolution; ``tests/plumes/test_plumes_poisson.py`` checks the
relative error against ``scipy.special.k0`` over the range the Poisson
plume uses.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# A&S 9.8.1: I0(x) = sum_k a_k (x / 3.75)^(2k), |x| <= 3.75
_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
# A&S 9.8.5: K0(x) = -ln(x/2) I0(x) + sum_k b_k (x / 2)^(2k), 0 < x <= 2
_K0_SMALL = (-0.57721566, 0.42278420, 0.23069756, 0.03488590, 0.00262698, 0.00010750,
             0.00000740)
# A&S 9.8.6: sqrt(x) exp(x) K0(x) = sum_k c_k (2 / x)^k, x >= 2
_K0_LARGE = (1.25331414, -0.07832358, 0.02189568, -0.01062446, 0.00587872, -0.00251540,
             0.00053208)


def _poly(coefficients: tuple[float, ...], t: jax.Array) -> jax.Array:
    """Horner evaluation of ``sum_k coefficients[k] t^k``."""
    out = jnp.full_like(t, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = out * t + c
    return out


def k0(x: jax.Array) -> jax.Array:
    """f32[...]: ``K0(x)`` for ``x > 0`` (``+inf`` at 0, ``nan`` below 0).

    Elementwise, jit/vmap/grad-compatible (both branches are evaluated on
    clamped inputs, so neither produces a nan that ``where`` would mask
    out only in the forward pass).
    """
    x = jnp.asarray(x, jnp.float32)
    small_x = jnp.clip(x, 1e-30, 2.0)
    t_small = jnp.square(small_x / 2.0)
    i0 = _poly(_I0_SMALL, jnp.square(small_x / 3.75))
    small = -jnp.log(small_x / 2.0) * i0 + _poly(_K0_SMALL, t_small)
    large_x = jnp.maximum(x, 2.0)
    large = jnp.exp(-large_x) / jnp.sqrt(large_x) * _poly(_K0_LARGE, 2.0 / large_x)
    out = jnp.where(x <= 2.0, small, large)
    out = jnp.where(x == 0.0, jnp.inf, out)
    return jnp.where(x < 0.0, jnp.nan, out).astype(jnp.float32)
