"""Seeds and the PRNG keys they start (layer 0), the same at every door:
``PlumeGymEnv.reset(seed=...)``, the vector and SB3 adapters, PettingZoo,
``plume-jax evaluate`` / ``demo`` and scenario files.

A seed is an integer in ``[0, 2**63)`` and every bit of it reaches the key:
``jax.random.key`` keeps only a seed's low 32 bits (64-bit integers are off
by default), so :func:`seed_key` folds the high bits in for seeds
``>= 2**32`` and is ``jax.random.key(seed)`` itself below, so the streams of
small seeds are those of ``jax.random.key``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError

#: Largest seed accepted (exclusive): every one of its 63 bits reaches the
#: key (:func:`seed_key`); Gymnasium's own seeding wants a non-negative one.
SEED_LIMIT = 2**63


def check_seed(seed: Any, name: str = "seed", *, none_ok: bool = True) -> int:
    """A valid seed as a Python int, or ``ValidationError`` naming ``name``.
    ``None`` is refused here too; ``none_ok`` only says so in the message
    (the caller handles None itself)."""
    allowed = ("None or " if none_ok else "") + "an integer in [0, 2**63) (every bit is used)"
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValidationError.for_parameter(name, seed, allowed)
    seed = int(seed)
    if not 0 <= seed < SEED_LIMIT:
        raise ValidationError.for_parameter(name, seed, allowed)
    return seed


def seed_key(seed: int) -> jax.Array:
    """The key of a checked seed, every bit of it:
    ``fold_in(key(s % 2**32), s >> 32)`` for ``s >= 2**32``, and
    ``jax.random.key(s)`` itself below."""
    if seed < 2**32:
        return jax.random.key(seed)
    return jax.random.fold_in(jax.random.key(seed & 0xFFFFFFFF), seed >> 32)


def keys_from_seeds(seeds: Sequence[int]) -> jax.Array:
    """:func:`seed_key` of each seed, stacked (one call when all < 2**32)."""
    seeds = [int(s) for s in seeds]
    if all(0 <= s < 2**32 for s in seeds):
        return jax.vmap(jax.random.key)(np.asarray(seeds, np.uint32))
    return jnp.stack([seed_key(s) for s in seeds])


def fresh_seed() -> int:
    """A seed drawn from OS entropy, for a first reset without one."""
    return int(np.random.SeedSequence().generate_state(1, np.uint32)[0])
