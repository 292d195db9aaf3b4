"""Captured trajectories (layer 5): ``plume-jax evaluate ... --capture DIR``.

A capture folder holds three files, written from the per-step arrays the
jitted rollout keeps when asked (``rollout(..., capture=True)``; no Python
loop per step):

- ``run.json`` — provenance: :data:`SCHEMA_VERSION`, plume_jax's version,
  the command line, the git revision (when the package runs from a git
  checkout), the machine (platform, Python, JAX and its backend), and per
  run (scenario x agent) the validated scenario and its sha256 over
  canonical JSON, the agent and its parameters, seed, episodes and
  ``max_steps``; then the columns of both tables with their units, and each
  Parquet file's row count and sha256.
- ``steps.parquet`` — one row per transition of every episode (the first
  episode of each of the run's envs, as the evaluation reports it), and per
  agent in a multi-agent env (``agent_index``).
- ``episodes.parquet`` — one row per episode.

Both tables are keyed by ``(run, episode)``; ``steps`` is ordered by run,
episode, step and agent, so the rows of an episode are contiguous and number
``length x agents`` of its ``episodes`` row (``length`` for a single
agent). Columns: :data:`STEP_COLUMNS`, :data:`EPISODE_COLUMNS`; the format
is :mod:`plume_jax.capture_files`'s, shared with the Gymnasium wrapper
(docs/agents.md, "Captured trajectories").

Memory: the rollout keeps ``max_steps x episodes x agents`` transitions per run;
:func:`check_capture_size` refuses a run above :data:`MAX_CAPTURE_TRANSITIONS`
before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plume_jax.capture_files import (EPISODE_COLUMNS, SCHEMA_VERSION, STEP_COLUMNS,
                                     canonical_hash, git_revision, machine, path_efficiency,
                                     require_pyarrow, table, write_folder)
from plume_jax.errors import ValidationError

__all__ = ["EPISODE_COLUMNS", "MAX_CAPTURE_TRANSITIONS", "SCHEMA_VERSION", "STEP_COLUMNS",
           "canonical_hash", "check_capture_plan", "check_capture_size", "git_revision",
           "machine", "require_pyarrow", "run_tables", "steps_columns", "write_capture"]

#: Largest ``max_steps x episodes x agents`` a captured run may have: the rollout
#: keeps ~50 bytes per transition in memory (~1 GB at this limit).
MAX_CAPTURE_TRANSITIONS = 20_000_000



def check_capture_size(episodes: int, max_steps: int, where: str,
                       limit: int | None = None, agents: int = 1) -> None:
    """Refuse a captured run whose ``max_steps x episodes x agents`` exceeds
    ``limit`` (default :data:`MAX_CAPTURE_TRANSITIONS`).

    Raises:
        ValidationError: (parameter ``--capture``) naming the run, its size
            and the limit.
    """
    limit = MAX_CAPTURE_TRANSITIONS if limit is None else limit
    size = int(episodes) * int(max_steps) * int(agents)
    if size > limit:
        kept = f"{max_steps:,} x {episodes:,}" + (f" x {agents:,}" if agents > 1 else "")
        raise ValidationError.for_parameter(
            "--capture", where,
            f"a run of at most {limit:,} transitions (max_steps x episodes x agents) to "
            f"capture; this one keeps {kept} = {size:,} (use fewer --episodes)")


def check_capture_plan(plan: Any) -> None:
    """Checks of one planned run before anything runs: the size limit."""
    where = f"{plan.scenario['name']} / {plan.label}"
    check_capture_size(plan.episodes, plan.num_steps, where,
                       agents=getattr(plan.env, "num_agents", 1))


def steps_columns(steps: Mapping[str, Any], steps_run: int) -> dict[str, np.ndarray]:
    """Time-major per-step arrays ``[T, N, ...]`` (``[T, N, A, ...]`` for a
    multi-agent env, whose ``x`` is ``[T, N, A]``) -> columns of the kept
    rows (``valid``, ``bool[T, N]``), ordered by episode, step, then agent."""
    arrays = {k: np.asarray(v)[:steps_run] for k, v in steps.items()}
    valid = arrays.pop("valid")  # [T, N]
    agents = arrays["x"].shape[2] if arrays["x"].ndim == 3 else 1
    # episode-major: rows of env n are contiguous, steps in order
    valid_em = valid.T
    episode, step = np.nonzero(valid_em)  # row-major: by episode, then by step
    step_index = np.cumsum(valid_em, axis=1)[episode, step] - 1
    out = {"episode": np.repeat(episode.astype(np.int32), agents),
           "step": np.repeat(step_index.astype(np.int32), agents),
           "agent_index": np.tile(np.arange(agents, dtype=np.int32), episode.shape[0])}
    for name, a in arrays.items():
        rows = np.swapaxes(a, 0, 1)[episode, step]  # [R, ...] or [R, A, ...]
        out[name] = rows.reshape((-1,) + rows.shape[2:]) if agents > 1 else rows
    return out


def run_tables(report: Mapping[str, Any], run_index: int) -> tuple[Any, Any]:
    """``(steps, episodes)`` pyarrow tables of one evaluated run (its report
    from :func:`plume_jax.evaluate.scenario.execute_run` with capture on)."""
    require_pyarrow()
    result = report["_rollout"]
    if result.steps is None:
        raise ValidationError.for_parameter("--capture", report["scenario"],
                                            "a run evaluated with capture=True")
    cols = steps_columns(result.steps, int(result.steps_run))
    n_rows = cols["episode"].shape[0]
    steps = {"run": np.full(n_rows, run_index, np.int32)}
    steps.update({k: cols[k] for k in ("episode", "step", "agent_index")})
    for name in STEP_COLUMNS:
        if name not in steps and name in cols:
            steps[name] = cols[name]

    success = np.asarray(result.success)
    n = success.shape[0]
    start = [np.asarray(result.steps[k])[0] for k in ("x", "y")]  # [N] or [N, A]
    agents = start[0].shape[1] if start[0].ndim == 2 else 1
    start = [a[:, 0] if a.ndim == 2 else a for a in start]  # agent 0's
    episodes = {
        "run": np.full(n, run_index, np.int32),
        "scenario": [report["scenario"]] * n,
        "agent": [report["agent"]["label"]] * n,
        "episode": np.arange(n, dtype=np.int32),
        "agents": np.full(n, agents, np.int32),
        "length": np.asarray(result.episode_length, np.int32),
        "success": success,
        "finished": np.asarray(result.finished),
        "return": np.asarray(result.episode_return, np.float32),
        "path_length": np.asarray(result.path_length, np.float32),
        "start_distance": np.asarray(result.start_distance, np.float32),
        "path_efficiency": path_efficiency(result.start_distance, result.path_length,
                                           float(report["_params"].goal_radius), success,
                                           team=agents > 1),
        "start_x": start[0], "start_y": start[1],
    }
    return table(steps), table(episodes)


def write_capture(reports: Sequence[Mapping[str, Any]], out_dir: str,
                  argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Write ``run.json``, ``steps.parquet`` and ``episodes.parquet`` for the
    evaluated ``reports`` into ``out_dir`` (each file written to a temporary
    name, then renamed; ``run.json`` last). Returns the run.json content."""
    steps, episodes, runs = [], [], []
    for i, report in enumerate(reports):
        s, e = run_tables(report, i)
        steps.append(s)
        episodes.append(e)
        scenario = {k: v for k, v in report.get("_scenario", {}).items()}
        runs.append({
            "run": i, "scenario": report["scenario"], "preset": report["preset"],
            "scenario_config": scenario, "scenario_hash": canonical_hash(scenario),
            "overrides": report["overrides"], "agent": report["agent"],
            "seed": report["seed"], "episodes": report["metrics"]["episodes"],
            "max_steps": report["max_steps"], "steps_run": int(report["_rollout"].steps_run),
            "agents": int(e.column("agents")[0].as_py()) if e.num_rows else 1,
            "transitions": s.num_rows,
        })
    return write_folder(out_dir, steps, episodes, runs, argv)
