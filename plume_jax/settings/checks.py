"""Checkers: validate one user value and return it normalised (layer 0).

A checker is ``check(qualified_name, value, grid) -> normalised value`` and
raises :class:`plume_jax.ValidationError` naming the setting, the value and
what is allowed. Numbers are checked as the env will hold them: a real
setting becomes a float32 leaf and an integer an int32 (or a static Python
int that feeds int32 arithmetic), so a value must lie in its interval both
as given and after that cast; and every real setting has finite physical
bounds under which the computations it feeds stay finite in float32 (the
limits below, named in each setting's doc).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.core.types import Grid

Checker = Callable[[str, Any, Grid], Any]

#: The largest grid side, cells.
MAX_GRID_SIDE = 32768
#: Bound on lengths, distances and speeds (cells, cells per step): about 20
#: times the diagonal of the largest grid, and small enough that squares and
#: products of two such values stay finite in float32.
MAX_LENGTH = 1e6
#: Lower bound of lengths that are squared or divided by (plume widths, puff
#: radii), cells: keeps ``1 / length²`` finite in float32.
MIN_LENGTH = 1e-3
#: Bound on dimensionless gains, rates and emission scales.
MAX_SCALE = 1e6
#: Bound on ``|reward|`` settings and reward weights: the return of the
#: longest episode (``2**31 - 1`` steps) stays finite in float32.
MAX_REWARD = 1e6
#: The largest int32, the bound of step counts and integer settings.
MAX_INT32 = 2**31 - 1
#: Angles (radians) larger than this in magnitude are wrapped into
#: ``[-π, π]`` in float64 before the float32 cast (float32 no longer
#: resolves an angle to better than about 1e-3 rad there).
ANGLE_WRAP = 1e4

_F32 = np.float32


def is_real(value: Any) -> bool:
    """Whether ``value`` is a Python or NumPy real number (not a bool)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def finite_float(value: Any) -> float | None:
    """``value`` as a finite Python float, or ``None`` when it is not a real
    number (:func:`is_real`), is ``inf``/``nan``, or is an integer too large
    for a float (``float(10**400)`` raises ``OverflowError``)."""
    if not is_real(value):
        return None
    try:
        v = float(value)
    except OverflowError:
        return None
    return v if math.isfinite(v) else None


def as_float32(value: float) -> float:
    """``value`` as the float32 the env will hold (``inf`` past float32's range)."""
    with np.errstate(over="ignore"):
        return float(_F32(value))


def _number_text_hint(value: Any) -> str:
    """For a string that reads as a number, why it is one (PyYAML's
    ``yaml.safe_load`` follows YAML 1.1, which reads ``3e-4`` as text);
    otherwise ``''``."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return (" (this is a string: yaml.safe_load reads 3e-4 and 1e6 as text; write 3.0e-4 "
                "and 1.0e+6, or read the file with plume_jax, whose YAML reader takes them as "
                "numbers)")
    return ""

def _interval(low: float | None, high: float | None, low_inclusive: bool,
              high_inclusive: bool) -> str:
    lo = "[" if low_inclusive and low is not None else "("
    hi = "]" if high_inclusive and high is not None else ")"
    return f"{lo}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi}"


@dataclasses.dataclass(frozen=True)
class Real:
    """Checker of a finite real number in an interval (``None``: unbounded
    on that side); returns a Python float. The value must lie in the
    interval both as given (float64) and as the float32 the env holds:
    ``1e39`` is refused (float32 ``inf``), and so is ``1e-50`` for
    ``low=0, low_inclusive=False`` (float32 ``0``)."""

    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    high_inclusive: bool = True

    @property
    def allowed(self) -> str:
        """What is allowed, for error messages."""
        text = "a finite real number"
        if self.low is not None or self.high is not None:
            text += " in " + _interval(self.low, self.high, self.low_inclusive,
                                       self.high_inclusive)
        return text + " (as float32 too)"

    def contains(self, v: float, held: bool = False) -> bool:
        """Whether ``v`` is finite and inside the interval; with ``held``
        (the value the env holds), whether the float32 ``v`` is inside the interval of
        the float32 bounds (``-π`` is accepted in ``[-π, π]`` though float32
        rounds it below the float64 bound)."""
        low, high = self.low, self.high
        if held:
            v = as_float32(v)
            low = None if low is None else as_float32(low)
            high = None if high is None else as_float32(high)
        if not math.isfinite(v):
            return False
        if low is not None and (v < low or (v == low and not self.low_inclusive)):
            return False
        return high is None or not (v > high or (v == high and not self.high_inclusive))

    def __call__(self, name: str, value: Any, grid: Grid | None) -> float:
        v = finite_float(value)
        if v is None:
            raise ValidationError.for_parameter(name, value,
                                                self.allowed + _number_text_hint(value))
        if not (self.contains(v) and self.contains(v, held=True)):
            raise ValidationError.for_parameter(name, value, self.allowed)
        return v


def real(*, low: float | None = None, high: float | None = None,
         low_inclusive: bool = True, high_inclusive: bool = True) -> Real:
    """A finite real number in an optional interval (see :class:`Real`)."""
    return Real(low, high, low_inclusive, high_inclusive)


@dataclasses.dataclass(frozen=True)
class Angle:
    """Checker of an angle in radians: any finite real number. Values with
    ``|a| > ANGLE_WRAP`` are wrapped into ``[-π, π]`` (in float64, before
    the float32 cast); smaller ones are kept as given. Returns a Python float."""

    allowed = f"a finite real number of radians (|a| > {ANGLE_WRAP:g} is wrapped into [-pi, pi])"

    def __call__(self, name: str, value: Any, grid: Grid | None) -> float:
        v = finite_float(value)
        if v is None:
            raise ValidationError.for_parameter(name, value, self.allowed)
        return math.remainder(v, 2.0 * math.pi) if abs(v) > ANGLE_WRAP else v


def angle() -> Angle:
    """An angle in radians (see :class:`Angle`)."""
    return Angle()


@dataclasses.dataclass(frozen=True)
class Integer:
    """Checker of an integer (not a bool) in ``[low, high]``, by default the
    int32 range (integer settings feed int32 arithmetic); returns a Python int.

    A float is refused unless ``whole_floats`` (the training config's
    counts, where ``total_steps: 1e6`` reads as the float ``1000000.0``):
    then a float with no fractional part is taken as that integer.
    """

    low: int = -MAX_INT32 - 1
    high: int = MAX_INT32
    whole_floats: bool = False

    @property
    def allowed(self) -> str:
        """What is allowed, for error messages."""
        return f"an integer in [{self.low}, {self.high}]"

    def __call__(self, name: str, value: Any, grid: Grid | None) -> int:
        if (self.whole_floats and isinstance(value, (float, np.floating))
                and math.isfinite(value) and float(value).is_integer()):
            value = int(value)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValidationError.for_parameter(name, value,
                                                self.allowed + _number_text_hint(value))
        v = int(value)
        if not self.low <= v <= self.high:
            raise ValidationError.for_parameter(name, value, self.allowed)
        return v


def integer(*, low: int | None = None, high: int | None = None,
            whole_floats: bool = False) -> Integer:
    """An integer in a closed interval that defaults to the int32 range
    (``whole_floats``: see :class:`Integer`)."""
    return Integer(-MAX_INT32 - 1 if low is None else low, MAX_INT32 if high is None else high,
                   whole_floats)



def count(*, low: int = 0, high: int = MAX_INT32) -> Integer:
    """A count in a config file (steps, envs, layers, a seed): an integer in
    ``[low, high]`` that may be written ``1e6`` (YAML reads it as a float;
    see :class:`Integer`)."""
    return Integer(low, high, whole_floats=True)

@dataclasses.dataclass(frozen=True)
class IntegerList:
    """Checker of a non-empty list (or tuple) of integers, each as ``item``
    checks it; returns a tuple of Python ints (hashable: network layer
    sizes are compiled in). ``lengths``: the allowed lengths, or ``None``
    for any."""

    item: Integer
    lengths: tuple[int, ...] | None = None

    @property
    def allowed(self) -> str:
        """What is allowed, for error messages."""
        size = ("a non-empty list" if self.lengths is None else
                f"a list of {' or '.join(str(n) for n in self.lengths)}")
        return f"{size} of integers in [{self.item.low}, {self.item.high}]"

    def __call__(self, name: str, value: Any, grid: Grid | None) -> tuple[int, ...]:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value \
                or (self.lengths is not None and len(value) not in self.lengths):
            raise ValidationError.for_parameter(name, value, self.allowed)
        try:
            return tuple(self.item(name, v, grid) for v in value)
        except ValidationError:
            raise ValidationError.for_parameter(name, value, self.allowed) from None


def integer_list(*, low: int, high: int, lengths: tuple[int, ...] | None = None,
                 whole_floats: bool = False) -> IntegerList:
    """A non-empty list of integers in ``[low, high]`` (see :class:`IntegerList`)."""
    return IntegerList(Integer(low, high, whole_floats), lengths)


def boolean() -> Callable[[str, Any, Grid | None], bool]:
    """A bool (``True``/``False``; integers are refused). A :data:`Checker`
    that needs no grid (``grid`` may be None)."""

    def check(name: str, value: Any, grid: Grid | None) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise ValidationError.for_parameter(name, value, "a bool (true or false)")
        return bool(value)

    return check


def is_pair(value: Any) -> bool:
    """Whether ``value`` is an indexable sequence of length 2 (a list, tuple or
    array; not a string, a mapping or a set, whose order or indexing is not
    that of a pair)."""
    if isinstance(value, (str, bytes, Mapping, AbstractSet)):
        return False
    return hasattr(value, "__getitem__") and hasattr(value, "__len__") and len(value) == 2


def grid_centre(grid: Grid) -> tuple[float, float]:
    """``((width-1)/2, (height-1)/2)`` rounded down to a cell."""
    return (float((grid.width - 1) // 2), float((grid.height - 1) // 2))


def grid_position(*, none_means_centre: bool = False) -> Checker:
    """An ``(x, y)`` pair of finite reals inside the grid; returns a tuple of floats.

    With ``none_means_centre``, ``None`` resolves to :func:`grid_centre`.
    """

    def check(name: str, value: Any, grid: Grid) -> tuple[float, float]:
        allowed = (
            f"an (x, y) pair inside the grid, 0 <= x <= {grid.width - 1}, "
            f"0 <= y <= {grid.height - 1}"
        )
        if value is None and none_means_centre:
            return grid_centre(grid)
        x, y = (finite_float(v) for v in value) if is_pair(value) else (None, None)
        if x is None or y is None:
            raise ValidationError.for_parameter(name, value, allowed)
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


def check_order(resolved: Mapping[str, Any], prefix: str, lower: str, upper: str, *,
                strict: bool = False) -> None:
    """Refuse resolved settings where ``lower`` exceeds ``upper`` (or equals
    it, with ``strict``), naming ``prefix.lower``."""
    low, high = resolved[lower], resolved[upper]
    if low > high or (strict and low == high):
        relation = "below" if strict else "<="
        raise ValidationError.for_parameter(f"{prefix}.{lower}", low,
                                            f"a value {relation} {upper}={high}")


@dataclasses.dataclass(frozen=True)
class OrNone:
    """Checker: ``None`` (a value resolved later, e.g. from a file or from
    other settings) or what ``check`` accepts."""

    check: Checker

    def __call__(self, name: str, value: Any, grid: Grid) -> Any:
        return None if value is None else self.check(name, value, grid)


def optional(check: Checker) -> OrNone:
    """``check`` that also accepts ``None`` (see :class:`OrNone`)."""
    return OrNone(check)


def real_list(*, low: float, high: float) -> Checker:
    """A list of finite reals, each in ``[low, high]`` (as float32 too), or
    ``None``; returns a list of Python floats. The length is checked by the
    component (``Configurable.validate``)."""
    element = real(low=low, high=high)
    allowed = f"null or a list of finite real numbers, each in [{low}, {high}]"

    def check(name: str, value: Any, grid: Grid) -> list[float] | None:
        if value is None:
            return None
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise ValidationError.for_parameter(name, value, allowed)
        try:
            return [element(name, v, grid) for v in value]
        except ValidationError:
            raise ValidationError.for_parameter(name, value, allowed) from None

    return check
