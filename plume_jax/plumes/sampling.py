"""Fixed-cost random draws used by the filament plume and the hits sensor.

``jax.random.poisson`` runs a rejection loop whose length depends on the
draw; under ``vmap`` every lane waits for the slowest. The draws here invert
the CDF over a static number of classes instead, so their cost is fixed and
small, which is what a per-step draw inside a batched ``lax.scan`` needs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


#: Means above this get the Poisson terms from their logarithms: below it
#: ``exp(-mean)`` and ``mean^k / k!`` stay normal float32 numbers.
LARGE_MEAN = 80.0


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
    # above LARGE_MEAN, exp(-mean) underflows and the products overflow in
    # float32 (0 * inf): there the terms come from their logarithms
    counts = jnp.arange(cap, dtype=jnp.float32)
    log_head = counts * jnp.log(jnp.maximum(mean, 1.0)) - mean - jax.scipy.special.gammaln(
        counts + 1.0)
    head = jnp.where(mean > LARGE_MEAN, jnp.exp(log_head), head)
    tail = jnp.clip(1.0 - jnp.sum(head, axis=-1, keepdims=True), 0.0, 1.0)
    return jnp.concatenate([head, tail], axis=-1)


def capped_poisson(key: jax.Array, mean: jax.Array, cap: int, *,
                   nonzero: bool = False) -> jax.Array:
    """i32[shape of mean]: ``min(H, cap)`` with ``H ~ Poisson(mean)``, exactly.

    With ``nonzero``, ``H`` is conditioned on ``H >= 1`` (the draw is from
    ``P(· | H >= 1)``); where ``P(H = 0)`` rounds to 1 in float32 (a zero
    or vanishing mean) the result is 1, the limit of that law.
    """
    pmf = capped_poisson_pmf(mean, cap)
    cdf = jnp.cumsum(pmf[..., :-1], axis=-1)  # P(min(H, cap) <= k), k = 0 .. cap-1
    u = jax.random.uniform(key, jnp.shape(mean), jnp.float32)
    if nonzero:
        p0 = pmf[..., 0]
        u = p0 + u * (1.0 - p0)
    count = jnp.sum((u[..., None] >= cdf).astype(jnp.int32), axis=-1)
    if nonzero:
        # P(H = 0) rounds to 1 for a (near-)zero mean: the law given H >= 1 is then
        # (almost surely) H = 1
        count = jnp.where(pmf[..., 0] >= 1.0, 1, jnp.maximum(count, 1))
    return jnp.minimum(count, cap).astype(jnp.int32)


def _mix32(h: jax.Array) -> jax.Array:
    """A 32-bit avalanche mix (the MurmurHash3 finaliser): every input bit
    flips each output bit with probability close to 1/2."""
    h = h ^ (h >> jnp.uint32(16))
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> jnp.uint32(13))
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> jnp.uint32(16))


def hashed_bits(key: jax.Array, n: int) -> jax.Array:
    """u32[n] pseudo-random words: two words drawn from ``key`` with
    ``jax.random`` seed a keyed integer hash of the index ``0 .. n-1``.

    Much cheaper than ``jax.random.bits(key, (n,))`` (a few integer
    operations per word instead of a Threefry block), for noise where many
    words are needed per step and statistical quality beyond a good
    avalanche mix is not (the puffs' dispersion steps). Deterministic given
    the key.
    """
    seeds = jax.random.bits(key, (2,), jnp.uint32)
    index = jnp.arange(n, dtype=jnp.uint32)
    return _mix32(_mix32(index * jnp.uint32(0x9E3779B9) + seeds[0]) ^ seeds[1])


def uniform_pairs(key: jax.Array, n: int) -> jax.Array:
    """f32[n, 2] in the open interval (-1, 1): the high and low 16 bits of
    :func:`hashed_bits` mapped to ``(2 (k + 1/2) / 65536) - 1``; each
    coordinate has mean 0 and variance 1/3 (to within 2e-10)."""
    bits = hashed_bits(key, n)
    halves = jnp.stack([bits >> jnp.uint32(16), bits & jnp.uint32(0xFFFF)], axis=-1)
    return (halves.astype(jnp.float32) + 0.5) * (2.0 / 65536.0) - 1.0
