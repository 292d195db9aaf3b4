"""Evaluation scenarios: YAML files that fix an env, an agent, seeds and an
expectation, and a runner that reports comparable metrics.

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

Metrics (first episode of every env, from the env's own step outputs):
success rate with a Wilson 95% interval; mean (with standard error),
median and the tail (90th and 99th percentiles) of the steps to source over
successful episodes; the 90th and 99th percentiles of the episode length
over all episodes (an episode that did not end within ``num_steps`` counts
as ``num_steps``, so that tail is censored there); path efficiency =
``max(start distance - goal_radius, 0) / path length`` averaged over
successful episodes (1 = straight to the goal region); mean return; and
throughput (env steps per second, excluding compile time). For a
multi-agent env the outcome is the team's: success when the episode ends at
the goal (the first arrival with ``done_mode="any"``), and steps are the
time to that arrival; path efficiency is not reported.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import pathlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.core.seeding import check_seed, seed_key
from plume_jax.settings import (
    MAX_INT32,
    REQUIRED,
    Setting,
    choice,
    integer,
    optional,
    plain,
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
#: The largest ``--baseline`` file read (a report is a few KiB per run).
MAX_BASELINE_BYTES = 64 << 20


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


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval ``(low, high)`` for ``successes`` of ``n``.

    Always ``0 <= low <= successes / n <= high <= 1``: exactly ``0.0`` at no
    successes and exactly ``1.0`` at all successes (the closed form leaves a
    rounding error there, 0.9999999999999999, which put the point outside
    its own interval), so error bars drawn from it are never negative.
    ``n == 0`` gives ``(0.0, 1.0)``.
    """
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes <= 0 else min(max(0.0, centre - half), p)
    high = 1.0 if successes >= n else max(min(1.0, centre + half), p)
    return (low, high)


def summarise(result: Any, goal_radius: float, team: bool = False) -> dict[str, Any]:
    """Metrics from a :class:`~plume_jax.evaluate.rollout.RolloutResult` (numpy floats -> Python).

    ``team``: a multi-agent env, whose success and steps are the team's (first
    arrival for ``done_mode="any"``); path efficiency is then not reported
    (the agent that arrives need not be the one whose path was tracked).

    Percentiles (``median_steps``, ``p90_steps``, ``p99_steps`` over
    successful episodes; ``p90_episode_length``, ``p99_episode_length`` over
    all episodes, unfinished ones counted at ``num_steps``) are numpy's
    default, linear interpolation between order statistics, in steps
    (floats); ``None`` where there is no episode to take them over.
    """
    success = np.asarray(result.success)
    n, k = int(success.size), int(success.sum())
    all_lengths = np.asarray(result.episode_length).astype(float)
    lengths = all_lengths[success]
    shortest = np.maximum(np.asarray(result.start_distance)[success] - goal_radius, 0.0)
    travelled = np.asarray(result.path_length)[success]
    efficiency = np.where(travelled > 0, shortest / np.maximum(travelled, 1e-9), 1.0)
    low, high = wilson_interval(k, n)
    return {
        "episodes": n,
        "successes": k,
        "success_rate": k / n if n else 0.0,
        "success_ci95": [low, high],
        "mean_steps": float(lengths.mean()) if k else None,
        "sem_steps": float(lengths.std(ddof=1) / math.sqrt(k)) if k > 1 else None,
        "median_steps": float(np.median(lengths)) if k else None,
        "p90_steps": float(np.percentile(lengths, 90)) if k else None,
        "p99_steps": float(np.percentile(lengths, 99)) if k else None,
        "p90_episode_length": float(np.percentile(all_lengths, 90)) if n else None,
        "p99_episode_length": float(np.percentile(all_lengths, 99)) if n else None,
        "path_efficiency": float(efficiency.mean()) if k and not team else None,
        "mean_return": float(np.asarray(result.episode_return).mean()),
    }


def check_expectations(metrics: Mapping[str, Any], expect: Mapping[str, float]) -> list[str]:
    """Human-readable failures of ``expect`` (empty when all hold)."""
    failures = []
    if "min_success_rate" in expect and metrics["success_rate"] < expect["min_success_rate"]:
        failures.append(f"success rate {metrics['success_rate']:.3f} < "
                        f"min_success_rate {expect['min_success_rate']}")
    if "max_mean_steps" in expect and (metrics["mean_steps"] is None
                                       or metrics["mean_steps"] > expect["max_mean_steps"]):
        failures.append(f"mean steps {metrics['mean_steps']} > max_mean_steps "
                        f"{expect['max_mean_steps']}")
    if "min_path_efficiency" in expect and (metrics["path_efficiency"] is None
                                            or metrics["path_efficiency"] < expect["min_path_efficiency"]):
        failures.append(f"path efficiency {metrics['path_efficiency']} < min_path_efficiency "
                        f"{expect['min_path_efficiency']}")
    return failures


def compare_to_baseline(metrics: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    """Regressions against a saved report's metrics.

    Flags a success rate whose 95% interval lies wholly below the baseline
    rate, and mean steps more than 3 combined standard errors above the
    baseline's.
    """
    flags = []
    if metrics["success_ci95"][1] < baseline["success_rate"]:
        flags.append(f"success rate regressed: {metrics['success_rate']:.3f} "
                     f"(95% CI {metrics['success_ci95'][0]:.3f}-{metrics['success_ci95'][1]:.3f}) "
                     f"vs baseline {baseline['success_rate']:.3f}")
    if metrics.get("mean_steps") is not None and baseline.get("mean_steps") is not None:
        se = math.hypot(metrics.get("sem_steps") or 0.0, baseline.get("sem_steps") or 0.0)
        if metrics["mean_steps"] > baseline["mean_steps"] + 3 * se:
            flags.append(f"mean steps regressed: {metrics['mean_steps']:.1f} vs baseline "
                         f"{baseline['mean_steps']:.1f} (3 SE = {3 * se:.1f})")
    return flags




@dataclasses.dataclass(frozen=True)
class AgentChoice:
    """An agent asked for instead of a scenario's own (``--agent``).

    Attributes:
        name: the registry name (``agents.registry``), e.g. ``"trained"``.
        label: what names the run in tables, files and baselines (default:
            ``name``); distinct labels let one agent run twice with different
            parameters (two trained policies).
        params: parameters given for it; for the scenario's own agent they
            are laid over the scenario's parameters.
    """

    name: str
    label: str = ""
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.name)


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """One (scenario, agent) pair, built and checked, not yet run.

    Attributes:
        scenario: the validated scenario.
        label, agent_name, agent_params: the agent that runs it.
        expect: the expectations checked for this run ({} when skipped).
        expect_skipped: why the scenario's expectations are not checked
            (``None`` when they are, or when it has none).
        env, params, policy: the built env, its params and the agent.
        episodes, seed, num_steps: the run's size and seed.
        overrides: the settings laid over the preset.
        env_note: a warning that a trained policy runs on an env other than
            its training env (:func:`env_note`), or None.
        preset: the preset run when it is not the scenario's
            (``--env-from-run``), or None.
    """

    scenario: Mapping[str, Any]
    label: str
    agent_name: str
    agent_params: Mapping[str, Any]
    expect: Mapping[str, Any]
    expect_skipped: str | None
    env: Any
    params: Any
    policy: Any
    episodes: int
    seed: int
    num_steps: int
    overrides: Mapping[str, Any]
    env_note: str | None = None
    preset: str | None = None


def scenario_env(scenario: Mapping[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """``(env, params, overrides)`` of a scenario (``max_steps`` applied)."""
    from plume_jax.envs.presets import make

    overrides = dict(scenario["env"]["overrides"])
    if scenario.get("max_steps") is not None:
        overrides["max_steps"] = scenario["max_steps"]
    env, params = make(scenario["env"]["preset"], **overrides)
    return env, params, overrides


#: Env settings a trained policy's evaluation is not warned about: the
#: reward (evaluation measures success and steps) and the episode budget
#: (a scenario's own ``max_steps``).
UNCOMPARED_SETTINGS = ("reward", "max_steps")


def training_env(agent_name: str, agent_params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The settings of the env a trained policy was trained on, as its
    ``policy.json`` records them (``env``: the resolved settings, preset id
    included), for agent ``trained`` with a ``path`` or a zoo reference;
    ``None`` for other agents, or a policy folder without a readable
    ``policy.json`` recording them (building the agent reports a bad one).

    Raises:
        ValidationError: an unknown zoo entry.
    """
    from agents.zoo import is_zoo_reference, resolve
    from plume_jax.files.safe_io import load_json_file

    if is_zoo_reference(agent_name):
        folder = resolve(agent_name).policy_path
    elif agent_name == "trained" and isinstance(agent_params.get("path"), (str, os.PathLike)):
        folder = pathlib.Path(agent_params["path"])
    else:
        return None
    if not (folder / "policy.json").is_file():
        return None  # building the agent says what is wrong with the folder
    try:
        spec = load_json_file(folder / "policy.json", "path")
    except ValidationError:
        return None
    env = spec.get("env") if isinstance(spec, dict) else None
    return dict(env) if isinstance(env, dict) and env.get("id") else None


def env_differences(trained: Mapping[str, Any], used: Mapping[str, Any],
                    prefix: str = "") -> list[str]:
    """``"name: trained X, here Y"`` for each setting (dotted, e.g.
    ``plume.sigma``) that differs between two envs' settings, leaving out
    :data:`UNCOMPARED_SETTINGS`; a component of another ``type`` is one
    entry (its type), not a list of its parameters."""
    out = []
    for name in dict.fromkeys([*trained, *used]):
        if not prefix and name in UNCOMPARED_SETTINGS:
            continue
        a, b = plain(trained.get(name)), plain(used.get(name))
        if isinstance(a, Mapping) and isinstance(b, Mapping) and a.get("type") == b.get("type"):
            out += env_differences(a, b, f"{prefix}{name}.")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b) \
                and all(isinstance(v, Mapping) for v in a + b):  # e.g. a composite's sensors
            for i, (x, y) in enumerate(zip(a, b)):
                part = x.get("name", i) if x.get("name") == y.get("name") else i
                out += env_differences({part: x}, {part: y}, f"{prefix}{name}.")
        elif a != b:
            def shown(v: Any) -> Any:
                return v.get("type", v) if isinstance(v, Mapping) else v
            out.append(f"{prefix}{name}: trained {shown(a)!r}, here {shown(b)!r}")
    return out


def env_note(trained: Mapping[str, Any] | None, env: Any, label: str,
             protocol: str | None = None) -> str | None:
    """The warning for a trained policy evaluated on an env other than its
    own (:func:`env_differences`), or None. Under a fixed-start ``protocol``
    the scenario's env is the protocol's evaluation env on purpose, so the
    warning says that instead of offering ``--env-from-run``."""
    used = getattr(env, "settings", None)
    if not trained or not isinstance(used, Mapping):
        return None
    diffs = env_differences(_with_current_defaults(trained), used)
    if not diffs:
        return None
    limit = 3 if protocol else 4
    shown = "; ".join(diffs[:limit]) + (f"; and {len(diffs) - limit} more"
                                         if len(diffs) > limit else "")
    head = (f"agent {label!r} was trained on {trained['id']} with other settings than this "
            f"env ({shown})")
    if protocol:
        return (f"{head}; expected: protocol {protocol} evaluates on its scenario's env "
                "(docs/singh2023.md)")
    return f"{head}; --env-from-run evaluates it on its own training env"


def _with_current_defaults(trained: Mapping[str, Any]) -> Mapping[str, Any]:
    """``trained`` with each setting its record lacks (one added since the
    policy was trained) read as its preset's current value, so that a
    setting the training env could not have had is no difference unless
    this env moves it from that value."""
    try:
        from plume_jax.envs.presets import make

        current = make(str(trained["id"]))[0].settings
    except Exception:  # an id that is not a preset (today's or any): compare as recorded
        return trained

    def fill(record: Any, now: Any) -> Any:
        if not (isinstance(record, Mapping) and isinstance(now, Mapping)) \
                or record.get("type") != now.get("type"):
            return record
        return {**{k: v for k, v in now.items() if k not in record},
                **{k: fill(v, now.get(k)) for k, v in record.items()}}

    return fill(trained, current)


def check_policy_traces(env: Any, params: Any, policy: Any, name: str) -> None:
    """Trace one decision of a functional ``policy`` on the env's observation,
    abstractly (``jax.eval_shape``: nothing compiles or runs), and check the
    action's shape and kind — so an agent that cannot act on this env fails
    here, not while a rollout compiles after other runs.

    Raises:
        ValidationError: (parameter ``agent``) naming the agent and what failed.
    """
    key = jax.random.key(0)
    obs = jax.eval_shape(env.reset, key, params)[0]
    try:
        action = jax.eval_shape(lambda k, o: policy.act(policy.init(k), o, k)[0], key, obs)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as error:
        raise ValidationError.for_parameter(
            "agent", name, f"an agent that can act on this env's observation {obs} "
            f"({type(error).__name__}: {' '.join(str(error).split())[:300]})") from None
    space = env.action_space(params)
    team = env.is_multi_agent
    expected = ((env.num_agents,) if team else ()) + tuple(space.shape)
    discrete = not hasattr(space, "low")
    if tuple(action.shape) != expected or (discrete and not jnp.issubdtype(action.dtype,
                                                                           jnp.integer)):
        raise ValidationError.for_parameter(
            "agent", name, f"an agent whose action fits the env's action space {space} "
            f"(shape {expected}{', integers' if discrete else ''}), not {action}")


def plan_run(scenario: Mapping[str, Any], agent: AgentChoice | None = None, *,
             episodes: int | None = None, seed: int | None = None,
             built_env: tuple[Any, Any, dict[str, Any]] | None = None,
             env_from_run: bool = False) -> PlannedRun:
    """Build the env and the agent of one run, so that every check (preset
    overrides, agent name and parameters, the agent against the env, a
    trained policy's or SB3 model's file) happens before anything runs.

    ``agent=None`` runs the scenario's own agent. An :class:`AgentChoice`
    with the scenario's agent name runs it with the scenario's parameters
    updated by the choice's; the scenario's ``expect`` is checked only when
    the result is the scenario's own agent and parameters (defaults
    included: ``include_noop=False`` given for ``random_walk`` is its own
    default). ``built_env``
    reuses ``scenario_env(scenario)`` across agents.

    A trained policy (``trained`` or ``zoo:<name>``) whose recorded training
    env differs from the scenario's in a setting that matters gets a
    warning in ``env_note`` (:func:`env_note`); ``env_from_run=True`` runs
    it on its own training env instead (the scenario's episodes and seed;
    its expectations are not checked there).

    Raises:
        ValidationError: from the env, the agent registry or the agent.
    """
    from plume_jax.core.agents_package import check_agents_package

    check_agents_package()
    from agents.registry import default_params, is_host_agent, make_agent

    env, params, overrides = built_env or scenario_env(scenario)
    own = scenario["agent"]
    if agent is None:
        agent = AgentChoice(own["name"])
    agent_params = dict(agent.params)
    if agent.name == own["name"]:
        agent_params = {**own["params"], **agent_params}
    trained = training_env(agent.name, agent_params)
    if env_from_run:
        if trained is None:
            raise ValidationError.for_parameter(
                "--env-from-run", agent.label, "trained agents only (trained with path=..., or "
                "zoo:<name>) whose policy.json records the env they were trained on")
        from plume_jax.envs.presets import make

        overrides = {k: v for k, v in trained.items() if k != "id"}
        env, params = make(trained["id"], **overrides)
    defaults = default_params(agent.name)
    is_own = agent.name == own["name"] and \
        {**defaults, **agent_params} == {**defaults, **own["params"]}
    skipped = None
    if scenario["expect"] and not is_own:
        skipped = (f"the scenario's expectations are for agent {own['name']!r}"
                   + (f" with parameters {own['params']}" if own["params"] else "")
                   + f", not {agent.name!r}"
                   + (f" with parameters {agent_params}" if agent_params else ""))
    elif scenario["expect"] and env_from_run:
        is_own = False
        skipped = ("the scenario's expectations are for its own env; --env-from-run ran the "
                   f"policy's training env ({trained['id']})")  # type: ignore[index]
    if episodes is not None:
        check_episodes("episodes", episodes, None)
    if scenario.get("protocol"):
        from plume_jax.evaluate import singh_protocol

        singh_protocol.check_env(env, params, scenario["protocol"])
        if is_host_agent(agent.name):
            raise ValidationError.for_parameter(
                "agent", agent.name, f"a functional agent (protocol {scenario['protocol']} "
                "runs its own jitted rollout)")
        if episodes is None:
            episodes = singh_protocol.EPISODES
        else:  # a quick look: that many of the fixed starts, evenly spread
            singh_protocol.subset(episodes)
    if scenario.get("normalisation", "saved") != "saved" and not scenario.get("protocol"):
        raise ValidationError.for_parameter(
            "normalisation", scenario["normalisation"], "'saved' without a protocol (online "
            "normalisation is the singh240 protocol's)")
    policy = make_agent(agent.name, env, **agent_params)
    if scenario.get("protocol"):
        singh_protocol.check_options(scenario["protocol"], scenario.get("normalisation", "saved"),
                                     policy)
    if not is_host_agent(agent.name):
        check_policy_traces(env, params, policy, agent.name)
    return PlannedRun(
        scenario=scenario, label=agent.label, agent_name=agent.name, agent_params=agent_params,
        expect=dict(scenario["expect"]) if is_own else {}, expect_skipped=skipped,
        env=env, params=params, policy=policy,
        episodes=episodes or scenario["episodes"],
        seed=validate_seed(scenario["seed"] if seed is None else seed),
        num_steps=int(params.max_steps), overrides=overrides,
        env_note=None if env_from_run else env_note(trained, env, agent.label,
                                                    scenario.get("protocol")),
        preset=trained["id"] if env_from_run else None)  # type: ignore[index]


class _BatchProgress:
    """``progress`` of a run evaluated in batches of envs: the envs of the
    batches before (``base``) plus a batch's finished episodes less the
    ``skip`` envs it shares with the batch before (already counted; the
    count is then a lower bound until the batch ends, never above the
    episodes run, never going back). One object per run, hashable by
    identity (a static argument of the rollout)."""

    def __init__(self, progress: Callable[[int, int], None]):
        self.progress, self.base, self.skip = progress, 0, 0

    def __call__(self, steps: Any, finished: Any) -> None:
        self.progress(steps, self.base + max(0, int(finished) - self.skip))


def _captured_rollout(run: PlannedRun, key: jax.Array,
                      progress: Callable[[int, int], None] | None,
                      capture: Any) -> tuple[Any, float, float]:
    """The rollout of ``run`` in batches of ``capture.batch`` envs, each
    drawing the keys it has in the whole run (the results are the whole
    rollout's), each batch's transitions handed to ``capture.add`` before
    the next runs. Returns ``(result, compile seconds, run seconds)``."""
    from agents.registry import is_host_agent
    from plume_jax.evaluate.rollout import host_rollout, join_results, rollout

    env, params, n = run.env, run.params, run.episodes
    size = max(1, min(n, int(capture.batch)))
    batch_progress = None if progress is None else _BatchProgress(progress)
    host = is_host_agent(run.agent_name)
    compile_s = run_s = 0.0
    if not host:
        t0 = time.perf_counter()
        compiled = rollout.lower(env, params, run.policy, key, size, run.num_steps,
                                 until_done=True, progress=batch_progress, capture=True,
                                 total_envs=n, env_offset=jnp.int32(0)).compile()
        compile_s = time.perf_counter() - t0
    parts = []
    for start in range(0, n, size):
        offset = min(start, n - size)  # the last batch: the run's last `size` envs
        if batch_progress is not None:
            batch_progress.base, batch_progress.skip = start, start - offset
        t0 = time.perf_counter()
        if host:
            result = host_rollout(env, params, run.policy, key, size, run.num_steps,
                                  until_done=True, progress=batch_progress, capture=True,
                                  total_envs=n, env_offset=offset)
        else:
            result = compiled(params, key, env_offset=jnp.int32(offset))
        result = jax.block_until_ready(result)
        run_s += time.perf_counter() - t0
        capture.add(result, offset, start - offset)
        parts.append((jax.device_get(result.replace(steps=None)), start - offset))
    return join_results(parts), compile_s, run_s


def execute_run(run: PlannedRun,
                progress: Callable[[int, int], None] | None = None,
                capture: Any = None) -> dict[str, Any]:
    """Run a planned (scenario, agent) pair: one rollout of ``run.episodes``
    seeded episodes that stops when all have ended.

    ``progress(steps_done, episodes_finished)`` is called on the host as the
    rollout advances (see :func:`plume_jax.evaluate.rollout.rollout`).

    Returns a JSON-serialisable report: scenario, agent, metrics,
    expectations (checked, failed or skipped, and why), timing; plus
    ``"_rollout"``, ``"_env"``, ``"_params"`` and ``"_scenario"`` (not
    serialised) for plotting and captures. ``capture`` (a
    :class:`plume_jax.evaluate.capture.RunCapture`) runs the episodes in
    batches of ``capture.batch`` envs with the same results, handing each
    batch's transitions to ``capture.add`` (:func:`_captured_rollout`).
    """
    from plume_jax.core.agents_package import check_agents_package

    check_agents_package()
    from agents.registry import is_host_agent
    from plume_jax.evaluate.rollout import host_rollout, rollout

    env, params, n = run.env, run.params, run.episodes
    key = seed_key(run.seed)
    t0 = time.perf_counter()
    protocol: dict[str, Any] | None = None
    if run.scenario.get("protocol") and capture is not None:
        raise ValidationError.for_parameter(
            "--capture", "a capture folder", f"no capture with protocol "
            f"{run.scenario['protocol']} (scenario {run.scenario['name']!r})")
    if run.scenario.get("protocol"):
        from plume_jax.evaluate import singh_protocol

        result, protocol = singh_protocol.run(
            env, params, run.policy, key, run.seed, run.num_steps, episodes=n,
            protocol=run.scenario["protocol"],
            normalisation=run.scenario.get("normalisation", "saved"))
        protocol["paper_best"] = singh_protocol.paper_best(run.preset
                                                           or run.scenario["env"]["preset"])
        compile_s, run_s = 0.0, time.perf_counter() - t0
    elif capture is not None:
        result, compile_s, run_s = _captured_rollout(run, key, progress, capture)
    elif is_host_agent(run.agent_name):
        compile_s = 0.0
        result = jax.block_until_ready(host_rollout(env, params, run.policy, key, n,
                                                    run.num_steps, until_done=True,
                                                    progress=progress))
        run_s = time.perf_counter() - t0
    else:
        compiled = rollout.lower(env, params, run.policy, key, n, run.num_steps,
                                 until_done=True, progress=progress).compile()
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = jax.block_until_ready(compiled(params, key))
        run_s = time.perf_counter() - t0

    team = env.is_multi_agent
    metrics = summarise(result, float(params.goal_radius), team=team)
    if team:
        metrics["num_agents"] = env.num_agents
    if protocol is not None:
        metrics["protocol"] = protocol
    metrics["env_steps_per_second"] = n * int(result.steps_run) / run_s
    metrics["episodes_per_second"] = n / run_s
    failures = check_expectations(metrics, run.expect)
    if run.expect_skipped:
        expectations = {"status": "skipped", "reason": run.expect_skipped}
    elif not run.expect:
        expectations = {"status": "none", "reason": "the scenario sets no expectations"}
    else:
        expectations = {"status": "failed" if failures else "passed", "reason": ""}
    return {
        "scenario": run.scenario["name"],
        "preset": run.preset or run.scenario["env"]["preset"],
        "overrides": dict(run.overrides),
        "agent": {"name": run.agent_name, "label": run.label, "params": dict(run.agent_params)},
        "seed": run.seed,
        "max_steps": run.num_steps,
        "metrics": metrics,
        "expect": dict(run.scenario["expect"]),
        "expectations": expectations,
        "failures": failures,
        "timing": {"compile_seconds": compile_s, "run_seconds": run_s},
        "_rollout": result, "_env": env, "_params": params, "_scenario": run.scenario,
    }


def run_scenario(scenario: Mapping[str, Any], *, agent: str | None = None,
                 agent_params: Mapping[str, Any] | None = None, episodes: int | None = None,
                 seed: int | None = None) -> dict[str, Any]:
    """Plan and run one scenario (optionally with another agent / size /
    seed); see :func:`plan_run` and :func:`execute_run`."""
    choice = None if agent is None else AgentChoice(agent, params=dict(agent_params or {}))
    return execute_run(plan_run(scenario, choice, episodes=episodes, seed=seed))


def baseline_key(report: Mapping[str, Any]) -> tuple[str, str]:
    """``(scenario, agent label)``: how a saved baseline finds a run."""
    agent = report["agent"]
    return (str(report["scenario"]), str(agent.get("label") or agent["name"]))


def load_baseline(path: str | os.PathLike) -> dict[tuple[str, str], dict[str, Any]]:
    """Metrics by :func:`baseline_key` from a file written by ``--save-baseline``.

    Raises:
        ValidationError: (parameter ``--baseline``) unreadable or not such a file.
    """
    from plume_jax.files.safe_io import load_json_file

    saved = load_json_file(path, "--baseline", max_bytes=MAX_BASELINE_BYTES)
    try:
        return {baseline_key(r): r["metrics"] for r in saved["reports"]}
    except (KeyError, TypeError, ValueError) as error:
        raise ValidationError.for_parameter(
            "--baseline", str(path), f"a report JSON written by --save-baseline "
            f"({type(error).__name__}: {' '.join(str(error).split())[:200]})") from None


def attach_baseline(report: dict[str, Any],
                    baseline: Mapping[tuple[str, str], Mapping[str, Any]] | None) -> None:
    """Set ``report["baseline"]`` (compared / missing / not requested) and
    ``report["regressions"]`` from a loaded baseline (``None``: none asked for)."""
    key = baseline_key(report)
    if baseline is None:
        report["baseline"], report["regressions"] = {"status": "not requested"}, []
    elif key not in baseline:
        report["baseline"] = {"status": "missing",
                              "reason": f"the baseline has no run of scenario {key[0]!r} "
                                        f"with agent {key[1]!r}"}
        report["regressions"] = []
    else:
        report["regressions"] = compare_to_baseline(report["metrics"], baseline[key])
        report["baseline"] = {"status": "regressed" if report["regressions"] else "matched"}


def status(report: Mapping[str, Any]) -> str:
    """One line: expectations (ok / FAIL / skipped, why / none set) and the
    baseline comparison (matched / REGRESSED / missing) when one was asked for."""
    parts = []
    expectations = report.get("expectations", {"status": "none"})
    if report["failures"]:
        parts.append("FAIL: " + "; ".join(report["failures"]))
    elif expectations["status"] == "passed":
        parts.append("ok")
    elif expectations["status"] == "skipped":
        parts.append(f"expectations skipped ({expectations['reason']})")
    else:
        parts.append("no expectations")
    base = report.get("baseline", {"status": "not requested"})
    if report.get("regressions"):
        parts.append("REGRESSED: " + "; ".join(report["regressions"]))
    elif base["status"] == "matched":
        parts.append("baseline matched")
    elif base["status"] == "missing":
        parts.append(f"NO BASELINE ({base['reason']})")
    return "; ".join(parts)


def failed(report: Mapping[str, Any]) -> bool:
    """An expectation failed or a regression was flagged."""
    return bool(report["failures"] or report.get("regressions"))


def public(report: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-serialisable part of a report."""
    return {k: v for k, v in report.items() if not k.startswith("_")}


def _groups(reports: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Reports grouped by scenario (``"_group"`` when set, else the name), in
    first-seen order."""
    groups: dict[Any, list] = {}
    for r in reports:
        groups.setdefault(r.get("_group", r["scenario"]), []).append(r)
    return list(groups.values())


def protocol_line(p: Mapping[str, Any]) -> str:
    """The homings line of a fixed-start protocol's report (``metrics.protocol``),
    e.g. ``97/240 homings (singh240; Singh et al.'s best 176/240)``; a subset
    of the starts (``--episodes N``) says so and keeps their best out of all
    the starts, never out of ``N``."""
    from plume_jax.evaluate import singh_protocol

    total = singh_protocol.EPISODES
    best = ("not in their table" if p["paper_best"] is None
            else f"Singh et al.'s best {p['paper_best']}/{total}")
    run = p["protocol"] if p["episodes"] == total else (
        f"{p['protocol']}, {p['episodes']} of the {total} starts, evenly spread: a quick look, "
        "not the protocol's figure")
    return f"{p['homings']}/{p['episodes']} homings ({run}; {best})"


def markdown_table(reports: Sequence[Mapping[str, Any]]) -> str:
    """One comparison table per scenario: a row per agent with success (95%
    interval), mean steps ± SE, median steps, the tail of the steps (90th /
    99th percentile, successful episodes), the tail of the episode length
    (all episodes), path efficiency and status."""

    def fmt(value: Any, spec: str) -> str:
        return "—" if value is None else format(value, spec)

    def tail(m: Mapping[str, Any], what: str) -> str:  # reports saved before the tail: —
        return f"{fmt(m.get(f'p90_{what}'), '.0f')} / {fmt(m.get(f'p99_{what}'), '.0f')}"

    sections = []
    for group in _groups(reports):
        first = group[0]
        lines = [f"### {first['scenario']} ({first['preset']}, "
                 f"{first['metrics']['episodes']} episodes, seed {first['seed']})", "",
                 "| agent | episodes | success (95% CI) | mean steps ± SE | median steps "
                 "| p90 / p99 steps | episode length p90 / p99 | path efficiency | status |",
                 "|---|---:|---|---:|---:|---:|---:|---:|---|"]
        for r in group:
            m = r["metrics"]
            lo, hi = m["success_ci95"]
            steps = fmt(m["mean_steps"], ".1f") + (f" ± {m['sem_steps']:.1f}"
                                                   if m["sem_steps"] is not None else "")
            agent = r["agent"]
            name = agent.get("label") or agent["name"]
            if name != agent["name"]:
                name += f" ({agent['name']})"
            lines.append(f"| {name} | {m['episodes']} | {m['success_rate']:.3f} "
                         f"({lo:.3f}–{hi:.3f}) | {steps} | {fmt(m['median_steps'], '.0f')} | "
                         f"{tail(m, 'steps')} | {tail(m, 'episode_length')} | "
                         f"{fmt(m['path_efficiency'], '.2f')} | {status(r)} |")
        for r in group:
            p = r["metrics"].get("protocol")
            if p:
                agent = r["agent"].get("label") or r["agent"]["name"]
                lines.append(f"\n{agent}: {protocol_line(p)}")
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def output_stems(reports: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """Safe, distinct file stems: one per report (``<scenario>__<agent>``) and
    one per scenario group (``<scenario>``), in :func:`_groups` order."""
    used: set[str] = set()

    def unique(stem: str) -> str:
        candidate, i = stem, 2
        while candidate.lower() in used:
            candidate, i = f"{stem}-{i}", i + 1
        used.add(candidate.lower())
        return candidate

    groups = _groups(reports)
    group_stems = [unique(safe_name(g[0]["scenario"])) for g in groups]
    index = {id(r): (gi, g.index(r)) for gi, g in enumerate(groups) for r in g}
    run_stems = []
    for r in reports:
        gi, _ = index[id(r)]
        agent = r["agent"].get("label") or r["agent"]["name"]
        run_stems.append(unique(f"{group_stems[gi]}__{safe_name(agent)}"))
    return run_stems, group_stems


def write_results(reports: list[dict[str, Any]], out_dir: str) -> list[str]:
    """The results of the runs, before any figure: a JSON report per run and
    ``summary.md`` (a table per scenario). File names are :func:`safe_name`
    forms of scenario and agent names, always inside ``out_dir``. Each file
    is written whole under a temporary name and then renamed into place."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    run_stems, _ = output_stems(reports)
    for r, stem in zip(reports, run_stems):
        path = os.path.join(out_dir, stem + ".json")
        _write_text_whole(path, functools.partial(json.dump, public(r), indent=2))
        written.append(path)
    path = os.path.join(out_dir, "summary.md")
    _write_text_whole(path, lambda f: f.write(markdown_table(reports) + "\n"))
    written.append(path)
    return written


def write_figures(reports: list[dict[str, Any]], out_dir: str) -> tuple[list[str], list[str]]:
    """A comparison figure per scenario (``<scenario>.png``: success with 95%
    intervals, mean steps ± SE, and a trajectory panel per agent).

    A figure that cannot be drawn or saved loses nothing else: it is left
    out (no partial file), a ``RuntimeWarning`` names it and the error, and
    the others are still drawn.

    Returns:
        ``(written, problems)``: the figures written, and one line per
        figure that failed.
    """
    import warnings

    from plume_jax.evaluate.figures import scenario_figure
    from plume_jax.files import atomic_write

    written, problems = [], []
    _, group_stems = output_stems(reports)
    for group, stem in zip(_groups(reports), group_stems):
        path = os.path.join(out_dir, stem + ".png")
        try:
            figure = scenario_figure(group)
            atomic_write(path, lambda tmp: figure.savefig(tmp, dpi=100, format="png"))
        except Exception as error:  # a figure must never lose the results
            problem = (f"figure {path} was not written ({type(error).__name__}: "
                       f"{' '.join(str(error).split())[:300]}); the JSON reports and "
                       "summary.md are written")
            warnings.warn(problem, RuntimeWarning, stacklevel=2)
            problems.append(problem)
            continue
        written.append(path)
    return written, problems


def write_outputs(reports: list[dict[str, Any]], out_dir: str) -> list[str]:
    """:func:`write_results`, then :func:`write_figures` (a figure that fails
    is a warning, after the results are on disk). Returns the files
    written."""
    written = write_results(reports, out_dir)
    figures, _ = write_figures(reports, out_dir)
    return written + figures


def _write_text_whole(path: str, write: Callable[[Any], Any]) -> None:
    """``write(f)`` (an open UTF-8 text file) into ``path`` whole or not at
    all (:func:`plume_jax.files.atomic_write`)."""
    from plume_jax.files import atomic_write

    def into(tmp: Any) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            write(f)

    atomic_write(path, into)
