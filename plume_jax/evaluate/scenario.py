"""Evaluation scenarios: YAML files that fix an env, an agent, seeds and an
expectation, and a runner that reports comparable metrics.

A scenario file (``configs/scenarios/*.yaml``)::

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

Metrics (first episode of every env, from the env's own step outputs):
success rate with a Wilson 95% interval; mean (with standard error) and
median steps to source over successful episodes; path efficiency =
``max(start distance - goal_radius, 0) / path length`` averaged over
successful episodes (1 = straight to the goal region); mean return; and
throughput (env steps per second, excluding compile time). For a
multi-agent env the outcome is the team's: success when the episode ends at
the goal (the first arrival with ``done_mode="any"``), and steps are the
time to that arrival; path efficiency is not reported.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from plume_jax.errors import ValidationError

SCENARIO_KEYS = {"name", "description", "env", "agent", "episodes", "seed", "max_steps", "expect"}
EXPECT_KEYS = {"min_success_rate", "max_mean_steps", "min_path_efficiency"}


def load_scenario(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a scenario YAML file."""
    import yaml

    try:
        with open(path) as f:
            raw = yaml.safe_load(f)
    except OSError as error:
        raise ValidationError.for_parameter("scenario", str(path), f"a readable YAML file ({error})")
    return validate_scenario(raw, source=str(path))


def validate_scenario(raw: Any, source: str = "<scenario>") -> dict[str, Any]:
    """Check a scenario mapping; returns a normalised copy."""
    if not isinstance(raw, Mapping):
        raise ValidationError.for_parameter("scenario", source, "a YAML mapping")
    unknown = sorted(set(raw) - SCENARIO_KEYS)
    if unknown:
        raise ValidationError.for_parameter(unknown[0], raw[unknown[0]],
                                            f"a scenario key: one of {sorted(SCENARIO_KEYS)}")
    env = raw.get("env")
    if not isinstance(env, Mapping) or not isinstance(env.get("preset"), str) \
            or set(env) - {"preset", "overrides"}:
        raise ValidationError.for_parameter("env", env, "a mapping {preset: <id>, overrides: {...}}")
    agent = raw.get("agent")
    if isinstance(agent, str):
        agent = {"name": agent}
    if not isinstance(agent, Mapping) or not isinstance(agent.get("name"), str) \
            or set(agent) - {"name", "params"}:
        raise ValidationError.for_parameter("agent", agent, "a mapping {name: <agent>, params: {...}}")
    out = {
        "name": str(raw.get("name", os.path.splitext(os.path.basename(source))[0])),
        "description": str(raw.get("description", "")),
        "env": {"preset": env["preset"], "overrides": dict(env.get("overrides") or {})},
        "agent": {"name": agent["name"], "params": dict(agent.get("params") or {})},
        "episodes": raw.get("episodes", 1000),
        "seed": raw.get("seed", 0),
        "max_steps": raw.get("max_steps"),
        "expect": dict(raw.get("expect") or {}),
    }
    for key in ("episodes", "seed") + (("max_steps",) if out["max_steps"] is not None else ()):
        value = out[key]
        low = 0 if key == "seed" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValidationError.for_parameter(key, value, f"an integer >= {low}")
    bad = sorted(set(out["expect"]) - EXPECT_KEYS)
    if bad:
        raise ValidationError.for_parameter(f"expect.{bad[0]}", out["expect"][bad[0]],
                                            f"one of {sorted(EXPECT_KEYS)}")
    for key, value in out["expect"].items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError.for_parameter(f"expect.{key}", value, "a number")
    return out


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def summarise(result: Any, goal_radius: float, team: bool = False) -> dict[str, Any]:
    """Metrics from a :class:`RolloutResult` (numpy floats -> Python).

    ``team``: a multi-agent env, whose success and steps are the team's (first
    arrival for ``done_mode="any"``); path efficiency is then not reported
    (the agent that arrives need not be the one whose path was tracked).
    """
    success = np.asarray(result.success)
    n, k = int(success.size), int(success.sum())
    lengths = np.asarray(result.episode_length)[success].astype(float)
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


def run_scenario(scenario: Mapping[str, Any], *, agent: str | None = None,
                 agent_params: Mapping[str, Any] | None = None, episodes: int | None = None,
                 seed: int | None = None) -> dict[str, Any]:
    """Run one scenario (optionally with another agent / size / seed).

    Returns a JSON-serialisable report: scenario, agent, metrics,
    expectation failures, timing; plus ``"_rollout"``, ``"_env"`` and
    ``"_params"`` (not serialised) for plotting.
    """
    import plume_jax
    from plume_jax.agents_package import check_agents_package

    check_agents_package()
    from agents.registry import is_host_agent, make_agent
    from plume_jax.evaluate.rollout import host_rollout, rollout

    overrides = dict(scenario["env"]["overrides"])
    if scenario.get("max_steps") is not None:
        overrides["max_steps"] = scenario["max_steps"]
    env, params = plume_jax.make(scenario["env"]["preset"], **overrides)
    agent_name = agent or scenario["agent"]["name"]
    params_for_agent = dict(agent_params if agent_params is not None
                            else (scenario["agent"]["params"] if agent is None else {}))
    policy = make_agent(agent_name, env, **params_for_agent)
    n = episodes or scenario["episodes"]
    key = jax.random.key(scenario["seed"] if seed is None else seed)
    num_steps = int(params.max_steps)

    t0 = time.perf_counter()
    if is_host_agent(agent_name):
        compile_s = 0.0
        result = jax.block_until_ready(host_rollout(env, params, policy, key, n, num_steps,
                                                    until_done=True))
    else:
        compiled = rollout.lower(env, params, policy, key, n, num_steps,
                                 until_done=True).compile()
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = jax.block_until_ready(compiled(params, key))
    run_s = time.perf_counter() - t0

    metrics = summarise(result, float(params.goal_radius), team=hasattr(env, "num_agents"))
    if hasattr(env, "num_agents"):
        metrics["num_agents"] = env.num_agents
    metrics["env_steps_per_second"] = n * int(result.steps_run) / run_s
    metrics["episodes_per_second"] = n / run_s
    return {
        "scenario": scenario["name"],
        "preset": scenario["env"]["preset"],
        "overrides": overrides,
        "agent": {"name": agent_name, "params": params_for_agent},
        "seed": scenario["seed"] if seed is None else seed,
        "max_steps": num_steps,
        "metrics": metrics,
        "expect": scenario["expect"] if agent is None else {},
        "failures": check_expectations(metrics, scenario["expect"] if agent is None else {}),
        "timing": {"compile_seconds": compile_s, "run_seconds": run_s},
        "_rollout": result, "_env": env, "_params": params,
    }


def public(report: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-serialisable part of a report."""
    return {k: v for k, v in report.items() if not k.startswith("_")}


def markdown_table(reports: list[Mapping[str, Any]]) -> str:
    """One row per (scenario, agent)."""

    def fmt(value: Any, spec: str) -> str:
        return "—" if value is None else format(value, spec)

    lines = ["| scenario | agent | episodes | success (95% CI) | mean steps ± SE | median steps "
             "| path efficiency | status |",
             "|---|---|---:|---|---:|---:|---:|---|"]
    for r in reports:
        m = r["metrics"]
        lo, hi = m["success_ci95"]
        status = "FAIL: " + "; ".join(r["failures"] + r.get("regressions", [])) \
            if r["failures"] or r.get("regressions") else "ok"
        steps = fmt(m["mean_steps"], ".1f") + (f" ± {m['sem_steps']:.1f}" if m["sem_steps"] else "")
        lines.append(f"| {r['scenario']} | {r['agent']['name']} | {m['episodes']} | "
                     f"{m['success_rate']:.3f} ({lo:.3f}–{hi:.3f}) | {steps} | "
                     f"{fmt(m['median_steps'], '.0f')} | {fmt(m['path_efficiency'], '.2f')} | {status} |")
    return "\n".join(lines)


def write_outputs(reports: list[dict[str, Any]], out_dir: str, scale: int = 3) -> list[str]:
    """JSON per report, ``summary.md`` and a trajectory PNG per report."""
    from plume_jax.png import write_png
    from plume_jax.render import render_frame

    os.makedirs(out_dir, exist_ok=True)
    written = []
    for r in reports:
        stem = os.path.join(out_dir, f"{r['scenario']}__{r['agent']['name']}")
        with open(stem + ".json", "w") as f:
            json.dump(public(r), f, indent=2)
        res = r["_rollout"]
        image = render_frame(r["_env"], res.final_plume, res.final_agent, r["_params"],
                             trail=res.trajectory, trail_valid=res.trajectory_valid, scale=scale)
        write_png(stem + ".png", np.asarray(image))
        written += [stem + ".json", stem + ".png"]
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(markdown_table(reports) + "\n")
    written.append(os.path.join(out_dir, "summary.md"))
    return written
