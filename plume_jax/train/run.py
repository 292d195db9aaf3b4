"""The one run function: ``plume-jax train``, ``plume-jax sweep`` and
:func:`plume_jax.train.train` all train through :func:`run`. A single run is
a sweep of one member: one program of one member whose run folder is
``--out``; a sweep is one program per group of members that share their
static structure, each member a run folder under ``members/``. Which folders,
which checkpoint a program resumes from and what a resume rewrites are the
rules of :mod:`plume_jax.train.folder`; what a command does with the results
(a sweep's ranked tables) is its ``finish`` callback, run while the folder is
still locked. Across several processes every process calls :func:`run` with
the same arguments; process 0 alone holds the locks, shows progress and
writes, and no process returns before process 0 has written. :func:`train`
is ``plume-jax train`` from Python (:func:`single_run`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import time
from typing import Any, Callable, TextIO

import jax
import numpy as np

from plume_jax.progress import ProgressBar
from plume_jax.train.algorithms.base import Algorithm
from plume_jax.train.config import TrainConfig
from plume_jax.train.distributed import barrier, check_joined, is_main_process
from plume_jax.train.folder import RunFolders, SingleRun
from plume_jax.train.loop import Interrupted, Member, Program, ProgramResult, build_program, \
    evaluate_members, export_member, init_runner, load_runner, machine_info, member_summary, \
    stop_on_signals, train_program, update_of, write_member
from plume_jax.train.report import plot_learning_curves
from plume_jax.train.progress import RunLoggers, check_wandb, read_jsonl
from plume_jax.train.warm_start import start_notes


@dataclasses.dataclass
class RunResult:
    """What :func:`run` returns: one ``ProgramResult`` per program, each
    member's ``summary.json`` and final evaluation (None: not evaluated) by
    its index in the sweep (0 for a single run), the notes the run told the
    user (also in every summary), and what ``finish`` returned."""

    programs: list[ProgramResult] = dataclasses.field(default_factory=list)
    summaries: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    evaluations: dict[int, dict[str, Any] | None] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    finished: Any = None


def run(folders: RunFolders, build: Callable[[], list[Program]], configs: list[TrainConfig], *,
        progress: bool = True, stream: TextIO | None = None, evaluate: bool = True,
        overwrite: bool = False, finish: Callable[[RunResult], Any] | None = None) -> RunResult:
    """Train the programs ``build()`` returns in ``folders`` (``folders.out``
    None writes nothing): lock the folder, check it and what a resume reads,
    build the programs (envs and algorithms; nothing compiles), load or
    initialise the first one's runner, all before anything is written or
    compiled; then prepare the folder (``overwrite``: delete an earlier run's
    ``folders.outputs`` first) and, program after program, train, export,
    evaluate (``evaluate``) and write each member's summary. ``configs``:
    every member's; ``progress``: a bar or lines (to ``stream``, default
    stderr); ``finish(result)``: called once every member is written.

    Raises ``ValidationError`` / ``StateError`` for a folder or resume the
    rules refuse (before anything is written), and ``Interrupted`` when a
    signal stopped the training (after a checkpoint).
    """
    check_joined(configs[0].run["distributed"])
    t_wall, main = time.perf_counter(), is_main_process()
    with contextlib.ExitStack() as stack:
        locks = stack.enter_context(folders.locked(overwrite)) \
            if folders.out is not None and main else {}
        folders.check(overwrite)
        for cfg in configs:
            check_wandb(cfg.run["wandb_project"])
        programs = build()
        if main:
            folders.migrate(locks)
        started = _start_runner(folders, programs[0])  # checked before anything is written
        barrier(f"plume_jax.{folders.command}: checked and loaded")  # before process 0 writes
        if folders.out is not None and main:
            folders.prepare(overwrite)
        result = RunResult(notes=list(dict.fromkeys(n for n in (c.steps_note() for c in configs)
                                                    if n)) + folders.notes())
        sizes = [len(p.runs) * p.num_updates * p.config.steps_per_update for p in programs]
        bar = stack.enter_context(contextlib.closing(ProgressBar(
            sum(sizes), folders.command, unit=folders.unit, quiet=not (progress and main),
            stream=stream, min_interval_s=0.0)))
        for note in result.notes:
            bar.update(len(programs[0].runs) * update_of(started[0])
                       * programs[0].config.steps_per_update, message=f"note: {note}")
        with stop_on_signals() as stop:
            for k, p in enumerate(programs):
                runner, checkpoint, init_s = started if k == 0 else _start_runner(folders, p)
                offset, start_update = float(sum(sizes[:k])), update_of(runner)
                start = folders.start(p, start_update if checkpoint is not None else None)
                for loggers in start.loggers:
                    if loggers is not None:
                        stack.callback(loggers.close)
                notes = list(start.notes) + (start_notes(p) if checkpoint is None else [])
                for note in notes:
                    bar.update(offset + len(p.runs) * start_update * p.config.steps_per_update,
                               message=f"note: {note}")
                result.notes.extend(notes)
                trained = train_program(p, runner, start.rows, bar=bar, offset=offset,
                                        init_seconds=init_s, loggers=start.loggers, stop=stop)
                if trained.interrupted:  # checkpointed: the folder resumes where it stopped
                    raise Interrupted(trained.interrupted, trained.update,
                                      folders.resume_command)
                result.programs.append(trained)
                _finish_program(folders, trained, checkpoint, start.loggers, evaluate, t_wall,
                                result)
        bar.close()
        if finish is not None:
            result.finished = finish(result)
        barrier(f"plume_jax.{folders.command}: written")  # no process leaves before process 0
    return result


def _start_runner(folders: RunFolders, p: Program
                  ) -> tuple[Any, pathlib.Path | None, float]:
    """``p``'s runner: loaded (and checked) from the checkpoint it resumes
    from, or initialised; that checkpoint (None: fresh); seconds taken."""
    t0 = time.perf_counter()
    checkpoint = folders.checkpoint_of(p)
    runner = init_runner(p) if checkpoint is None else \
        load_runner(folders.as_saved(p, checkpoint), checkpoint)[0]
    return runner, checkpoint, time.perf_counter() - t0


def _finish_program(folders: RunFolders, trained: ProgramResult, checkpoint: pathlib.Path | None,
                    loggers: list[RunLoggers | None], evaluate: bool, t_wall: float,
                    result: RunResult) -> None:
    """Export every member of a trained program (its checkpoint and policy,
    process 0), evaluate them (every process: the same work; a single run
    from its exported files), then (process 0) write each member's run
    folder: ``metrics.csv`` of every row its ``metrics.jsonl`` holds,
    ``summary.json``, the evaluation logged, then (``folders.figure``)
    ``learning_curve.png``."""
    p = trained.setup
    for j in range(len(p.runs)):
        export_member(p, trained, j)
    train_wall = time.perf_counter() - t_wall
    evaluations = evaluate_members(p, trained.runner) if evaluate else [None] * len(p.runs)
    for j, i in enumerate(p.members):
        summary = run_summary(trained, j, checkpoint, result.notes)
        summary["train_wall_seconds"] = train_wall
        if evaluations[j] is not None:
            summary["evaluation"] = evaluations[j]
        summary["wall_seconds"] = time.perf_counter() - t_wall
        summary["machine"] = machine_info()
        result.summaries[i], result.evaluations[i] = summary, evaluations[j]
        member = p.runs[j]
        if member.folder is None or not is_main_process():
            continue
        rows = read_jsonl(member.folder / "metrics.jsonl")
        env_id = summary["env"]
        title = f"{p.algo.name} ({member.config.network.type}) on {env_id}"
        curve = (lambda path, r: plot_learning_curves(path, {env_id: r}, title=title)) \
            if folders.figure else None
        with folders.logs(p, j, loggers[j], rows) as live:
            write_member(p, trained, j, summary, rows=rows, loggers=live, curve=curve)


def run_summary(trained: ProgramResult, j: int, checkpoint: pathlib.Path | None,
                notes: list[str]) -> dict[str, Any]:
    """Member ``j``'s ``summary.json`` but the evaluation and wall times:
    ``member_summary``'s fields, this call's updates and env steps, timings
    (seconds; the program's, which a sweep's members share), throughput (of
    this member's own env steps), where it resumed from, the notes."""
    p = trained.setup
    start, run_s, compile_s = trained.resumed_at_update, trained.train_seconds, \
        trained.compile_seconds
    steps = (trained.update - start) * p.runs[j].config.steps_per_update
    summary: dict[str, Any] = {
        **member_summary(p, trained, j),
        "updates_this_call": trained.update - start,
        "env_steps_this_call": steps,
        "devices": p.devices,
        "processes": jax.process_count(),
        "init_seconds": trained.init_seconds,
        "compile_seconds": compile_s,
        "train_seconds": run_s,
        "checkpoints_written": trained.checkpoints,
        "checkpoint_seconds": trained.checkpoint_seconds,
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


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns: the ``config`` and ``algo`` trained, the
    final ``runner``, this call's per-update metrics ``rows``, the
    ``summary`` (as ``summary.json``) and the output folder (or None)."""

    config: TrainConfig
    algo: Algorithm
    runner: Any
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    out_dir: pathlib.Path | None

    def policy(self, greedy: bool = True):
        """The trained policy as an ``agents.trained.TrainedPolicy``."""
        from agents.trained import TrainedPolicy

        spec, arrays = self.algo.policy(self.runner)
        return TrainedPolicy({**spec, "env": self.algo.env.settings},
                             {k: np.asarray(v) for k, v in arrays.items()}, greedy=greedy)


def single_run(config: TrainConfig, out: pathlib.Path | None,
               resume: str | pathlib.Path | None = None
               ) -> tuple[SingleRun, Callable[[], list[Program]]]:
    """The folder rules (:class:`~plume_jax.train.folder.SingleRun`) and the
    program builder of one run of ``config`` in ``out``, for :func:`run`: a
    program of one member in ``out``."""
    def build() -> list[Program]:
        env, env_params = config.make_env()
        return [build_program([Member(config, env, env_params, folder=out)], batched=False,
                              folder=out)]

    return SingleRun(out, config, resume), build


def train(config: TrainConfig, out_dir: str | pathlib.Path | None = None, *,
          progress: bool = True, stream: TextIO | None = None,
          resume: str | pathlib.Path | None = None, evaluate: bool = True,
          overwrite: bool = False) -> TrainResult:
    """Train with ``config`` into ``out_dir`` (None: write nothing), as
    :func:`run` does (``overwrite``, ``progress``, ``stream``, ``evaluate``);
    ``out_dir`` must be new or empty unless ``overwrite`` or it is the folder
    of the run being resumed. ``resume``: a run or checkpoint folder to
    continue from, with a config that may differ from the checkpoint's only
    as :func:`~plume_jax.train.folder.resume_point` allows. With several
    processes every process calls ``train`` with the same arguments, after
    :func:`plume_jax.train.distributed.join`.
    """
    out = pathlib.Path(out_dir) if out_dir is not None else None
    folders, build = single_run(config, out, resume)
    result = run(folders, build, [config], progress=progress, stream=stream, evaluate=evaluate,
                 overwrite=overwrite)
    trained = result.programs[0]
    return TrainResult(config=config, algo=trained.setup.algo, runner=trained.runner,
                       rows=trained.rows[0], summary=result.summaries[0], out_dir=out)
