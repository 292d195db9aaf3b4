"""The one run function: ``plume-jax train`` and ``plume-jax sweep`` both
train through :func:`run`. A single run is a sweep of one member: one
program (:class:`~plume_jax.train.driver.Program`) of one member whose run
folder is ``--out``; a sweep is one program per group of members that share
their static structure, each member a run folder under ``members/``.

:func:`run` is the skeleton both share, in this order: lock the folder,
check it (and everything a resume reads), build the programs, load or
initialise the first one's runner — all before anything is written or
compiled — then prepare the folder and, program after program, start its
members' rows, train (:func:`~plume_jax.train.driver.run_program`), export,
evaluate and write each member's summary. Which folders, which checkpoint a
program resumes from and what a resume rewrites are the folder rules of
:mod:`plume_jax.train.run_folder` (:class:`~plume_jax.train.run_folder.SingleRun`,
:class:`~plume_jax.train.run_folder.Sweep`); what a command does with the
results (a sweep's ranked tables) is its ``finish`` callback, run while the
folder is still locked.

Across several processes (:mod:`plume_jax.train.distributed`) every process
calls :func:`run` with the same arguments; process 0 alone holds the locks,
shows progress and writes, and no process returns before process 0 has
written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import pathlib
import time
from typing import Any, Callable, Mapping, TextIO

import jax

from plume_jax.progress import ProgressBar
from plume_jax.train.chunks import Interrupted, stop_on_signals
from plume_jax.train.config import TrainConfig
from plume_jax.train.distributed import barrier, check_joined, is_main_process
from plume_jax.train.driver import Program, ProgramResult, evaluate_members, export_member, \
    init_runner, machine_info, member_summary, run_program, update_of, write_member
from plume_jax.train.loggers import RunLoggers, check_wandb
from plume_jax.train.report import plot_learning_curves
from plume_jax.train.progress import read_jsonl
from plume_jax.train.run_folder import FolderLock, RunFolders
from plume_jax.train.warm_start import start_notes


@dataclasses.dataclass
class RunResult:
    """What :func:`run` returns.

    Attributes:
        programs: one :class:`~plume_jax.train.driver.ProgramResult` per
            program, in order.
        summaries: each member's ``summary.json`` contents, by its index in
            the sweep (0 for a single run).
        evaluations: each member's final evaluation (None: not evaluated),
            by index.
        notes: what the run told the user (also in every summary).
        finished: what the ``finish`` callback returned.
    """

    programs: list[ProgramResult] = dataclasses.field(default_factory=list)
    summaries: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    evaluations: dict[int, dict[str, Any] | None] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    finished: Any = None


@dataclasses.dataclass(frozen=True)
class _Options:
    progress: bool
    stream: TextIO | None
    evaluate: bool
    overwrite: bool
    finish: Callable[[RunResult], Any] | None
    t_wall: float


def run(folders: RunFolders, build: Callable[[], list[Program]], configs: list[TrainConfig], *,
        progress: bool = True, stream: TextIO | None = None, evaluate: bool = True,
        overwrite: bool = False, finish: Callable[[RunResult], Any] | None = None) -> RunResult:
    """Train the programs ``build()`` returns (called once the folder is
    checked) in ``folders`` (its rules: a
    :class:`~plume_jax.train.run_folder.SingleRun` or
    :class:`~plume_jax.train.run_folder.Sweep`), following the module
    docstring's order.

    Args:
        folders: the folder rules; ``folders.out`` None writes nothing.
        build: the programs, built after the checks (building a program
            builds its envs and algorithm; nothing is compiled yet).
        configs: every member's config (checked before building: W&B).
        progress: show a progress bar (a terminal) or progress lines (to
            ``stream``, default stderr).
        evaluate: the final greedy evaluation of every member.
        overwrite: delete the outputs of an earlier run in the folder
            (``folders.outputs``; other files stay) before writing.
        finish: called with the result after every member is written,
            while the folder is still locked (process 0 writes there what
            the command adds: a sweep's tables); its return value is
            ``RunResult.finished``.

    Raises ``ValidationError`` / ``StateError`` for a folder or resume that
    the rules refuse (before anything is written), and
    :class:`~plume_jax.train.chunks.Interrupted` when a signal stopped the
    training (after a checkpoint: ``folders.resume_command`` continues it).
    """
    check_joined(configs[0].run["distributed"])
    options = _Options(progress, stream, evaluate, overwrite, finish, time.perf_counter())
    if folders.out is None or not is_main_process():
        return _run(folders, build, configs, {}, options)
    with folders.locked(overwrite) as locks:
        return _run(folders, build, configs, locks, options)


def _run(folders: RunFolders, build: Callable[[], list[Program]], configs: list[TrainConfig],
         locks: Mapping[pathlib.Path, FolderLock], options: _Options) -> RunResult:
    """:func:`run` once the locks are held."""
    folders.check(options.overwrite)
    for cfg in configs:
        check_wandb(cfg.run["wandb_project"])
    programs = build()
    main = is_main_process()
    if main:
        folders.migrate(locks)
    first = _start_runner(folders, programs[0])  # checked before anything is written
    barrier(f"plume_jax.{folders.command}: checked and loaded")  # before process 0 writes
    if folders.out is not None and main:
        folders.prepare(options.overwrite)
    result = RunResult(notes=list(dict.fromkeys(n for n in (c.steps_note() for c in configs)
                                                if n)) + folders.notes())
    sizes = [len(p.runs) * p.num_updates * p.config.steps_per_update for p in programs]
    bar = ProgressBar(sum(sizes), folders.command, unit=folders.unit,
                      quiet=not (options.progress and main), stream=options.stream,
                      min_interval_s=0.0)
    with contextlib.ExitStack() as logs:
        logs.callback(bar.close)
        for note in result.notes:
            bar.update(len(programs[0].runs) * update_of(first[0])
                       * programs[0].config.steps_per_update, message=f"note: {note}")
        with stop_on_signals() as stop:
            for k, p in enumerate(programs):
                started = first if k == 0 else _start_runner(folders, p)
                _train_program(folders, p, started, bar, float(sum(sizes[:k])), stop, options,
                               result, logs)
        bar.close()
        if options.finish is not None:
            result.finished = options.finish(result)
        barrier(f"plume_jax.{folders.command}: written")  # no process leaves before process 0
    return result


def _start_runner(folders: RunFolders, p: Program
                  ) -> tuple[Any, pathlib.Path | None, float]:
    """``p``'s runner: loaded (and checked) from the checkpoint it resumes
    from, or initialised; that checkpoint (None: fresh); seconds taken."""
    t0 = time.perf_counter()
    checkpoint = folders.checkpoint_of(p)
    runner = init_runner(p) if checkpoint is None else folders.load(p, checkpoint)[0]
    return runner, checkpoint, time.perf_counter() - t0


def _train_program(folders: RunFolders, p: Program, started: tuple[Any, pathlib.Path | None,
                                                                   float],
                   bar: ProgressBar, offset: float, stop: Any, options: _Options,
                   result: RunResult, logs: contextlib.ExitStack) -> None:
    """Train program ``p`` from ``started`` (:func:`_start_runner`), then
    export, evaluate and write its members (:func:`_finish_program`)."""
    runner, checkpoint, init_s = started
    start_update = update_of(runner)
    start = folders.start(p, start_update if checkpoint is not None else None)
    for loggers in start.loggers:
        if loggers is not None:
            logs.callback(loggers.close)
    notes = list(start.notes) + (start_notes(p) if checkpoint is None else [])
    for note in notes:
        bar.update(offset + len(p.runs) * start_update * p.config.steps_per_update,
                   message=f"note: {note}")
    result.notes.extend(notes)
    trained = run_program(p, runner, start.rows, bar=bar, offset=offset, init_seconds=init_s,
                          loggers=start.loggers, stop=stop)
    if trained.interrupted:  # checkpointed: the folder resumes where it stopped
        raise Interrupted(trained.interrupted, trained.update, folders.resume_command)
    result.programs.append(trained)
    _finish_program(folders, trained, checkpoint, start.loggers, options, result)


def _finish_program(folders: RunFolders, trained: ProgramResult, checkpoint: pathlib.Path | None,
                    loggers: list[RunLoggers | None], options: _Options,
                    result: RunResult) -> None:
    """Export every member of a trained program (its checkpoint and policy,
    process 0), evaluate them (every process: the same work; a single run
    from its exported files), then write each member's summary and figure."""
    p = trained.setup
    for j in range(len(p.runs)):
        export_member(p, trained, j)
    train_wall = time.perf_counter() - options.t_wall
    evaluations = (evaluate_members(p, trained.runner) if options.evaluate
                   else [None] * len(p.runs))
    for j, i in enumerate(p.members):
        summary = run_summary(trained, j, checkpoint, result.notes)
        summary["train_wall_seconds"] = train_wall
        if evaluations[j] is not None:
            summary["evaluation"] = evaluations[j]
        summary["wall_seconds"] = time.perf_counter() - options.t_wall
        summary["machine"] = machine_info()
        result.summaries[i], result.evaluations[i] = summary, evaluations[j]
        _write(folders, trained, j, summary, loggers[j])


def run_summary(trained: ProgramResult, j: int, checkpoint: pathlib.Path | None,
                notes: list[str]) -> dict[str, Any]:
    """Member ``j``'s ``summary.json`` fields but the evaluation and wall
    times: :func:`~plume_jax.train.driver.member_summary`, the updates and
    env steps of this call, timings (seconds; the program's, which a sweep's
    members share) and throughput (env steps per second of this member's
    own steps), where it resumed from, the notes."""
    p = trained.setup
    per_update = p.runs[j].config.steps_per_update
    start, run_s, compile_s = (trained.resumed_at_update, trained.train_seconds,
                               trained.compile_seconds)
    steps = (trained.update - start) * per_update
    summary: dict[str, Any] = {
        **member_summary(p, trained, j),
        "updates_this_call": trained.update - start,
        "env_steps_this_call": steps,
        "devices": p.devices,
        "processes": jax.process_count(),
        "init_seconds": trained.init_seconds,
        "compile_seconds": compile_s,
        "train_seconds": run_s,
        "checkpoints_written": trained.stats.checkpoints,
        "checkpoint_seconds": trained.stats.checkpoint_seconds,
        "steps_per_second_excl_compile": steps / run_s if run_s > 0 else None,
        "steps_per_second_incl_compile": (steps / (run_s + compile_s + trained.init_seconds)
                                          if steps else None),
    }
    if p.algo.multi_agent:  # every env step is num_agents agent steps
        summary["num_agents"] = p.algo.num_agents
        summary["agent_steps_per_second_excl_compile"] = (
            steps * p.algo.num_agents / run_s if run_s > 0 else None)
    if checkpoint is not None:
        summary["resumed_from"] = str(checkpoint)
        summary["resumed_at_update"] = start
    if notes:
        summary["notes"] = list(notes)
    return summary


def _write(folders: RunFolders, trained: ProgramResult, j: int, summary: dict[str, Any],
           live: RunLoggers | None) -> None:
    """Member ``j``'s finished run folder (process 0): ``metrics.csv`` of
    every row its ``metrics.jsonl`` holds, ``summary.json``, the evaluation
    logged, then (``folders.figure``) ``learning_curve.png``."""
    p = trained.setup
    member = p.runs[j]
    if member.folder is None or not is_main_process():
        return
    rows = read_jsonl(member.folder / "metrics.jsonl")
    curve = None
    if folders.figure:
        curve = functools.partial(_learning_curve, env_id=summary["env"], title=(
            f"{p.algo.name} ({member.config.network.type}) on {summary['env']}"))
    with folders.logs(p, j, live, rows) as loggers:
        write_member(p, trained, j, summary, rows=rows, loggers=loggers, curve=curve)


def _learning_curve(path: pathlib.Path, rows: list[dict[str, Any]], *, title: str,
                    env_id: str) -> None:
    plot_learning_curves(path, {env_id: rows}, title=title)
