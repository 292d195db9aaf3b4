"""The one adapter between ``plume-jax tune`` and the run driver: a batch of
trials trained as vmapped programs, one per static structure
(:func:`~plume_jax.train.sweep.program_groups`), with each periodic
evaluation reported to Optuna as an intermediate value and pruning at the
evaluations (chunk boundaries).

Pruning rebuilds the program: when a periodic evaluation prunes a member,
the program returns there (the driver's stop request, set by the
evaluation), the pruned members' run folders are finished at that update,
and the survivors' stacked state (their slices of the runner) continues in
a program built for them alone, which compiles again. A pruned member so
stops costing updates; masking it inside the program would not, since
``vmap`` computes every member of a masked update anyway.

Every trial is a run folder (``trials/<number>``, zero-padded:
``trials/00003``) with ``train``'s rules: the folder lock, ``config.yaml``
first, ``metrics.jsonl`` appended as it trains, ``evaluations.jsonl`` and
``best/`` from the periodic evaluations,
then ``checkpoint/`` and ``policy/`` (with checksums), ``metrics.csv`` and
``summary.json`` (atomic replacements), TensorBoard event files with the
trial's hyperparameters in the HPARAMS table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import time
from typing import Any

import jax
import numpy as np

from plume_jax.progress import ProgressBar
from plume_jax.train.config import TrainConfig, dump_yaml
from plume_jax.train.loop import Member, Program, ProgramResult, build_program, \
    evaluate_members, export_member, init_runner, member_summary, place_runner, update_of, \
    write_member
from plume_jax.train.loop import train_program as run_program
from plume_jax.train.progress import RunLoggers, hparams
from plume_jax.train.members import is_shared
from plume_jax.train.folder import FolderLock, make_out_dir
from plume_jax.train.sweep import SweepConfig, program_groups


@dataclasses.dataclass
class TrialRun:
    """One trial of a batch: the Optuna trial, its sampled values (decoded),
    config, run folder, metrics rows and outcome. ``programs``: the
    programs it trained in, in order (``from_update``, ``lanes``: their
    number of members, ``devices``), one more after each pruning rebuild:
    what ``best_config.yaml``'s ``run.lanes`` (a width, or a width
    schedule) is made of (:func:`reproducing_lanes`)."""

    trial: Any
    values: dict[str, Any]
    config: TrainConfig
    folder: pathlib.Path
    rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    pruned_at: int | None = None
    evaluation: dict[str, Any] | None = None
    loggers: RunLoggers | None = None
    programs: list[dict[str, int]] = dataclasses.field(default_factory=list)


def reproducing_lanes(programs: list[dict[str, int]]) -> int | list[dict[str, int]] | None:
    """The ``run.lanes`` with which ``plume-jax train`` reproduces, bit for
    bit on the same device, a trial that trained in ``programs``
    (:attr:`TrialRun.programs`): their width when the trial trained in one
    program, the width schedule ``[{from_update, lanes}, ...]`` of its
    programs when pruning rebuilds continued it in narrower ones; None when
    any of them was sharded over several devices, held env settings per
    member (``env_per_member``: its members differed in an env setting,
    such as ``env.reward.scale``; ``run.lanes`` holds the env settings once
    for all lanes, other arithmetic: measured 6e-8 apart after one update),
    or none is recorded (no single run does that arithmetic; ``train`` then
    agrees with it to float tolerance)."""
    if not programs or any(p["devices"] != 1 or p.get("env_per_member") for p in programs):
        return None
    if len(programs) == 1:
        return int(programs[0]["lanes"])
    return [{"from_update": int(p["from_update"]), "lanes": int(p["lanes"])} for p in programs]


class PruneStop:
    """The driver's stop request: a signal (Ctrl-C / SIGTERM, from
    ``signals``) or an evaluation that pruned a member."""

    def __init__(self, signals: Any):
        self.signals = signals
        self.pruned = False

    @property
    def signal_name(self) -> str | None:
        return self.signals.signal_name if self.signals else (
            "pruning" if self.pruned else None)

    def __bool__(self) -> bool:
        return bool(self.signals) or self.pruned


class _Reporter:
    """A member's logger for the driver: rows to its TensorBoard files; each
    periodic evaluation reported to its trial, and a pruning decision made."""

    def __init__(self, run: TrialRun, stop: PruneStop, prune: bool):
        self.run, self.stop, self.prune = run, stop, prune

    def log_rows(self, rows: list[dict[str, Any]]) -> None:
        if self.run.loggers is not None:
            self.run.loggers.log_rows(rows)

    def log_periodic_evaluation(self, row: dict[str, Any], **kwargs: Any) -> None:
        if self.run.loggers is not None:
            self.run.loggers.log_periodic_evaluation(row, **kwargs)
        update = int(row["update"])
        self.run.trial.report(float(row["success_rate"]), update)
        if self.prune and update < self.run.config.num_updates and self.run.trial.should_prune():
            self.run.pruned_at = update
            self.stop.pruned = True


def _member(run: TrialRun) -> Member:
    env, env_params = run.config.make_env()
    number = run.trial.number
    return Member(run.config, env, env_params, folder=run.folder, name=f"trial {number}",
                  summary={"trial": number, "params": run.values})


def groups(runs: list[TrialRun]) -> list[list[int]]:
    """The batch's programs: indices of trials that share static structure."""
    configs = [r.config for r in runs]
    members = [dict(r.values) for r in runs]
    sweep = SweepConfig(base=configs[0], grid={}, mode="zip", members=members,
                        configs=configs, names=[str(r.trial.number) for r in runs])
    return program_groups(sweep)


def _finish(p: Program, result: ProgramResult, j: int, run: TrialRun,
            evaluation: dict[str, Any] | None) -> None:
    """Member ``j``'s run folder finished (driver order: checkpoint and
    policy, metrics.csv, summary.json), its hyperparameters in TensorBoard."""
    export_member(p, result, j)
    summary = member_summary(p, result, j)
    summary["tune"] = {"trial": run.trial.number, "params": run.values,
                       "pruned_at_update": run.pruned_at, "programs": run.programs,
                       "reproducing_lanes": reproducing_lanes(run.programs)}
    if evaluation is not None:
        summary["evaluation"] = evaluation
    write_member(p, result, j, summary, rows=run.rows, loggers=run.loggers)
    if run.loggers is not None and run.loggers.writer is not None:
        figures = evaluation or (run.rows[-1] if run.rows else {})
        metrics = {f"hparam/{k}": float(figures[k]) for k in ("success_rate",
                   "mean_steps_to_goal") if isinstance(figures.get(k), (int, float))}
        run.loggers.writer.add_hparams({**hparams(run.config.to_dict()),
                                        **{f"tune/{k}": str(v) for k, v in run.values.items()}},
                                       metrics, name="tune_hparams",
                                       global_step=result.update * run.config.steps_per_update)
        run.loggers.writer.flush()


def _segment(runs: list[TrialRun], runner: Any, stop: PruneStop, prune: bool,
             bar: ProgressBar) -> tuple[Program, ProgramResult, dict[str, float]]:
    """Train ``runs`` from ``runner`` (None: fresh) until the end or a
    pruning stop."""
    t0 = time.perf_counter()
    p = build_program([_member(r) for r in runs], batched=True)
    runner = init_runner(p) if runner is None else place_runner(p, runner)
    init_s = time.perf_counter() - t0
    per_member = any(not is_shared(x) for x in jax.tree.leaves(p.env_params,
                                                                is_leaf=is_shared))
    for r in runs:
        r.programs.append({"from_update": update_of(runner), "lanes": len(runs),
                           "devices": p.devices,
                           **({"env_per_member": True} if per_member else {})})
    reporters: list[Any] = [_Reporter(r, stop, prune) for r in runs]
    result = run_program(p, runner, [r.rows for r in runs], bar=bar, loggers=reporters,
                         stop=stop, init_seconds=init_s)
    return p, result, {"compile": result.compile_seconds, "train": result.train_seconds,
                       "init": init_s}


def train_group(runs: list[TrialRun], *, stop: Any, prune: bool, bar: ProgressBar
                ) -> dict[str, float]:
    """Train one program's trials to the end, pruning at evaluations; every
    trial's folder is written and ``run.evaluation`` / ``run.pruned_at`` set
    (a signal stops it early: the unfinished trials have neither). Returns
    the seconds spent compiling, initialising and training."""
    seconds = {"compile": 0.0, "train": 0.0, "init": 0.0, "segments": 0.0}
    with contextlib.ExitStack() as stack:
        for r in runs:
            stack.enter_context(FolderLock(r.folder, "tune"))
            make_out_dir(r.folder)
            (r.folder / "config.yaml").write_text(dump_yaml(r.config.to_dict()))
            if r.config.run["tensorboard"]:
                r.loggers = stack.enter_context(RunLoggers(r.folder, tensorboard=True))
        live, runner = list(runs), None
        while live:
            guard = PruneStop(stop)
            p, result, spent = _segment(live, runner, guard, prune, bar)
            seconds = {k: seconds[k] + spent.get(k, 1.0 if k == "segments" else 0.0)
                       for k in seconds}
            if stop:  # Ctrl-C / SIGTERM: the batch stops, its trials unfinished
                return seconds
            finished = [j for j, r in enumerate(live) if r.pruned_at is not None] \
                if result.update < p.num_updates else list(range(len(live)))
            evaluations = evaluate_members(p, result.runner) \
                if result.update >= p.num_updates else [None] * len(live)
            for j in finished:
                live[j].evaluation = evaluations[j]
                _finish(p, result, j, live[j], evaluations[j])
            keep = [j for j in range(len(live)) if j not in finished]
            runner = None if not keep else jax.tree.map(
                lambda x: np.asarray(x)[np.asarray(keep)], result.runner)
            live = [live[j] for j in keep]
    return seconds


__all__ = ["PruneStop", "TrialRun", "groups", "reproducing_lanes", "train_group"]
