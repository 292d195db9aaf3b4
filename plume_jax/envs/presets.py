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
import difflib
import math
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from plume_jax.actions import ACTIONS
from plume_jax.envs.plume_env import PlumeEnv
from plume_jax.core.errors import ValidationError
from plume_jax.envs.multi_agent import DONE_MODES, MultiAgentPlumeEnv
from plume_jax.plumes import PLUMES
from plume_jax.rewards import REWARDS
from plume_jax.sensors import SENSORS
from plume_jax.settings import (
    Checker,
    Configurable,
    MAX_GRID_SIDE,
    MAX_INT32,
    MAX_LENGTH,
    boolean,
    choice,
    integer,
    is_pair,
    real,
)
from plume_jax.starts import STARTS
from plume_jax.core.types import EnvParams, Grid

#: Component slot -> {type name -> class}.
COMPONENTS: dict[str, Mapping[str, type[Configurable]]] = {
    "plume": PLUMES,
    "sensor": SENSORS,
    "actions": ACTIONS,
    "reward": REWARDS,
    "start": STARTS,
}

#: Settings that belong to the env itself rather than to a component.
ENV_SETTINGS = ("grid_size", "goal_radius", "max_steps")

#: Optional env settings of many agents in one plume, with their defaults. With
#: ``num_agents > 1`` ``build_env`` returns a ``MultiAgentPlumeEnv``; with 1 it
#: returns the single-agent ``PlumeEnv`` (the same per-agent code path).
MULTI_AGENT_SETTINGS = {"num_agents": 1, "done_mode": "all", "collisions": False,
                        "observe_others": False}

#: The Gaussian benchmark task (shared by its sensor/action variants).
_GAUSSIAN_TASK: dict[str, Any] = {
    "grid_size": [128, 128],
    "goal_radius": 5.0,
    "max_steps": 1000,
    "plume": {"type": "gaussian", "source": None, "sigma": 20.0},
    "sensor": {"type": "concentration"},
    "actions": {"type": "discrete_grid", "step_size": 1, "include_noop": True,
                "diagonals": False},
    "reward": {"type": "sparse", "goal_reward": 1.0},
    "start": {"type": "uniform"},
}


def _variant(task: dict[str, Any], description: str, **slots: Any) -> dict[str, Any]:
    """A preset: ``task`` with some component slots replaced."""
    return {"description": description, **copy.deepcopy(task), **copy.deepcopy(slots)}


PRESETS: dict[str, dict[str, Any]] = {
    "PlumeNav-Gaussian-v0": _variant(
        _GAUSSIAN_TASK,
        "Static Gaussian plume (sigma 20) on a 128x128 grid, source at the centre; point "
        "concentration sensor; noop + 4 cardinal moves; sparse goal reward; uniform start; goal "
        "radius 5; 1000 steps."),
    "PlumeNav-GaussianOriented-v0": _variant(
        _GAUSSIAN_TASK,
        "The Gaussian task (sigma 20, 128x128, source at the centre, goal radius 5, 1000 steps) "
        "for an oriented agent: noop / forward / turn_left / turn_right (90-degree turns) and two "
        "antennae 2 cells out at +/-45 degrees from the heading (observation: [left, right] "
        "concentration); sparse goal reward; uniform start with a cardinal heading.",
        sensor={"type": "antennae", "count": 2, "length": 2.0, "spacing_deg": 90.0,
                "offset_deg": 0.0},
        actions={"type": "oriented_grid", "step_size": 1, "include_noop": True,
                 "turn_angle_deg": 90.0}),
    "PlumeNav-GaussianBinary-v0": _variant(
        _GAUSSIAN_TASK,
        "The Gaussian task (sigma 20, 128x128, source at the centre, goal radius 5, 1000 steps) "
        "with an odour / no-odour detector: observation 1.0 where the concentration is >= 0.2 "
        "(within about 36 cells of the source), else 0.0; noop + 4 cardinal moves; sparse goal "
        "reward; uniform start.",
        sensor={"type": "binary", "threshold": 0.2}),
}


# -- realistic plumes: filament (turbulent puffs), Poisson hits, movie ------------

#: The filament benchmark task (shared by its wind-regime variants).
_FILAMENT_TASK: dict[str, Any] = {
    "grid_size": [128, 96],
    "goal_radius": 3.0,
    "max_steps": 500,
    "plume": {"type": "filament", "source": [16, 48], "capacity": 256, "warmup_steps": 160,
              "release_rate": 1.0, "wind_kind": "meander", "wind_speed": 1.0,
              "wind_direction": 0.0, "wind_direction_std": 0.25,
              "wind_correlation_time": 50.0},
    "sensor": {"type": "composite", "sensors": [
        {"type": "concentration", "name": "odour"},
        {"type": "wind", "name": "wind", "frame": "body", "max_speed": 2.0}]},
    "actions": {"type": "oriented_grid", "step_size": 1, "include_noop": True,
                "turn_angle_deg": 45.0},
    "reward": {"type": "potential_shaping", "goal_reward": 1.0, "gamma": 0.99, "scale": 0.01},
    "start": {"type": "downwind", "min_distance": 20.0, "max_distance": 90.0,
              "half_width": 10.0},
}
_FILAMENT_SUMMARY = (
    "128x96 grid, source at (16, 48), wind 1 cell/step toward east on average; observation "
    "[odour concentration at the agent, wind along the heading, wind to the left]; noop / "
    "forward / turn_left / turn_right (45-degree turns); distance-shaped reward (scale 0.01, "
    "gamma 0.99) plus 1 at the goal; start 20-90 cells downwind of the source along the "
    "current wind, within 10 cells of its axis; goal radius 3; 500 steps.")
_SWITCH_30 = math.pi / 6
#: The wind field of Farrell et al. (2002), self-advected as pompy computes it
#: (4 substeps per step), with their "large amplitude meander" filter at 1 cell =
#: 1 m, 1 step = 1 s: boundary wind 1 cell/step, boundary noise damping 0.1 and
#: bandwidth 0.2 rad/step, diffusivity 10 cells^2/step, nodes 8 cells apart (they
#: use 5-10 m). The noise std, 1.6 cells/step, makes the linearised field's
#: (Gusty's) mean plume width match PlumeNav-Filament-v0's within 3 % at 50 and 80
#: cells (their gain G = 20 at their dt = 0.01 s gives 1.41).
_FARRELL_WIND: dict[str, Any] = {
    "wind_model": "field", "wind_kind": "constant", "wind_gust_std": 1.6,
    "wind_gust_damping": 0.1, "wind_gust_bandwidth": 0.2, "wind_gust_diffusivity": 10.0,
    "wind_field_spacing": 8.0, "wind_field_substeps": 4, "warmup_steps": 200}


def _filament(description: str, **plume: Any) -> dict[str, Any]:
    spec = copy.deepcopy(_FILAMENT_TASK)
    spec["plume"].update(plume)
    return {"description": f"{description} {_FILAMENT_SUMMARY}", **spec}


def _poisson(description: str, grid: list[int], plume: dict[str, Any], h_max: int,
             max_steps: int, observer: list[int] | None) -> dict[str, Any]:
    start = {"type": "uniform"} if observer is None else \
        {"type": "fixed", "position": list(observer), "heading": 0.0}
    source = {"source_mode": "uniform"} if observer is None else \
        {"source_mode": "otto", "observer": list(observer)}
    return {
        "description": description,
        "grid_size": grid,
        "goal_radius": 0.0,
        "max_steps": max_steps,
        "plume": {"type": "poisson", **source, **plume},
        "sensor": {"type": "hits", "h_max": h_max, "nonzero_first": observer is not None},
        "actions": {"type": "discrete_grid", "step_size": 1, "include_noop": False,
                    "diagonals": False},
        "reward": {"type": "step_penalty", "goal_reward": 0.0, "step_penalty": 1.0},
        "start": start,
    }


_POISSON_RULES = (
    "Observation: hits in h_max classes; move_north/south/east/west (no noop); reward -1 per "
    "step, 0 on entering the source cell, which ends the episode (goal radius 0).")

PRESETS.update({
    "PlumeNav-Filament-v0": _filament(
        "Turbulent filament plume (Farrell-style puffs, 1 puff/step, 256 slots) in a "
        "meandering wind (direction an Ornstein-Uhlenbeck process: std 0.25 rad, correlation "
        "time 50 steps)."),
    "PlumeNav-Filament-Constant-v0": _filament(
        "Filament plume in a constant wind (Singh et al. 2023 'constant' regime).",
        wind_kind="constant"),
    "PlumeNav-Filament-SwitchOnce-v0": _filament(
        "Filament plume whose wind turns once by 30 degrees, 100 steps into each episode "
        "(Singh et al. 2023 'switch once' regime; consecutive episodes alternate between the "
        "two directions).",
        wind_kind="switch_once", wind_switch_time=100.0, wind_switch_angle=_SWITCH_30),
    "PlumeNav-Filament-SwitchMany-v0": _filament(
        "Filament plume whose wind switches often (0.05 switches/step) to a random direction "
        "within 30 degrees of east (Singh et al. 2023 'frequent switches' regime).",
        wind_kind="switch_random", wind_switch_rate=0.05, wind_switch_angle=_SWITCH_30),
    "PlumeNav-Filament-Sparse-v0": _filament(
        "Sparse filament plume: 0.2 puffs/step (a fifth of PlumeNav-Filament-v0's birth "
        "rate, 64 slots), meandering wind.",
        release_rate=0.2, capacity=64),
    "PlumeNav-Filament-Gusty-v0": _filament(
        "The puffs of PlumeNav-Filament-v0 (2-D kernels) in a 2-D wind field whose gusts travel "
        "with the puffs (Farrell et al. 2002, linearised: the gusts are carried by the mean "
        "wind, not by themselves): coloured noise at the domain's corners "
        "(std 1.6 cells/step, damping 0.1, bandwidth 0.2 rad/step), interpolated along the "
        "edges and carried downwind by the mean wind with diffusivity 10 cells^2/step on nodes "
        "8 cells apart; its mean plume width matches the meandering preset's. Sensors read the "
        "local wind.",
        **{**_FARRELL_WIND, "wind_model": "linear_field"}),
    "PlumeNav-Filament-Farrell-v0": _filament(
        "Farrell et al. (2002)'s plume model as their reference implementation pompy computes "
        "it: a 2-D wind field advected by itself (4 substeps per step), driven at the domain's "
        "boundary by a 1 cell/step wind plus PlumeNav-Filament-Gusty-v0's noise, and 3-D "
        "Gaussian puffs sampled in their plane "
        "(m / ((2 pi)^1.5 r^3); puff mass 5 so that the concentration near the source is "
        "about that of the 2-D presets), so odour thins out faster downwind.",
        kernel="3d", puff_mass=5.0, **_FARRELL_WIND),
    "PlumeNav-Poisson-v0": _poisson(
        "Infotaxis-style grid search: Poisson hits from the isotropic law "
        "mu(d) = R dt / ln(2 lambda/dx) K0(d / (lambda/dx)) with lambda/dx = 2, R dt = 2, on a "
        "33x33 grid; source and start uniformly random cells; h_max = 3 hit classes; 1000 "
        "steps. " + _POISSON_RULES,
        [33, 33], {"model": "isotropic", "lambda_over_dx": 2.0, "r_dt": 2.0}, 3, 1000, None),
    "PlumeNav-Poisson-Iso19x19-v0": _poisson(
        "Infotaxis benchmark 'isotropic-19x19' (Loisy & Heinonen 2023; otto's automatic "
        "settings): lambda/dx = 1, R dt = 1, h_max = 3 hit classes (0, 1, >= 2); otto's start: "
        "the agent at the centre (9, 9), a non-zero first hit, the source drawn from the "
        "posterior it implies; 642 steps (otto's STOP_t). " + _POISSON_RULES,
        [19, 19], {"model": "isotropic", "lambda_over_dx": 1.0, "r_dt": 1.0}, 3, 642, [9, 9]),
    "PlumeNav-Poisson-Iso53x53-v0": _poisson(
        "Infotaxis benchmark 'isotropic-53x53' (Loisy & Heinonen 2023): lambda/dx = 3, "
        "R dt = 2, h_max = 4 hit classes (0, 1, 2, >= 3); otto's start at the centre (26, 26) "
        "with a non-zero first hit; 2188 steps (otto's STOP_t). " + _POISSON_RULES,
        [53, 53], {"model": "isotropic", "lambda_over_dx": 3.0, "r_dt": 2.0}, 4, 2188, [26, 26]),
    "PlumeNav-Poisson-Windy81x41-v0": _poisson(
        "Infotaxis benchmark 'windy-medium-detections' (Loisy & Heinonen 2023; Heinonen et al. "
        "2023): mu = R/d exp(V dx/2 - d/lambda) with R = 2.5, V = 2 (toward east) and the "
        "paper's tau_bar = V^2 tau = 150, i.e. tau = 37.5 steps here (lambda = 0.98693 "
        "cells); binary detection; otto's start at (65, 20) with a non-zero first hit; "
        "10000 steps (otto-benchmark's STOP_t). " + _POISSON_RULES,
        [81, 41], {"model": "windy", "wind_speed": 2.0, "wind_direction": 0.0, "tau": 37.5,
                   "r_bar": 2.5}, 2, 10000, [65, 20]),
    "PlumeNav-Movie-v0": {
        "description": "The bundled movie plume (a 160-frame, 10 fps FilamentPlume run on "
                       "128x64, made by scripts/tools/make_filament_movie.py, looping), played one "
                       "frame per step on a 128x64 grid, source at (12, 32); the filament "
                       "task's observation (odour, body-frame wind), 45-degree oriented moves "
                       "and shaped reward; start 15-80 cells downwind within 8 cells of the "
                       "axis; goal radius 3; 500 steps.",
        "grid_size": [128, 64],
        "goal_radius": 3.0,
        "max_steps": 500,
        "plume": {"type": "movie", "path": None, "loop": "wrap", "normalise": "max"},
        "sensor": copy.deepcopy(_FILAMENT_TASK["sensor"]),
        "actions": copy.deepcopy(_FILAMENT_TASK["actions"]),
        "reward": copy.deepcopy(_FILAMENT_TASK["reward"]),
        "start": {"type": "downwind", "min_distance": 15.0, "max_distance": 80.0,
                  "half_width": 8.0},
    },
})

#: Singh et al. (2023)'s task ("Emergent behaviour and neural dynamics in artificial
#: agents tracking odour plumes", Nat. Mach. Intell. 5, 58-70), in metres as their code
#: (github.com/BruntonUWBio/plumetracknets, code/plume_env.py, code/sim_utils.py) has it:
#: 1 cell = 1 m, one step = 0.04 s (25 fps; 4 simulator steps of 0.01 s). Their arena
#: x -2..10 m, y -10..10 m around the source: a 13x21 grid, source at (2, 10). Every
#: value is documented against the paper's and the code's in docs/singh2023.md.
_SINGH_STEP_SECONDS = 0.04
_SINGH_TASK: dict[str, Any] = {
    "grid_size": [13, 21],
    "goal_radius": 0.2,                 # homed_radius 0.2 m
    "max_steps": 299,                   # sim_steps_max 300, ends at episode_step >= 300 - 1
    "plume": {"type": "singh", "source": [2.0, 10.0], "capacity": 2304, "warmup_steps": 750,
              "substeps": 4, "substep_seconds": 0.01, "wind_speed": 0.5,
              "crosswind_noise": 0.5, "birth_rate": 1.0, "puff_radius": 0.01, "growth": 0.01,
              "stray_limit": 2.0},
    # [apparent wind along / left of the heading in m/s, odour]: their 3-D observation
    "sensor": {"type": "composite", "sensors": [
        {"type": "apparent_wind", "name": "wind", "scale": 1.0 / _SINGH_STEP_SECONDS,
         "max_reading": 10.0},
        {"type": "gated_concentration", "name": "odour", "threshold": 1e-4,
         "gain_low": 0.5, "gain_high": 1.5}]},
    # move_capacity 2.0 m/s, turn_capacity 6.25 pi rad/s over turn in [0, 1] (+-3.125 pi)
    "actions": {"type": "flight", "min_speed": 0.0, "max_speed": 2.0 * _SINGH_STEP_SECONDS,
                "max_turn_rate": 3.125 * math.pi * _SINGH_STEP_SECONDS},
    # +101 at home, -10/300 per step, 5 x the decrease of the distance to the source
    "reward": {"type": "weighted_sum", "components": [
        {"type": "step_penalty", "goal_reward": 101.0, "step_penalty": 10.0 / 300.0},
        {"type": "potential_shaping", "goal_reward": 0.0, "gamma": 1.0, "scale": 5.0}],
        "weights": [1.0, 1.0]},
    # their training curriculum's second stage: x ~ 4-8 m downwind (+- 0.5 m), near the axis
    "start": {"type": "downwind_band", "snap": False, "min_distance": 4.0, "max_distance": 8.0,
              "along_std": 0.5, "cross_std": 0.15},
}
_SINGH_SUMMARY = (
    "13x21 m arena (1 cell = 1 m), source at (2, 10); 0.04 s steps (25 fps) over 4 puff "
    "steps of 0.01 s; wind 0.5 m/s; puffs of radius 0.01 m growing 0.01 m/s, concentration "
    "(r0/r)^3 over a square of half-side r; observation [apparent wind along and left of the "
    "heading (m/s), odour (x U(0.5, 1.5) per episode, 0 below 1e-4, clipped to 1)]; flight "
    "actions (up to 2 m/s, +-3.125 pi rad/s) carried by the wind; +101 at home, -1/30 per "
    "step, 5 x distance gained; start 4-8 m downwind, any heading; ends at the source "
    "(0.2 m), 2 m from every puff, or after 299 steps.")


def _singh(description: str, **plume: Any) -> dict[str, Any]:
    spec = copy.deepcopy(_SINGH_TASK)
    spec["plume"].update(plume)
    return {"description": f"{description} {_SINGH_SUMMARY}", **spec}


#: Singh et al.'s sparse plumes: the constant plume with a fraction of the puffs
#: (their evaluation keeps 0.8, 0.6, 0.4 and 0.2 of them; the paper's 'sparse' is 0.4).
SINGH_SPARSE = {"Sparse80": 0.8, "Sparse60": 0.6, "Sparse40": 0.4, "Sparse20": 0.2}

PRESETS.update({
    "PlumeNav-Singh2023-Constant-v0": _singh(
        "Singh et al. (2023) 'constant': their puff plume in a constant wind."),
    "PlumeNav-Singh2023-SwitchOnce-v0": _singh(
        "Singh et al. (2023) 'switch-once': the wind turns 45 degrees counter-clockwise 2.5 s "
        "into each episode (their evaluation starts 2.5 s and 1.5 s before the switch).",
        wind_kind="switch_once", switch_time=2.5, switch_angle=math.pi / 4, capacity=3072),
    "PlumeNav-Singh2023-SwitchMany-v0": _singh(
        "Singh et al. (2023) 'switch-many': every 3 s (+- 0.3 s) the wind direction is set to "
        "N(0, 30 degrees) clipped to +-60 degrees.",
        wind_kind="switch_many", switch_period=3.0, switch_jitter=0.3,
        switch_std=math.pi / 6, switch_max=math.pi / 3, capacity=3072),
    **{f"PlumeNav-Singh2023-{name}-v0": _singh(
        f"Singh et al. (2023) sparse plume: the constant plume with {fraction:g} of its puffs "
        f"(birth rate {fraction:g} puffs per 0.01 s).", birth_rate=fraction)
       for name, fraction in SINGH_SPARSE.items()},
})

PRESETS["PlumeNav-Swarm-v0"] = {
    **copy.deepcopy(PRESETS["PlumeNav-Filament-v0"]),
    "description": "Eight agents searching the turbulent filament plume of PlumeNav-Filament-v0 "
                   "together (same plume, sensor, actions, reward and downwind start "
                   "distribution); no two agents in one cell (collisions resolved in agent "
                   "order); the episode ends when the first agent reaches the source "
                   "(done_mode any), so its length is the team's time to first arrival.",
    "num_agents": 8,
    "done_mode": "any",
    "collisions": True,
    "observe_others": False,
}


#: Presets that play a registered dataset (:mod:`plume_jax.datasets`, ``plume-jax
#: data``): one per dataset whose registry entry gives the frame rate and the
#: source position. Kept apart from :data:`PRESETS`, whose every entry builds
#: without a download (tests, ``configs/presets`` and benchmarks build them all);
#: :func:`make` and the Gymnasium registration know both. Building one needs the
#: dataset in the cache: otherwise the error names ``plume-jax data download ID``.
DATA_PRESETS: dict[str, dict[str, Any]] = {
    "PlumeNav-Crimaldi-v0": {
        "description": "The CU Boulder PLIF acetone plume (Connor, McHugh & Crimaldi 2018; "
                       "dataset colorado_jet_v1, plume-jax data download colorado_jet_v1): "
                       "150 frames at 15 Hz, read at every 2nd pixel onto a 203x108 grid "
                       "(1 cell = 2 pixels, about 1.5 mm), played one frame per step and "
                       "looping every 10 s; source at the upstream edge, mean flow 0.10 m/s "
                       "toward east (4.5 cells/step); the filament task's observation (odour, "
                       "body-frame wind up to 5 cells/step), 45-degree oriented moves and "
                       "shaped reward; start 20-150 cells downwind within 15 cells of the "
                       "axis; goal radius 5; 1000 steps (67 s).",
        "grid_size": [203, 108],
        "goal_radius": 5.0,
        "max_steps": 1000,
        "plume": {"type": "movie", "data_id": "colorado_jet_v1", "spatial_stride": 2,
                  "loop": "wrap", "normalise": "max"},
        "sensor": {"type": "composite", "sensors": [
            {"type": "concentration", "name": "odour"},
            {"type": "wind", "name": "wind", "frame": "body", "max_speed": 5.0}]},
        "actions": copy.deepcopy(_FILAMENT_TASK["actions"]),
        "reward": copy.deepcopy(_FILAMENT_TASK["reward"]),
        "start": {"type": "downwind", "min_distance": 20.0, "max_distance": 150.0,
                  "half_width": 15.0},
    },
}


def preset_spec(preset_id: str) -> dict[str, Any] | None:
    """The settings dict of a preset of :data:`PRESETS` or
    :data:`DATA_PRESETS` (``None`` for an unknown id)."""
    return PRESETS.get(preset_id, DATA_PRESETS.get(preset_id))


def is_multi_agent(preset_id: str) -> bool:
    """Whether a preset has several agents (a ``MultiAgentPlumeEnv``; its
    Python-side adapter is PettingZoo's, not Gymnasium's single-agent API)."""
    spec = preset_spec(preset_id)
    if spec is None:
        raise ValidationError.for_parameter(
            "preset_id", preset_id, f"a preset id (known: {sorted({**PRESETS, **DATA_PRESETS})})")
    return int(spec.get("num_agents", 1)) > 1


def list_presets() -> dict[str, str]:
    """``preset id -> one-line description``."""
    return {pid: spec.get("description", "")
            for pid, spec in {**PRESETS, **DATA_PRESETS}.items()}


def _grid_size(value: Any) -> Grid:
    allowed = f"a [width, height] pair of integers, each in [2, {MAX_GRID_SIDE}]"
    if not is_pair(value):
        raise ValidationError.for_parameter("grid_size", value, allowed)
    try:
        w, h = (integer(low=2, high=MAX_GRID_SIDE)("grid_size", v, None) for v in value)
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
        if name in ENV_SETTINGS or name in MULTI_AGENT_SETTINGS or name == "description":
            out[name] = value
        elif name in COMPONENTS:
            out[name] = _component_spec(name, out.get(name, {}), value)
        else:
            flat[name] = value
    for name, value in flat.items():
        owners = [slot for slot in COMPONENTS
                  if name in COMPONENTS[slot][out[slot]["type"]].SETTINGS]
        if len(owners) != 1:
            allowed = sorted(set(ENV_SETTINGS) | set(MULTI_AGENT_SETTINGS) | set(COMPONENTS) | {
                p for slot in COMPONENTS for p in COMPONENTS[slot][out[slot]["type"]].SETTINGS})
            reason = "a setting of this env" if not owners else \
                f"an unambiguous name (it belongs to {owners}; pass {owners[0]}={{...}})"
            raise ValidationError.for_parameter(name, value, f"{reason}: one of {allowed}")
        out[owners[0]] = {**out[owners[0]], name: value}
    return out


def build_env(spec: Mapping[str, Any]) -> tuple[PlumeEnv, EnvParams]:
    """Validate a full settings dict and build ``(env, default params)``."""
    known = set(ENV_SETTINGS) | set(MULTI_AGENT_SETTINGS) | set(COMPONENTS)
    unknown = sorted(set(spec) - known - {"description", "id"})
    if unknown:
        raise ValidationError.for_parameter(unknown[0], spec[unknown[0]],
                                            f"a known setting: one of {sorted(known)}")
    missing = sorted((set(ENV_SETTINGS) | set(COMPONENTS)) - set(spec))
    if missing:
        raise ValidationError.for_parameter(missing[0], None, "a value (this setting is required)")
    grid = _grid_size(spec["grid_size"])
    goal_radius = real(low=0.0, high=MAX_LENGTH)("goal_radius", spec["goal_radius"], grid)
    max_steps = integer(low=1, high=MAX_INT32)("max_steps", spec["max_steps"], grid)
    multi = _multi_agent_settings(spec, grid)

    built, params, resolved = {}, {}, {}
    for slot, table in COMPONENTS.items():
        entry = _component_spec(slot, {"type": None}, spec[slot])
        cls = table[entry["type"]]
        values = {k: v for k, v in entry.items() if k != "type"}
        built[slot], params[slot], settings = cls.build(values, grid, slot)
        resolved[slot] = {"type": cls.type_name, **settings}

    _check_compatible(grid, goal_radius, resolved)
    if multi["num_agents"] > 1 and multi["collisions"] and resolved["start"]["type"] == "fixed":
        raise ValidationError.for_parameter(
            "start.type", "fixed", "a random start distribution when several agents may not "
            "share a cell (collisions=true, num_agents > 1)")
    if multi["num_agents"] > 1 and multi["collisions"]:
        _check_agents_fit(grid, goal_radius, resolved["plume"].get("source"),
                          multi["num_agents"])
    settings = {
        **({"id": spec["id"]} if "id" in spec else {}),
        "grid_size": [grid.width, grid.height],
        "goal_radius": goal_radius,
        "max_steps": max_steps,
        **(multi if multi["num_agents"] > 1 else {}),
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
    if multi["num_agents"] > 1:
        env = MultiAgentPlumeEnv.from_env(env, settings=settings, **multi)
    return env, env_params


def _multi_agent_settings(spec: Mapping[str, Any], grid: Grid) -> dict[str, Any]:
    """Validated multi-agent settings (defaults filled)."""
    checks: dict[str, Checker] = {"num_agents": integer(low=1, high=4096), "done_mode": choice(DONE_MODES),
              "collisions": boolean(), "observe_others": boolean()}
    return {name: checks[name](name, spec.get(name, default), grid)
            for name, default in MULTI_AGENT_SETTINGS.items()}


def free_start_cells(grid: Grid, goal_radius: float, source: Any) -> int:
    """How many grid cells lie outside the goal region (farther than
    ``goal_radius`` from ``source``), where an episode may start; every cell
    when the source is not known when the env is built."""
    if source is None:
        return grid.width * grid.height
    xs = np.arange(grid.width, dtype=np.float64)[None, :]
    ys = np.arange(grid.height, dtype=np.float64)[:, None]
    distance = np.hypot(xs - float(source[0]), ys - float(source[1]))
    return int(np.count_nonzero(distance > goal_radius))


def _check_agents_fit(grid: Grid, goal_radius: float, source: Any, num_agents: int) -> None:
    """With collisions no two agents share a cell, so there must be a start
    cell for each (:func:`free_start_cells`)."""
    limit = free_start_cells(grid, goal_radius, source)
    if num_agents > limit:
        where = f"the {grid.width}x{grid.height} grid has {limit} cells" if source is None \
            else (f"the {grid.width}x{grid.height} grid has {limit} cells outside the goal "
                  f"region (goal_radius={goal_radius} around the source {list(source)})")
        raise ValidationError.for_parameter(
            "num_agents", num_agents,
            f"at most {limit} with collisions=true: no two agents share a cell, and {where}")


def _check_compatible(grid: Grid, goal_radius: float, resolved: Mapping[str, Any]) -> None:
    """Cross-component checks that no single component can make."""
    start_cls = STARTS[resolved["start"]["type"]]
    plume_type = resolved["plume"]["type"]
    if start_cls.needs_puffs and not PLUMES[plume_type].has_puffs:
        puffy = sorted(name for name, cls in PLUMES.items() if cls.has_puffs)
        raise ValidationError.for_parameter(
            "start.type", start_cls.type_name,
            f"a start that does not need puffs with plume.type={plume_type!r} (this start "
            f"places the agent by the plume's puffs; plumes with puffs: {', '.join(puffy)})")
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
    on_grid = ACTIONS[resolved["actions"]["type"]].on_grid
    STARTS[start["type"]].check_compatible(grid, tuple(source), goal_radius, start, on_grid)


def make(env_id: str, **overrides: Any) -> tuple[PlumeEnv, EnvParams]:
    """Build a registered preset, with validated overrides.

    ``env_id`` is a preset id, bare or with its Gymnasium namespace
    (``"PlumeNav-Gaussian-v0"`` or ``"plume_jax/PlumeNav-Gaussian-v0"``).

    Example::

        env, params = plume_jax.make("PlumeNav-Gaussian-v0", sigma=10.0, max_steps=500)

    Raises:
        ValidationError: unknown preset id (with the closest known ids),
            unknown override name, or a bad value.
    """
    preset = env_id
    if isinstance(env_id, str) and env_id.startswith("plume_jax/"):
        preset = env_id[len("plume_jax/"):]
    known_presets = {**PRESETS, **DATA_PRESETS}
    if not isinstance(preset, str) or preset not in known_presets:
        lowered = {known.lower(): known for known in known_presets}
        close = [lowered[m] for m in difflib.get_close_matches(preset.lower(), lowered, n=3,
                                                               cutoff=0.6)] \
            if isinstance(preset, str) else []
        hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise ValidationError.for_parameter(
            "env_id", env_id, f"a preset id, bare or as 'plume_jax/<id>' ({hint}"
                              f"known: {sorted(known_presets)})")
    spec = merge_overrides(known_presets[preset], overrides)
    spec["id"] = preset
    spec.pop("description", None)
    return build_env(spec)
