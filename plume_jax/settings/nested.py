"""Component configs inside component configs (layer 0): a wrapper's
``sensor``, a composite's ``sensors``, a weighted sum's ``components``.

A nested config is a type name or ``{"type": ..., ...settings}``; it is
checked and resolved against a table ``type name -> component class``
(passed as a function, since the tables are built after the component
modules), and errors name the nested field (``sensor.sensors[1].std``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from plume_jax.core.errors import ValidationError
from plume_jax.settings.checks import Checker
from plume_jax.settings.schema import Builder, Configurable, nested_setting
from plume_jax.core.types import Grid

Table = Callable[[], Mapping[str, type[Configurable]]]


def _as_entry(name: str, value: Any, table: Mapping[str, type[Configurable]], kind: str) -> dict[str, Any]:
    allowed = f"a {kind} config: a type name or a dict {{'type': one of {sorted(table)}, ...settings}}"
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, Mapping):
        raise ValidationError.for_parameter(name, value, allowed)
    if "type" not in value:
        raise ValidationError.for_parameter(f"{name}.type", None, f"one of {sorted(table)}")
    if value["type"] not in table:
        raise ValidationError.for_parameter(f"{name}.type", value["type"], f"one of {sorted(table)}")
    return dict(value)


def resolve_component(name: str, value: Any, table: Mapping[str, type[Configurable]], kind: str,
                      grid: Grid) -> tuple[Any, Any, dict[str, Any]]:
    """Validate and build one component config.

    Returns ``(component, params, resolved)`` where ``resolved`` is
    ``{"type": ..., **every setting}`` — plain Python, enough to rebuild.
    Errors name the nested field (``sensor.sensor.threshold``).
    """
    entry = _as_entry(name, value, table, kind)
    cls = table[entry.pop("type")]
    component, params, resolved = cls.build(entry, grid, name)
    return component, params, {"type": cls.type_name, **resolved}


def component_config(table: Table, kind: str) -> Checker:
    """A checker for one nested component config (``{"type": ..., ...}`` or a
    bare type name); returns the fully resolved config dict."""

    def check(name: str, value: Any, grid: Grid) -> dict[str, Any]:
        return resolve_component(name, value, table(), kind, grid)[2]

    return check


def component_list(table: Table, kind: str, *, named: bool = False,
                   min_length: int = 1) -> Checker:
    """A checker for a non-empty list of nested component configs.

    With ``named``, each entry may carry a ``"name"`` (a non-empty string,
    unique in the list); entries without one are named after their type
    (``antennae``, then ``antennae_2``, ...). The resolved entries always
    carry their name, so a resolved list resolves to itself.
    """

    def check(name: str, value: Any, grid: Grid) -> list[dict[str, Any]]:
        allowed = f"a list of at least {min_length} {kind} config(s)"
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") \
                or len(value) < min_length:
            raise ValidationError.for_parameter(name, value, allowed)
        out: list[dict[str, Any]] = []
        used: set[str] = set()
        for i, raw in enumerate(value):
            entry_name = f"{name}[{i}]"
            entry = _as_entry(entry_name, raw, table(), kind)
            label = entry.pop("name", None)
            if named:
                if label is not None and (not isinstance(label, str) or not label
                                          or label in used):
                    raise ValidationError.for_parameter(
                        f"{entry_name}.name", label,
                        f"a non-empty string not used before ({sorted(used)})")
                if label is None:
                    label, k = entry["type"], 2
                    while label in used:
                        label, k = f"{entry['type']}_{k}", k + 1
                used.add(label)
            elif label is not None:
                raise ValidationError.for_parameter(
                    f"{entry_name}.name", label, "no 'name' here (entries are not named)")
            resolved = resolve_component(entry_name, entry, table(), kind, grid)[2]
            out.append({"name": label, **resolved} if named else resolved)
        return out

    return check


def nested(default: Any, table: Table, kind: str, *, doc: str, many: bool = False,
           named: bool = False, build_one: Builder | None = None) -> Any:
    """A static setting holding one component config (``many=False``; the
    field holds the component, ``None`` until built) or a list of them
    (``many=True``, optionally ``named``; the field holds a tuple). The
    ``Params`` field of the same name (a ``nested_params()``) holds their
    params, in the same structure.

    ``build_one(qualified_name, config, grid) -> (component, params)``
    builds one entry (default: from ``table``); entry ``i`` of a list is
    named ``<setting>[i]`` in errors.
    """
    if build_one is None:
        def build_one(name: str, config: Any, grid: Grid) -> tuple[Any, Any]:
            return resolve_component(name, config, table(), kind, grid)[:2]

    if not many:
        return nested_setting(default, component_config(table, kind), build=build_one, doc=doc)

    def build_all(name: str, entries: list[dict[str, Any]], grid: Grid) -> tuple[tuple, tuple]:
        built = [build_one(f"{name}[{i}]", {k: v for k, v in entry.items() if k != "name"}, grid)
                 for i, entry in enumerate(entries)]
        return tuple(c for c, _ in built), tuple(p for _, p in built)

    return nested_setting(default, component_list(table, kind, named=named), build=build_all,
                          doc=doc, unbuilt=())
