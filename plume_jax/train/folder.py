"""The run folder: what ``train`` and ``sweep`` write, and every rule for
writing and resuming it. The run function (:func:`plume_jax.train.run.run`)
follows these rules through a :class:`SingleRun` or a :class:`Sweep` (the
two layouts); it knows neither layout.

Nothing is replaced silently. A command writes into a folder only if it is
new or empty, or if the user said what to do with what is there:
``--resume`` (continue the run in it) or ``--overwrite`` (delete the outputs
this command writes, :data:`RUN_OUTPUTS` / :data:`SWEEP_OUTPUTS`, then start
afresh; other files are left alone). The checks run before anything is
written, compiled or trained, holding the folder's :class:`FolderLock`.

A folder changes only by appending or by atomic replacement; nothing is
trimmed or deleted before what replaces it is durable; what a resume from
an older checkpoint would drop is moved aside, whole, under
``superseded/`` (:func:`set_aside_later_state`).

The periodic evaluations (``eval.every``, run by :mod:`plume_jax.train.loop`)
leave a row per evaluation in ``evaluations.jsonl`` and the best policy so
far in ``best/``. What is on disk is the truth, so a kill at any moment
loses nothing:

- the best so far is the last row of ``evaluations.jsonl`` flagged
  ``best`` (:func:`recorded_best`); a resumed run compares its next
  evaluations with that row, whatever ``best/`` holds. Best: the higher
  success rate, then the fewer mean steps to the goal (:func:`better`);
- a new best policy is written whole into ``.best.partial/`` (its
  ``evaluation.json`` last), then its row is appended (the commit), then it
  is swapped into ``best/`` by renames (:func:`record_evaluation`).
  :func:`settle_best` finishes or undoes a swap a kill interrupted: the
  folder whose ``evaluation.json`` is the committed row itself becomes
  ``best/``, an uncommitted ``.best.partial/`` is dropped (its evaluation is
  run again), a ``.best.old/`` goes once ``best/`` holds the committed
  policy, and a swap folder no row commits (another run's) is never
  adopted. A folder is dropped by renaming it to a unique ``.best.drop-*``
  name, then deleting it, so a kill part way through a deletion leaves only
  such a folder, which the next settle deletes;
- a resume drops rows (and a ``best/``) past the update it resumes from, as
  it drops metrics rows (:func:`trim_evaluations`).
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
from plume_jax.train.loggers import RunLoggers
from plume_jax.train.member_names import checkpoint_member_names, member_folders, \
    rename_legacy_member_folders, row_names
from plume_jax.train.progress import append_jsonl, read_jsonl, rows_up_to, trim_jsonl, \
    write_jsonl

#: A :class:`plume_jax.train.loop.Program` (the loop imports this module, not the reverse).
Program = Any

#: The file of a member's periodic evaluation rows, in its run folder.
EVALUATIONS = "evaluations.jsonl"
#: The folder of a member's best policy, in its run folder.
BEST = "best"
#: Where a new best policy is written before its row commits it, and where
#: the previous ``best/`` waits during the swap (:func:`settle_best`).
PARTIAL, OLD = f".{BEST}.partial", f".{BEST}.old"
#: The name prefix of a folder renamed aside to be deleted (:func:`settle_best`).
DROP = f".{BEST}.drop-"
#: Every name a run folder's best policy and its swap folders may have
#: (``*``: any token), for ``--overwrite`` to clear.
BEST_FOLDERS = (BEST, PARTIAL, OLD, f"{DROP}*")
#: The lock file of a run or sweep folder (:class:`FolderLock`).
LOCK_NAME = ".plume_jax.lock"
#: Where a resume from an older checkpoint moves the run's later state.
SUPERSEDED = "superseded"


@dataclasses.dataclass(frozen=True)
class Output:
    """One entry a command writes into its folder: ``name`` (a folder ends
    in ``/``), what it holds, and the setting that makes it (``when``, a
    dotted setting: written only when that setting is set; ``""``: always)."""

    name: str
    what: str
    when: str = ""

    def written(self, config: Any) -> bool:
        """Whether a run of ``config`` (a ``TrainConfig``) writes it."""
        if not self.when:
            return True
        section, key = self.when.split(".")
        return bool(getattr(config, section)[key])


#: What ``train`` writes into a run folder, stated once: the code deletes
#: these on ``--overwrite`` (:data:`RUN_OUTPUTS`), the CLI's closing line
#: names them (:func:`outputs_line`) and docs/training.md's table lists them
#: (a test compares). A sweep member's folder holds the same, but for the
#: figure.
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

#: What ``--overwrite`` deletes from a run folder (``*`` stands for any
#: token): :data:`RUN_FILES`, ``wandb_run_id`` and the hidden folders a kill
#: may leave (a first ``checkpoint/`` written whole, ``best/``'s swap folders).
RUN_OUTPUTS = (*(f.name.rstrip("/") for f in RUN_FILES), "wandb_run_id",
               f"{partial_folder_prefix('checkpoint')}*", *BEST_FOLDERS[1:])

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
    if resuming_here:
        if overwrite:
            raise ValidationError.for_parameter(
                "--overwrite", True, f"not set when resuming in the run's own folder {out} "
                "(it would delete the checkpoint being resumed)")
        return
    if overwrite or not out.exists():
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
    """Delete the entries ``names`` (files or folders) of ``out`` that
    exist (a name with ``*`` in it that is no entry itself: every entry it
    matches); returns the names deleted."""
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
    """An exclusive lock on a run or sweep folder for one process:
    ``fcntl.flock`` on the folder itself, while ``folder/.plume_jax.lock``
    names the holder (PID, host, command, start) for the others' message.

    A second ``train`` / ``sweep`` on the same folder gets a ``StateError``
    naming the holder's PID instead of interleaving its writes. The kernel
    releases the lock when the holder ends, however it ends (kill -9
    included), so a lock is never stale; a holder file a killed process left
    is only information, replaced by the next holder and removed on release.
    ``folder`` is created if needed (and removed again on :meth:`release` if
    this lock created it and it is still empty). Where ``fcntl`` does not
    exist (Windows) the folder is not locked.
    """

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
        if self.fd is None:
            if self.created and self.folder.is_dir() and not any(self.folder.iterdir()):
                self.folder.rmdir()
            return
        import fcntl

        self.path.unlink(missing_ok=True)
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None
        if self.created and not any(self.folder.iterdir()):
            self.folder.rmdir()

    def __enter__(self) -> "FolderLock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def check_writable_logdir(folder: pathlib.Path) -> None:
    """``ValidationError`` unless ``folder/tensorboard`` is (or can be made)
    a real folder this process can write: checked before a run changes
    anything, so an unwritable log folder never fails a run half-way through
    its resume."""
    path, parameter = folder / "tensorboard", "run.tensorboard"
    allowed = (f"a writable folder {path} for the event files (it {{}}); fix it, or set "
               f"{parameter}: false")
    if path.is_symlink():
        raise ValidationError.for_parameter(parameter, True, allowed.format("is a symbolic link"))
    if path.exists() and not path.is_dir():
        raise ValidationError.for_parameter(parameter, True, allowed.format("is a file"))
    target = path if path.exists() else folder
    if target.exists() and not os.access(target, os.W_OK | os.X_OK):
        raise ValidationError.for_parameter(parameter, True, allowed.format("is not writable"))
    if path.exists():
        try:
            probe = path / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise ValidationError.for_parameter(
                parameter, True, allowed.format(f"cannot be written: {exc.strerror or exc}")
            ) from None


def set_aside_later_state(out: pathlib.Path, update: int, checkpoint: pathlib.Path,
                          rows: list[dict[str, Any]]) -> pathlib.Path | None:
    """Before a run folder resumes from ``checkpoint`` at ``update`` while it
    holds a later state (kept checkpoints past ``update``, or a
    ``checkpoint/`` further on): move that later state aside, whole, to
    ``out/superseded/after_update_<N>-<time>/`` — the metrics (a full copy),
    the later kept checkpoints and ``checkpoint/`` (moved), the policy and
    summary (copied) — and make ``checkpoint/`` the resumed one. Every step
    is a copy or an atomic rename, so a kill at any moment loses nothing.
    Returns the folder written, or None when there was no later state (a
    run resumed from its own latest checkpoint keeps its folder)."""
    kept_dir = out / "checkpoints"
    later = sorted(p for p in kept_dir.glob("update_*") if p.name[7:].isdigit()
                   and int(p.name[7:]) > update) if kept_dir.is_dir() else []
    current = out / "checkpoint"
    current_later = False
    if current.is_dir() and current.resolve() != checkpoint.resolve():
        try:
            current_later = checkpoint_update(current) > update  # runner.msgpack's own
        except ValidationError:
            current_later = True  # damaged: keep it aside rather than lose it
    if not later and not current_later:
        return None
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    dest = out / SUPERSEDED / f"after_update_{update:08d}-{stamp}"
    n = 1
    while dest.exists():
        n += 1
        dest = out / SUPERSEDED / f"after_update_{update:08d}-{stamp}-{n}"
    dest.mkdir(parents=True)
    for name in ("metrics.jsonl", "metrics.csv", "summary.json", "evaluations.jsonl"):
        if (out / name).is_file():
            shutil.copy2(out / name, dest / name)
    for name in ("policy", "best"):
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


# ------------------------------------------------------------------ resuming a run
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


def resume_notes(config: TrainConfig, point: ResumePoint) -> list[str]:
    """What resuming at ``point`` under ``config``'s budget does to the
    algorithm's own settings (:meth:`Algorithm.resume_notes
    <plume_jax.train.algorithms.base.Algorithm.resume_notes>`: an annealed
    learning rate jumps when the budget changed); ``[]`` when nothing."""
    from plume_jax.train.algorithms.base import algorithm_class

    algorithm = algorithm_class(config.algo["algorithm"], "algo.algorithm")
    return algorithm.resume_notes(config.algo, point.update, point.num_updates,
                                  config.num_updates)


def check_metrics_cover(point: ResumePoint) -> None:
    """``StateError`` unless the resumed run's ``metrics.jsonl`` holds a row
    for every update up to the checkpoint's (rows are appended before each
    checkpoint is written, so a shorter file has lost rows: resuming would
    hide the loss)."""
    path = point.run_dir / "metrics.jsonl"
    have = {int(r["update"]) for r in read_jsonl(path)}
    missing = [u for u in range(1, point.update + 1) if u not in have]
    if missing:
        raise StateError(
            f"--resume {point.checkpoint}: {path} lacks the metrics rows of {len(missing)} of "
            f"the {point.update} updates the checkpoint has trained (first missing: update "
            f"{missing[0]}); resuming would hide their loss. Restore the file, or train anew "
            "with --overwrite")


def prepare_run_folder(out: pathlib.Path, config: TrainConfig, point: ResumePoint | None
                        ) -> tuple[list[dict[str, Any]] | None, pathlib.Path | None]:
    """Create the run folder and write its config; on resume make its metrics
    match the checkpoint. Write-ahead: a later state is first moved aside,
    whole (:func:`set_aside_later_state`); rows past the checkpoint are then
    dropped by an atomic replacement (after a kill they are trained again,
    bit for bit). Returns the metrics rows kept and the folder the later
    state went to (or None)."""
    make_out_dir(out)
    kept: list[dict[str, Any]] | None = None
    aside = None
    if point is not None:
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
    atomic_write(out / "config.yaml", dump_yaml(config.to_dict()))
    return kept, aside


def keep_finished_run(out: pathlib.Path, point: ResumePoint) -> None:
    """A finished run continued with a larger budget: keep its final state —
    the checkpoint as ``checkpoints/update_<N>/`` (as ``run.checkpoint_every``
    keeps them) and the policy as ``checkpoints/update_<N>/policy/`` — before
    the continuation replaces ``checkpoint/`` and ``policy/``."""
    dest = out / "checkpoints" / f"update_{point.update:08d}"
    if not dest.exists():
        tmp = out / "checkpoints" / f".update_{point.update:08d}.copy"
        if tmp.exists():
            shutil.rmtree(tmp)
        shutil.copytree(point.checkpoint, tmp)
        if (out / "policy").is_dir():
            shutil.copytree(out / "policy", tmp / "policy")
        tmp.rename(dest)


# ------------------------------------------------------------------ resuming a sweep
def resume_member_rows(p: Program, done: int, names: list[tuple[str, ...]]
                       ) -> list[list[dict[str, Any]]]:
    """Each member's metrics rows up to ``done``, the update of its program's
    checkpoint (already loaded and checked), their run folders'
    ``metrics.jsonl`` trimmed to them (atomic replacements, every row kept)
    and a later state of the program folder set aside. ``names``: the
    names each of the sweep's members has in the sweep's own metrics rows
    (:func:`~plume_jax.train.member_names.row_names`)."""
    assert p.folder is not None  # resumed from the checkpoint in its folder
    members_dir = p.folder.parent.parent / "members"
    rows = [member_rows(members_dir, m.name, done, names[i])
            for m, i in zip(p.runs, p.members)]
    if is_main_process():  # reads; process 0 writes the files
        for m, kept in zip(p.runs, rows):
            assert m.folder is not None  # a program with a folder writes every member
            make_out_dir(m.folder)
            write_jsonl(m.folder / "metrics.jsonl", kept)
            trim_evaluations(m.folder, done)
        set_aside_later_state(p.folder, done, p.folder / "checkpoint", [])
    return rows


def member_rows(members_dir: pathlib.Path, name: str, done: int,
                names: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The metrics rows of member ``name`` for updates 1..``done``: from its
    run folder, or — when that file was deleted or lost rows — from the
    sweep's own ``metrics.jsonl`` (written when the sweep last finished,
    naming the member ``name`` or one of ``names``: an older sweep's).
    ``StateError`` naming the member when neither holds them all."""
    def complete(rows: list[dict[str, Any]]) -> bool:
        return {int(r["update"]) for r in rows} >= set(range(1, done + 1))

    rows = rows_up_to(members_dir / name / "metrics.jsonl", done)
    if complete(rows):
        return rows
    sweep_rows = [{k: v for k, v in r.items() if k not in ("member", "name")}
                  for r in read_jsonl(members_dir.parent / "metrics.jsonl")
                  if r.get("name") in (name, *names) and int(r["update"]) <= done]
    if complete(sweep_rows):
        return sweep_rows
    raise StateError(
        f"sweep --resume: member {name!r} has metrics rows for {len(rows)} of the {done} updates "
        f"its program's checkpoint holds (members/{name}/metrics.jsonl was deleted or cut), and "
        "the sweep's metrics.jsonl does not hold them either; restore the file, or run the "
        "sweep anew with --overwrite")


def check_members_not_ahead(out: pathlib.Path, sweep: Any,
                             folders: list[pathlib.Path]) -> None:
    """``ValidationError`` naming a member whose run folder (``folders``,
    :func:`member_folders`) was trained further than this sweep trains it
    (``plume-jax train --resume members/<m>`` with a larger budget):
    resuming the sweep would rewind it to the sweep's budget and replace its
    checkpoint, metrics and policy."""
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
    """What a program starts from in its folders (:meth:`RunFolders.start`):
    each member's metrics rows so far, its live loggers (None: its logs are
    written when it finishes) and notes for the user."""

    rows: list[list[dict[str, Any]]]
    loggers: list[RunLoggers | None]
    notes: list[str] = dataclasses.field(default_factory=list)


class RunFolders:
    """The folder rules of one command: from :meth:`locked` on, its methods
    below are in the order the run function (:func:`plume_jax.train.run.run`)
    calls them (:meth:`start` and :meth:`logs` per program). ``out`` None:
    nothing is written, nothing resumed.

    Class attributes: ``command`` (``train`` / ``sweep``), ``outputs``
    (what ``--overwrite`` deletes), ``unit`` (of the progress bar),
    ``figure`` (each member gets ``learning_curve.png``)."""

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
        """Hold the folder's :class:`FolderLock` and those of the existing
        member folders in it (unless ``overwrite``: those go), so that a
        second process on any of them is refused, naming this one. Yields
        the member folders' locks by folder."""
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
        """``ValidationError`` / ``StateError`` unless the folder may be
        written and a resume may read what it needs, before anything moves."""

    def migrate(self, locks: Mapping[pathlib.Path, FolderLock]) -> None:
        """Bring an older folder up to date (process 0, after the checks)."""

    def checkpoint_of(self, p: Program) -> pathlib.Path | None:
        """The checkpoint program ``p`` resumes from, or None (a fresh start)."""
        return None

    def as_saved(self, p: Program, checkpoint: pathlib.Path) -> Program:
        """``p`` as ``checkpoint`` was written for it (what its runner is
        loaded and checked against)."""
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
        """``p``'s members' rows before training (``resumed_at``: the update
        of the checkpoint loaded, None for a fresh start; process 0 writes)."""
        return Start([[] for _ in p.runs], [None] * len(p.runs))

    def logs(self, p: Program, j: int, live: RunLoggers | None,
             rows: list[dict[str, Any]]) -> contextlib.AbstractContextManager[Any]:
        """The loggers member ``j``'s final figures go to: its live ones, or
        fresh ones given its ``rows``."""
        return contextlib.nullcontext(live)


class SingleRun(RunFolders):
    """``plume-jax train``: the run folder is ``out`` (:data:`RUN_FILES`),
    a program of one member whose checkpoints go there; ``resume``: a run
    folder or checkpoint folder to continue from (:func:`resume_point`), in
    its own folder or a new one."""

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
        if point is not None:
            check_metrics_cover(point)
            check_best(point.run_dir)  # everything the resume reads, before anything moves

    def notes(self) -> list[str]:
        return resume_notes(self.config, self.point) if self.point else []

    def checkpoint_of(self, p: Program) -> pathlib.Path | None:
        return self.point.checkpoint if self.point is not None else None

    def start(self, p: Program, resumed_at: int | None) -> Start:
        out, point = self.out, self.point
        if out is None or not is_main_process():
            return Start([[]], [None])
        history, aside = prepare_run_folder(out, self.config, point)
        notes = []
        if point is not None and aside is not None:  # a folder is set aside only on resume
            notes.append(f"resumed from update {point.update} while this folder held a later "
                         f"state: that state (metrics, checkpoints, policy) was moved, whole, to "
                         f"{aside}")
        loggers = RunLoggers(out, tensorboard=self.config.run["tensorboard"],
                             wandb_project=self.config.run["wandb_project"], name=out.name,
                             config=self.config.to_dict(), history=history)
        if history is not None:  # TensorBoard was written anew from the kept rows
            for row in replay_rows(out):
                loggers.log_periodic_evaluation(row, tensorboard_only=True)
        return Start([[]], [loggers], notes)


class Sweep(RunFolders):
    """``plume-jax sweep``: the folder ``out`` (:data:`SWEEP_FILES`) holds a
    run folder per member (``members/<name>/``) and a checkpoint folder per
    compiled program (``programs/<k>/``); ``resume`` continues the sweep in
    ``out`` from those checkpoints. ``sweep``: the sweep's ``members``
    (grid values), ``names``, ``configs``, ``base`` config, ``grid`` and
    ``mode``."""

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
        if resumed_at is not None:
            names = row_names(self.sweep)
            return Start(resume_member_rows(p, resumed_at, names), [None] * len(p.runs))
        if p.folder is not None and is_main_process():  # rows of a killed attempt that
            for m in p.runs:                             # reached no checkpoint
                if m.folder is not None:
                    (m.folder / "metrics.jsonl").unlink(missing_ok=True)
        return super().start(p, resumed_at)

    def logs(self, p: Program, j: int, live: RunLoggers | None,
             rows: list[dict[str, Any]]) -> contextlib.AbstractContextManager[Any]:
        """Fresh loggers for member ``j``, TensorBoard written anew from all
        its ``rows`` (a resumed member has some from before); W&B holds one
        run at a time, so a sweep's members log when they finish."""
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

    def steps(r: dict[str, Any]) -> float:
        value = r.get("mean_steps_to_goal")
        return math.inf if value is None else float(value)

    if row["success_rate"] != best["success_rate"]:
        return row["success_rate"] > best["success_rate"]
    return steps(row) < steps(best)


def _checked_row(row: Any, where: str) -> dict[str, Any]:
    """``row`` if it is an evaluation row :func:`better` can compare;
    ``ValidationError`` naming ``where`` otherwise."""
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
    """The row in ``policy/evaluation.json`` (a ``best/`` or one of its
    swap folders), checked; None when that folder is absent."""
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


def _same_row(row: dict[str, Any], best: dict[str, Any] | None) -> bool:
    """Whether a policy folder's row is the recorded best row ``best``
    itself: every key and value alike (compared as JSON, so a NaN figure
    matches itself)."""
    return best is not None and json.dumps(row, sort_keys=True) == json.dumps(best,
                                                                              sort_keys=True)


def best_row(folder: pathlib.Path) -> dict[str, Any] | None:
    """The row of the policy in ``folder/best/`` (None when there is none),
    checked (``ValidationError`` naming the file when it is damaged)."""
    return _policy_row(folder / BEST)


def recorded_best(folder: pathlib.Path, up_to: int | None = None) -> dict[str, Any] | None:
    """The best periodic evaluation so far as ``evaluations.jsonl`` records
    it: its last row flagged ``best`` (of updates ``<= up_to`` when given),
    checked; None when none is."""
    flagged = [r for r in replay_rows(folder) if r.get("best") is True
               and (up_to is None or int(r["update"]) <= up_to)]
    return _checked_row(flagged[-1], str(folder / EVALUATIONS)) if flagged else None


def _best_plan(folder: pathlib.Path, up_to: int | None = None
               ) -> tuple[dict[str, Any] | None, str | None, list[str]]:
    """How ``folder``'s best policy is made consistent with its rows (of
    updates ``<= up_to``), everything read and checked, nothing changed:
    ``(recorded best row, the folder among best/, .best.partial/,
    .best.old/ holding its policy or None, the folders to drop)``.

    The holder: the folder whose ``evaluation.json`` is the recorded row
    itself (module docstring). A damaged folder (a kill part way through writing or
    deleting it) is dropped when another folder holds the recorded row, and
    so is a damaged ``.best.partial/`` or ``.best.old/`` in any case; a
    damaged ``best/`` with no other holder is refused (``ValidationError``
    naming it). Leftover ``.best.drop-*`` folders are always dropped."""
    best = recorded_best(folder, up_to)
    found: dict[str, dict[str, Any]] = {}
    damaged: dict[str, ValidationError] = {}
    for name in (BEST, PARTIAL, OLD):
        try:
            row = _policy_row(folder / name)
        except ValidationError as exc:
            damaged[name] = exc  # killed while it was written or deleted, or hand-damaged
            continue
        if row is not None:
            found[name] = row
    leftovers = sorted(p.name for p in folder.glob(f"{DROP}*")  # a deletion a kill cut short
                       if p.is_dir() and not p.is_symlink())
    holder = next((name for name, row in found.items() if _same_row(row, best)), None)
    if holder is not None:
        return best, holder, [name for name in [*found, *damaged] if name != holder] + leftovers
    if BEST in damaged:  # nothing else holds the recorded best: best/ is not to be guessed at
        raise damaged[BEST]
    # no folder holds the recorded best: the swap folders go (an uncommitted
    # partial, an old best superseded, or another run's), and so does a best/
    # past ``up_to`` (set aside before a resume from an older update)
    drop = [*damaged, *(name for name, row in found.items() if name != BEST
                        or (up_to is not None and row["update"] > up_to))]
    return best, BEST if BEST in found and BEST not in drop else None, drop + leftovers


def check_best(folder: pathlib.Path) -> None:
    """Read and check everything :func:`settle_best` and a resume read in
    ``folder`` (``evaluations.jsonl``, ``best/`` and its swap folders):
    ``ValidationError`` naming the damaged file, before anything moves."""
    _best_plan(folder)


def settle_best(folder: pathlib.Path, up_to: int | None = None) -> dict[str, Any] | None:
    """Make ``folder/best/`` hold the policy of the recorded best row (of
    updates ``<= up_to``), finishing or undoing a swap a kill interrupted,
    by renames only (module docstring); returns that row."""
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
    """``path`` renamed (atomically) to a unique ``.best.drop-*`` name beside
    it, unless it has one already; the path it now has."""
    if path.name.startswith(DROP):
        return path
    aside = path.with_name(f"{DROP}{secrets.token_hex(6)}")
    os.rename(path, aside)
    return aside


def trim_evaluations(folder: pathlib.Path, update: int) -> None:
    """Before a run folder resumes at ``update``: drop the periodic
    evaluation rows past it (an atomic replacement) and a ``best/`` policy
    found past it (it belongs to a trajectory the resume retrains; the next
    evaluation that beats the recorded best writes ``best/`` anew). Call it
    after any later state was set aside and :func:`check_best` passed."""
    settle_best(folder)  # a swap a kill cut short, finished before anything is dropped
    trim_jsonl(folder / EVALUATIONS, update)
    settle_best(folder, update)


def copy_evaluations(source: pathlib.Path, folder: pathlib.Path, update: int) -> None:
    """A run resumed into a new folder from ``source``'s checkpoint at
    ``update``: its periodic evaluation rows up to ``update`` and the policy
    of its recorded best by then (from ``best/``, or from a swap folder a
    kill left), as the metrics rows are copied. ``source`` is only read."""
    best, holder, _ = _best_plan(source, update)
    if (source / EVALUATIONS).is_file():
        write_jsonl(folder / EVALUATIONS, rows_up_to(source / EVALUATIONS, update))
    row = _policy_row(source / holder) if holder is not None else None
    if row is not None and _same_row(row, best) \
            and not (folder / BEST).exists():
        shutil.copytree(source / str(holder), folder / BEST)


def replay_rows(folder: pathlib.Path) -> list[dict[str, Any]]:
    """The periodic evaluation rows of a run folder (none: ``[]``)."""
    path = folder / EVALUATIONS
    return read_jsonl(path) if path.is_file() else []


def write_partial_best(folder: pathlib.Path, row: dict[str, Any],
                       write_policy: Callable[[pathlib.Path], Any]) -> None:
    """The policy of evaluation ``row``, written whole by
    ``write_policy(folder/.best.partial)``, then its ``evaluation.json``;
    :func:`settle_best` swaps it into ``best/`` once ``row`` is committed."""
    tmp = folder / PARTIAL
    if tmp.exists():
        shutil.rmtree(_set_aside(tmp))
    write_policy(tmp)
    atomic_write(tmp / "evaluation.json", json.dumps(row, indent=2))


def record_evaluation(folder: pathlib.Path, row: dict[str, Any],
                      write_policy: Callable[[pathlib.Path], Any]) -> None:
    """Append periodic evaluation ``row`` to ``folder/evaluations.jsonl``;
    a new best (``row["best"]``) is first written whole
    (:func:`write_partial_best`), committed by its row, then swapped in."""
    if row["best"]:
        write_partial_best(folder, row, write_policy)
    append_jsonl(folder / EVALUATIONS, [row])
    if row["best"]:
        settle_best(folder)
