"""Exceptions raised by plume_jax.

``ValidationError`` is raised for bad actions, parameters and configuration;
``StateError`` for lifecycle misuse of the Gymnasium environment. Messages name
the offending parameter, the value received and what is allowed.

Every value a message quotes is bounded (:func:`bounded_repr`): a huge or
deeply nested value (a YAML alias bomb, a whole file's text) is shown as a
short excerpt, never built in full; the exception's ``value`` attribute
still holds the object itself.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any

#: At most this many characters of a value are quoted in a message.
REPR_LIMIT = 200
#: At most this many characters of ``parameter`` and ``allowed`` each.
TEXT_LIMIT = 2000


class _BoundedRepr(reprlib.Repr):
    """``reprlib.Repr`` with small container limits (so a shared-reference
    structure that expands exponentially is cut after a few levels and
    items) and integers shown by size once they are long (``repr`` of an
    int over 4300 digits raises)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxtuple = self.maxlist = self.maxarray = self.maxset = self.maxfrozenset = 6
        self.maxdeque = self.maxdict = 6
        self.maxstring = self.maxother = self.maxlong = max(limit, 12)

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 3 * self.maxlong:
            return f"<int of {x.bit_length()} bits>"
        return super().repr_int(x, level)

    def repr_instance(self, x: Any, level: int) -> str:
        # subclasses of the containers (a settings mapping, a named tuple)
        # are cut like their bases, never repr'd whole
        if isinstance(x, Mapping):
            return type(x).__name__ + "(" + self.repr_dict(dict(x), level) + ")" \
                if len(x) <= 10 * self.maxdict else \
                f"<{type(x).__name__} of {len(x)} items>"
        if isinstance(x, (list, tuple)):
            return type(x).__name__ + self.repr_list(list(x[:self.maxlist + 1]), level)
        try:
            text = repr(x)
        except Exception as error:  # a value whose repr fails is still reported
            return f"<{type(x).__name__} (repr failed: {type(error).__name__})>"
        return _cut(text, self.maxother)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with ``...``."""
    if len(text) <= limit:
        return text
    keep = max(limit - 3, 1)
    head = (keep + 1) // 2 + keep // 4
    return text[:head] + "..." + text[len(text) - (keep - head):]


def bounded_repr(value: Any, limit: int = REPR_LIMIT) -> str:
    """``repr(value)`` in at most ``limit`` characters (an excerpt marked
    with ``...`` when cut), built without ever making the full ``repr`` of a
    big container: containers are cut after a few items and three levels,
    long strings and numbers are cut before they are quoted."""
    return _cut(_BoundedRepr(limit).repr(value), limit)


def bounded_text(text: Any, limit: int = TEXT_LIMIT) -> str:
    """``str(text)`` cut to ``limit`` characters (``...`` marks the cut)."""
    if not isinstance(text, str):
        text = bounded_repr(text, limit) if not isinstance(text, (int, float)) else str(text)
    return _cut(text, limit)


class ValidationError(ValueError):
    """A value (action, parameter, configuration entry) is not allowed.

    Attributes:
        parameter: name of the offending parameter, or None.
        value: the value that was rejected.
        allowed: a human-readable description of what is allowed.
    """

    def __init__(
        self,
        message: str,
        *,
        parameter: str | None = None,
        value: Any = None,
        allowed: str | None = None,
    ) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.value = value
        self.allowed = allowed

    @classmethod
    def for_parameter(cls, parameter: str, value: Any, allowed: str) -> "ValidationError":
        """Build the standard message: ``<parameter>=<value!r> is invalid:
        expected <allowed>``, the value quoted by :func:`bounded_repr` and the
        parameter and ``allowed`` text cut to :data:`TEXT_LIMIT` characters."""
        return cls(
            f"{bounded_text(parameter, REPR_LIMIT)}={bounded_repr(value)} is invalid: "
            f"expected {bounded_text(allowed)}",
            parameter=parameter,
            value=value,
            allowed=allowed,
        )


class StateError(RuntimeError):
    """A method was called in a lifecycle state that does not allow it."""
