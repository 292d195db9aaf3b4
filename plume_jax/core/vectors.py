"""Planar ``(x, y)`` vector arithmetic written elementwise, and sums that
stay fast on the CPU backend (layer 0).

Why not ``jnp.linalg.norm(v, axis=-1)`` or ``jnp.sum(..., axis=-1)``: under
``vmap`` a per-env length of an f32[2] vector becomes a float ``reduce``
over a trailing axis of 2, and jaxlib 0.10's CPU backend hands every float
``reduce`` to a YNNPACK library fusion (``ynn_fusion``, kind ``kCustom``,
in the compiled HLO: ``jax.jit(f).lower(...).compile().as_text()``) that
does not fuse with the elementwise work around it. Written as ``x² + y²``
the same arithmetic fuses into the neighbouring elementwise loop: with the
auto-reset unchanged (the speculative step against the old step, one run
under load) the Gaussian step ran 1.7x and the filament step 2.4x faster
(BENCHMARKS.md, "Before and after, in one run"). The
results are those of the reduction: a sum of two terms has one rounding
either way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def squared_norm(v: jax.Array) -> jax.Array:
    """f32[...]: ``x² + y²`` of vectors f32[..., 2]."""
    return jnp.square(v[..., 0]) + jnp.square(v[..., 1])


def norm(v: jax.Array) -> jax.Array:
    """f32[...]: the length ``√(x² + y²)`` of vectors f32[..., 2]."""
    return jnp.sqrt(squared_norm(v))


def _dot_sum(terms: jax.Array) -> jax.Array:
    ones = jnp.ones(terms.shape[-1], terms.dtype)
    return jnp.matmul(terms, ones, precision=jax.lax.Precision.HIGHEST)


def _reduce_sum(terms: jax.Array) -> jax.Array:
    return jnp.sum(terms, axis=-1)


def sum_last(terms: jax.Array) -> jax.Array:
    """f32[...]: the sum of f32[..., K] over its last axis, for long axes
    (a plume's puffs, a grid's cells).

    On the CPU backend a product with a vector of ones (a matrix-vector
    product, full float32 precision), which runs at the speed of the
    elementwise work that produces the terms instead of the ~10x slower
    library ``reduce`` (see the module docstring); elsewhere ``jnp.sum``
    (on a GPU XLA fuses the terms into the reduction). The same sum up to
    the order of the additions.
    """
    return jax.lax.platform_dependent(terms, cpu=_dot_sum, default=_reduce_sum)
