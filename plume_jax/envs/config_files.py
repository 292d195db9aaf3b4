"""Environment config files (layer 2): YAML in, YAML out, exact round trip.

A config file is the settings dict that ``plume_jax.make`` resolves (see
:mod:`plume_jax.envs.presets`): ``grid_size``, ``goal_radius``, ``max_steps``
and one ``{"type": ..., ...settings}`` block per component slot (``plume``,
``sensor``, ``actions``, ``reward``, ``start``), optionally with ``id`` and
``description``::

    env, params = plume_jax.make("PlumeNav-GaussianOriented-v0", sigma=10.0)
    plume_jax.save_config(env, "my_env.yaml")
    env2, params2 = plume_jax.make_from_config("my_env.yaml")   # env2 == env

``save_config`` writes every resolved setting (defaults included), so a
file pins the environment exactly even if a preset's defaults change later;
``make_from_config`` validates it like ``make`` does (unknown names, bad
values and incompatible components raise ``ValidationError`` naming the
field). ``configs/presets/<id>.yaml`` holds one file per preset, written by
:func:`write_preset_configs` (run
``python -c "import plume_jax.envs.config_files as c; c.write_preset_configs()"`` after
changing a preset).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any

import yaml

from plume_jax.core.errors import ValidationError, bounded_repr
from plume_jax.envs.presets import COMPONENTS, PRESETS, build_env, make, merge_overrides
from plume_jax.files.safe_io import YAMLDumper, load_yaml_file
from plume_jax.settings import plain

#: Where the preset config files live in a source checkout.
PRESET_DIR = pathlib.Path(__file__).resolve().parents[2] / "configs" / "presets"

_HEADER = ("# plume_jax environment config: load with plume_jax.make_from_config(path).\n"
           "# Every setting is spelled out; see docs/components.md.\n")

#: Order of the top-level keys in written files.
_KEY_ORDER = ("id", "description", "grid_size", "goal_radius", "max_steps", "num_agents",
              "done_mode", "collisions", "observe_others",
              "plume", "sensor", "actions", "reward", "start")


def config_dict(env: Any, description: str | None = None) -> dict[str, Any]:
    """The config of ``env`` (built by ``make``, ``build_env`` or
    ``make_from_config``) as a plain dict, keys in a fixed order."""
    settings = getattr(env, "settings", None)
    if not settings:
        raise ValidationError.for_parameter(
            "env", env, "an env built by plume_jax.make, build_env or make_from_config "
                        "(its settings are empty)")
    spec = dict(settings)
    if description is not None:
        spec["description"] = str(description)
    ordered = {k: spec[k] for k in _KEY_ORDER if k in spec}
    ordered.update({k: v for k, v in spec.items() if k not in ordered})
    return plain(ordered)  # tuples as lists: the YAML holds only plain lists


class _Dumper(YAMLDumper):
    """Block style for mappings, flow style for lists of scalars
    (``grid_size: [128, 128]``)."""


def _represent_list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    flow = all(not isinstance(v, (list, tuple, dict)) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def config_text(env: Any, description: str | None = None) -> str:
    """The YAML text ``save_config`` writes."""
    return _HEADER + yaml.dump(config_dict(env, description), Dumper=_Dumper, sort_keys=False,
                               default_flow_style=False, width=100)


def save_config(env: Any, path: str | pathlib.Path, description: str | None = None) -> pathlib.Path:
    """Write ``env``'s full resolved settings to a YAML file.

    Args:
        env: an env built by ``plume_jax.make`` / ``build_env`` /
            ``make_from_config``.
        path: the file to write (parent folders are created).
        description: optional one-line description stored in the file.

    Returns:
        The path written.
    """
    path = pathlib.Path(path)
    text = config_text(env, description)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def read_yaml(path: str | os.PathLike, parameter: str = "path") -> Any:
    """The YAML document of a file (not yet validated), read with the
    bounds of :mod:`plume_jax.files.safe_io` (at most 1 MiB, 64 levels of nesting
    and 100 000 nodes once aliases are expanded: an alias bomb is refused
    before it is built).

    Raises:
        ValidationError: naming ``parameter``, for a missing, unreadable,
            binary or too large file, a folder, or text that is not YAML or
            is over those bounds.
    """
    return load_yaml_file(path, parameter)


def load_config(path: str | pathlib.Path) -> dict[str, Any]:
    """Read a config file into a settings dict (not yet validated).

    Raises:
        ValidationError: the file is missing, is not YAML, or is not a
            mapping (the message quotes a bounded excerpt of what it holds,
            never the whole file).
    """
    spec = read_yaml(path)
    if not isinstance(spec, Mapping):
        raise ValidationError(
            f"config={str(path)!r} is invalid: expected a YAML mapping of settings at the top "
            f"of the file (it holds {type(spec).__name__} {bounded_repr(spec, 80)})",
            parameter="config", value=spec, allowed="a YAML mapping of settings")
    return dict(spec)


def make_from_config(path: str | pathlib.Path, **overrides: Any):
    """Build ``(env, default params)`` from a YAML config file.

    ``overrides`` work as in ``plume_jax.make`` (env settings, component
    slots, or bare parameter names). Everything is validated before the env
    is built.

    Raises:
        ValidationError: unreadable file, unknown names, bad values.
    """
    spec = load_config(path)
    if overrides:
        for slot in COMPONENTS:
            entry = spec.get(slot)
            if not isinstance(entry, Mapping) or "type" not in entry:
                raise ValidationError.for_parameter(
                    slot, entry, f"a dict with a 'type' (one of {sorted(COMPONENTS[slot])})")
        spec = merge_overrides(spec, overrides)
    return build_env(spec)


def write_preset_configs(directory: str | pathlib.Path | None = None) -> list[pathlib.Path]:
    """Write ``<directory>/<preset id>.yaml`` for every preset (default:
    ``configs/presets`` of the source checkout). Returns the paths."""
    directory = PRESET_DIR if directory is None else pathlib.Path(directory)
    paths = []
    for preset_id, preset in PRESETS.items():
        env, _ = make(preset_id)
        paths.append(save_config(env, directory / f"{preset_id}.yaml",
                                 description=preset.get("description")))
    return paths
