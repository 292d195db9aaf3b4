"""The search-space file of ``plume-jax tune``: what Optuna samples, and
how the study runs.

Search-space YAML::

    params:                          # dotted settings of the training config
      algo.learning_rate: {type: float, low: 1.0e-4, high: 3.0e-3, log: true}
      algo.ent_coef: {type: float, low: 0.0, high: 0.05}
      algo.update_epochs: {type: int, low: 2, high: 8, step: 2}
      network.hidden_sizes: {type: categorical, choices: [[32], [64, 64]]}
      env.reward.scale: {type: float, low: 0.02, high: 0.2}
    set:                             # optional: fixed overrides of every trial
      algo.total_steps: 500000
      eval.every: 10                 # periodic evaluations: intermediate values
    sampler: tpe                     # tpe (constant liar) | random | grid
    seed: 0                          # the sampler's seed
    pruner: median                   # none | median | successive_halving | hyperband
    batch_size: 8                    # trials asked for at once, trained as one program per
                                     # static structure

Every key is checked by the settings system (an unknown key names the
closest known ones, "did you mean"); every parameter name is checked by
applying its lowest value to the training config, so a misspelt setting
fails before anything is written or compiled.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from typing import Any

from plume_jax.core.errors import ValidationError
from plume_jax.settings import REQUIRED, Setting, boolean, choice, count, optional, \
    resolve_keys
from plume_jax.train.config import TrainConfig, apply_dotted, train_config, with_overrides

SAMPLERS = ("tpe", "random", "grid")
PRUNERS = ("none", "median", "successive_halving", "hyperband")
PARAM_TYPES = ("float", "int", "categorical")


#: The largest magnitude of a bound or step (a 400-digit integer or +-1e308
#: would overflow the arithmetic of a range).
MAX_MAGNITUDE = 1e15

#: The most grid points (the grid sampler's, or any finite space's that tune
#: enumerates), and the most choices of one categorical.
GRID_MAX = 10_000


def _number(name: str, value: Any, grid: Any) -> float | None:
    if value is None:
        return None
    allowed = f"a finite number of magnitude at most {MAX_MAGNITUDE:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError.for_parameter(name, value, allowed)
    if isinstance(value, int) and abs(value) > MAX_MAGNITUDE:  # before float(): no overflow
        raise ValidationError.for_parameter(name, f"{str(value)[:20]}... ({len(str(value))} "
                                            "digits)" if len(str(value)) > 24 else value,
                                            allowed)
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise ValidationError.for_parameter(name, value, allowed)
    return value


def _choices(name: str, value: Any, grid: Any) -> list[Any] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or len(value) > GRID_MAX:
        raise ValidationError.for_parameter(
            name, value if not isinstance(value, list) or len(value) <= 8 else
            f"a list of {len(value)} values", f"a non-empty list of at most {GRID_MAX} values")
    return value


def _sections(name: str, value: Any, grid: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValidationError.for_parameter(name, value, "a mapping of SECTION.KEY: value")
    return dict(value)


PARAM_SCHEMA: dict[str, Setting] = {
    "type": Setting(REQUIRED, choice(PARAM_TYPES), doc="float, int or categorical"),
    "low": Setting(None, _number, doc="lowest value (float, int)"),
    "high": Setting(None, _number, doc="highest value (float, int)"),
    "log": Setting(False, boolean(), doc="sample on a log scale (float, int)"),
    "step": Setting(None, _number, doc="a discretisation step (float, int)"),
    "choices": Setting(None, _choices, doc="the values (categorical)"),
}

SPACE_SCHEMA: dict[str, Setting] = {
    "params": Setting(REQUIRED, _sections, doc="dotted setting -> parameter spec"),
    "set": Setting(None, _sections, doc="fixed overrides of every trial"),
    "sampler": Setting("tpe", choice(SAMPLERS), doc="the Optuna sampler"),
    "seed": Setting(0, optional(count()), doc="the sampler's seed"),
    "pruner": Setting("none", choice(PRUNERS), doc="the Optuna pruner"),
    "batch_size": Setting(8, count(low=1, high=4096), doc="trials trained at once"),
}


@dataclasses.dataclass(frozen=True)
class Param:
    """One sampled setting: its dotted name and Optuna distribution's fields."""

    name: str
    type: str
    low: Any = None
    high: Any = None
    log: bool = False
    step: Any = None
    choices: tuple[Any, ...] = ()

    def count(self) -> int | None:
        """How many values the parameter takes (None: a float range without
        step), computed without listing them."""
        if self.type == "categorical":
            return len(self.choices)
        if self.type == "int":
            return (int(self.high) - int(self.low)) // int(self.step or 1) + 1
        if self.step is None:
            return None
        return int(math.floor((self.high - self.low) / self.step + 1e-9)) + 1

    def values(self) -> list[Any]:
        """The values the grid sampler visits (categorical choices, or every
        step of an integer/stepped range, none past ``high``: the last step
        that fits is the highest value, as Optuna's own ranges do)."""
        if self.type == "categorical":
            return list(self.choices)
        n = self.count()
        if n is None:
            raise ValidationError.for_parameter(
                f"params.{self.name}", {"type": self.type, "low": self.low, "high": self.high},
                "with sampler grid: a categorical, an int range or a float range with step")
        if n > GRID_MAX:
            raise ValidationError.for_parameter(
                f"params.{self.name}.step", self.step or 1,
                f"a step giving at most {GRID_MAX} values (this one gives {n})")
        if self.type == "int":
            return [int(self.low) + k * int(self.step or 1) for k in range(n)]
        return [min(self.low + k * self.step, self.high) for k in range(n)]

    def optuna_high(self) -> Any:
        """The highest value Optuna samples: ``high``, or the last step that
        fits below it."""
        if self.type == "categorical" or self.step is None:
            return self.high
        n = self.count() or 1
        return self.values()[-1] if n <= GRID_MAX else self.low + (n - 1) * self.step

    def lowest(self) -> Any:
        return self.choices[0] if self.type == "categorical" else self.low


def _param(name: str, spec: Any) -> Param:
    where = f"params.{name}"
    if not isinstance(spec, Mapping):
        raise ValidationError.for_parameter(where, spec, "a mapping {type: float|int|categorical, "
                                            "low: ..., high: ...} or {type: categorical, "
                                            "choices: [...]}")
    s = resolve_keys(where, PARAM_SCHEMA, spec, what="a parameter spec key")
    if s["type"] == "categorical":
        if s["choices"] is None:
            raise ValidationError.for_parameter(f"{where}.choices", None, "a non-empty list")
        extra = [k for k in ("low", "high", "step") if s[k] is not None] + \
            (["log"] if s["log"] else [])
        if extra:
            raise ValidationError.for_parameter(f"{where}.{extra[0]}", s[extra[0]],
                                                "nothing for a categorical (only choices)")
        return Param(name, "categorical", choices=tuple(s["choices"]))
    if s["choices"] is not None:
        raise ValidationError.for_parameter(f"{where}.choices", s["choices"],
                                            "nothing for a range (choices: type categorical)")
    for key in ("low", "high"):
        if s[key] is None:
            raise ValidationError.for_parameter(f"{where}.{key}", None, "a number")
        if s["type"] == "int" and s[key] != int(s[key]):
            raise ValidationError.for_parameter(f"{where}.{key}", s[key], "an integer")
    if s["low"] > s["high"]:
        raise ValidationError.for_parameter(f"{where}.low", s["low"],
                                            f"a value <= high={s['high']}")
    if s["log"] and (s["low"] <= 0 or s["step"] is not None):
        raise ValidationError.for_parameter(f"{where}.log", True,
                                            "false, unless low > 0 and there is no step")
    if s["step"] is not None and s["step"] <= 0:
        raise ValidationError.for_parameter(f"{where}.step", s["step"], "a positive number")
    if s["type"] == "int" and s["step"] is not None and s["step"] != int(s["step"]):
        raise ValidationError.for_parameter(f"{where}.step", s["step"], "a positive integer")
    cast = int if s["type"] == "int" else float
    return Param(name, s["type"], cast(s["low"]), cast(s["high"]), s["log"],
                 None if s["step"] is None else cast(s["step"]))


@dataclasses.dataclass(frozen=True)
class Space:
    """A validated search space (module docstring) and the base config's
    raw mapping it applies to."""

    params: tuple[Param, ...]
    set: dict[str, Any]
    sampler: str
    seed: int | None
    pruner: str
    batch_size: int
    base: dict[str, Any]
    base_dir: str

    def raw_config(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The raw config of a trial: the base, ``set``, then ``values``."""
        raw = with_overrides(self.base, self.set, "set")
        for key, value in values.items():
            apply_dotted(raw, key, value, "params")
        return raw

    def config(self, values: Mapping[str, Any]) -> TrainConfig:
        """The validated training config of a trial with ``values``; its
        ``run.lanes`` must be null (a batch's program width is its number
        of trials)."""
        config = train_config(self.raw_config(values), base_dir=self.base_dir)
        if config.run["lanes"] is not None:
            raise ValidationError.for_parameter(
                "run.lanes", config.run["lanes"], "null in tune's training config (each batch "
                "of trials trains as vmapped programs whose width is their number of trials; "
                "best_config.yaml sets run.lanes for plume-jax train): drop it, or "
                "--set run.lanes=null")
        return config

    def grid(self) -> dict[str, list[Any]]:
        return {p.name: p.values() for p in self.params}

    def size(self) -> int | None:
        """The number of distinct points of the space (None: infinite, a
        float range without step)."""
        counts = [p.count() for p in self.params]
        return None if None in counts else math.prod(c for c in counts if c is not None)

    def points(self) -> list[dict[str, Any]]:
        """Every point of a finite space, at most :data:`GRID_MAX` (the grid
        sampler's grid), in the order of the parameters' values."""
        for p in self.params:
            n = p.count()
            if n is None or n > GRID_MAX:
                p.values()  # the parameter's own error
        size = self.size()
        if size is None or size > GRID_MAX:
            raise ValidationError.for_parameter(
                "params", "a grid of " + ("infinitely many" if size is None else f"{size}")
                + " points", f"with sampler grid: at most {GRID_MAX} points")
        names = [p.name for p in self.params]
        return [dict(zip(names, values)) for values in itertools.product(
            *(p.values() for p in self.params))]

    def refused(self, points: list[dict[str, Any]]) -> dict[int, str]:
        """The points the training config refuses: index -> the error."""
        out = {}
        for k, point in enumerate(points):
            try:
                self.config(point)
            except ValidationError as error:
                out[k] = str(error)
        return out


def space_from_mapping(data: Any, base: Mapping[str, Any], base_dir: str,
                       overrides: Mapping[str, Any] | None = None) -> Space:
    """Validate a search-space mapping against the raw training config
    ``base`` (``overrides``: the command line's ``sampler``, ``seed``,
    ``pruner``, ``batch_size``, replacing the file's)."""
    if not isinstance(data, Mapping):
        raise ValidationError.for_parameter("--space", data, f"a mapping with keys among "
                                            f"{list(SPACE_SCHEMA)}")
    merged = {**data, **{k: v for k, v in (overrides or {}).items() if v is not None}}
    s = resolve_keys("", SPACE_SCHEMA, merged, what="a search-space key")
    if not s["params"]:
        raise ValidationError.for_parameter("params", s["params"],
                                            "at least one parameter to tune")
    params = tuple(_param(name, spec) for name, spec in s["params"].items())
    space = Space(params, s["set"], s["sampler"], s["seed"], s["pruner"], s["batch_size"],
                  dict(base), base_dir)
    for p in params:  # every name is a setting, every bound a valid value
        bounds = p.choices if p.type == "categorical" else (p.low, p.optuna_high())
        for value in bounds:
            space.config({**{q.name: q.lowest() for q in params}, p.name: value})
    cfg = space.config({q.name: q.lowest() for q in params})
    if s["pruner"] != "none" and not cfg.eval["every"]:
        raise ValidationError.for_parameter(
            "pruner", s["pruner"], "none unless eval.every is set (the periodic evaluations "
            "are the intermediate values a pruner reads): add it under set")
    if s["sampler"] == "grid":
        points = space.points()
        refused = space.refused(points)
        if len(refused) == len(points):
            first = next(iter(refused.values()))
            raise ValidationError.for_parameter(
                "params", f"a grid of {len(points)} points", "a grid with at least one point "
                f"the training config accepts (the first refused: {first})")
    return space


__all__ = ["GRID_MAX", "MAX_MAGNITUDE", "PARAM_TYPES", "PRUNERS", "SAMPLERS", "Param", "Space", "space_from_mapping"]
