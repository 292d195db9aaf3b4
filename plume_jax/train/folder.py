"""The run folder: what ``train`` and ``sweep`` write, and every rule for
writing and resuming it (docs/training.md states them for users), followed
by :func:`plume_jax.train.run.run` through a :class:`SingleRun` or a
:class:`Sweep`. Nothing is replaced silently: a command writes into a new or
empty folder, or as ``--resume`` / ``--overwrite`` says, checked first under
the folder's :class:`FolderLock`. A folder changes only by appending or by
atomic replacement, nothing is deleted before what replaces it is durable,
and what a resume would drop is moved aside, whole (:func:`set_aside_later_state`).
``evaluations.jsonl`` is the truth about ``best/`` (:func:`settle_best`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import math
import os
import pathlib
import platform
import secrets
import shutil
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Iterable

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.files import atomic_write, fsync_folder
from plume_jax.files.safe_io import load_json_file
from plume_jax.train.checkpoint import checkpoint_update, find_checkpoint, \
    partial_folder_prefix, read_checkpoint, read_meta
from plume_jax.train.config import RESUME_MAY_CHANGE, TrainConfig, current_form, dump_yaml, \
    resume_differences, train_config
from plume_jax.train.distributed import is_main_process
from plume_jax.train.member_names import checkpoint_member_names, member_folders, \
    rename_legacy_member_folders, row_names
from plume_jax.train.progress import RunLoggers, append_jsonl, read_jsonl, rows_up_to, \
    trim_jsonl, write_jsonl

#: A :class:`plume_jax.train.loop.Program` (the loop imports this module, not the reverse).
Program = Any

#: A member's periodic evaluation rows and best policy, in its run folder.
EVALUATIONS, BEST = "evaluations.jsonl", "best"
#: ``best/``'s swap folders (:func:`settle_best`): a new best before its row
#: commits it, the previous best during the swap, the prefix of one being deleted.
PARTIAL, OLD, DROP = f".{BEST}.partial", f".{BEST}.old", f".{BEST}.drop-"
#: The lock file of a run or sweep folder (:class:`FolderLock`).
LOCK_NAME = ".plume_jax.lock"


@dataclasses.dataclass(frozen=True)
class Output:
    """One entry a command writes into its folder: ``name`` (a folder ends in
    ``/``), what it holds, and ``when``: the setting that makes it (``""``: always)."""

    name: str
    what: str
    when: str = ""

    def written(self, config: Any) -> bool:
        """Whether a run of ``config`` (a ``TrainConfig``) writes it."""
        section, _, key = self.when.partition(".")
        return not self.when or bool(getattr(config, section)[key])


#: What ``train`` writes into a run folder, stated once: ``--overwrite``
#: deletes these (:data:`RUN_OUTPUTS`), the CLI's closing line names them
#: (:func:`outputs_line`), docs/training.md's table lists them (a test
#: compares). A sweep member's folder holds the same, but for the figure.
RUN_FILES = (
    Output("config.yaml", "the resolved config, every default spelled out"),
    Output("metrics.jsonl", "one JSON object per update"),
    Output("metrics.csv", "the same rows as a table"),
    Output("learning_curve.png", "success rate and mean return against env steps"),
    Output("tensorboard/", "TensorBoard event files", "run.tensorboard"),
    Output("wandb/", "Weights & Biases files (and wandb_run_id, the run W&B resumes)",
           "run.wandb_project"),
    Output("checkpoint/", "the latest checkpoint (resume with --resume)"),
    Output("checkpoints/", "checkpoints kept every run.checkpoint_every updates "
           "(update_<N>/)", "run.checkpoint_every"),
    Output("policy/", "the exported policy (agents.trained.TrainedPolicy.load)"),
    Output(EVALUATIONS, "the periodic evaluations, one row each", "eval.every"),
    Output("best/", "the best policy of those evaluations, with its row", "eval.every"),
    Output("summary.json", "budget, timings, throughput, evaluation"),
)

#: What ``--overwrite`` deletes from a run folder (``*``: any token):
#: :data:`RUN_FILES`, ``wandb_run_id`` and the hidden folders a kill may leave.
RUN_OUTPUTS = (*(f.name.rstrip("/") for f in RUN_FILES), "wandb_run_id",
               f"{partial_folder_prefix('checkpoint')}*", PARTIAL, OLD, f"{DROP}*")

#: What ``sweep`` writes into its folder, stated once (the code, the CLI's
#: closing line and the sweep module's docs read it).
SWEEP_FILES = (
    Output("sweep.yaml", "the resolved sweep (base config, grid, mode)"),
    Output("summary.md", "settings ranked by greedy evaluation success (mean and spread over "
           "seeds), the best named; the programs"),
    Output("results.csv", "one row per member"),
    Output("results.json", "everything: programs, members, ranked settings"),
    Output("metrics.jsonl", "per-update metrics of every member"),
    Output("eval_success.png", "greedy success per setting (seeds as dots)"),
    Output("eval_steps.png", "mean steps to the goal per setting"),
    Output("train_success.png", "training success rate per setting (seed mean, range)"),
    Output("train_return.png", "training return per setting (likewise)"),
    Output("members/", "one run folder per member (members/<name>/), named by its grid values"),
    Output("programs/", "programs/<k>/checkpoint/: program k's members' stacked training "
           "state; sweep --resume continues from them"),
)

#: What ``sweep --overwrite`` deletes.
SWEEP_OUTPUTS = tuple(f.name.rstrip("/") for f in SWEEP_FILES)


def outputs_line(folder: pathlib.Path, files: Iterable[Output], config: Any = None) -> str:
    """The CLI's closing line: ``outputs in <folder>/ (<the entries written>)``
    (those ``config``, a ``TrainConfig``, writes; every one without it)."""
    names = [f.name for f in files if config is None or f.written(config)]
    return f"outputs in {folder}/ ({', '.join(names)})"


def check_out_dir(out: pathlib.Path, *, overwrite: bool, resuming_here: bool = False,
                  command: str = "train") -> None:
    """``ValidationError`` (naming ``--out``) unless ``out`` may be written:
    it does not exist, is an empty folder, is the folder of the run being
    resumed (``resuming_here``), or ``overwrite`` is set."""
    if out.exists() and not out.is_dir():
        raise ValidationError.for_parameter("--out", str(out), "a folder (this is a file)")
    if resuming_here and overwrite:
        raise ValidationError.for_parameter(
            "--overwrite", True, f"not set when resuming in the run's own folder {out} "
            "(it would delete the checkpoint being resumed)")
    if resuming_here or overwrite or not out.exists():
        return
    entries = sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME)
    if entries:
        shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        hint = (f"continue the run there with --resume {out}, " if command == "train" else "")
        raise ValidationError.for_parameter(
            "--out", str(out), f"a new or empty folder: it holds {len(entries)} entries "
            f"({shown}); {hint}replace the outputs of plume-jax {command} there with "
            "--overwrite, or choose another folder")


def clear_outputs(out: pathlib.Path, names: Iterable[str]) -> list[str]:
    """Delete the entries ``names`` of ``out`` that exist (a name with ``*``
    that is no entry itself: every entry it matches); returns those deleted."""
    removed = []
    for pattern in names:
        exact = out / pattern
        for path in (sorted(out.glob(pattern)) if "*" in pattern and not (
                exact.exists() or exact.is_symlink()) else [exact]):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            else:
                continue
            removed.append(path.name)
    return removed


def make_out_dir(out: pathlib.Path) -> None:
    """Create ``out``; ``ValidationError`` naming ``--out`` if that fails."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError.for_parameter(
            "--out", str(out), f"a folder that can be created ({exc.strerror or exc})") from None


class FolderLock:
    """An exclusive ``fcntl.flock`` on a run or sweep folder, which the kernel
    releases when the holder ends, however (kill -9 included): never stale.
    ``.plume_jax.lock`` names the holder in the ``StateError`` another process
    gets. ``folder`` is created if needed, and removed on :meth:`release` if
    still empty. Where ``fcntl`` does not exist (Windows) nothing is locked."""

    def __init__(self, folder: pathlib.Path, command: str):
        self.folder = folder
        self.created = not folder.exists()
        make_out_dir(folder)
        self.path = folder / LOCK_NAME
        self.fd: int | None = None
        try:
            import fcntl
        except ImportError:  # no flock (Windows): the folder is not locked
            return
        self.fd = os.open(folder, os.O_RDONLY)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            self.fd = None
            try:
                holder = self.path.read_text(errors="replace")[:300].strip() or "unknown"
            except OSError:
                holder = "unknown"
            raise StateError(
                f"{folder} is in use by another plume-jax process ({holder}): wait for it to "
                "finish or stop it (its lock ends with it), or use another folder") from None
        try:
            self.path.write_text(
                f"pid {os.getpid()} on {platform.node()}, plume-jax {command}, since "
                f"{dt.datetime.now().isoformat(timespec='seconds')}\n")
        except OSError:
            pass  # a read-only folder: the lock holds; the run's own checks will say why

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self.fd is not None:
            import fcntl

            self.path.unlink(missing_ok=True)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
        if self.created and self.folder.is_dir() and not any(self.folder.iterdir()):
            self.folder.rmdir()

    def __enter__(self) -> "FolderLock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def check_writable_logdir(folder: pathlib.Path) -> None:
    """``ValidationError`` unless ``folder/tensorboard`` is (or can be made) a
    real folder this process can write: it never fails a run half way through."""
    path, parameter = folder / "tensorboard", "run.tensorboard"
    target = path if path.exists() else folder
    problem = ("is a symbolic link" if path.is_symlink()
               else "is a file" if path.exists() and not path.is_dir()
               else "is not writable" if target.exists()
               and not os.access(target, os.W_OK | os.X_OK) else None)
    if problem is None and path.exists():
        try:
            probe = path / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            problem = f"cannot be written: {exc.strerror or exc}"
    if problem is not None:
        raise ValidationError.for_parameter(
            parameter, True, f"a writable folder {path} for the event files (it {problem}); "
            f"fix it, or set {parameter}: false")


def set_aside_later_state(out: pathlib.Path, update: int, checkpoint: pathlib.Path,
                          rows: list[dict[str, Any]]) -> pathlib.Path | None:
    """Before a run folder resumes from ``checkpoint`` at ``update`` while it
    holds a later state (kept checkpoints past it, or a later ``checkpoint/``):
    move that state aside, whole, to ``out/superseded/after_update_<N>-<time>/``
    and make ``checkpoint/`` the resumed one, by copies and atomic renames
    only, so a kill at any moment loses nothing. Returns that folder (None:
    there was no later state); ``rows``: the folder's metrics rows."""
    kept_dir, current = out / "checkpoints", out / "checkpoint"
    later = sorted(p for p in kept_dir.glob("update_*") if p.name[7:].isdigit()
                   and int(p.name[7:]) > update) if kept_dir.is_dir() else []
    current_later = False
    if current.is_dir() and current.resolve() != checkpoint.resolve():
        try:
            current_later = checkpoint_update(current) > update  # runner.msgpack's own
        except ValidationError:
            current_later = True  # damaged: keep it aside rather than lose it
    if not later and not current_later:
        return None
    stamp = f"after_update_{update:08d}-{dt.datetime.now().strftime('%Y%m%dT%H%M%S')}"
    dest, n = out / "superseded" / stamp, 1
    while dest.exists():
        n += 1
        dest = out / "superseded" / f"{stamp}-{n}"
    dest.mkdir(parents=True)
    for name in ("metrics.jsonl", "metrics.csv", "summary.json", EVALUATIONS):
        if (out / name).is_file():
            shutil.copy2(out / name, dest / name)
    for name in ("policy", BEST):
        if (out / name).is_dir():
            shutil.copytree(out / name, dest / name)
    if later:
        (dest / "checkpoints").mkdir()
        for folder in later:
            os.replace(folder, dest / "checkpoints" / folder.name)
    if current_later:
        fresh = out / ".checkpoint.resumed"
        if fresh.exists():
            shutil.rmtree(fresh)
        source = dest / "checkpoints" / checkpoint.name if checkpoint.parent == kept_dir \
            and not checkpoint.exists() else checkpoint
        shutil.copytree(source, fresh)
        os.replace(current, dest / "checkpoint")
        os.replace(fresh, current)
    (dest / "README.txt").write_text(
        f"This run was resumed from update {update} ({checkpoint}) while it held a later "
        f"state; that later state was moved here, whole, instead of being deleted.\n"
        f"Metrics rows of updates after {update}: "
        f"{sum(1 for r in rows if int(r.get('update', 0)) > update)}.\n")
    return dest


# ------------------------------------------------------------------ resuming
@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run starts: the checkpoint, its run folder, the update
    it holds, the budget it was trained for (updates) and its config."""

    checkpoint: pathlib.Path
    run_dir: pathlib.Path
    update: int
    num_updates: int
    config: dict[str, Any]


def resume_point(resume: str | pathlib.Path, config: TrainConfig) -> ResumePoint:
    """Where ``config`` resumes from ``resume`` (a run or checkpoint folder);
    ``ValidationError`` unless the checkpoint is whole, its config differs
    only in ``RESUME_MAY_CHANGE`` and the budget covers the updates done."""
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


def resume_notes(config: TrainConfig, point: ResumePoint) -> list[str]:
    """What resuming at ``point`` under ``config``'s budget does to the
    algorithm's settings (``Algorithm.resume_notes``)."""
    from plume_jax.train.algorithms.base import algorithm_class

    algorithm = algorithm_class(config.algo["algorithm"], "algo.algorithm")
    return algorithm.resume_notes(config.algo, point.update, point.num_updates,
                                  config.num_updates)


def keep_finished_run(out: pathlib.Path, point: ResumePoint) -> None:
    """A finished run continued with a larger budget: keep its checkpoint and
    policy as ``checkpoints/update_<N>/`` before the continuation replaces them."""
    dest = out / "checkpoints" / f"update_{point.update:08d}"
    if not dest.exists():
        tmp = out / "checkpoints" / f".update_{point.update:08d}.copy"
        if tmp.exists():
            shutil.rmtree(tmp)
        shutil.copytree(point.checkpoint, tmp)
        if (out / "policy").is_dir():
            shutil.copytree(out / "policy", tmp / "policy")
        tmp.rename(dest)


def member_rows(members_dir: pathlib.Path, name: str, done: int,
                names: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The metrics rows of sweep member ``name`` for updates 1..``done``: from
    its run folder or, when that lost rows, from the sweep's ``metrics.jsonl``
    (naming it ``name`` or, an older sweep's, one of ``names``); else ``StateError``."""
    every = set(range(1, done + 1))
    rows = rows_up_to(members_dir / name / "metrics.jsonl", done)
    if {int(r["update"]) for r in rows} >= every:
        return rows
    sweep_rows = [{k: v for k, v in r.items() if k not in ("member", "name")}
                  for r in read_jsonl(members_dir.parent / "metrics.jsonl")
                  if r.get("name") in (name, *names) and int(r["update"]) <= done]
    if {int(r["update"]) for r in sweep_rows} >= every:
        return sweep_rows
    raise StateError(
        f"sweep --resume: member {name!r} has metrics rows for {len(rows)} of the {done} updates "
        f"its program's checkpoint holds (members/{name}/metrics.jsonl was deleted or cut), and "
        "the sweep's metrics.jsonl does not hold them either; restore the file, or run the "
        "sweep anew with --overwrite")


def check_members_not_ahead(out: pathlib.Path, sweep: Any,
                             folders: list[pathlib.Path]) -> None:
    """``ValidationError`` naming a member whose run folder (of ``folders``) was
    trained beyond the sweep's budget: resuming the sweep would rewind it."""
    for cfg, name, folder in zip(sweep.configs, sweep.names, folders):
        ckpt = folder / "checkpoint"
        if not (ckpt / "runner.msgpack").exists():
            continue
        try:  # the update inside runner.msgpack, not meta.json's copy
            update = checkpoint_update(ckpt)
        except ValidationError:
            continue
        if update > cfg.num_updates:
            raise ValidationError.for_parameter(
                "--resume", str(out),
                f"a sweep whose members are at most at its budget ({cfg.num_updates} updates): "
                f"member {name!r} was trained further, to {update} updates (plume-jax train "
                f"--resume); resuming the sweep would rewind it. Move that member's folder out "
                f"of {out / 'members'} (it is a run folder of its own), or set "
                f"base.algo.total_steps in {out / 'sweep.yaml'} to at least "
                f"{update * cfg.steps_per_update} (sweep --resume takes no --set)")


# ------------------------------------------------------------------ the two layouts
@dataclasses.dataclass
class Start:
    """What a program starts from: each member's metrics rows so far, its live
    loggers (None: logged when it finishes), notes for the user."""

    rows: list[list[dict[str, Any]]]
    loggers: list[RunLoggers | None]
    notes: list[str] = dataclasses.field(default_factory=list)


class RunFolders:
    """The folder rules of one command, its methods from :meth:`locked` on in
    the order :func:`plume_jax.train.run.run` calls them. ``out`` None: nothing
    written or resumed; ``outputs``: what ``--overwrite`` deletes; ``unit``: of
    the progress bar; ``figure``: each member gets ``learning_curve.png``."""

    command = ""
    outputs: tuple[str, ...] = ()
    unit = "steps"
    figure = False

    def __init__(self, out: pathlib.Path | None):
        self.out = out

    @property
    def resume_command(self) -> str:
        """What continues an interrupted run (the ``Interrupted`` message)."""
        if self.out is None:
            return f"(no {self.command} folder: nothing was saved)"
        return f"plume-jax {self.command} --resume {self.out}"

    def member_folders(self) -> list[pathlib.Path]:
        """The members' run folders (each locked too, if it exists)."""
        return [] if self.out is None else [self.out]

    @contextlib.contextmanager
    def locked(self, overwrite: bool) -> Iterator[dict[pathlib.Path, FolderLock]]:
        """Hold the locks of the folder and of its existing member folders
        (unless ``overwrite``: those go); yields the members' locks by folder."""
        assert self.out is not None
        if self.out.exists() and not self.out.is_dir():
            raise ValidationError.for_parameter("--out", str(self.out), "a folder (this is a file)")
        with FolderLock(self.out, self.command), contextlib.ExitStack() as stack:
            locks = {}
            for folder in [] if overwrite else self.member_folders():
                if folder.is_dir() and folder.resolve() != self.out.resolve():
                    locks[folder] = stack.enter_context(FolderLock(folder, self.command))
            yield locks

    def check(self, overwrite: bool) -> None:
        """Refuse (``ValidationError`` / ``StateError``) before anything moves
        unless the folder may be written and a resume may read what it needs."""

    def migrate(self, locks: Mapping[pathlib.Path, FolderLock]) -> None:
        """Bring an older folder up to date (process 0, after the checks)."""

    def checkpoint_of(self, p: Program) -> pathlib.Path | None:
        """The checkpoint program ``p`` resumes from, or None (a fresh start)."""
        return None

    def as_saved(self, p: Program, checkpoint: pathlib.Path) -> Program:
        """``p`` as ``checkpoint`` was written for it (what it is checked against)."""
        return p

    def prepare(self, overwrite: bool) -> None:
        """Process 0, after every check: delete the outputs of an earlier
        run (``overwrite``) and create the folder."""
        assert self.out is not None
        if overwrite and self.out.exists():
            clear_outputs(self.out, self.outputs)
        make_out_dir(self.out)

    def notes(self) -> list[str]:
        """Notes on what the run will do (shown first, kept in summary.json)."""
        return []

    def start(self, p: Program, resumed_at: int | None) -> Start:
        """``p``'s start (``resumed_at``: the checkpoint's update; process 0 writes)."""
        return Start([[] for _ in p.runs], [None] * len(p.runs))

    def logs(self, p: Program, j: int, live: RunLoggers | None,
             rows: list[dict[str, Any]]) -> contextlib.AbstractContextManager[Any]:
        """The loggers member ``j``'s final figures go to (given its ``rows``)."""
        return contextlib.nullcontext(live)


class SingleRun(RunFolders):
    """``plume-jax train``: the run folder is ``out`` (:data:`RUN_FILES`);
    ``resume``: a run or checkpoint folder to continue, there or in ``out``."""

    command = "train"
    outputs = RUN_OUTPUTS
    figure = True

    def __init__(self, out: pathlib.Path | None, config: TrainConfig,
                 resume: str | pathlib.Path | None = None):
        super().__init__(out)
        self.config = config
        self.resume = resume
        self.point: ResumePoint | None = None

    def check(self, overwrite: bool) -> None:
        point = self.point = (resume_point(self.resume, self.config)
                              if self.resume is not None else None)
        out = self.out
        if out is None:
            return
        here = point is not None and out.resolve() == point.run_dir.resolve()
        check_out_dir(out, overwrite=overwrite, resuming_here=here)
        if self.config.run["tensorboard"] and is_main_process():
            check_writable_logdir(out)
        if point is None:
            return
        # rows are appended before each checkpoint: a file that lacks some lost them
        path = point.run_dir / "metrics.jsonl"
        have = {int(r["update"]) for r in read_jsonl(path)}
        missing = [u for u in range(1, point.update + 1) if u not in have]
        if missing:
            raise StateError(
                f"--resume {point.checkpoint}: {path} lacks the metrics rows of {len(missing)} "
                f"of the {point.update} updates the checkpoint has trained (first missing: "
                f"update {missing[0]}); resuming would hide their loss. Restore the file, or "
                "train anew with --overwrite")
        check_best(point.run_dir)  # everything the resume reads, before anything moves

    def notes(self) -> list[str]:
        return resume_notes(self.config, self.point) if self.point else []

    def checkpoint_of(self, p: Program) -> pathlib.Path | None:
        return self.point.checkpoint if self.point is not None else None

    def start(self, p: Program, resumed_at: int | None) -> Start:
        """Write the config; on resume first set a later state aside, then drop
        the rows past the checkpoint by atomic replacements (write-ahead: after
        a kill they are trained again, bit for bit)."""
        out, point = self.out, self.point
        if out is None or not is_main_process():
            return Start([[]], [None])
        make_out_dir(out)
        history: list[dict[str, Any]] | None = None
        notes = []
        if point is not None:
            if out.resolve() == point.run_dir.resolve():
                rows = read_jsonl(out / "metrics.jsonl")
                settle_best(out)  # a swap a kill cut short, finished before it is set aside
                aside = set_aside_later_state(out, point.update, point.checkpoint, rows)
                history = [r for r in rows if int(r["update"]) <= point.update]
                if aside is not None:
                    notes.append(f"resumed from update {point.update} while this folder held a "
                                 "later state: that state (metrics, checkpoints, policy) was "
                                 f"moved, whole, to {aside}")
                elif point.update == point.num_updates < self.config.num_updates:
                    keep_finished_run(out, point)
            else:
                history = rows_up_to(point.run_dir / "metrics.jsonl", point.update)
                copy_evaluations(point.run_dir, out, point.update)
            trim_evaluations(out, point.update)
            write_jsonl(out / "metrics.jsonl", history)
        atomic_write(out / "config.yaml", dump_yaml(self.config.to_dict()))
        loggers = RunLoggers(out, tensorboard=self.config.run["tensorboard"],
                             wandb_project=self.config.run["wandb_project"], name=out.name,
                             config=self.config.to_dict(), history=history)
        if history is not None:  # TensorBoard was written anew from the kept rows
            for row in replay_rows(out):
                loggers.log_periodic_evaluation(row, tensorboard_only=True)
        return Start([[]], [loggers], notes)


class Sweep(RunFolders):
    """``plume-jax sweep``: ``out`` (:data:`SWEEP_FILES`) holds a run folder per
    member (``members/<name>/``) and a checkpoint folder per program
    (``programs/<k>/``), from which ``resume`` continues; ``sweep``: a ``SweepConfig``."""

    command = "sweep"
    outputs = SWEEP_OUTPUTS
    unit = "member steps"

    def __init__(self, out: pathlib.Path | None, sweep: Any, resume: bool = False):
        if resume and out is None:
            raise ValidationError.for_parameter("out_dir", None, "the folder of the sweep to resume")
        super().__init__(out)
        self.sweep = sweep
        self.resume = resume

    def member_folders(self) -> list[pathlib.Path]:
        return [] if self.out is None else member_folders(self.out, self.sweep, resume=self.resume)

    def check(self, overwrite: bool) -> None:
        out = self.out
        if out is None:
            return
        check_out_dir(out, overwrite=overwrite, resuming_here=self.resume, command="sweep")
        folders = self.member_folders()
        if self.resume:
            check_members_not_ahead(out, self.sweep, folders)
            for folder in folders:  # what the resume reads, before anything moves
                if folder.is_dir():
                    check_best(folder)
        if is_main_process():
            for cfg, folder in zip(self.sweep.configs, folders):
                if cfg.run["tensorboard"] and folder.is_dir():
                    check_writable_logdir(folder)

    def migrate(self, locks: Mapping[pathlib.Path, FolderLock]) -> None:
        if self.resume and self.out is not None:  # the first change, before the others read
            rename_legacy_member_folders(self.out, self.sweep, locks)

    def checkpoint_of(self, p: Program) -> pathlib.Path | None:
        checkpoint = p.folder / "checkpoint" if p.folder is not None else None
        return checkpoint if self.resume and checkpoint is not None and checkpoint.exists() \
            else None

    def as_saved(self, p: Program, checkpoint: pathlib.Path) -> Program:
        names = checkpoint_member_names(read_meta(checkpoint), self.sweep, p.members)
        if names != [m.name for m in p.runs]:  # checked against the names it was written with
            p = dataclasses.replace(p, runs=[dataclasses.replace(m, name=n)
                                             for m, n in zip(p.runs, names)])
        return p

    def prepare(self, overwrite: bool) -> None:
        super().prepare(overwrite)
        out, sweep = self.out, self.sweep
        assert out is not None
        (out / "sweep.yaml").write_text(dump_yaml({"base": sweep.base.to_dict(),
                                                   "grid": sweep.grid, "mode": sweep.mode}))
        for cfg, name in zip(sweep.configs, sweep.names):
            make_out_dir(out / "members" / name)
            (out / "members" / name / "config.yaml").write_text(dump_yaml(cfg.to_dict()))

    def start(self, p: Program, resumed_at: int | None) -> Start:
        """Resumed: each member's rows up to ``resumed_at``, its files trimmed to
        them and the program folder's later state set aside. Fresh: rows of a
        killed attempt that reached no checkpoint go."""
        if resumed_at is not None:
            assert p.folder is not None  # resumed from the checkpoint in its folder
            names = row_names(self.sweep)
            rows = [member_rows(p.folder.parent.parent / "members", m.name, resumed_at,
                                names[i]) for m, i in zip(p.runs, p.members)]
            if is_main_process():  # reads; process 0 writes the files
                for m, kept in zip(p.runs, rows):
                    assert m.folder is not None  # a program with a folder writes every member
                    make_out_dir(m.folder)
                    write_jsonl(m.folder / "metrics.jsonl", kept)
                    trim_evaluations(m.folder, resumed_at)
                set_aside_later_state(p.folder, resumed_at, p.folder / "checkpoint", [])
            return Start(rows, [None] * len(p.runs))
        if p.folder is not None and is_main_process():
            for m in p.runs:
                if m.folder is not None:
                    (m.folder / "metrics.jsonl").unlink(missing_ok=True)
        return super().start(p, resumed_at)

    def logs(self, p: Program, j: int, live: RunLoggers | None,
             rows: list[dict[str, Any]]) -> contextlib.AbstractContextManager[Any]:
        """Fresh loggers for member ``j``, given all its ``rows`` (W&B holds one
        run at a time, so members log when they finish)."""
        member = p.runs[j]
        assert member.folder is not None and self.out is not None
        cfg = member.config
        loggers = RunLoggers(member.folder, tensorboard=cfg.run["tensorboard"],
                             wandb_project=cfg.run["wandb_project"],
                             name=f"{self.out.name}/{member.name}", config=cfg.to_dict(),
                             group=self.out.name, history=[])
        loggers.log_rows(rows)
        return loggers


# ------------------------------------------------------------------ the best policy
def better(row: dict[str, Any], best: dict[str, Any] | None) -> bool:
    """Whether evaluation ``row`` beats ``best`` (None: anything does): a
    higher success rate, or the same and fewer mean steps to the goal."""
    if best is None:
        return True
    if row["success_rate"] != best["success_rate"]:
        return row["success_rate"] > best["success_rate"]
    steps = [math.inf if r.get("mean_steps_to_goal") is None else float(r["mean_steps_to_goal"])
             for r in (row, best)]
    return steps[0] < steps[1]


def _checked_row(row: Any, where: str) -> dict[str, Any]:
    """``row`` if :func:`better` can compare it; else ``ValidationError`` naming ``where``."""
    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value)

    ok = (isinstance(row, dict) and isinstance(row.get("update"), int)
          and not isinstance(row.get("update"), bool) and row["update"] >= 0
          and number(row.get("success_rate"))
          and (row.get("mean_steps_to_goal") is None or number(row["mean_steps_to_goal"])))
    if not ok:
        raise ValidationError.for_parameter(
            "evaluation", where, "a periodic evaluation row (a JSON object with an integer "
            "'update', a number 'success_rate' and a number or null 'mean_steps_to_goal'); "
            "restore the file, or move that folder out of the run folder")
    return row


def _policy_row(policy: pathlib.Path) -> dict[str, Any] | None:
    """The checked row in ``policy/evaluation.json`` (None: no such folder)."""
    if not policy.exists():
        return None
    path = policy / "evaluation.json"
    try:
        row = load_json_file(path, f"{policy.name}/evaluation.json")
    except ValidationError as exc:
        raise ValidationError.for_parameter(
            "evaluation", str(path), f"the row of the policy in {policy.name}/ (it is missing "
            f"or damaged: {exc}); restore it, or move {policy.name}/ out of the run folder"
        ) from None
    if not (policy / "policy.npz").is_file():
        raise ValidationError.for_parameter(
            "evaluation", str(policy), "a best policy folder holding policy.npz beside its "
            "evaluation.json; restore it, or move it out of the run folder")
    return _checked_row(row, str(path))


def best_row(folder: pathlib.Path) -> dict[str, Any] | None:
    """The checked row of the policy in ``folder/best/`` (None: there is none)."""
    return _policy_row(folder / BEST)


def recorded_best(folder: pathlib.Path, up_to: int | None = None) -> dict[str, Any] | None:
    """The best evaluation so far: the last row of ``evaluations.jsonl``
    flagged ``best`` (of updates ``<= up_to`` when given), checked, or None."""
    flagged = [r for r in replay_rows(folder) if r.get("best") is True
               and (up_to is None or int(r["update"]) <= up_to)]
    return _checked_row(flagged[-1], str(folder / EVALUATIONS)) if flagged else None


def _best_plan(folder: pathlib.Path, up_to: int | None = None
               ) -> tuple[dict[str, Any] | None, str | None, list[str]]:
    """What :func:`settle_best` does, read and checked, nothing changed: ``(the
    recorded best row, the folder whose evaluation.json is that row or None,
    the folders to drop)``. A damaged folder (killed while written or deleted)
    is dropped, but a ``best/`` nothing replaces is refused (``ValidationError``)."""
    best = recorded_best(folder, up_to)
    found: dict[str, dict[str, Any]] = {}
    damaged: dict[str, ValidationError] = {}
    for name in (BEST, PARTIAL, OLD):
        try:
            row = _policy_row(folder / name)
        except ValidationError as exc:
            damaged[name] = exc
            continue
        if row is not None:
            found[name] = row
    leftovers = sorted(p.name for p in folder.glob(f"{DROP}*")  # a deletion a kill cut short
                       if p.is_dir() and not p.is_symlink())
    same = json.dumps(best, sort_keys=True)  # as JSON, so that a NaN figure matches itself
    holder = next((name for name, row in found.items()
                   if best is not None and json.dumps(row, sort_keys=True) == same), None)
    if holder is not None:
        return best, holder, [name for name in [*found, *damaged] if name != holder] + leftovers
    if BEST in damaged:  # nothing else holds the recorded best: best/ is not to be guessed at
        raise damaged[BEST]
    # the swap folders go (an uncommitted partial, an old best superseded, or
    # another run's), and so does a best/ past ``up_to`` (set aside before a resume)
    drop = [*damaged, *(name for name, row in found.items() if name != BEST
                        or (up_to is not None and row["update"] > up_to))]
    return best, None, drop + leftovers


def check_best(folder: pathlib.Path) -> None:
    """``ValidationError`` naming a damaged file :func:`settle_best` would read."""
    _best_plan(folder)


def settle_best(folder: pathlib.Path, up_to: int | None = None) -> dict[str, Any] | None:
    """Make ``best/`` hold the policy of the recorded best row (of updates
    ``<= up_to``), finishing or undoing a swap a kill cut short; returns that
    row. The folder whose ``evaluation.json`` is that row becomes ``best/`` by
    a rename (a swap folder no row commits is never adopted); the others are
    renamed to ``.best.drop-*``, then deleted, so a kill leaves only those."""
    best, holder, drop = _best_plan(folder, up_to)
    doomed = [_set_aside(folder / name) for name in drop]
    if holder in (PARTIAL, OLD):
        os.replace(folder / holder, folder / BEST)
    if doomed or holder in (PARTIAL, OLD):
        fsync_folder(folder)
    for path in doomed:
        shutil.rmtree(path)
    return best


def _set_aside(path: pathlib.Path) -> pathlib.Path:
    """``path`` renamed atomically to a unique ``.best.drop-*`` name beside
    it (unless it has one); the path it now has."""
    if path.name.startswith(DROP):
        return path
    aside = path.with_name(f"{DROP}{secrets.token_hex(6)}")
    os.rename(path, aside)
    return aside


def trim_evaluations(folder: pathlib.Path, update: int) -> None:
    """Before a run folder resumes at ``update`` (its later state set aside):
    drop the evaluation rows past it (atomically) and a ``best/`` found past it."""
    settle_best(folder)  # a swap a kill cut short, finished before anything is dropped
    trim_jsonl(folder / EVALUATIONS, update)
    settle_best(folder, update)


def copy_evaluations(source: pathlib.Path, folder: pathlib.Path, update: int) -> None:
    """A run resumed into ``folder`` from ``source``'s checkpoint at ``update``
    gets the evaluation rows up to it and the recorded best's policy by then."""
    _, holder, _ = _best_plan(source, update)
    if (source / EVALUATIONS).is_file():
        write_jsonl(folder / EVALUATIONS, rows_up_to(source / EVALUATIONS, update))
    if holder is not None and not (folder / BEST).exists():
        shutil.copytree(source / holder, folder / BEST)


def replay_rows(folder: pathlib.Path) -> list[dict[str, Any]]:
    """The periodic evaluation rows of a run folder (none: ``[]``)."""
    path = folder / EVALUATIONS
    return read_jsonl(path) if path.is_file() else []


def write_partial_best(folder: pathlib.Path, row: dict[str, Any],
                       write_policy: Callable[[pathlib.Path], Any]) -> None:
    """Write ``row``'s policy whole (``write_policy(folder/.best.partial)``),
    then its ``evaluation.json``: the swap :func:`settle_best` finishes."""
    tmp = folder / PARTIAL
    if tmp.exists():
        shutil.rmtree(_set_aside(tmp))
    write_policy(tmp)
    atomic_write(tmp / "evaluation.json", json.dumps(row, indent=2))


def record_evaluation(folder: pathlib.Path, row: dict[str, Any],
                      write_policy: Callable[[pathlib.Path], Any]) -> None:
    """Append evaluation ``row``; a new best (``row["best"]``) is written
    whole first (:func:`write_partial_best`), committed by it, then swapped in."""
    if row["best"]:
        write_partial_best(folder, row, write_policy)
    append_jsonl(folder / EVALUATIONS, [row])
    if row["best"]:
        settle_best(folder)
