"""Shared machinery of the sensors (and of other composed components):
validated sub-component configs, static configs for metadata, clipping."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from plume_jax.errors import ValidationError
from plume_jax.settings import Checker
from plume_jax.spaces import Box
from plume_jax.types import Grid


def _as_entry(name: str, value: Any, table: Mapping[str, type], kind: str) -> dict[str, Any]:
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


def resolve_component(name: str, value: Any, table: Mapping[str, type], kind: str,
                      grid: Grid) -> tuple[Any, Any, dict[str, Any]]:
    """Validate and build one sub-component config.

    Returns ``(component, params, resolved)`` where ``resolved`` is
    ``{"type": ..., **every setting}`` — plain Python, enough to rebuild.
    Errors name the nested field (``sensor.sensor.threshold``).
    """
    entry = _as_entry(name, value, table, kind)
    cls = table[entry.pop("type")]
    component, params, resolved = cls.build(entry, grid, name)
    return component, params, {"type": cls.type_name, **resolved}


def component_config(table: Callable[[], Mapping[str, type]], kind: str) -> Checker:
    """A checker for one nested component config (``{"type": ..., ...}`` or a
    bare type name); returns the fully resolved config dict. ``table`` is
    called lazily (the tables are built after the component modules)."""

    def check(name: str, value: Any, grid: Grid) -> dict[str, Any]:
        return resolve_component(name, value, table(), kind, grid)[2]

    return check


def component_list(table: Callable[[], Mapping[str, type]], kind: str, *,
                   named: bool = False, min_length: int = 1) -> Checker:
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
        out, used = [], set()
        for i, raw in enumerate(value):
            entry_name = f"{name}[{i}]"
            entry = _as_entry(entry_name, raw, table(), kind)
            label = entry.pop("name", None)
            if named:
                if label is not None and (not isinstance(label, str) or not label
                                          or label in used):
                    raise ValidationError.for_parameter(
                        f"{entry_name}.name", label, f"a non-empty string not used before ({sorted(used)})")
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


def static_config(component: Any) -> dict[str, Any]:
    """``{"type": ..., **static settings}`` of a component, nested components
    as their own static configs: a config ``build`` accepts and that
    rebuilds an equal component (dynamic settings take their defaults)."""
    out = {"type": component.type_name}
    for name, setting in component.SETTINGS.items():
        if setting.static:
            out[name] = _plain(getattr(component, name))
    return out


def _plain(value: Any) -> Any:
    if hasattr(value, "type_name") and hasattr(value, "SETTINGS"):
        return static_config(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def clip_to_box(obs: jax.Array, box: Box) -> jax.Array:
    """f32 ``obs`` clipped element-wise into ``box``."""
    return jnp.clip(jnp.asarray(obs, jnp.float32), jnp.asarray(box.low_array),
                    jnp.asarray(box.high_array)).astype(jnp.float32)


def sensor_metadata(sensor: Any, **extra: Any) -> dict[str, Any]:
    """The common JSON metadata of a sensor: type, static parameters
    (nested sensors as static configs), dynamic parameter names, and
    ``observation_labels`` (what each index of the flattened observation
    means)."""
    config = static_config(sensor)
    config.pop("type")
    return {
        "type": sensor.type_name,
        "parameters": config,
        "dynamic_parameters": [n for n, s in sensor.SETTINGS.items() if not s.static],
        "observation_labels": list(sensor.observation_labels()),
        **extra,
    }
