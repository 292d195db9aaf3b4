"""Minimal jittable spaces (layer 0).

The functional core declares its spaces with these classes; the env converts
them to gymnax spaces (``PlumeEnv.action_space``) and the Gymnasium layer to
Gymnasium spaces. Unlike gymnax's spaces, ``contains`` checks the dtype kind
and the shape as well as the range, so it agrees with Gymnasium's ``contains``.
Spaces are frozen and hashable (they are part of static configuration).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def is_integer_scalar(x: Any) -> bool:
    """Static check: is ``x`` an integer scalar (Python int, NumPy or JAX
    integer of shape ``()``)? Booleans are not integers here."""
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (int, np.integer)):
        return True
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jnp.integer) and np.shape(x) == ()


@dataclasses.dataclass(frozen=True)
class Discrete:
    """Integers ``0 .. n-1``; samples are int32 scalars."""

    n: int

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int32)

    def sample(self, key: jax.Array) -> jax.Array:
        """A uniform int32 scalar in ``[0, n)``."""
        return jax.random.randint(key, (), 0, self.n, dtype=jnp.int32)

    def contains(self, x: Any) -> jax.Array:
        """bool[] — True iff ``x`` is an integer scalar in ``[0, n)``.

        Floats, booleans and non-scalars are never contained (the check on
        dtype and shape is static, so this is jittable).
        """
        if not is_integer_scalar(x):
            return jnp.asarray(False)
        x = jnp.asarray(x)
        return (x >= 0) & (x < self.n)


@dataclasses.dataclass(frozen=True)
class Box:
    """A float32 box ``low <= x <= high`` of a fixed shape.

    ``low`` and ``high`` are tuples (flattened, row-major) so the space stays
    hashable; use ``low_array`` / ``high_array`` for arrays of ``shape``.
    """

    low: tuple[float, ...]
    high: tuple[float, ...]
    shape: tuple[int, ...]

    @classmethod
    def uniform(cls, low: float, high: float, shape: tuple[int, ...]) -> "Box":
        """A box with the same bounds on every element."""
        size = int(np.prod(shape, dtype=np.int64))
        return cls(low=(float(low),) * size, high=(float(high),) * size, shape=tuple(shape))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def low_array(self) -> np.ndarray:
        return np.asarray(self.low, np.float32).reshape(self.shape)

    @property
    def high_array(self) -> np.ndarray:
        return np.asarray(self.high, np.float32).reshape(self.shape)

    def sample(self, key: jax.Array) -> jax.Array:
        """A uniform float32 sample of ``shape``."""
        return jax.random.uniform(
            key, self.shape, jnp.float32, jnp.asarray(self.low_array), jnp.asarray(self.high_array)
        )

    def contains(self, x: Any) -> jax.Array:
        """bool[] — True iff ``x`` has ``shape``, a numeric dtype and lies in the box."""
        if np.shape(x) != self.shape or isinstance(x, (bool, np.bool_)):
            return jnp.asarray(False)
        x = jnp.asarray(x)
        if not (jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer)):
            return jnp.asarray(False)
        x = x.astype(jnp.float32)
        return jnp.all((x >= self.low_array) & (x <= self.high_array) & jnp.isfinite(x))
