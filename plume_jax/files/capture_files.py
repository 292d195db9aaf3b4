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
import shutil
import secrets
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plume_jax.files import atomic_write, new_folder
from plume_jax.core.errors import ValidationError

#: Version of the capture layout (files, columns, their meaning). Bumped on
#: any change a reader could notice; readers check it.
SCHEMA_VERSION = "2.0"
# 1.1: agent_index (steps), agents (episodes): multi-agent runs
# 2.0: one obs_<label> column per observation entry (was a list column), action_name,
#      source_x/y and goal_x/y (episodes), action names and labels in run.json's runs

#: Prefix of the observation's columns in ``steps.parquet``: ``obs_<label>``
#: per entry of the flattened observation, the labels the env's
#: ``observation_labels()``.
OBSERVATION_PREFIX = "obs_"

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
    OBSERVATION_PREFIX + "<label>": "one float32 column per entry of the observation the "
                                    "agent acted on, flattened, named after the env's "
                                    "observation_labels (run.json: the run's "
                                    "observation_columns; absent when the observation has "
                                    "more than 64 numbers)",
    "action": "the action taken (integer for discrete action models; list of float32 "
              "for continuous ones)",
    "action_name": "the discrete action's name (a dictionary column: categorical in pandas; "
                   "run.json: the run's action_names; null for an id outside them; absent "
                   "for continuous action models)",
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
    "source_x": "plume source x at the start of the episode (grid cells)",
    "source_y": "plume source y at the start of the episode (grid cells)",
    "goal_x": "goal x at the start of the episode (grid cells)",
    "goal_y": "goal y at the start of the episode (grid cells)",
}

#: Rows per Parquet row group (and per batch of the final merge): what a
#: reader or the writer holds of one table at a time.
ROW_GROUP_ROWS = 1 << 17


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


def observation_columns(labels: Sequence[str] | None, size: int) -> list[str]:
    """The ``obs_<label>`` column names of a flattened observation of
    ``size`` numbers: the env's ``labels`` when they are ``size`` distinct
    names, else ``obs_0 .. obs_<size-1>``."""
    labels = list(labels or [])
    if len(labels) != size or len(set(labels)) != size:
        labels = [str(i) for i in range(size)]
    return [OBSERVATION_PREFIX + str(label) for label in labels]


def split_observation(observation: Any, names: Sequence[str]) -> dict[str, np.ndarray]:
    """``[R, k]`` observations -> ``{name: f32[R]}``, one column per entry."""
    observation = np.asarray(observation, np.float32)
    return {name: np.ascontiguousarray(observation[:, i]) for i, name in enumerate(names)}


def action_columns(action: Any, names: Sequence[str] | None) -> dict[str, Any]:
    """The ``action`` column, and for a discrete action (integers ``[R]``)
    with ``names`` its ``action_name`` as a dictionary column (ids outside
    ``names`` are null)."""
    pa = require_pyarrow()
    action = np.asarray(action)
    out: dict[str, Any] = {"action": action}
    if names and action.ndim == 1 and action.dtype.kind in "iu":
        ids = action.astype(np.int32)
        outside = (ids < 0) | (ids >= len(names))
        out["action_name"] = pa.DictionaryArray.from_arrays(
            pa.array(np.where(outside, 0, ids), pa.int32(), mask=outside),
            pa.array(list(names), pa.string()))
    return out


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


CAPTURE_MARK = "plume_jax.capture"


def is_capture_folder(path: str | os.PathLike) -> bool:
    """True for a folder holding a capture's ``run.json`` (``schema``
    :data:`CAPTURE_MARK`)."""
    try:
        with open(os.path.join(path, "run.json"), encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(found, dict) and found.get("schema") == CAPTURE_MARK


def check_capture_folder(path: str | os.PathLike, overwrite: bool,
                         parameter: str = "--capture") -> None:
    """Refuse ``path`` as the capture folder unless it is new, empty, or
    (with ``overwrite``) an earlier capture: a non-empty folder needs
    ``--overwrite``, and ``--overwrite`` replaces only a capture.

    Raises:
        ValidationError: naming ``parameter``.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        return
    if not os.path.isdir(path):
        raise ValidationError.for_parameter(parameter, path, "a folder (this is a file)")
    try:
        entries = sorted(os.listdir(path))
    except OSError as error:
        raise ValidationError.for_parameter(
            parameter, path, f"a folder that can be read ({error.strerror or error})") from None
    if not entries:
        return
    shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
    if not is_capture_folder(path):
        raise ValidationError.for_parameter(
            parameter, path, f"a new or empty folder, or an earlier capture to replace with "
            f"--overwrite: this one holds {len(entries)} entries ({shown}) and no capture's "
            "run.json")
    if not overwrite:
        raise ValidationError.for_parameter(
            parameter, path, f"a new or empty folder: it holds an earlier capture ({shown}); "
            "replace it with --overwrite, or choose another folder")


def _sibling(out_dir: str, kind: str) -> str:
    """A name beside ``out_dir`` that nothing holds yet:
    ``<out_dir>.capture-<kind>-<pid>-<random hex>``, so a folder a killed run
    left behind under the same pid is never in the way."""
    while True:
        path = f"{out_dir}.capture-{kind}-{os.getpid()}-{secrets.token_hex(4)}"
        if not os.path.lexists(path):
            return path


def _swap_into_place(new: str, out_dir: str, parameter: str = "--capture") -> None:
    """Rename the finished folder ``new`` to ``out_dir``; an existing
    ``out_dir`` is first renamed aside and deleted only once ``new`` is in
    place, so a kill at any moment leaves either capture whole (the old one,
    at worst, under its set-aside name ``<name>.capture-old-<pid>-<hex>``).

    Raises:
        ValidationError: (naming ``parameter``) a rename the file system
            refused, naming both folders; ``out_dir`` is then as it was.
    """
    def rename(src: str, dst: str) -> None:
        try:
            os.rename(src, dst)
        except OSError as error:
            raise ValidationError.for_parameter(
                parameter, out_dir, f"a folder the finished capture can be renamed into: "
                f"renaming {src} to {dst} failed ({error.strerror or error}); {out_dir} is "
                "as it was") from None

    if not os.path.lexists(out_dir):
        rename(new, out_dir)
        return
    old = _sibling(out_dir, "old")
    rename(out_dir, old)
    try:
        rename(new, out_dir)
    except BaseException:  # an error or Ctrl-C between the renames: the old one back
        if not os.path.lexists(out_dir):
            os.rename(old, out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)


class CaptureWriter:
    """Writes a capture folder as one unit.

    Tables are added as they are produced (:meth:`add`; a run's tables may
    come in several batches) and streamed to Parquet row groups in a
    temporary sibling folder ``<out_dir>.capture-tmp-<pid>-*``, so memory
    holds one batch, not the capture. :meth:`finish` writes
    ``steps.parquet`` and ``episodes.parquet`` (each run's rows, in order;
    runs with different columns get nulls where a column is not theirs) and
    ``run.json`` (with each file's rows and sha256), then renames the folder
    into place (:func:`_swap_into_place`). :meth:`abort`, or leaving a
    ``with`` block by an exception, removes the temporary folder; a killed
    process leaves it beside ``out_dir``, which stays as it was.
    """

    TABLES = ("steps", "episodes")

    def __init__(self, out_dir: str | os.PathLike, parameter: str = "--capture"):
        self.pa = require_pyarrow(parameter)
        import pyarrow.parquet as pq

        self.pq = pq
        self.parameter = parameter
        self.out_dir = os.path.abspath(os.fspath(out_dir))
        self.tmp = os.fspath(new_folder(
            os.path.dirname(self.out_dir),
            f"{os.path.basename(self.out_dir)}.capture-tmp-{os.getpid()}-"))
        self._writers: dict[tuple[str, int], Any] = {}
        self._parts: dict[str, list[str]] = {t: [] for t in self.TABLES}
        self.flushes = 0

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if kind is not None:
            self.abort()

    def add(self, run: int, steps: Any, episodes: Any) -> None:
        """Append a batch of run ``run``'s rows (pyarrow tables of
        :data:`STEP_COLUMNS` and :data:`EPISODE_COLUMNS`) to its part files."""
        for name, rows in zip(self.TABLES, (steps, episodes)):
            writer = self._writers.get((name, run))
            if writer is None:
                path = os.path.join(self.tmp, f"{name}.run{run}.parquet")
                writer = self.pq.ParquetWriter(path, rows.schema, compression="zstd")
                self._writers[(name, run)] = writer
                self._parts[name].append(path)
            writer.write_table(rows.cast(writer.schema), row_group_size=ROW_GROUP_ROWS)
            self.flushes += 1

    def _merge(self, name: str) -> int:
        """Write ``<name>.parquet`` from its part files, one row group at a
        time; returns its rows."""
        pa, pq = self.pa, self.pq
        path = os.path.join(self.tmp, f"{name}.parquet")
        parts = self._parts[name]
        if len(parts) == 1:
            os.replace(parts[0], path)
            return int(pq.ParquetFile(path).metadata.num_rows)
        schemas = [pq.read_schema(p) for p in parts]
        try:
            schema = pa.unify_schemas(schemas, promote_options="permissive")
        except (pa.ArrowTypeError, pa.ArrowInvalid) as error:
            raise ValidationError.for_parameter(
                self.parameter, self.out_dir, f"runs whose {name} tables have one type per "
                f"column: {str(error).splitlines()[0]}") from None
        schema = schema.with_metadata({"plume_jax.capture_schema": SCHEMA_VERSION})
        rows = 0
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            for part in parts:
                for batch in pq.ParquetFile(part).iter_batches(batch_size=ROW_GROUP_ROWS):
                    columns = [batch.column(f.name) if f.name in batch.schema.names
                               else pa.nulls(batch.num_rows, f.type) for f in schema]
                    writer.write_table(
                        pa.Table.from_arrays(columns, names=schema.names).cast(schema))
                    rows += batch.num_rows
                os.remove(part)
        return rows

    def finish(self, runs: list[dict[str, Any]],
               argv: Sequence[str] | None = None) -> dict[str, Any]:
        """Close the tables, write ``run.json`` and rename the folder into
        place. Returns the run.json content."""
        from plume_jax.core.version import __version__

        for writer in self._writers.values():
            writer.close()
        self._writers = {}
        files = {}
        for name in self.TABLES:
            if not self._parts[name]:
                raise ValidationError.for_parameter(self.parameter, self.out_dir,
                                                    "at least one run's rows to write")
            rows = self._merge(name)
            files[f"{name}.parquet"] = {
                "rows": rows, "sha256": file_sha256(os.path.join(self.tmp, f"{name}.parquet"))}
        meta = {
            "schema": CAPTURE_MARK, "schema_version": SCHEMA_VERSION,
            "plume_jax_version": __version__,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": list(sys.argv if argv is None else argv),
            "git_revision": git_revision(), "machine": machine(),
            "runs": runs, "files": files,
            "columns": {"steps.parquet": STEP_COLUMNS, "episodes.parquet": EPISODE_COLUMNS},
        }
        atomic_write(os.path.join(self.tmp, "run.json"),
                     json.dumps(meta, indent=2, default=str))
        _swap_into_place(self.tmp, self.out_dir, self.parameter)
        return meta

    def abort(self) -> None:
        """Close the writers and remove the temporary folder (``out_dir`` is
        left as it was)."""
        for writer in self._writers.values():
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the folder goes anyway
                pass
        self._writers = {}
        shutil.rmtree(self.tmp, ignore_errors=True)


def write_folder(out_dir: str, steps: Sequence[Any], episodes: Sequence[Any],
                 runs: list[dict[str, Any]], argv: Sequence[str] | None = None,
                 parameter: str = "--capture") -> dict[str, Any]:
    """Write the tables of each run (``steps[i]``, ``episodes[i]``) and
    ``runs`` as a capture folder ``out_dir``, as one unit
    (:class:`CaptureWriter`), replacing an earlier capture there (a
    non-empty folder that is not a capture is refused). Returns the
    run.json content."""
    check_capture_folder(out_dir, overwrite=True, parameter=parameter)
    with CaptureWriter(out_dir, parameter) as writer:
        for i, (s, e) in enumerate(zip(steps, episodes)):
            writer.add(i, s, e)
        return writer.finish(runs, argv)
