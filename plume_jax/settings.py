"""Declarative, validated component settings (layer 0).

Every component declares its settings as a mapping ``name -> Setting``. A
setting is *static* (fixes a shape or a code path: a field of the frozen
component object, hashed into the jit cache) or *dynamic* (a leaf of the
component's params pytree, sweepable under ``vmap``). ``resolve_settings``
validates user values against the schema before anything is built, so bad
configuration fails at construction with a message naming the field, the
value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from plume_jax.errors import ValidationError
from plume_jax.types import Grid

Checker = Callable[[str, Any, Grid], Any]


@dataclasses.dataclass(frozen=True)
class Setting:
    """One configurable value of a component.

    Attributes:
        default: value used when the user gives none (passed through ``check``).
        check: ``check(qualified_name, value, grid) -> normalised value``;
            raises ``ValidationError`` for a bad value.
        static: True for static configuration, False for a params leaf.
        doc: one line: meaning and units.
    """

    default: Any
    check: Checker
    static: bool = False
    doc: str = ""


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def real(*, low: float | None = None, high: float | None = None,
         low_inclusive: bool = True, high_inclusive: bool = True) -> Checker:
    """A finite real number in an optional interval; returns a Python float."""
    lo_br = "[" if low_inclusive and low is not None else "("
    hi_br = "]" if high_inclusive and high is not None else ")"
    allowed = "a finite real number"
    if low is not None or high is not None:
        allowed += f" in {lo_br}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_br}"

    def check(name: str, value: Any, grid: Grid) -> float:
        if not _is_real(value) or not math.isfinite(float(value)):
            raise ValidationError.for_parameter(name, value, allowed)
        v = float(value)
        if low is not None and (v < low or (v == low and not low_inclusive)):
            raise ValidationError.for_parameter(name, value, allowed)
        if high is not None and (v > high or (v == high and not high_inclusive)):
            raise ValidationError.for_parameter(name, value, allowed)
        return v

    return check


def integer(*, low: int | None = None, high: int | None = None) -> Checker:
    """An integer (not a bool, not a float) in an optional closed interval."""
    allowed = "an integer"
    if low is not None or high is not None:
        allowed += f" in [{'-inf' if low is None else low}, {'inf' if high is None else high}]"

    def check(name: str, value: Any, grid: Grid) -> int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValidationError.for_parameter(name, value, allowed)
        v = int(value)
        if (low is not None and v < low) or (high is not None and v > high):
            raise ValidationError.for_parameter(name, value, allowed)
        return v

    return check


def boolean() -> Checker:
    """A bool (``True``/``False``; integers are refused)."""

    def check(name: str, value: Any, grid: Grid) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise ValidationError.for_parameter(name, value, "a bool (true or false)")
        return bool(value)

    return check


def grid_position(*, none_means_centre: bool = False) -> Checker:
    """An ``(x, y)`` pair of finite reals inside the grid; returns a tuple of floats.

    With ``none_means_centre``, ``None`` resolves to the grid centre
    ``((width-1)/2, (height-1)/2)`` rounded down to a cell.
    """

    def check(name: str, value: Any, grid: Grid) -> tuple[float, float]:
        allowed = (
            f"an (x, y) pair inside the grid, 0 <= x <= {grid.width - 1}, "
            f"0 <= y <= {grid.height - 1}"
        )
        if value is None and none_means_centre:
            return (float((grid.width - 1) // 2), float((grid.height - 1) // 2))
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
            raise ValidationError.for_parameter(name, value, allowed)
        if not all(_is_real(v) and math.isfinite(float(v)) for v in value):
            raise ValidationError.for_parameter(name, value, allowed)
        x, y = float(value[0]), float(value[1])
        if not (0.0 <= x <= grid.width - 1 and 0.0 <= y <= grid.height - 1):
            raise ValidationError.for_parameter(name, value, allowed)
        return (x, y)

    return check


def choice(options: tuple[str, ...]) -> Checker:
    """One of a fixed set of strings."""

    def check(name: str, value: Any, grid: Grid) -> str:
        if value not in options:
            raise ValidationError.for_parameter(name, value, f"one of {list(options)}")
        return value

    return check


def resolve_settings(
    component: str,
    schema: Mapping[str, Setting],
    values: Mapping[str, Any],
    grid: Grid,
) -> dict[str, Any]:
    """Validate ``values`` against ``schema``, filling defaults.

    Args:
        component: name used to qualify parameter names in errors
            (``"plume.sigma"``).
        schema: the component's settings.
        values: user-supplied values; every key must be in ``schema``.
        grid: the static grid (for position checks).

    Returns:
        A new dict with every setting of ``schema``, validated and normalised
        to plain Python values (JSON-serialisable).

    Raises:
        ValidationError: for an unknown name or a bad value.
    """
    unknown = sorted(set(values) - set(schema))
    if unknown:
        raise ValidationError.for_parameter(
            f"{component}.{unknown[0]}", values[unknown[0]],
            f"a parameter of {component!r}: one of {sorted(schema)}",
        )
    out = {}
    for name, setting in schema.items():
        raw = values.get(name, setting.default)
        out[name] = setting.check(f"{component}.{name}", raw, grid)
    return out


def split_static(schema: Mapping[str, Setting], resolved: Mapping[str, Any]) -> tuple[dict, dict]:
    """Split resolved values into ``(static, dynamic)`` dicts per the schema."""
    static = {k: v for k, v in resolved.items() if schema[k].static}
    dynamic = {k: v for k, v in resolved.items() if not schema[k].static}
    return static, dynamic


def to_leaf(value: Any) -> Any:
    """A params leaf for a resolved dynamic value: float -> f32, int -> i32,
    bool -> bool, sequence of numbers -> f32[n]."""
    import jax.numpy as jnp

    if isinstance(value, bool):
        return jnp.asarray(value, jnp.bool_)
    if isinstance(value, int):
        return jnp.asarray(value, jnp.int32)
    return jnp.asarray(value, jnp.float32)


class Configurable:
    """Mixin for components built from validated settings.

    Subclasses are frozen dataclasses whose fields are exactly their static
    settings, and define:

    - ``type_name``: the name used in configs (``"gaussian"``);
    - ``SETTINGS``: ``name -> Setting``;
    - ``Params``: a ``chex.dataclass`` whose fields are the dynamic settings.
    """

    type_name: str = ""
    SETTINGS: Mapping[str, Setting] = {}
    Params: Any = None

    @classmethod
    def build(cls, values: Mapping[str, Any], grid: Grid, prefix: str) -> tuple[Any, Any, dict]:
        """Validate ``values`` and return ``(component, params, resolved)``.

        ``resolved`` holds every setting (static and dynamic) as plain Python
        values, enough to rebuild the component.
        """
        resolved = resolve_settings(prefix, cls.SETTINGS, values, grid)
        static, dynamic = split_static(cls.SETTINGS, resolved)
        params = cls.Params(**{k: to_leaf(v) for k, v in dynamic.items()})
        return cls(**static), params, resolved

    def get_metadata(self) -> dict[str, Any]:
        """JSON-serialisable description: type and static parameters.

        Dynamic parameters live in the params pytree; ``PlumeEnv.settings``
        holds both.
        """
        return {
            "type": self.type_name,
            "parameters": {f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
        }
