"""The capture folder's format (``run.json``, ``steps.parquet``,
``episodes.parquet``): schema version, columns and their units, provenance,
and the writing of the files. Shared by ``plume-jax evaluate --capture``
(:mod:`plume_jax.evaluate.capture`, from jitted rollouts) and the Gymnasium
wrapper :class:`plume_jax.gym.capture.CaptureTrajectories`, so both write
one schema (docs/agents.md, "Captured trajectories").

No JAX at import (``machine`` imports it when called); pyarrow is imported
when a table is built (:func:`require_pyarrow`).
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
SCHEMA_VERSION = "1.1"  # 1.1: agent_index (steps), agents (episodes): multi-agent runs

#: ``steps.parquet`` columns: name -> meaning (units).
STEP_COLUMNS = {
    "run": "index of the run (scenario x agent) in run.json's runs",
    "episode": "episode index within the run (0-based; the env's index in the batch)",
    "step": "step index within the episode (0-based)",
    "agent_index": "the agent's index in the env (0-based; always 0 for single-agent envs)",
    "x": "agent x before the step (grid cells, east positive)",
    "y": "agent y before the step (grid cells, north positive)",
    "heading": "agent heading before the step (radians, 0 = east, counter-clockwise)",
    "concentration": "plume concentration at (x, y) before the step",
    "observation": "the observation the agent acted on, flattened (list of float32; "
                   "absent when larger than 64 numbers)",
    "action": "the action taken (integer for discrete action models; list of float32 "
              "for continuous ones)",
    "reward": "reward of the step",
    "terminated": "the agent reached the goal at this step (single-agent: the episode ended) "
                  "or, in a multi-agent env, before it",
    "truncated": "the step hit max_steps before the agent reached the goal (episode ended)",
    "next_x": "agent x after the step (grid cells)",
    "next_y": "agent y after the step (grid cells)",
}

#: ``episodes.parquet`` columns: name -> meaning (units).
EPISODE_COLUMNS = {
    "run": "index of the run in run.json's runs",
    "scenario": "scenario name",
    "agent": "agent label",
    "episode": "episode index within the run",
    "agents": "agents in the env (1, or num_agents of a multi-agent env)",
    "length": "steps in the episode (its rows in steps.parquet: length x agents)",
    "success": "the episode ended at the goal (multi-agent: as done_mode says, the team's)",
    "finished": "the episode ended (at the goal or at max_steps) within the run",
    "return": "sum of the episode's rewards (multi-agent: over all agents)",
    "path_length": "distance travelled (grid cells; multi-agent: by agent 0)",
    "start_distance": "distance from the start to the goal (grid cells; multi-agent: agent 0's)",
    "path_efficiency": "max(start_distance - goal_radius, 0) / path_length for successful "
                       "episodes (1 when it did not move), null otherwise and for "
                       "multi-agent runs — as evaluate's path_efficiency metric",
    "start_x": "agent x at the start (grid cells; multi-agent: agent 0's)",
    "start_y": "agent y at the start (grid cells; multi-agent: agent 0's)",
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


def arrow_column(pa: Any, values: Any) -> Any:
    """A numpy column (``[R]``, or ``[R, k]`` as fixed-size lists), a list,
    or an arrow array as an arrow array."""
    if isinstance(values, (pa.Array, list)):
        return values if isinstance(values, pa.Array) else pa.array(values)
    values = np.asarray(values)
    if values.ndim == 1:
        return pa.array(values)
    flat = pa.array(np.ascontiguousarray(values).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, values.shape[1])


def table(columns: Mapping[str, Any], parameter: str = "--capture") -> Any:
    """A pyarrow table of ``columns`` (:func:`arrow_column`) carrying
    :data:`SCHEMA_VERSION` in its schema metadata."""
    pa = require_pyarrow(parameter)
    out = pa.table({k: arrow_column(pa, v) for k, v in columns.items()})
    return out.replace_schema_metadata({"plume_jax.capture_schema": SCHEMA_VERSION})


def path_efficiency(start_distance: Any, path_length: Any, goal_radius: float,
                    success: Any, team: bool = False) -> Any:
    """The ``path_efficiency`` column: ``max(start_distance - goal_radius, 0)
    / path_length`` (1 where the agent did not move) for successful
    single-agent episodes, null otherwise (a float32 arrow array)."""
    pa = require_pyarrow()
    travelled = np.asarray(path_length, np.float64)
    shortest = np.maximum(np.asarray(start_distance, np.float64) - goal_radius, 0.0)
    efficiency = np.where(travelled > 0, shortest / np.maximum(travelled, 1e-9), 1.0)
    success = np.asarray(success, bool)
    return pa.array(efficiency.astype(np.float32), mask=~success | bool(team))


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


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_folder(out_dir: str, steps: Sequence[Any], episodes: Sequence[Any],
                 runs: list[dict[str, Any]], argv: Sequence[str] | None = None,
                 parameter: str = "--capture") -> dict[str, Any]:
    """Write ``steps.parquet`` and ``episodes.parquet`` (the tables of each
    run, concatenated) and then ``run.json`` (provenance, ``runs``, the
    columns, each file's rows and sha256) into ``out_dir``; each file is
    written to a temporary name and renamed. Returns the run.json content."""
    pa = require_pyarrow(parameter)
    import pyarrow.parquet as pq

    import plume_jax

    os.makedirs(out_dir, exist_ok=True)
    files = {}
    for name, tables in (("steps.parquet", steps), ("episodes.parquet", episodes)):
        joined = pa.concat_tables(list(tables), promote_options="permissive")
        path = os.path.join(out_dir, name)
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            pq.write_table(joined, tmp, compression="zstd")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        files[name] = {"rows": joined.num_rows, "sha256": file_sha256(path)}
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
