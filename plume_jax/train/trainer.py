"""``train(config)``: one training run from a validated config, as used by
``plume-jax train`` — a program of one member run by the driver
(:mod:`plume_jax.train.driver`), plus the single-run folder rules below.

The driver compiles ``Algorithm.run`` once — for PPO the rollout, GAE and
the minibatch epochs of every update are one XLA program, with the number
of updates per call an argument — and calls it in chunks until the update
budget is spent (:mod:`plume_jax.train.chunks`). Between chunks (about every
30 s) the metrics rows are appended to ``metrics.jsonl`` and TensorBoard;
every ``run.checkpoint_minutes`` (and every ``run.checkpoint_every``
updates, when set) the whole training state is checkpointed. The chunk
lengths never change results: splitting a run into chunks of any lengths
gives bit-for-bit the same run (tested). Progress comes from inside the
program (``jax.debug.callback``) to a :class:`plume_jax.progress.ProgressBar`.
Afterwards the policy is exported, reloaded from disk as an
``agents.trained.TrainedPolicy`` and evaluated greedily on fresh seeds.

Output folder (``out_dir``, a *run folder*)::

    config.yaml          the resolved config (every default spelled out)
    metrics.jsonl        one JSON object per update
    metrics.csv          the same as a table
    learning_curve.png   success rate and mean return against env steps
    tensorboard/         TensorBoard event files (run.tensorboard)
    checkpoint/          the latest checkpoint (resume with --resume)
    checkpoints/         checkpoints kept every run.checkpoint_every updates
                         (update_<N>/), when that is set
    policy/              the exported policy (agents.trained)
    evaluations.jsonl    periodic evaluations (eval.every; plume_jax.train.periodic_eval)
    best/                the best policy of those evaluations, with its row
    summary.json         budget, timings, throughput, evaluation

Several processes (:mod:`plume_jax.train.distributed`): every process
runs the same program on the global mesh; process 0 alone shows progress
and writes the run folder, from arrays gathered from all processes; every
process checks the folder and reads the checkpoint it resumes (a filesystem
all hosts share).

Run folder rules (:mod:`plume_jax.train.run_folder`): a fresh run needs a
new or empty folder, or ``overwrite``; a resumed run continues in its own
folder (or a new one). Resuming trims ``metrics.jsonl`` to the checkpoint's
update (the rows of updates after it, and a line torn by a kill, are
dropped: they are trained again), so no update is counted twice.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import time
from typing import Any, TextIO

import jax
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.progress import ProgressBar
from plume_jax.train.algorithms.base import Algorithm
from plume_jax.train.checkpoint import find_checkpoint, partial_folder_prefix, read_checkpoint
from plume_jax.train.chunks import Interrupted, stop_on_signals
from plume_jax.train.config import RESUME_MAY_CHANGE, TrainConfig, dump_yaml, \
    current_form, resume_differences, train_config
from plume_jax.train.distributed import barrier, check_joined, is_main_process
from plume_jax.train.driver import Member, build_program, evaluate_members, export_member, \
    init_runner, load_runner, machine_info, member_summary, run_program, update_of, \
    write_member, write_text
from plume_jax.train.loggers import RunLoggers, check_wandb
from plume_jax.train.periodic_eval import BEST_FOLDERS, EVALUATIONS, check_best, \
    copy_evaluations, replay_rows, settle_best, trim_evaluations
from plume_jax.train.plots import plot_learning_curves
from plume_jax.train.progress import read_jsonl, rows_up_to, write_jsonl
from plume_jax.train.run_folder import FolderLock, check_out_dir, check_writable_logdir, \
    clear_outputs, make_out_dir, set_aside_later_state

#: What ``train`` writes into a run folder (``overwrite`` deletes these; ``*``
#: stands for any token): its files, and the hidden folders a kill may leave
#: (a first ``checkpoint/`` written whole, ``best/``'s swap folders).
RUN_OUTPUTS = ("config.yaml", "metrics.jsonl", "metrics.csv", "learning_curve.png",
               "summary.json", "checkpoint", f"{partial_folder_prefix('checkpoint')}*",
               "checkpoints", "policy", "tensorboard", "wandb", "wandb_run_id", EVALUATIONS,
               *BEST_FOLDERS)


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        config: the config trained.
        algo: the :class:`~plume_jax.train.algorithms.base.Algorithm` trained.
        runner: the final runner (parameters, optimiser and env state).
        rows: per-update metrics of this call (one dict per update).
        summary: budget, timings, throughput, evaluation (also
            ``summary.json``).
        out_dir: the output folder, or None.
    """

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
        spec = {**spec, "env": self.algo.env.settings}
        return TrainedPolicy(spec, {k: np.asarray(v) for k, v in arrays.items()},
                             greedy=greedy)


@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run starts: the checkpoint, its run folder, the update
    it holds and its config."""

    checkpoint: pathlib.Path
    run_dir: pathlib.Path
    update: int
    num_updates: int
    config: dict[str, Any]


def resume_point(resume: str | pathlib.Path, config: TrainConfig) -> ResumePoint:
    """Check that ``config`` may resume from ``resume`` (a run folder or a
    checkpoint folder): the checkpoint's files are whole, its config equals
    ``config`` in everything but what a resume may change
    (:data:`plume_jax.train.config.RESUME_MAY_CHANGE`), and the new budget
    is not below the updates already done. ``ValidationError`` otherwise,
    naming the differing settings."""
    run_dir, ckpt = find_checkpoint(resume)
    meta, _ = read_checkpoint(ckpt)
    saved = current_form(meta.get("config"))  # an earlier version's form: this one's
    if not isinstance(saved, dict):
        raise ValidationError.for_parameter("--resume", str(ckpt),
                                            "a checkpoint whose metadata holds its config")
    diffs = resume_differences(saved, config)
    if diffs:
        listed = "; ".join(f"{k}: checkpoint {a!r}, now {b!r}" for k, (a, b) in diffs.items())
        name = next(iter(diffs))
        raise ValidationError(
            f"--resume {ckpt}: the config differs from the checkpoint's in {len(diffs)} "
            f"setting(s) that define the problem or the algorithm ({listed}). A resumed run may "
            f"change only {', '.join(RESUME_MAY_CHANGE)}; train a changed config as a new run "
            "(another --out).",
            parameter=name, value=diffs[name][1], allowed=f"{diffs[name][0]!r} (the checkpoint's)")
    update = int(meta.get("update", 0))
    if update > config.num_updates:
        raise ValidationError.for_parameter(
            "algo.total_steps", config.algo["total_steps"],
            f"at least the {update * config.steps_per_update:,} env steps ({update} updates) "
            f"the checkpoint {ckpt} has already trained")
    old_updates = int(meta.get("num_updates") or train_config(saved).num_updates)
    return ResumePoint(checkpoint=ckpt, run_dir=run_dir, update=update,
                       num_updates=old_updates, config=saved)


def learning_rate_note(config: TrainConfig, point: ResumePoint) -> str | None:
    """What a changed budget does to an annealed learning rate (the linear
    decay runs to 0 over the *current* total, so the rate jumps), or None."""
    from plume_jax.train.algorithms.base import algorithm_class

    anneals = "anneal_lr" in algorithm_class(config.algo["algorithm"], "algo.algorithm").SETTINGS
    if not anneals or not config.algo.get("anneal_lr") or point.num_updates == config.num_updates:
        return None  # only an algorithm that declares anneal_lr anneals
    lr = config.algo["learning_rate"]
    u = point.update
    before = lr * (1.0 - u / point.num_updates)
    after = lr * (1.0 - u / config.num_updates)
    return (f"algo.anneal_lr: the learning rate decays linearly to 0 over the whole budget, now "
            f"{config.num_updates} updates instead of {point.num_updates}: at update {u + 1} it "
            f"is {after:.3g} (it would have been {before:.3g} under the old budget)")


def train(config: TrainConfig, out_dir: str | pathlib.Path | None = None, *,
          progress: bool = True, stream: TextIO | None = None,
          resume: str | pathlib.Path | None = None, evaluate: bool = True,
          overwrite: bool = False) -> TrainResult:
    """Train with ``config`` (:func:`_train` says how), holding the run
    folder's lock (:class:`~plume_jax.train.run_folder.FolderLock`: a
    second process on the same folder gets a ``StateError`` naming this
    one) from before the folder is checked until everything is written."""
    check_joined(config.run["distributed"])
    if out_dir is None or not is_main_process():
        return _train(config, out_dir, progress=progress, stream=stream, resume=resume,
                      evaluate=evaluate, overwrite=overwrite)
    out = pathlib.Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValidationError.for_parameter("--out", str(out), "a folder (this is a file)")
    with FolderLock(out, "train"):
        return _train(config, out_dir, progress=progress, stream=stream, resume=resume,
                      evaluate=evaluate, overwrite=overwrite)


def _train(config: TrainConfig, out_dir: str | pathlib.Path | None = None, *,
           progress: bool = True, stream: TextIO | None = None,
           resume: str | pathlib.Path | None = None, evaluate: bool = True,
           overwrite: bool = False) -> TrainResult:
    """Train with ``config``: a program of one member run by the driver
    (:mod:`plume_jax.train.driver`); see the module docstring for the folder.

    Args:
        config: a validated :class:`TrainConfig`.
        out_dir: output folder (None: write nothing, return only). It must be
            new or empty, unless ``overwrite`` or it is the folder of the run
            being resumed.
        progress: show a progress bar (a terminal) or progress lines (to
            ``stream``, default stderr; the summary is for stdout).
        resume: a run folder or checkpoint folder to continue from; the
            config may differ from the checkpoint's only in the budget,
            logging, checkpointing, devices and evaluation settings.
        evaluate: run the greedy evaluation at the end.
        overwrite: delete the outputs of an earlier run in ``out_dir``
            (:data:`RUN_OUTPUTS`; other files stay) before writing.

    Everything is checked (the folder, the env, the checkpoint and its
    config) before anything is written or compiled.

    With several processes (see the module docstring) every process calls
    ``train`` with the same arguments, after
    :func:`plume_jax.train.distributed.join` (``StateError`` if
    ``run.distributed`` and the launcher ask for several processes and this
    one joined none); only process 0 shows progress and writes ``out_dir``.
    """
    t_wall = time.perf_counter()
    check_joined(config.run["distributed"])
    out = pathlib.Path(out_dir) if out_dir is not None else None
    point = resume_point(resume, config) if resume is not None else None
    if out is not None:
        here = point is not None and out.resolve() == point.run_dir.resolve()
        check_out_dir(out, overwrite=overwrite, resuming_here=here)
        if config.run["tensorboard"] and is_main_process():
            check_writable_logdir(out)
        if point is not None:
            check_metrics_cover(point)
            check_best(point.run_dir)  # everything the resume reads, before anything moves
    check_wandb(config.run["wandb_project"])
    env, env_params = config.make_env()
    program = build_program([Member(config, env, env_params, folder=out)], batched=False,
                            folder=out)
    algo = program.algo
    num_updates = config.num_updates
    per_update = config.steps_per_update

    main = is_main_process()
    written = out if main else None  # the folder this process writes, or None
    t0 = time.perf_counter()
    if point is not None:
        runner, _ = load_runner(program, point.checkpoint)
    else:
        runner = init_runner(program)
    init_s = time.perf_counter() - t0
    start_update = update_of(runner)
    notes = [n for n in [config.steps_note(),
                         learning_rate_note(config, point) if point else None] if n]

    barrier("plume_jax.train: checked and loaded")  # before process 0 writes
    loggers = None
    if written is not None:
        if overwrite and written.exists():
            clear_outputs(written, RUN_OUTPUTS)
        history, aside = _prepare_run_folder(written, config, point)
        if point is not None and aside is not None:  # a folder is set aside only on resume
            notes.append(f"resumed from update {point.update} while this folder held a later "
                         f"state: that state (metrics, checkpoints, policy) was moved, whole, to "
                         f"{aside}")
        loggers = RunLoggers(written, tensorboard=config.run["tensorboard"],
                             wandb_project=config.run["wandb_project"], name=written.name,
                             config=config.to_dict(), history=history)
        if history is not None:  # TensorBoard was written anew from the kept rows
            for row in replay_rows(written):
                loggers.log_periodic_evaluation(row, tensorboard_only=True)

    bar = ProgressBar(num_updates * per_update, "train", unit="steps",
                      quiet=not (progress and main), stream=stream, min_interval_s=0.0)
    for note in notes:
        bar.update(start_update * per_update, message=f"note: {note}")
    try:
        with stop_on_signals() as stop:
            result = run_program(program, runner, [[]], bar=bar, init_seconds=init_s,
                                 loggers=[loggers], stop=stop)
        done = result.update
        if result.interrupted:  # checkpointed: the folder resumes where it stopped
            raise Interrupted(result.interrupted, done,
                              f"plume-jax train --resume {out}" if out is not None
                              else "(no run folder: nothing was saved)")
        compile_s, run_s = result.compile_seconds, result.train_seconds
        trained_steps = (done - start_update) * per_update
        summary: dict[str, Any] = {
            **member_summary(program, result, 0),
            "updates_this_call": done - start_update,
            "env_steps_this_call": trained_steps,
            "devices": program.devices,
            "processes": jax.process_count(),
            "init_seconds": init_s,
            "compile_seconds": compile_s,
            "train_seconds": run_s,
            "checkpoints_written": result.stats.checkpoints,
            "checkpoint_seconds": result.stats.checkpoint_seconds,
            "steps_per_second_excl_compile": trained_steps / run_s if run_s > 0 else None,
            "steps_per_second_incl_compile": (trained_steps / (run_s + compile_s + init_s)
                                              if trained_steps else None),
        }
        if algo.multi_agent:  # every env step is num_agents agent steps
            summary["num_agents"] = algo.num_agents
            summary["agent_steps_per_second_excl_compile"] = (
                trained_steps * algo.num_agents / run_s if run_s > 0 else None)
        if point is not None:
            summary["resumed_from"] = str(point.checkpoint)
            summary["resumed_at_update"] = point.update
        if notes:
            summary["notes"] = notes
        train_result = TrainResult(config=config, algo=algo, runner=result.runner,
                                   rows=result.rows[0], summary=summary, out_dir=out)
        export_member(program, result, 0)
        summary["train_wall_seconds"] = time.perf_counter() - t_wall
        if evaluate:  # every process (the same work), process 0 from the exported files
            summary["evaluation"] = evaluate_members(program, result.runner)[0]
        summary["wall_seconds"] = time.perf_counter() - t_wall
        summary["machine"] = machine_info()
        if written is not None:
            write_member(program, result, 0, summary, rows=read_jsonl(written / "metrics.jsonl"),
                         loggers=loggers, curve=functools.partial(
                             _learning_curve, env_id=summary["env"],
                             title=f"{algo.name} ({config.network.type}) on {summary['env']}"))
        barrier("plume_jax.train: written")  # no process leaves before process 0 has written
    finally:
        bar.close()
        if loggers is not None:
            loggers.close()
    return train_result


def _learning_curve(path: pathlib.Path, rows: list[dict[str, Any]], *, title: str,
                    env_id: str) -> None:
    plot_learning_curves(path, {env_id: rows}, title=title)


def check_metrics_cover(point: ResumePoint) -> None:
    """``StateError`` unless the resumed run's ``metrics.jsonl`` holds a row
    for every update up to the checkpoint's (rows are appended before each
    checkpoint is written, so a shorter file has lost rows: resuming would
    hide the loss)."""
    from plume_jax.core.errors import StateError

    path = point.run_dir / "metrics.jsonl"
    have = {int(r["update"]) for r in read_jsonl(path)}
    missing = [u for u in range(1, point.update + 1) if u not in have]
    if missing:
        raise StateError(
            f"--resume {point.checkpoint}: {path} lacks the metrics rows of {len(missing)} of "
            f"the {point.update} updates the checkpoint has trained (first missing: update "
            f"{missing[0]}); resuming would hide their loss. Restore the file, or train anew "
            "with --overwrite")


def _prepare_run_folder(out: pathlib.Path, config: TrainConfig, point: ResumePoint | None
                        ) -> tuple[list[dict[str, Any]] | None, pathlib.Path | None]:
    """Create the run folder and write its config; on resume make its metrics
    match the checkpoint. Write-ahead: when the folder holds a later state
    than the checkpoint resumed (kept checkpoints past it, or a later
    ``checkpoint/``) that state is first moved aside, whole
    (:func:`~plume_jax.train.run_folder.set_aside_later_state`); rows past
    the checkpoint are then dropped by an atomic replacement (after a kill
    they are trained again, bit for bit). Returns the metrics rows kept and
    the folder the later state went to (or None)."""
    make_out_dir(out)
    if point is None:
        _write_config(out, config)
        return None, None
    aside = None
    if out.resolve() == point.run_dir.resolve():
        rows = read_jsonl(out / "metrics.jsonl")
        settle_best(out)  # a best/ swap a kill cut short, finished before it is set aside
        aside = set_aside_later_state(out, point.update, point.checkpoint, rows)
        kept = [r for r in rows if int(r["update"]) <= point.update]
        if aside is None and point.update == point.num_updates < config.num_updates:
            keep_finished_run(out, point)
    else:
        kept = rows_up_to(point.run_dir / "metrics.jsonl", point.update)
        copy_evaluations(point.run_dir, out, point.update)
    trim_evaluations(out, point.update)
    write_jsonl(out / "metrics.jsonl", kept)
    _write_config(out, config)
    return kept, aside


def keep_finished_run(out: pathlib.Path, point: ResumePoint) -> None:
    """A finished run continued with a larger budget: keep its final state —
    the checkpoint as ``checkpoints/update_<N>/`` (as ``run.checkpoint_every``
    keeps them) and the policy as ``checkpoints/update_<N>/policy/`` — before
    the continuation replaces ``checkpoint/`` and ``policy/``."""
    import shutil

    dest = out / "checkpoints" / f"update_{point.update:08d}"
    if not dest.exists():
        tmp = out / "checkpoints" / f".update_{point.update:08d}.copy"
        if tmp.exists():
            shutil.rmtree(tmp)
        shutil.copytree(point.checkpoint, tmp)
        if (out / "policy").is_dir():
            shutil.copytree(out / "policy", tmp / "policy")
        tmp.rename(dest)


def _write_config(out: pathlib.Path, config: TrainConfig) -> None:
    write_text(out / "config.yaml", dump_yaml(config.to_dict()))


def print_summary(summary: dict[str, Any], stream: TextIO | None = None) -> None:
    import sys

    stream = stream or sys.stdout
    p = functools.partial(print, file=stream)
    p(f"trained {summary['env_steps_this_call']:,} env steps ({summary['updates_this_call']} "
      f"updates, {summary['env_steps_total']:,} in total) on {summary['env']}")
    sps = summary["steps_per_second_excl_compile"]
    p(f"compile {summary['compile_seconds']:.1f} s, train {summary['train_seconds']:.1f} s"
      + (f" ({sps:,.0f} env steps/s excluding compile)" if sps else ""))
    ev = summary.get("evaluation")
    if ev:
        kind = "greedy" if ev["greedy"] else "sampled"
        steps = ev["mean_steps_to_goal"]
        p(f"{kind} evaluation on {ev['episodes']} fresh episodes (seed {ev['seed']}): "
          f"success {100 * ev['success_rate']:.1f}% ({ev['successes']}/{ev['episodes']})"
          + (f", mean steps to goal {steps:.1f}" if steps is not None else ""))
        if ev.get("mean_steps_to_first_arrival") is not None:
            p(f"first arrival after {ev['mean_steps_to_first_arrival']:.1f} steps on average; "
              f"{ev['mean_arrivals']:.2f} agents at the goal and {ev['mean_collisions']:.1f} "
              "blocked moves per episode")
    for note in summary.get("notes", []):
        p(f"note: {note}")
    p(f"wall time {summary['wall_seconds']:.1f} s")
