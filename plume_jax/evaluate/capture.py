"""Captured trajectories (layer 5): ``plume-jax evaluate ... --capture DIR``.

A capture folder holds three files, written from the per-step arrays the
jitted rollout keeps when asked (``rollout(..., capture=True)``; no Python
loop per step):

- ``run.json`` — provenance: :data:`SCHEMA_VERSION`, plume_jax's version,
  the command line, the git revision (when the package runs from a git
  checkout), the machine (platform, Python, JAX and its backend), and per
  run (scenario x agent) the validated scenario and its sha256 over
  canonical JSON, the agent and its parameters, seed, episodes,
  ``max_steps``, the action names and the observation's columns; then the
  columns of both tables with their units, and each Parquet file's row
  count and sha256.
- ``steps.parquet`` — one row per transition of every episode (the first
  episode of each of the run's envs, as the evaluation reports it), and per
  agent in a multi-agent env (``agent_index``).
- ``episodes.parquet`` — one row per episode.

Both tables are keyed by ``(run, episode)``; ``steps`` is ordered by run,
episode, step and agent, so the rows of an episode are contiguous and number
``length x agents`` of its ``episodes`` row (``length`` for a single
agent). Columns: :data:`STEP_COLUMNS`, :data:`EPISODE_COLUMNS`; the format
is :mod:`plume_jax.files.capture_files`'s, shared with the Gymnasium wrapper
(docs/agents.md, "Captured trajectories").

Memory: a captured run is evaluated in batches of envs
(:func:`plan_batches`: at most :data:`CAPTURE_BATCH_BYTES` of per-step
arrays each, every env drawing the keys it has in the whole run, so the
results are the same), and each batch's rows are streamed to Parquet
(:class:`~plume_jax.files.capture_files.CaptureWriter`) before the next one runs:
memory holds one batch, whatever the number of episodes.
:func:`check_capture_plans` refuses a command whose runs add up to more than
:data:`MAX_CAPTURE_TRANSITIONS` (disk and time), or mix discrete and
continuous actions (one ``action`` column), before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plume_jax.files.capture_files import (EPISODE_COLUMNS, OBSERVATION_PREFIX, SCHEMA_VERSION,
                                     STEP_COLUMNS,
                                     CaptureWriter, action_columns, canonical_hash,
                                     check_capture_folder, git_revision, machine,
                                     observation_columns, path_efficiency, require_pyarrow,
                                     split_observation, table)
from plume_jax.core.errors import ValidationError

__all__ = ["CAPTURE_BATCH_BYTES", "EPISODE_COLUMNS", "MAX_CAPTURE_TRANSITIONS",
           "SCHEMA_VERSION", "STEP_COLUMNS", "EvaluationCapture", "RunCapture",
           "action_kind", "canonical_hash", "check_capture_folder", "check_capture_plans",
           "check_capture_size", "git_revision", "machine", "plan_batches", "require_pyarrow",
           "steps_columns"]

#: Largest sum over a command's captured runs of ``max_steps x episodes x
#: agents`` (the transitions they may write; a bound on disk and time, not
#: memory, which :data:`CAPTURE_BATCH_BYTES` bounds).
MAX_CAPTURE_TRANSITIONS = 20_000_000

#: Largest per-step arrays (``max_steps x envs x agents`` transitions, at
#: :func:`transition_bytes` each) one batch of a captured run keeps.
CAPTURE_BATCH_BYTES = 64 * 2**20


def check_capture_size(episodes: int, max_steps: int, where: str,
                       limit: int | None = None, agents: int = 1) -> None:
    """Refuse a capture whose ``max_steps x episodes x agents`` exceeds
    ``limit`` (default :data:`MAX_CAPTURE_TRANSITIONS`).

    Raises:
        ValidationError: (parameter ``--capture``) naming the runs, their
            size and the limit.
    """
    limit = MAX_CAPTURE_TRANSITIONS if limit is None else limit
    size = int(episodes) * int(max_steps) * int(agents)
    if size > limit:
        kept = f"{max_steps:,} x {episodes:,}" + (f" x {agents:,}" if agents > 1 else "")
        raise ValidationError.for_parameter(
            "--capture", where,
            f"at most {limit:,} transitions (max_steps x episodes x agents, summed over the "
            f"command's runs) to capture; this one has {kept} = {size:,} (use fewer "
            "--episodes)")


def action_kind(plan: Any) -> str:
    """``"discrete"`` or ``"continuous"``: the kind of a planned run's
    actions, which sets the type of ``steps.parquet``'s ``action`` column."""
    return "discrete" if hasattr(plan.env.action_space(plan.params), "n") else "continuous"


def check_capture_plans(plans: Sequence[Any], limit: int | None = None) -> None:
    """Checks of a command's planned runs before anything runs: their
    transitions added up against ``limit`` (default
    :data:`MAX_CAPTURE_TRANSITIONS`), and one kind of action
    (:func:`action_kind`) for all of them (the ``action`` column holds
    integers or lists of floats, not both).

    Raises:
        ValidationError: (parameter ``--capture``) naming each run's size,
            their sum and the limit; or each run's kind of action.
    """
    limit = MAX_CAPTURE_TRANSITIONS if limit is None else limit
    kinds = [(f"{p.scenario['name']} / {p.label}", action_kind(p)) for p in plans]
    if len({kind for _, kind in kinds}) > 1:
        raise ValidationError.for_parameter(
            "--capture", ", ".join(f"{where}: {kind}" for where, kind in kinds),
            "runs whose actions are all discrete or all continuous (steps.parquet's action "
            "column holds integers or lists of floats, not both): capture them with separate "
            "commands")
    if len(plans) == 1:
        plan = plans[0]
        check_capture_size(plan.episodes, plan.num_steps,
                           f"{plan.scenario['name']} / {plan.label}", limit=limit,
                           agents=int(getattr(plan.env, "num_agents", 1)))
        return
    sizes = [(f"{p.scenario['name']} / {p.label}",
               int(p.episodes) * int(p.num_steps) * int(getattr(p.env, "num_agents", 1)))
             for p in plans]
    total = sum(n for _, n in sizes)
    if total > limit:
        raise ValidationError.for_parameter(
            "--capture", ", ".join(f"{where}: {n:,}" for where, n in sizes),
            f"at most {limit:,} transitions (max_steps x episodes x agents, summed over the "
            f"command's runs) to capture; these {len(sizes)} runs add up to {total:,} (use "
            "fewer --episodes or fewer runs)")


def transition_bytes(env: Any, params: Any) -> int:
    """Bytes of one agent's transition in the rollout's per-step arrays:
    48 (with a margin) for the poses, concentration, reward and flags, plus
    4 per number of the action and, when it is captured (at most
    :data:`~plume_jax.evaluate.rollout.MAX_CAPTURED_OBS` numbers), of the
    observation."""
    from plume_jax.evaluate.rollout import MAX_CAPTURED_OBS

    agents = int(getattr(env, "num_agents", 1))
    shape = getattr(env.observation_space(params), "shape", None)
    size = int(np.prod(shape)) // agents if shape else 0
    action = getattr(env.action_space(params), "shape", ()) or ()
    return 48 + (4 * size if size <= MAX_CAPTURED_OBS else 0) + 4 * int(np.prod(action or (1,)))


def plan_batches(episodes: int, max_steps: int, agents: int, per_transition: int,
                 budget: int | None = None) -> int:
    """Envs per batch of a captured run: the fewest batches whose ``max_steps
    x envs x agents x per_transition`` bytes each stay within ``budget``
    (default :data:`CAPTURE_BATCH_BYTES`), shared as evenly as one batch
    size allows: at least one env, at most ``episodes``.

    A run's last batch is its last ``size`` envs (one compiled program
    serves every batch), so it reruns the envs it shares with the batch
    before; with batches of even size these are fewer than the number of
    batches (``batches x size - episodes``). The largest size that fits
    would rerun nearly a whole batch: 2,048 episodes of 642 steps in
    batches of 2,010 ran 4,020 episodes.
    """
    budget = CAPTURE_BATCH_BYTES if budget is None else budget
    episodes = max(1, int(episodes))
    per_env = max(1, int(max_steps) * int(agents) * int(per_transition))
    fits = max(1, min(episodes, budget // per_env))
    batches = -(-episodes // fits)
    return -(-episodes // batches)


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


class RunCapture:
    """The capture of one planned run: :meth:`add` turns each batch of its
    rollout into rows and hands them to the writer
    (``execute_run(..., capture=...)`` calls it)."""

    def __init__(self, writer: CaptureWriter, run_index: int, plan: Any,
                 budget: int | None = None):
        self.writer, self.run_index, self.plan = writer, run_index, plan
        env, params = plan.env, plan.params
        self.agents = int(getattr(env, "num_agents", 1))
        self.batch = plan_batches(plan.episodes, plan.num_steps, self.agents,
                                  transition_bytes(env, params), budget)
        self.goal_radius = float(np.asarray(params.goal_radius))
        space = env.action_space(params)
        self.action_names = (list(env.action_names) if hasattr(space, "n") else None)
        self.labels = list(env.observation_labels()) if hasattr(env, "observation_labels") \
            else []
        self.observation_columns: list[str] | None = None
        self.rows = 0

    def add(self, result: Any, offset: int, skip: int = 0) -> None:
        """Write the rows of a batch's rollout ``result`` (envs ``offset ..``
        of the run; its first ``skip`` envs were written by the batch
        before)."""
        cols = steps_columns(result.steps, int(result.steps_run))
        keep = cols["episode"] >= skip
        cols = {k: v[keep] for k, v in cols.items()}
        n_rows = cols["episode"].shape[0]
        steps: dict[str, Any] = {"run": np.full(n_rows, self.run_index, np.int32),
                                 "episode": cols["episode"] + np.int32(offset),
                                 "step": cols["step"], "agent_index": cols["agent_index"]}
        for name in STEP_COLUMNS:
            if name in cols and name not in steps:
                if name == "action":
                    steps.update(action_columns(cols[name], self.action_names))
                else:
                    steps[name] = cols[name]
            if name.startswith(OBSERVATION_PREFIX) and "observation" in cols:  # obs_<label>
                size = cols["observation"].shape[1]
                self.observation_columns = observation_columns(self.labels, size)
                steps.update(split_observation(cols["observation"], self.observation_columns))
        self.writer.add(self.run_index, table(steps), self.episodes_table(result, offset, skip))
        self.rows += n_rows

    def episodes_table(self, result: Any, offset: int, skip: int) -> Any:
        """The ``episodes.parquet`` rows of a batch (its envs from ``skip``)."""
        def per_env(value: Any, dtype: Any = None) -> np.ndarray:
            return np.asarray(value, dtype)[skip:]

        success = per_env(result.success)
        n = success.shape[0]
        start = [per_env(np.asarray(result.steps[k])[0]) for k in ("x", "y")]  # [n] or [n, A]
        start = [a[:, 0] if a.ndim == 2 else a for a in start]  # agent 0's
        goal, source = per_env(result.goal, np.float32), per_env(result.source, np.float32)
        return table({
            "run": np.full(n, self.run_index, np.int32),
            "scenario": [self.plan.scenario["name"]] * n, "agent": [self.plan.label] * n,
            "episode": np.arange(offset + skip, offset + skip + n, dtype=np.int32),
            "agents": np.full(n, self.agents, np.int32),
            "length": per_env(result.episode_length, np.int32),
            "success": success, "finished": per_env(result.finished),
            "return": per_env(result.episode_return, np.float32),
            "path_length": per_env(result.path_length, np.float32),
            "start_distance": per_env(result.start_distance, np.float32),
            "path_efficiency": path_efficiency(per_env(result.start_distance),
                                               per_env(result.path_length), self.goal_radius,
                                               success, team=self.agents > 1),
            "start_x": start[0], "start_y": start[1],
            "source_x": source[:, 0], "source_y": source[:, 1],
            "goal_x": goal[:, 0], "goal_y": goal[:, 1],
        })


class EvaluationCapture:
    """``evaluate --capture DIR``: a :class:`CaptureWriter` for the
    command's runs. :meth:`run` gives each planned run its
    :class:`RunCapture`; :meth:`end_run` records the run's report in
    ``run.json``'s ``runs``; :meth:`finish` puts the folder in place."""

    def __init__(self, out_dir: str, argv: Sequence[str] | None = None,
                 budget: int | None = None):
        self.writer = CaptureWriter(out_dir)
        self.argv, self.budget = argv, budget
        self.runs: list[dict[str, Any]] = []
        self._current: RunCapture | None = None

    def run(self, run_index: int, plan: Any) -> RunCapture:
        self._current = RunCapture(self.writer, run_index, plan, self.budget)
        return self._current

    def end_run(self, report: Mapping[str, Any]) -> None:
        current = self._current
        assert current is not None  # run() came first
        scenario = dict(report.get("_scenario", {}))
        self.runs.append({
            "run": current.run_index, "scenario": report["scenario"],
            "preset": report["preset"], "scenario_config": scenario,
            "scenario_hash": canonical_hash(scenario), "overrides": report["overrides"],
            "agent": report["agent"], "seed": report["seed"],
            "episodes": report["metrics"]["episodes"], "max_steps": report["max_steps"],
            "steps_run": int(report["_rollout"].steps_run), "agents": current.agents,
            "transitions": current.rows, "batch_envs": current.batch,
            "action_names": current.action_names,
            "observation_labels": current.labels,
            "observation_columns": current.observation_columns,
        })
        self._current = None

    def finish(self) -> dict[str, Any]:
        return self.writer.finish(self.runs, self.argv)

    def abort(self) -> None:
        self.writer.abort()
