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
        if isinstance(x, (int, np.integer, np.ndarray)):
            # concrete value: compare exactly (a 64-bit or huge Python int
            # must not wrap around or overflow on the way to int32)
            return jnp.asarray(0 <= int(x) < self.n)
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
        """bool[] — True iff ``x`` has ``shape``, a numeric (integer or
        floating, not bool) dtype, finite values, and lies in the box (after
        a cast to float32). Never raises: values that are not arrays of
        numbers (strings, ``None``, ragged lists) are simply not contained."""
        if isinstance(x, (bool, np.bool_)):
            return jnp.asarray(False)
        if isinstance(x, jax.Array):  # includes tracers: jittable path
            if x.shape != self.shape or not (
                    jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer)):
                return jnp.asarray(False)
            x = x.astype(jnp.float32)
            return jnp.all((x >= self.low_array) & (x <= self.high_array) & jnp.isfinite(x))
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError, OverflowError):
            return jnp.asarray(False)
        if arr.shape != self.shape or arr.dtype.kind not in "iuf":
            return jnp.asarray(False)
        with np.errstate(over="ignore", invalid="ignore"):
            arr = arr.astype(np.float32)
        inside = (arr >= self.low_array) & (arr <= self.high_array) & np.isfinite(arr)
        return jnp.asarray(bool(np.all(inside)))

    @classmethod
    def from_arrays(cls, low: Any, high: Any) -> "Box":
        """A box with element-wise bounds given as arrays of equal shape."""
        low = np.asarray(low, np.float32)
        high = np.asarray(high, np.float32)
        if low.shape != high.shape:
            raise ValueError(f"low {low.shape} and high {high.shape} differ in shape")
        return cls(low=tuple(float(v) for v in low.reshape(-1)),
                   high=tuple(float(v) for v in high.reshape(-1)), shape=tuple(low.shape))

    @classmethod
    def concatenate(cls, boxes: "tuple[Box, ...] | list[Box]") -> "Box":
        """The 1-D box of the flattened boxes placed end to end."""
        low = np.concatenate([b.low_array.reshape(-1) for b in boxes])
        high = np.concatenate([b.high_array.reshape(-1) for b in boxes])
        return cls.from_arrays(low, high)

    @property
    def size(self) -> int:
        """Number of elements, ``prod(shape)``."""
        return int(np.prod(self.shape, dtype=np.int64))


@dataclasses.dataclass(frozen=True)
class Dict:
    """A mapping of named sub-spaces; samples and observations are ``dict``s.

    ``spaces`` is a tuple of ``(name, space)`` pairs (ordered, hashable);
    build one with ``Dict.of({"a": Box(...), ...})``. Keys keep their order.
    """

    spaces: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, mapping: Any) -> "Dict":
        """Build from a mapping ``name -> space`` (order preserved)."""
        return cls(spaces=tuple((str(k), v) for k, v in mapping.items()))

    def keys(self) -> list[str]:
        return [k for k, _ in self.spaces]

    def items(self) -> list[tuple[str, Any]]:
        return list(self.spaces)

    def __getitem__(self, name: str) -> Any:
        for k, v in self.spaces:
            if k == name:
                return v
        raise KeyError(name)

    def __len__(self) -> int:
        return len(self.spaces)

    def sample(self, key: jax.Array) -> dict[str, jax.Array]:
        """A dict of samples, one per sub-space (independent keys)."""
        return {k: space.sample(jax.random.fold_in(key, i))
                for i, (k, space) in enumerate(self.spaces)}

    def contains(self, x: Any) -> jax.Array:
        """bool[] — True iff ``x`` is a mapping with exactly these keys and
        every value lies in its sub-space. Never raises."""
        if not hasattr(x, "keys") or not hasattr(x, "__getitem__"):
            return jnp.asarray(False)
        try:
            keys = set(x.keys())
        except TypeError:
            return jnp.asarray(False)
        if keys != set(self.keys()):
            return jnp.asarray(False)
        out = jnp.asarray(True)
        for k, space in self.spaces:
            out = out & space.contains(x[k])
        return out
