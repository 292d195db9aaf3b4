"""Fixed-cost random draws used by the plumes and the hits sensor.

``jax.random.poisson`` runs a rejection loop whose length depends on the
draw; under ``vmap`` every lane waits for the slowest. The draws here invert
the CDF over a static number of classes instead, so their cost is fixed and
small, which is what a per-step draw inside a batched ``lax.scan`` needs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def capped_poisson_pmf(mean: jax.Array, cap: int) -> jax.Array:
    """f32[..., cap + 1]: the law of ``min(H, cap)`` with ``H ~ Poisson(mean)``.

    Entries ``0 .. cap-1`` are the Poisson probabilities
    ``exp(-mean) mean^k / k!``; entry ``cap`` is the tail ``P(H >= cap)``.
    ``mean`` may have any shape (``>= 0``); ``cap`` is a static int ``>= 1``.
    """
    if not isinstance(cap, int) or cap < 1:
        raise ValueError(f"cap={cap!r} is invalid: expected an integer >= 1")
    mean = jnp.asarray(mean, jnp.float32)[..., None]
    k = jnp.arange(1, cap, dtype=jnp.float32)
    # mean^k / k! as a cumulative product of mean / k (exact at mean = 0)
    ratios = jnp.concatenate([jnp.ones_like(mean), jnp.broadcast_to(mean / k, (*mean.shape[:-1], cap - 1))],
                             axis=-1)
    head = jnp.exp(-mean) * jnp.cumprod(ratios, axis=-1)
    tail = jnp.clip(1.0 - jnp.sum(head, axis=-1, keepdims=True), 0.0, 1.0)
    return jnp.concatenate([head, tail], axis=-1)


def capped_poisson(key: jax.Array, mean: jax.Array, cap: int, *,
                   nonzero: bool = False) -> jax.Array:
    """i32[shape of mean]: ``min(H, cap)`` with ``H ~ Poisson(mean)``, exactly.

    With ``nonzero``, ``H`` is conditioned on ``H >= 1`` (the draw is from
    ``P(· | H >= 1)``); where ``mean == 0`` that law is undefined and the
    result is 1.
    """
    pmf = capped_poisson_pmf(mean, cap)
    cdf = jnp.cumsum(pmf[..., :-1], axis=-1)  # P(min(H, cap) <= k), k = 0 .. cap-1
    u = jax.random.uniform(key, jnp.shape(mean), jnp.float32)
    if nonzero:
        p0 = pmf[..., 0]
        u = p0 + u * (1.0 - p0)
    count = jnp.sum((u[..., None] >= cdf).astype(jnp.int32), axis=-1)
    if nonzero:
        count = jnp.maximum(count, 1)
    return jnp.minimum(count, cap).astype(jnp.int32)
