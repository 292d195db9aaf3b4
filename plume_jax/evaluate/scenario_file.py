"""A scenario file's schema: the YAML file that fixes an env, an agent,
seeds and an expectation (:mod:`plume_jax.evaluate.scenario` gathers the
pieces of an evaluation).

A scenario file (``configs/scenarios/*.yaml``; every key is declared once
in :data:`SCENARIO_SETTINGS`, listed in docs/config_reference.md)::

    name: gaussian-klinotaxis
    description: run-and-tumble on the default Gaussian plume
    env:
      preset: PlumeNav-Gaussian-v0
      overrides: {sigma: 20.0}        # optional, validated by plume_jax.make
    agent:
      name: klinotaxis                # see agents.registry
      params: {}
    episodes: 2000                    # seeded episodes, run as one vmapped rollout
    seed: 0
    max_steps: 1000                   # optional; overrides the env's max_steps
    expect:                           # optional; every key is checked
      min_success_rate: 0.95
      max_mean_steps: 200

The scenario's ``expect`` is about its own agent: it is checked when the run
uses that agent with the scenario's parameters, and reported as skipped,
with the reason, when another agent (or other parameters) runs the scenario.
``seed`` is an integer in ``[0, 2**63)``; every bit reaches the PRNG key
(:mod:`plume_jax.core.seeding`).
``name`` is shown as written; output files use a safe form of it
(:func:`safe_name`).
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Mapping
from typing import Any

from plume_jax.core.errors import ValidationError
from plume_jax.core.seeding import check_seed
from plume_jax.settings import (
    MAX_INT32,
    REQUIRED,
    Setting,
    choice,
    integer,
    optional,
    qualified,
    real,
    resolve_keys,
)

#: Evaluation protocols a scenario may name instead of seeded episodes.
PROTOCOLS = ("singh240", "singh240_paper")
#: Observation normalisation under a protocol (``singh_protocol.NORMALISATIONS``).
NORMALISATIONS = ("saved", "online")
#: The most episodes one run may ask for (one vmapped batch).
MAX_EPISODES = 2**24


def validate_seed(value: Any, parameter: str = "seed") -> int:
    """``value`` as a seed (``[0, 2**63)``, every bit used:
    :mod:`plume_jax.core.seeding`), or a ValidationError naming ``parameter``."""
    return check_seed(value, parameter, none_ok=False)


def safe_name(text: str, limit: int = 80) -> str:
    """A file-name stem for ``text``: letters, digits, ``.``, ``_`` and ``-``
    only (anything else becomes ``_``), no leading dot, at most ``limit``
    characters; never empty, never a path."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).lstrip("._-")[:limit].rstrip(".")
    return stem or "unnamed"


def load_scenario(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a scenario YAML file (read with the bounds of
    :mod:`plume_jax.files.safe_io`: at most 1 MiB, 64 levels, 100 000 nodes once
    aliases are expanded)."""
    from plume_jax.files.safe_io import load_yaml_file

    scenario = validate_scenario(load_yaml_file(path, "scenario"), source=str(path))
    return _shipped_agent_path(scenario, pathlib.Path(path))


def _shipped_agent_path(scenario: dict[str, Any], path: pathlib.Path) -> dict[str, Any]:
    """A scenario shipped with plume_jax (a file under
    :func:`plume_jax.files.shipped.configs_root`) names its agent's policy as
    ``path: configs/policies/...``, relative to the folder that holds
    ``configs/``; where that path does not exist from the working folder (a
    scenario run by name outside the checkout), it is read from the shipped
    folder. Other scenarios' paths stay relative to the working folder."""
    from plume_jax.files.shipped import configs_root

    root = configs_root()
    params = scenario["agent"].get("params") or {}
    named = params.get("path")
    if not isinstance(named, str) or os.path.isabs(named) or os.path.exists(named):
        return scenario
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return scenario
    shipped = root.parent / named
    if not shipped.exists():
        return scenario
    agent = {**scenario["agent"], "params": {**params, "path": str(shipped)}}
    return {**scenario, "agent": agent}


# ----------------------------------------------------------------- the file's keys
# Every key of a scenario file is a plume_jax.settings.Setting (default,
# checker, doc), resolved by plume_jax.settings.resolve_keys: the resolver of
# component settings and training configs, so unknown keys, bounds and
# messages ("did you mean") are the same everywhere.
def _string(name: str, value: Any, grid: Any = None) -> str:
    if not isinstance(value, str):
        raise ValidationError.for_parameter(name, value, "a string")
    return value


def _preset_id(name: str, value: Any, grid: Any = None) -> str:
    if not isinstance(value, str):
        raise ValidationError.for_parameter(name, value, "a preset id (a string: plume-jax list)")
    return value


def _scenario_name(name: str, value: Any, grid: Any = None) -> str | None:
    if value is None:  # the file's stem, filled by validate_scenario
        return None
    if not isinstance(value, (str, int)) or isinstance(value, bool) or not str(value).strip():
        raise ValidationError.for_parameter(name, value, "a non-empty string")
    return str(value)


def _seed(name: str, value: Any, grid: Any = None) -> int:
    return check_seed(value, name, none_ok=False)


def _mapping_of(allowed: str):
    """A mapping with string keys (``None``: ``{}``), copied."""

    def check(name: str, value: Any, grid: Any = None) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise ValidationError.for_parameter(name, value, allowed)
        return dict(value)

    return check


def _section(table: Mapping[str, Setting], shape: str, *, shorthand: str | None = None,
             given_only: bool = False):
    """A nested mapping checked against ``table``; errors about its shape (not
    a mapping, a required key missing) name the section and show ``shape``.
    With ``shorthand``, a bare string ``s`` means ``{shorthand: s}``."""

    def check(name: str, value: Any, grid: Any = None) -> dict[str, Any]:
        if shorthand is not None and isinstance(value, str):
            value = {shorthand: value}
        if given_only and value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValidationError.for_parameter(name, value, shape)
        for key, s in table.items():
            if s.default is REQUIRED and key not in value:
                raise ValidationError.for_parameter(
                    name, value, f"{shape} ({qualified(name, key)} is required)")
        return resolve_keys(name, table, value, grid, what=f"a known scenario {name} key",
                            given_only=given_only)

    return check


#: ``env``: which environment.
SCENARIO_ENV_SETTINGS: dict[str, Setting] = {
    "preset": Setting(REQUIRED, _preset_id, doc="a preset id (plume-jax list)"),
    "overrides": Setting({}, _mapping_of("a mapping of preset settings {name: value}"),
                         doc="settings passed to plume_jax.make (validated there)"),
}
#: ``agent``: the scenario's own agent (a bare name means ``{name: <name>}``).
SCENARIO_AGENT_SETTINGS: dict[str, Setting] = {
    "name": Setting(REQUIRED, _string, doc="an agent of agents.registry (plume-jax agents)"),
    "params": Setting({}, _mapping_of("a mapping of agent parameters {name: value}"),
                      doc="the agent's parameters (validated by the agent)"),
}
#: ``expect``: checked when the run uses the scenario's own agent; each key
#: is optional (only the keys given are checked).
SCENARIO_EXPECT_SETTINGS: dict[str, Setting] = {
    "min_success_rate": Setting(None, real(low=0.0, high=1.0),
                                doc="fail below this success rate"),
    "max_mean_steps": Setting(None, real(low=0.0),
                              doc="fail above this mean of the steps to the source "
                                  "(successful episodes)"),
    "min_path_efficiency": Setting(None, real(low=0.0, high=1.0),
                                   doc="fail below this mean path efficiency "
                                       "(successful episodes)"),
}
#: The check of a scenario's ``episodes`` (also of ``--episodes``; needs no grid).
check_episodes = integer(low=1, high=MAX_EPISODES)
#: The keys of a scenario file.
SCENARIO_SETTINGS: dict[str, Setting] = {
    "name": Setting(None, _scenario_name,
                    doc="shown as written (files use a safe form); null: the file's stem"),
    "description": Setting("", _string, doc="one line shown with the scenario"),
    "env": Setting(REQUIRED, _section(SCENARIO_ENV_SETTINGS,
                                      "a mapping {preset: <id>, overrides: {...}}"),
                   doc="the environment: {preset, overrides} (below)"),
    "agent": Setting(REQUIRED, _section(SCENARIO_AGENT_SETTINGS,
                                        "a mapping {name: <agent>, params: {...}}",
                                        shorthand="name"),
                     doc="the agent: a name, or {name, params} (below)"),
    "episodes": Setting(1000, check_episodes,
                        doc="seeded episodes, run as one vmapped rollout"),
    "seed": Setting(0, _seed, doc="an integer in [0, 2**63); every bit reaches the PRNG key"),
    "max_steps": Setting(None, optional(integer(low=1, high=MAX_INT32)),
                         doc="overrides the env's max_steps; null: the preset's"),
    "expect": Setting({}, _section(SCENARIO_EXPECT_SETTINGS,
                                   f"a mapping with keys among {list(SCENARIO_EXPECT_SETTINGS)}",
                                   given_only=True),
                      doc="expectations of the scenario's own agent (below)"),
    "protocol": Setting(None, optional(choice(PROTOCOLS)),
                        doc="null: seeded episodes from the env's start distribution; "
                            "singh240: Singh et al. (2023)'s 240 fixed starts (240 episodes "
                            "whatever episodes says; --episodes N runs N of them, evenly "
                            "spread), run as their evaluation code ran; singh240_paper: the "
                            "paper's reading, each episode its own plume future "
                            "(docs/singh2023.md)"),
    "normalisation": Setting("saved", choice(NORMALISATIONS),
                             doc="under protocol singh240: saved (the policy's own observation "
                                 "statistics) or online (re-estimated from the evaluation, as "
                                 "their evaluation scored their agents)"),
}
#: ``section -> key -> Setting`` of a scenario file (``""``: the top level).
SCENARIO_SCHEMA: dict[str, dict[str, Setting]] = {
    "": SCENARIO_SETTINGS, "env": SCENARIO_ENV_SETTINGS, "agent": SCENARIO_AGENT_SETTINGS,
    "expect": SCENARIO_EXPECT_SETTINGS}
SCENARIO_KEYS = set(SCENARIO_SETTINGS)
EXPECT_KEYS = set(SCENARIO_EXPECT_SETTINGS)


def validate_scenario(raw: Any, source: str = "<scenario>") -> dict[str, Any]:
    """Check a scenario mapping against :data:`SCENARIO_SETTINGS`; returns a
    normalised copy (``expect`` holds only the keys given).

    Raises:
        ValidationError: naming the offending key (``env``, ``agent.params``,
            ``seed``, ``expect.min_success_rate``, ...), its value and what is
            allowed; an unknown key with the closest known ones.
    """
    if not isinstance(raw, Mapping):
        raise ValidationError.for_parameter("scenario", source, "a YAML mapping")
    out = resolve_keys("", SCENARIO_SETTINGS, raw, what="a known scenario key")
    if out["name"] is None:
        out["name"] = _scenario_name("name", os.path.splitext(os.path.basename(source))[0])
    return out
