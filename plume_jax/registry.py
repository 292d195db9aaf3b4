"""Presets and ``make`` (layer 2).

A preset is a plain, JSON-serialisable settings dict::

    {"grid_size": [W, H], "goal_radius": r, "max_steps": n,
     "plume":   {"type": "gaussian", ...params},
     "sensor":  {"type": "concentration", ...},
     "actions": {"type": "discrete_grid", ...},
     "reward":  {"type": "sparse", ...},
     "start":   {"type": "uniform", ...}}

``make(id, **overrides)`` merges overrides into the preset, validates every
value (unknown names, wrong types, out-of-range values, positions outside the
grid raise ``ValidationError`` naming the field) and only then builds the env.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp

from plume_jax.actions import ACTIONS
from plume_jax.env import PlumeEnv
from plume_jax.errors import ValidationError
from plume_jax.plumes import PLUMES
from plume_jax.rewards import REWARDS
from plume_jax.sensors import SENSORS
from plume_jax.settings import integer, real
from plume_jax.starts import STARTS
from plume_jax.types import EnvParams, Grid

#: Component slot -> {type name -> class}.
COMPONENTS: dict[str, dict[str, type]] = {
    "plume": PLUMES,
    "sensor": SENSORS,
    "actions": ACTIONS,
    "reward": REWARDS,
    "start": STARTS,
}

#: Settings that belong to the env itself rather than to a component.
ENV_SETTINGS = ("grid_size", "goal_radius", "max_steps")

PRESETS: dict[str, dict[str, Any]] = {
    "PlumeNav-Gaussian-v0": {
        "description": "Static Gaussian plume (sigma 20) on a 128x128 grid, source at the "
                       "centre; point concentration sensor; noop + 4 cardinal moves; sparse "
                       "goal reward; uniform start; goal radius 5; 1000 steps.",
        "grid_size": [128, 128],
        "goal_radius": 5.0,
        "max_steps": 1000,
        "plume": {"type": "gaussian", "source": None, "sigma": 20.0},
        "sensor": {"type": "concentration"},
        "actions": {"type": "discrete_grid", "step_size": 1, "include_noop": True,
                    "diagonals": False},
        "reward": {"type": "sparse", "goal_reward": 1.0},
        "start": {"type": "uniform"},
    },
    "PlumeNav-GaussianOriented-v0": {
        "description": "The Gaussian task (sigma 20, 128x128, source at the centre, goal radius "
                       "5, 1000 steps) for an oriented agent: noop / forward / turn_left / "
                       "turn_right (90-degree turns) and two antennae 2 cells out at +/-45 "
                       "degrees from the heading (observation: [left, right] concentration); "
                       "sparse goal reward; uniform start with a cardinal heading.",
        "grid_size": [128, 128],
        "goal_radius": 5.0,
        "max_steps": 1000,
        "plume": {"type": "gaussian", "source": None, "sigma": 20.0},
        "sensor": {"type": "antennae", "count": 2, "length": 2.0, "spacing_deg": 90.0,
                   "offset_deg": 0.0},
        "actions": {"type": "oriented_grid", "step_size": 1, "include_noop": True,
                    "turn_angle_deg": 90.0},
        "reward": {"type": "sparse", "goal_reward": 1.0},
        "start": {"type": "uniform"},
    },
    "PlumeNav-GaussianBinary-v0": {
        "description": "The Gaussian task (sigma 20, 128x128, source at the centre, goal radius "
                       "5, 1000 steps) with an odour / no-odour detector: observation 1.0 where "
                       "the concentration is >= 0.2 (within about 36 cells of the source), "
                       "else 0.0; noop + 4 cardinal moves; sparse goal reward; uniform start.",
        "grid_size": [128, 128],
        "goal_radius": 5.0,
        "max_steps": 1000,
        "plume": {"type": "gaussian", "source": None, "sigma": 20.0},
        "sensor": {"type": "binary", "threshold": 0.2},
        "actions": {"type": "discrete_grid", "step_size": 1, "include_noop": True,
                    "diagonals": False},
        "reward": {"type": "sparse", "goal_reward": 1.0},
        "start": {"type": "uniform"},
    },
}


def list_presets() -> dict[str, str]:
    """``preset id -> one-line description``."""
    return {pid: spec.get("description", "") for pid, spec in PRESETS.items()}


def _grid_size(value: Any) -> Grid:
    allowed = "a [width, height] pair of integers, each in [2, 32768]"
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise ValidationError.for_parameter("grid_size", value, allowed)
    try:
        w, h = (integer(low=2, high=32768)("grid_size", v, None) for v in value)
    except ValidationError:
        raise ValidationError.for_parameter("grid_size", value, allowed) from None
    return Grid(width=w, height=h)


def _component_spec(slot: str, base: Mapping[str, Any], override: Any) -> dict[str, Any]:
    """Merge one component override (a type name or a dict) into ``base``."""
    table = COMPONENTS[slot]
    if isinstance(override, str):
        override = {"type": override}
    if not isinstance(override, Mapping):
        raise ValidationError.for_parameter(
            slot, override, f"a component type name (one of {sorted(table)}) or a dict of settings")
    new_type = override.get("type", base.get("type"))
    if new_type not in table:
        raise ValidationError.for_parameter(f"{slot}.type", new_type, f"one of {sorted(table)}")
    merged = dict(base) if new_type == base.get("type") else {}
    merged.update(override)
    merged["type"] = new_type
    return merged


def merge_overrides(spec: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Apply ``overrides`` to a settings dict (nothing validated yet but names).

    Overrides may be env settings (``grid_size``, ``goal_radius``,
    ``max_steps``), component slots (``plume="gaussian"`` or
    ``plume={"sigma": 10}``), or a bare parameter name (``sigma=10``) that
    belongs to exactly one of the chosen components.
    """
    out = copy.deepcopy(dict(spec))
    flat = {}
    for name, value in overrides.items():
        if name in ENV_SETTINGS or name == "description":
            out[name] = value
        elif name in COMPONENTS:
            out[name] = _component_spec(name, out.get(name, {}), value)
        else:
            flat[name] = value
    for name, value in flat.items():
        owners = [slot for slot in COMPONENTS
                  if name in COMPONENTS[slot][out[slot]["type"]].SETTINGS]
        if len(owners) != 1:
            allowed = sorted(set(ENV_SETTINGS) | set(COMPONENTS) | {
                p for slot in COMPONENTS for p in COMPONENTS[slot][out[slot]["type"]].SETTINGS})
            reason = "a setting of this env" if not owners else \
                f"an unambiguous name (it belongs to {owners}; pass {owners[0]}={{...}})"
            raise ValidationError.for_parameter(name, value, f"{reason}: one of {allowed}")
        out[owners[0]] = {**out[owners[0]], name: value}
    return out


def build_env(spec: Mapping[str, Any]) -> tuple[PlumeEnv, EnvParams]:
    """Validate a full settings dict and build ``(env, default params)``."""
    unknown = sorted(set(spec) - set(ENV_SETTINGS) - set(COMPONENTS) - {"description", "id"})
    if unknown:
        raise ValidationError.for_parameter(
            unknown[0], spec[unknown[0]],
            f"a known setting: one of {sorted(set(ENV_SETTINGS) | set(COMPONENTS))}")
    missing = sorted((set(ENV_SETTINGS) | set(COMPONENTS)) - set(spec))
    if missing:
        raise ValidationError.for_parameter(missing[0], None, "a value (this setting is required)")
    grid = _grid_size(spec["grid_size"])
    goal_radius = real(low=0.0)("goal_radius", spec["goal_radius"], grid)
    max_steps = integer(low=1, high=2**31 - 1)("max_steps", spec["max_steps"], grid)

    built, params, resolved = {}, {}, {}
    for slot, table in COMPONENTS.items():
        entry = _component_spec(slot, {"type": None}, spec[slot])
        cls = table[entry["type"]]
        values = {k: v for k, v in entry.items() if k != "type"}
        built[slot], params[slot], settings = cls.build(values, grid, slot)
        resolved[slot] = {"type": cls.type_name, **settings}

    _check_compatible(grid, goal_radius, resolved)
    settings = {
        **({"id": spec["id"]} if "id" in spec else {}),
        "grid_size": [grid.width, grid.height],
        "goal_radius": goal_radius,
        "max_steps": max_steps,
        **resolved,
    }
    env_params = EnvParams(
        plume=params["plume"], sensor=params["sensor"], actions=params["actions"],
        reward=params["reward"], start=params["start"],
        goal_radius=jnp.asarray(goal_radius, jnp.float32),
        max_steps=jnp.asarray(max_steps, jnp.int32),
    )
    env = PlumeEnv(grid, built["plume"], built["sensor"], built["actions"], built["reward"],
                   built["start"], env_params, settings)
    return env, env_params


def _check_compatible(grid: Grid, goal_radius: float, resolved: Mapping[str, Any]) -> None:
    """Cross-component checks that no single component can make."""
    source = resolved["plume"].get("source")
    if source is None:
        return
    corners = [(0, 0), (grid.width - 1, 0), (0, grid.height - 1), (grid.width - 1, grid.height - 1)]
    if max(math.dist(source, c) for c in corners) <= goal_radius:
        raise ValidationError.for_parameter(
            "goal_radius", goal_radius,
            "a radius that leaves some grid cell outside the goal region "
            f"(the farthest cell from the source {source} is "
            f"{max(math.dist(source, c) for c in corners):.2f} cells away)")
    start = resolved["start"]
    on_grid = getattr(ACTIONS[resolved["actions"]["type"]], "on_grid", True)
    check = getattr(STARTS[start["type"]], "check_compatible", None)
    if check is not None:
        check(grid, tuple(source), goal_radius, start, on_grid)


def make(env_id: str, **overrides: Any) -> tuple[PlumeEnv, EnvParams]:
    """Build a registered preset, with validated overrides.

    Example::

        env, params = plume_jax.make("PlumeNav-Gaussian-v0", sigma=10.0, max_steps=500)

    Raises:
        ValidationError: unknown preset id, unknown override name, or a bad value.
    """
    if env_id not in PRESETS:
        raise ValidationError.for_parameter("env_id", env_id, f"one of {sorted(PRESETS)}")
    spec = merge_overrides(PRESETS[env_id], overrides)
    spec["id"] = env_id
    spec.pop("description", None)
    return build_env(spec)
