"""The scoreboard record's schema: every section of a record is checked when
the record is read (:func:`plume_jax.scoreboard.report.load_record`), before
anything runs, so a malformed section is a one-line error naming its path
inside the record (``$.families.gaussian.rows[3].metrics.success_ci95``)
instead of a ``KeyError`` in ``bench --render-only``, in the rerun check, or
in the write after another family's whole run.

The schema is JSON Schema (draft 2020-12), checked with ``jsonschema``;
its ``number`` is a finite real number (the record is written with
``allow_nan=False``, so a ``NaN`` read back could never be written again).
What it asks for is what the renderer, the rerun merge and the verdicts
read: a row that ran has its metrics, one that did not has its reason, a
start-cell map that ran has at least one cell with a success rate. Names
that become paths stay inside the record's folder: a family's name is
letters, digits, ``_`` and ``-``, and a figure (``figure``,
``map_figure``, ``recipe_figure``) is a plain ``.png`` file name. Text
the page shows (labels, reasons, machine descriptions) is escaped where it
is written into the markdown (:func:`plume_jax.scoreboard.report.render`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from plume_jax.core.errors import ValidationError, bounded_repr

#: The end of the text (``(?![\s\S])``, read alike by Python's ``re`` and
#: ECMA-262): a pattern ending in ``$`` would also take a trailing newline.
_END = r"(?![\s\S])"
#: A family's name: it names its figures (``<family>.png``) and its section
#: of the page, so it stays inside the record's folder.
FAMILY_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*" + _END
#: A figure a section names: a plain ``.png`` file name in the figures
#: folder (no folder part, no ``..``: never a path that leaves the folder).
FIGURE_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.png" + _END
_FIGURE = {"type": "string", "pattern": FIGURE_NAME_PATTERN}
_NUMBER = {"type": "number"}
_MAYBE_NUMBER = {"type": ["number", "null"]}
_TEXT = {"type": "string"}
_COUNT = {"type": "integer", "minimum": 0}
_TEXTS = {"type": "array", "items": _TEXT}

_METRICS = {
    "type": "object",
    "required": ["episodes", "successes", "success_rate", "success_ci95", "mean_steps",
                 "median_steps", "p90_steps", "path_efficiency"],
    "properties": {
        "episodes": _COUNT, "successes": _COUNT,
        "success_rate": {"type": "number", "minimum": 0, "maximum": 1},
        "success_ci95": {"type": "array", "items": _NUMBER, "minItems": 2, "maxItems": 2},
        "mean_steps": _MAYBE_NUMBER, "sem_steps": _MAYBE_NUMBER,
        "median_steps": _MAYBE_NUMBER, "p90_steps": _MAYBE_NUMBER,
        "path_efficiency": _MAYBE_NUMBER,
    },
}


def _ran_or_why(ran: dict[str, Any]) -> dict[str, Any]:
    """``status`` ``"ok"`` with what a run gives (``ran``), or ``"not
    applicable"`` with its ``reason``."""
    return {
        "if": {"properties": {"status": {"const": "ok"}}},
        "then": ran,
        "else": {"if": {"properties": {"status": {"const": "not applicable"}}},
                 "then": {"required": ["reason"], "properties": {"reason": _TEXT}}},
    }


_STATUS = {"enum": ["ok", "not applicable"]}

#: A fixed-start protocol's count (``singh240``, :mod:`plume_jax.scoreboard.fixed_starts`).
FIXED_STARTS = ("singh240",)

#: A row of a fixed-start family: the homings out of the starts run, per
#: start group, and the paper's best on the preset (null where it has none).
_HOMINGS = {
    "type": "object",
    "required": ["protocol", "homings", "episodes", "by_start", "paper_best"],
    "properties": {"protocol": {"enum": list(FIXED_STARTS)}, "homings": _COUNT,
                   "episodes": {"type": "integer", "minimum": 1},
                   "by_start": {"type": "object", "additionalProperties": _COUNT},
                   "paper_best": {"type": ["integer", "null"], "minimum": 0}},
}

_ROW = {
    "type": "object",
    "required": ["preset", "label", "kind", "status"],
    "properties": {
        "family": _TEXT, "preset": _TEXT, "label": _TEXT, "kind": _TEXT, "agent": _TEXT,
        "source": _TEXT, "own_settings": _TEXTS, "status": _STATUS,
        "max_steps": _COUNT, "seconds": _NUMBER, "compile_seconds": _NUMBER,
        "trained_on": _TEXT, "homings": _HOMINGS,
    },
    **_ran_or_why({"required": ["metrics"], "properties": {"metrics": _METRICS}}),
}

_ROBUSTNESS_ROW = {
    "type": "object",
    "required": ["preset", "label", "kind", "status", "axis", "level"],
    "properties": {
        "family": _TEXT, "preset": _TEXT, "label": _TEXT, "kind": _TEXT, "status": _STATUS,
        "axis": _TEXT, "level": {"type": ["string", "number", "boolean", "null"]},
    },
    **_ran_or_why({"required": ["metrics"], "properties": {"metrics": _METRICS}}),
}

#: The protocols a protocol-variant row may run (a fixed-start family's own and
#: its variants, :mod:`plume_jax.scoreboard.variants`).
VARIANT_PROTOCOLS = ("singh240", "singh240_paper")

#: A fixed-start family's agent under one protocol of its variant table: the
#: homings under each evaluation seed (``seeds``, in the same order).
_VARIANT_ROW = {
    "type": "object",
    "required": ["preset", "label", "kind", "status", "protocol"],
    "properties": {
        "family": _TEXT, "preset": _TEXT, "label": _TEXT, "kind": _TEXT, "status": _STATUS,
        "protocol": {"enum": list(VARIANT_PROTOCOLS)}, "trained_on": _TEXT,
    },
    **_ran_or_why({
        "required": ["seeds", "homings", "episodes"],
        "properties": {"seeds": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
                       "homings": {"type": "array", "items": _COUNT, "minItems": 1},
                       "episodes": {"type": "integer", "minimum": 1},
                       "seconds": _NUMBER}}),
}

_CELLS = {"type": "array", "items": _MAYBE_NUMBER}
_MAP = {
    "type": "object",
    "required": ["label", "status"],
    "properties": {"label": _TEXT, "status": _STATUS},
    **_ran_or_why({
        "required": ["xs", "ys", "success"],
        "properties": {
            "xs": {"type": "array", "items": _NUMBER, "minItems": 1},
            "ys": {"type": "array", "items": _NUMBER, "minItems": 1},
            # at least one start cell with a rate: the table divides by their number
            "success": {"type": "array", "items": _CELLS,
                        "contains": {"type": "array", "contains": _NUMBER}},
            "episodes_per_cell": _COUNT, "heading": _NUMBER,
        }}),
}

_VERDICT = {
    "type": "object",
    "required": ["best_zoo", "beats_all", "not_beaten"],
    "properties": {"best_zoo": {"type": ["string", "null"]}, "beats_all": {"type": "boolean"},
                   "not_beaten": _TEXTS},
}

_RERUN = {
    "type": "object",
    "required": ["agents", "robustness", "wall_seconds", "finished_at", "machine_text"],
    "properties": {
        "agents": {**_TEXTS, "minItems": 1}, "robustness": {"type": ["boolean", "null"]},
        "wall_seconds": _NUMBER, "finished_at": _TEXT, "machine_text": _TEXT,
        "git_revision": {"type": ["string", "null"]},
    },
}

_PROTOCOL = {
    "type": "object",
    "required": ["mode", "episodes", "robustness_episodes", "map_stride", "map_episodes",
                 "seed"],
    "properties": {"mode": _TEXT, "episodes": _COUNT, "robustness_episodes": _COUNT,
                   "map_stride": _COUNT, "map_episodes": _COUNT, "seed": {"type": "integer"},
                   "fixed_starts": {"enum": list(FIXED_STARTS)}},
}

#: A recipe row's verdicts, best first (:func:`plume_jax.scoreboard.recipes.verdict`).
RECIPE_VERDICTS = ("beats", "faster", "no clear difference", "worse", "one seed: no verdict",
                   "no baseline ran")
#: Where a recipe row's per-seed results come from (``seed_results``).
SEED_RESULTS = ("board", "sweep", "headline")
#: A recipe's success IQM interval against a published best
#: (:func:`plume_jax.scoreboard.recipes.paper_verdict`).
PAPER_VERDICTS = ("above", "includes", "below", "one seed: no verdict")

_ESTIMATE = {
    "type": "object", "required": ["value", "ci95"],
    "properties": {"value": _NUMBER,
                   "ci95": {"oneOf": [{"type": "null"}, {"type": "array", "items": _NUMBER,
                                                         "minItems": 2, "maxItems": 2}]}},
}

#: A zoo recipe over seeds (:mod:`plume_jax.scoreboard.recipes`); records
#: written before issue 39 have none.
_RECIPE = {
    "type": "object",
    "required": ["preset", "label", "seeds", "seed_results", "per_seed", "success", "steps",
                 "baseline", "improvement", "verdict"],
    "properties": {
        "family": _TEXT, "preset": _TEXT, "label": _TEXT,
        # the entry's own preset, in a section whose recipes run on every regime
        "trained_on": _TEXT,
        "seeds": {"type": "integer", "minimum": 1},
        "seed_results": {"enum": list(SEED_RESULTS)},
        "per_seed": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["seed", "success_rate", "mean_steps", "episodes"],
            "properties": {"seed": _COUNT,
                           "success_rate": {"type": "number", "minimum": 0, "maximum": 1},
                           "mean_steps": _MAYBE_NUMBER, "episodes": _COUNT}}},
        "success": {"type": "object", "required": ["iqm", "mean"],
                    "properties": {"iqm": _ESTIMATE, "mean": _ESTIMATE}},
        "steps": {"oneOf": [{"type": "null"}, {
            "type": "object", "required": ["iqm", "mean", "seeds"],
            "properties": {"iqm": _ESTIMATE, "mean": _ESTIMATE, "seeds": _COUNT}}]},
        "baseline": {"oneOf": [{"type": "null"}, {
            "type": "object", "required": ["label", "success_rate", "mean_steps"],
            "properties": {"label": _TEXT, "success_rate": _NUMBER,
                           "mean_steps": _MAYBE_NUMBER}}]},
        "improvement": {"oneOf": [{"type": "null"}, _ESTIMATE]},
        "verdict": {"enum": list(RECIPE_VERDICTS)},
        # a fixed-start family's recipe: the paper's best on its preset, and the verdict
        "paper": {"type": "object", "required": ["homings", "episodes", "verdict"],
                  "properties": {"homings": _COUNT, "episodes": {"type": "integer", "minimum": 1},
                                 "verdict": {"enum": list(PAPER_VERDICTS)}}},
    },
}

_SECTION = {
    "type": "object",
    "required": ["protocol", "rows", "verdicts", "wall_seconds", "finished_at",
                 "machine_text"],
    "properties": {
        "protocol": _PROTOCOL,
        "rows": {"type": "array", "items": _ROW},
        "verdicts": {"type": "object", "additionalProperties": _VERDICT},
        "robustness": {"type": "array", "items": _ROBUSTNESS_ROW},
        "maps": {"type": "array", "items": _MAP},
        "variants": {"type": "array", "items": _VARIANT_ROW},
        "reruns": {"type": "array", "items": _RERUN},
        "wall_seconds": _NUMBER, "finished_at": _TEXT, "machine_text": _TEXT,
        "git_revision": {"type": ["string", "null"]}, "figure": _FIGURE, "map_figure": _FIGURE,
        "recipes": {"type": "array", "items": _RECIPE}, "recipe_figure": _FIGURE,
        "recipes_at": {"type": "object", "required": ["finished_at", "machine_text",
                                                      "wall_seconds"],
                       "properties": {"finished_at": _TEXT, "machine_text": _TEXT,
                                      "wall_seconds": _NUMBER,
                                      "git_revision": {"type": ["string", "null"]}}},
    },
}

#: The record's schema (the ``format`` string is checked by the reader).
RECORD_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["format", "families"],
    "properties": {"format": _TEXT,
                   "families": {"type": "object", "additionalProperties": _SECTION,
                                "propertyNames": {"pattern": FAMILY_NAME_PATTERN}}},
}


def _finite_number(checker: Any, instance: Any) -> bool:
    return (isinstance(instance, (int, float)) and not isinstance(instance, bool)
            and math.isfinite(instance))


def _finite_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@functools.cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"number": _finite_number, "integer": _finite_integer})
    cls = validators.extend(Draft202012Validator, type_checker=checker)
    return cls(RECORD_SCHEMA)


def _describe(error: Any) -> str:
    """What is wrong with ``error.instance``, in a few words (never the
    whole instance: a section can be hundreds of KB)."""
    kind, expected, got = error.validator, error.validator_value, error.instance
    if kind == "required":
        missing = [key for key in expected if isinstance(got, dict) and key not in got]
        return f"the key {missing[0] if missing else expected!r} is missing"
    shown = bounded_repr(got, 60)
    if kind == "type":
        names = {"number": "a finite number", "integer": "an integer", "array": "an array",
                 "object": "an object", "null": "a null"}
        wanted = " or ".join(names.get(t, f"a {t}") for t in
                             ([expected] if isinstance(expected, str) else expected))
        return f"{shown} is not {wanted}"
    if kind in ("enum", "const"):
        options = expected if kind == "enum" else [expected]
        return f"{shown} is not one of {options}"
    if kind in ("minItems", "maxItems"):
        return f"{shown} has {len(got)} items ({kind} {expected})"
    if kind in ("minimum", "maximum"):
        return f"{shown} is {'below' if kind == 'minimum' else 'above'} {expected}"
    if kind == "pattern":
        what = ("a plain .png file name in the figures folder" if expected == FIGURE_NAME_PATTERN
                else "a family name of letters, digits, _ and - (a name that stays inside the "
                "record's folder)")
        return f"{shown} is not {what}"
    if kind == "contains":
        return f"{shown} has no start cell with a success rate"
    return f"{shown} fails the record's {kind!r} rule"


def check_record(record: Any, path: str, parameter: str = "--json") -> None:
    """Check a whole record (every section) against :data:`RECORD_SCHEMA`.

    Raises:
        ValidationError: (``parameter``, quoting ``path``) naming the first
            problem's place inside the record and what is wrong there.
    """
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(record))
    if error is None:
        return
    raise ValidationError.for_parameter(
        parameter, path, f"a scoreboard record whose every section is well formed (at "
        f"{error.json_path}: {_describe(error)}); fix or remove that section, or write to a "
        "new file")
