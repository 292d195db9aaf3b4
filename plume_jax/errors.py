"""Exceptions raised by plume_jax.

``ValidationError`` is raised for bad actions, parameters and configuration;
``StateError`` for lifecycle misuse of the Gymnasium environment. Messages name
the offending parameter, the value received and what is allowed.
"""

from __future__ import annotations

from typing import Any


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
        """Build the standard message: ``<parameter>=<value!r> is invalid: expected <allowed>``."""
        return cls(
            f"{parameter}={value!r} is invalid: expected {allowed}",
            parameter=parameter,
            value=value,
            allowed=allowed,
        )


class StateError(RuntimeError):
    """A method was called in a lifecycle state that does not allow it."""
