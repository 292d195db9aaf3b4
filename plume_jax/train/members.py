"""Pytrees of a batched program's members: a leading member axis only where
the members differ.

A sweep trains its members as one ``vmap``; stacking a leaf no member varies
(a movie plume's ``f32[frames, rows, cols]`` frames) would copy it per member.
:func:`stack_members` keeps such a leaf once as :class:`Shared`,
:func:`member_axes` gives the ``vmap`` ``in_axes`` that broadcast it and
:func:`unshare` unwraps it inside the mapped function (docs/training.md,
"The training loop").
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class Shared:
    """A leaf every member has the same value of, kept once (no member axis);
    a pytree node, so it passes through ``jit`` and sharding like any leaf."""

    value: Any

    def tree_flatten(self) -> tuple[tuple[Any], None]:
        return (self.value,), None

    @classmethod
    def tree_unflatten(cls, _: None, children: Any) -> "Shared":
        return cls(children[0])


def is_shared(x: Any) -> bool:
    return isinstance(x, Shared)


def _stack_leaf(*values: Any) -> Any:
    first = values[0]
    if all(v is first for v in values[1:]):
        return Shared(jnp.asarray(first))
    a, *others = [np.asarray(v) for v in values]
    if all(b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b, equal_nan=True)
           for b in others):
        return Shared(jnp.asarray(first))
    return jnp.stack([jnp.asarray(v) for v in values])


def stack_members(trees: list[Any]) -> Any:
    """One tree for the members ``trees`` (all of one structure): a leaf they
    differ in stacked (a leading member axis), one they share :class:`Shared`."""
    return jax.tree.map(_stack_leaf, *trees)


def member_axes(tree: Any) -> Any:
    """``vmap`` ``in_axes`` for ``tree``: 0 for a stacked leaf, None
    (broadcast) for a :class:`Shared` one."""
    return jax.tree.map(lambda x: None if is_shared(x) else 0, tree, is_leaf=is_shared)


def unshare(tree: Any) -> Any:
    """``tree`` with every :class:`Shared` leaf unwrapped (inside a function
    mapped with :func:`member_axes`, that is one member's tree)."""
    return jax.tree.map(lambda x: x.value if is_shared(x) else x, tree, is_leaf=is_shared)


def member_of(tree: Any, j: int) -> Any:
    """Member ``j``'s own tree: stacked leaves sliced, shared ones unwrapped."""
    return jax.tree.map(lambda x: x.value if is_shared(x) else x[j], tree, is_leaf=is_shared)


def member_values(leaf: Any) -> np.ndarray:
    """A leaf of a member tree as a host array (shared: its one value)."""
    return np.asarray(leaf.value if is_shared(leaf) else leaf)


def shared(tree: Any) -> Any:
    """``tree`` with every leaf kept once for all members (:class:`Shared`)."""
    return jax.tree.map(Shared, tree)


def vmap_members(fn: Callable[..., Any], *trees: Any) -> Any:
    """``vmap(fn)(*trees)`` over the member axis, broadcasting each tree's
    :class:`Shared` leaves; ``fn`` gets every tree unshared."""
    return jax.vmap(lambda *args: fn(*(unshare(a) for a in args)),
                    in_axes=tuple(member_axes(t) for t in trees))(*trees)


__all__ = ["Shared", "is_shared", "member_axes", "member_of", "member_values", "shared",
           "stack_members", "unshare", "vmap_members"]
