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
  episode of each of the run's envs, as the evaluation reports it).
- ``episodes.parquet`` — one row per episode.

Both tables are keyed by ``(run, episode)``; ``steps`` is ordered by run,
episode and step, so the rows of an episode are contiguous and number
``length`` of its ``episodes`` row. Columns: :data:`STEP_COLUMNS`,
:data:`EPISODE_COLUMNS` (docs/agents.md, "Captured trajectories").

Memory: the rollout keeps ``max_steps x episodes`` transitions per run;
:func:`check_capture_size` refuses a run above :data:`MAX_CAPTURE_TRANSITIONS`
before anything runs.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plume_jax.errors import ValidationError

#: Version of the capture layout (files, columns, their meaning). Bumped on
#: any change a reader could notice; readers check it.
SCHEMA_VERSION = "1.0"

#: Largest ``max_steps x episodes`` a captured run may have: the rollout
#: keeps ~50 bytes per transition in memory (~1 GB at this limit).
MAX_CAPTURE_TRANSITIONS = 20_000_000

#: ``steps.parquet`` columns: name -> meaning (units).
STEP_COLUMNS = {
    "run": "index of the run (scenario x agent) in run.json's runs",
    "episode": "episode index within the run (0-based; the env's index in the batch)",
    "step": "step index within the episode (0-based)",
    "x": "agent x before the step (grid cells, east positive)",
    "y": "agent y before the step (grid cells, north positive)",
    "heading": "agent heading before the step (radians, 0 = east, counter-clockwise)",
    "concentration": "plume concentration at (x, y) before the step",
    "observation": "the observation the agent acted on, flattened (list of float32; "
                   "absent when larger than 64 numbers)",
    "action": "the action taken (integer for discrete action models; list of float32 "
              "for continuous ones)",
    "reward": "reward of the step",
    "terminated": "the step reached the goal (episode ended)",
    "truncated": "the step hit max_steps (episode ended)",
    "next_x": "agent x after the step (grid cells)",
    "next_y": "agent y after the step (grid cells)",
}

#: ``episodes.parquet`` columns: name -> meaning (units).
EPISODE_COLUMNS = {
    "run": "index of the run in run.json's runs",
    "scenario": "scenario name",
    "agent": "agent label",
    "episode": "episode index within the run",
    "length": "steps in the episode (= its rows in steps.parquet)",
    "success": "the episode ended at the goal",
    "finished": "the episode ended (at the goal or at max_steps) within the run",
    "return": "sum of the episode's rewards",
    "path_length": "distance travelled (grid cells)",
    "start_distance": "distance from the start to the goal (grid cells)",
    "path_efficiency": "max(start_distance - goal_radius, 0) / path_length for successful "
                       "episodes (1 when it did not move), null otherwise — as evaluate's "
                       "path_efficiency metric",
    "start_x": "agent x at the start (grid cells)",
    "start_y": "agent y at the start (grid cells)",
}


def require_pyarrow(parameter: str = "--capture") -> Any:
    """Import pyarrow, or a ``ValidationError`` saying how to install it."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise ValidationError.for_parameter(
            parameter, "pyarrow", "pyarrow installed (pip install 'plume-jax[data]')") from None
    return pyarrow


def check_capture_size(episodes: int, max_steps: int, where: str,
                       limit: int | None = None) -> None:
    """Refuse a captured run whose ``max_steps x episodes`` exceeds ``limit``
    (default :data:`MAX_CAPTURE_TRANSITIONS`).

    Raises:
        ValidationError: (parameter ``--capture``) naming the run, its size
            and the limit.
    """
    limit = MAX_CAPTURE_TRANSITIONS if limit is None else limit
    size = int(episodes) * int(max_steps)
    if size > limit:
        raise ValidationError.for_parameter(
            "--capture", where,
            f"a run of at most {limit:,} transitions (max_steps x episodes) to capture; "
            f"this one keeps {max_steps:,} x {episodes:,} = {size:,} (use fewer --episodes)")


def check_capture_plan(plan: Any) -> None:
    """Checks of one planned run before anything runs (multi-agent envs are
    not captured yet; the size limit)."""
    where = f"{plan.scenario['name']} / {plan.label}"
    if plan.env.is_multi_agent:
        raise ValidationError.for_parameter(
            "--capture", where, "single-agent scenarios (capturing multi-agent runs is not "
            "supported yet)")
    check_capture_size(plan.episodes, plan.num_steps, where)


def steps_columns(steps: Mapping[str, Any], steps_run: int) -> dict[str, np.ndarray]:
    """Time-major per-step arrays ``[T, N, ...]`` -> columns of the kept rows
    (``valid``), ordered by episode then step."""
    arrays = {k: np.asarray(v)[:steps_run] for k, v in steps.items()}
    valid = arrays.pop("valid")  # [T, N]
    # episode-major: rows of env n are contiguous, steps in order
    valid_em = valid.T
    episode, step = np.nonzero(valid_em)  # row-major: by episode, then by step
    step_index = np.cumsum(valid_em, axis=1)[episode, step] - 1
    out = {"episode": episode.astype(np.int32), "step": step_index.astype(np.int32)}
    for name, a in arrays.items():
        out[name] = np.swapaxes(a, 0, 1)[episode, step]
    return out


def _arrow_column(pa: Any, values: np.ndarray) -> Any:
    if values.ndim == 1:
        return pa.array(values)
    flat = pa.array(np.ascontiguousarray(values).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, values.shape[1])


def run_tables(report: Mapping[str, Any], run_index: int) -> tuple[Any, Any]:
    """``(steps, episodes)`` pyarrow tables of one evaluated run (its report
    from :func:`plume_jax.evaluate.scenario.execute_run` with capture on)."""
    pa = require_pyarrow()
    result = report["_rollout"]
    if result.steps is None:
        raise ValidationError.for_parameter("--capture", report["scenario"],
                                            "a run evaluated with capture=True")
    cols = steps_columns(result.steps, int(result.steps_run))
    n_rows = cols["episode"].shape[0]
    steps = {"run": np.full(n_rows, run_index, np.int32)}
    steps.update({k: cols[k] for k in ("episode", "step")})
    for name in STEP_COLUMNS:
        if name not in steps and name in cols:
            steps[name] = cols[name]
    steps_table = pa.table({k: _arrow_column(pa, v) for k, v in steps.items()})

    success = np.asarray(result.success)
    n = success.shape[0]
    goal_radius = float(report["_params"].goal_radius)
    travelled = np.asarray(result.path_length, np.float64)
    shortest = np.maximum(np.asarray(result.start_distance, np.float64) - goal_radius, 0.0)
    efficiency = np.where(travelled > 0, shortest / np.maximum(travelled, 1e-9), 1.0)
    start = np.asarray(result.steps["x"])[0], np.asarray(result.steps["y"])[0]
    episodes = {
        "run": np.full(n, run_index, np.int32),
        "scenario": [report["scenario"]] * n,
        "agent": [report["agent"]["label"]] * n,
        "episode": np.arange(n, dtype=np.int32),
        "length": np.asarray(result.episode_length, np.int32),
        "success": success,
        "finished": np.asarray(result.finished),
        "return": np.asarray(result.episode_return, np.float32),
        "path_length": travelled.astype(np.float32),
        "start_distance": np.asarray(result.start_distance, np.float32),
        "path_efficiency": pa.array(efficiency.astype(np.float32), mask=~success),
        "start_x": start[0], "start_y": start[1],
    }
    table = pa.table({k: (v if isinstance(v, (pa.Array, list)) else pa.array(v))
                      for k, v in episodes.items()})
    table = table.replace_schema_metadata({"plume_jax.capture_schema": SCHEMA_VERSION})
    return steps_table.replace_schema_metadata(
        {"plume_jax.capture_schema": SCHEMA_VERSION}), table


def canonical_hash(obj: Any) -> str:
    """sha256 of ``obj`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def git_revision() -> str | None:
    """The git commit of the plume_jax source tree (``+dirty`` when it has
    uncommitted changes), or ``None`` outside a git checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=here, capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def machine() -> dict[str, Any]:
    import jax

    return {
        "platform": platform.platform(), "machine": platform.machine(),
        "python": platform.python_version(), "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
    }


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_capture(reports: Sequence[Mapping[str, Any]], out_dir: str,
                  argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Write ``run.json``, ``steps.parquet`` and ``episodes.parquet`` for the
    evaluated ``reports`` into ``out_dir`` (each file written to a temporary
    name, then renamed; ``run.json`` last). Returns the run.json content."""
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    import plume_jax

    os.makedirs(out_dir, exist_ok=True)
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
            "transitions": s.num_rows,
        })
    files = {}
    for name, tables in (("steps.parquet", steps), ("episodes.parquet", episodes)):
        table = pa.concat_tables(tables, promote_options="permissive")
        path = os.path.join(out_dir, name)
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        files[name] = {"rows": table.num_rows, "sha256": _sha256(path)}
    meta = {
        "schema": "plume_jax.capture", "schema_version": SCHEMA_VERSION,
        "plume_jax_version": plume_jax.__version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": list(sys.argv if argv is None else argv),
        "git_revision": git_revision(), "machine": machine(),
        "runs": runs, "files": files,
        "columns": {"steps.parquet": STEP_COLUMNS, "episodes.parquet": EPISODE_COLUMNS},
    }
    path = os.path.join(out_dir, "run.json")
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2, default=str)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return meta
