"""Periodic evaluation during training, with the best policy kept (RL Zoo's
``EvalCallback`` and ``best_model``), for any algorithm the run driver trains.

With ``eval.every: N`` the driver ends a chunk at every N-th update, writes
that update's checkpoint, and then evaluates every member's current policy
greedily on ``eval.periodic_episodes`` fresh episodes drawn from
``eval.periodic_seed`` (not ``eval.seed``: the final evaluation then does
not score a policy on the episodes it was chosen on). Per member:

- a row in ``evaluations.jsonl``: ``update``, ``env_steps``,
  ``success_rate``, ``mean_steps_to_goal`` (of the successful episodes;
  null when none succeeded), ``mean_return``, ``episodes``, ``seed`` and
  ``best`` (whether it became the best so far);
- TensorBoard / W&B scalars at ``env_steps``: Stable-Baselines3's
  ``eval/mean_reward``, ``eval/mean_ep_length`` (of the successful
  episodes here) and ``eval/success_rate``;
- the best policy so far in ``best/`` (``policy.npz`` + ``policy.json``,
  loadable like ``policy/``: ``--agent-param trained.path=RUN/best``), with
  ``best/evaluation.json`` (its row). Best: the higher success rate, then
  the fewer mean steps to the goal; a tie keeps the earlier policy.

Evaluations follow the checkpoint of their update, so ``evaluations.jsonl``
is never ahead of the checkpoints; a resume drops rows (and a ``best/``)
past the update it resumes from, as it drops metrics rows
(:func:`trim_evaluations`).

What is on disk is the truth, so a kill at any moment loses nothing:

- the best so far is the last row of ``evaluations.jsonl`` flagged
  ``best`` (:func:`recorded_best`); a resumed run compares its next
  evaluations with that row, whatever ``best/`` holds;
- a new best policy is written whole into ``.best.partial/`` (its
  ``evaluation.json`` last), then its row is appended (the commit), then it
  is swapped into ``best/`` by renames (``best/`` -> ``.best.old/``,
  ``.best.partial/`` -> ``best/``). :func:`settle_best` finishes or undoes
  a swap a kill interrupted: the folder whose ``evaluation.json`` is the
  committed row itself becomes ``best/``, an uncommitted ``.best.partial/``
  is dropped (its evaluation is run again), a ``.best.old/`` goes once
  ``best/`` holds the committed policy, and a swap folder no row commits
  (another run's) is never adopted. A folder is dropped by renaming it to a
  unique ``.best.drop-*`` name, then deleting it: a kill part way through a
  deletion leaves only such a folder, which the next settle deletes;
- an evaluation a kill interrupted has no row: the resumed run evaluates
  the checkpoint's update again before it trains on (``resumed=True``),
  with the same figures (evaluations are deterministic).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import secrets
import shutil
from typing import Any, Callable

import jax

from plume_jax.core.errors import ValidationError
from plume_jax.files import atomic_write, fsync_folder
from plume_jax.train.checkpoint import export_policy
from plume_jax.train.distributed import host_copy, is_main_process
from plume_jax.files.safe_io import load_json_file
from plume_jax.train.progress import append_jsonl, read_jsonl, rows_up_to, trim_jsonl, \
    write_jsonl

#: The file of a member's periodic evaluation rows, in its run folder.
EVALUATIONS = "evaluations.jsonl"
#: The folder of a member's best policy, in its run folder.
BEST = "best"


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


#: Where a new best policy is written before its row commits it, and where
#: the previous ``best/`` waits during the swap (:func:`settle_best`).
PARTIAL, OLD = f".{BEST}.partial", f".{BEST}.old"
#: The name prefix of a folder renamed aside to be deleted (:func:`settle_best`).
DROP = f".{BEST}.drop-"
#: Every name a run folder's best policy and its swap folders may have
#: (``*``: any token), for ``--overwrite`` to clear.
BEST_FOLDERS = (BEST, PARTIAL, OLD, f"{DROP}*")


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


def dropped_folders(folder: pathlib.Path) -> list[str]:
    """The ``.best.drop-*`` folders in ``folder``: folders set aside to be
    deleted (:func:`settle_best`) that a kill left, whole or part deleted."""
    return sorted(p.name for p in folder.glob(f"{DROP}*") if p.is_dir() and not p.is_symlink())


def _best_plan(folder: pathlib.Path, up_to: int | None = None
               ) -> tuple[dict[str, Any] | None, str | None, list[str]]:
    """How ``folder``'s best policy is made consistent with its rows (of
    updates ``<= up_to``), everything read and checked, nothing changed:
    ``(recorded best row, the folder among best/, .best.partial/,
    .best.old/ holding its policy or None, the folders to drop)``.

    The holder is the folder whose ``evaluation.json`` is the recorded row
    itself (not merely a row of the same update: a folder another run left
    is never adopted). A damaged folder (a kill part way through writing or
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
    leftovers = dropped_folders(folder)
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
    updates ``<= up_to``), finishing or undoing a swap a kill interrupted
    (module docstring); returns that row. Every step is a rename: a folder
    to drop is first renamed to a unique ``.best.drop-*`` name, and only
    then deleted, so a kill part way through a deletion leaves a folder
    the next call deletes, never a damaged ``best/``."""
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
    after any later state was set aside
    (:func:`plume_jax.train.run_folder.set_aside_later_state`) and after
    :func:`check_best` passed."""
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


#: The keys of an evaluation summary a periodic evaluation row keeps.
ROW_KEYS = ("success_rate", "mean_steps_to_goal", "mean_return", "episodes", "seed")


def periodic_evaluator(program: Any, loggers: list[Any], *, note: Callable[[int, str], None],
                       load: Callable[[Any, pathlib.Path], tuple[Any, int]]
                       ) -> Callable[..., None] | None:
    """The ``on_evaluation(runner, update, resumed=False)`` of
    :func:`~plume_jax.train.chunks.run_in_chunks` for ``program`` (a
    :class:`~plume_jax.train.driver.Program`), or None when its config has
    no ``eval.every``. ``loggers``: each member's ``RunLoggers`` or None;
    ``note(update, text)``: one progress line per evaluation; ``load(program,
    checkpoint) -> (runner, update)``: the driver's checked checkpoint reader
    (:func:`~plume_jax.train.driver.load_runner`), for a ``best/`` exported
    again from a kept checkpoint.

    A member whose ``evaluations.jsonl`` already holds the update's row gets
    no second one; with ``resumed`` (the update a run resumed from) nothing
    is evaluated unless some member's row is missing (a kill during that
    evaluation). Each member's best so far is its recorded best row
    (:func:`recorded_best`), read from disk when the evaluator is made."""
    from plume_jax.train.distributed import agree
    from plume_jax.train.evaluation import eval_num_steps, evaluate, member_evaluation
    from plume_jax.train.lanes import evaluate_in_lanes

    cfg = program.config
    if not cfg.eval["every"]:
        return None
    num_steps = eval_num_steps(cfg, program.env_params)
    main = is_main_process()
    best: list[dict[str, Any] | None] = []
    for j, m in enumerate(program.runs):
        if m.folder is not None and main:
            settle_best(m.folder)
            _restore_best(program, j, load)
        best.append(recorded_best(m.folder) if m.folder is not None else None)

    def has_row(member: Any, update: int) -> bool:
        return member.folder is not None and any(
            int(r["update"]) == update for r in replay_rows(member.folder))

    def on_evaluation(runner: Any, update: int, resumed: bool = False) -> None:
        done = [has_row(m, update) if main else False for m in program.runs]
        if resumed and agree(all(m.folder is None or d for m, d in zip(program.runs, done))):
            return  # evaluated before the run stopped (or nothing to write it to)
        if jax.process_count() > 1:  # every process: a collective, as for the final evaluation
            runner = host_copy(runner)
        spec, arrays = program.algo.policy(runner)
        if program.lanes is not None:  # a single run in lanes: lane 0's figures, at the
            # width of the program that trained this update (a schedule's earlier segment
            # at its switch, as a tune trial evaluates before its pruning rebuild)
            evaluation = evaluate_in_lanes(program.env, spec, arrays, program.env_params,
                                           cfg.eval["periodic_seed"],
                                           cfg.eval["periodic_episodes"], num_steps, True,
                                           program.lanes.evaluation_width(update))
        else:
            evaluation = evaluate(program.env, spec, arrays, program.env_params,
                                  cfg.eval["periodic_seed"], cfg.eval["periodic_episodes"],
                                  num_steps, greedy=True, batched=program.batched)
        steps = update * cfg.steps_per_update
        texts = []
        for j, member in enumerate(program.runs):
            if done[j]:
                continue
            member_figures = member_evaluation(evaluation, j) if program.batched else evaluation
            row: dict[str, Any] = {"update": update, "env_steps": steps,
                                   **{k: member_figures[k] for k in ROW_KEYS}}
            row["best"] = better(row, best[j])
            if row["best"]:
                best[j] = row
            texts.append(f"{member.name + ': ' if member.name else ''}success "
                         f"{row['success_rate']:.3f}"
                         + (f", {row['mean_steps_to_goal']:.1f} steps"
                            if row["mean_steps_to_goal"] is not None else "")
                         + (" (new best)" if row["best"] else ""))
            if loggers[j] is not None:
                loggers[j].log_periodic_evaluation(row)
            if member.folder is None or not main:
                continue
            if row["best"]:  # written whole first, committed by its row, then swapped in
                _write_partial_best(member.folder, program, runner, j, row)
            append_jsonl(member.folder / EVALUATIONS, [row])
            if row["best"]:
                settle_best(member.folder)
        note(update, f"evaluation at update {update} ({cfg.eval['periodic_episodes']} episodes)"
             + (" again (a kill interrupted it)" if resumed else "") + ": " + "; ".join(texts))

    return on_evaluation


def _restore_best(program: Any, j: int,
                  load: Callable[[Any, pathlib.Path], tuple[Any, int]]) -> None:
    """Member ``j``'s ``best/`` again when its recorded best row has no
    policy on disk (a resume from an older update dropped a later best/
    that had replaced it): exported from the program's checkpoint of that
    update (``checkpoints/update_N/``, or ``checkpoint/``), the very runner
    that row evaluated. Without such a checkpoint ``best/`` stays absent
    until an evaluation beats the recorded row."""
    from plume_jax.train.checkpoint import checkpoint_update

    folder = program.runs[j].folder
    row = recorded_best(folder)
    if row is None or program.folder is None or (folder / BEST).exists() \
            or jax.process_count() > 1:  # one process loading onto a global mesh would hang
        return
    update = int(row["update"])
    for ckpt in (program.folder / "checkpoints" / f"update_{update:08d}",
                 program.folder / "checkpoint"):
        try:
            if ckpt.is_dir() and checkpoint_update(ckpt) == update:
                runner, _ = load(program, ckpt)
                break
        except ValidationError:
            continue
    else:
        return
    _write_partial_best(folder, program, runner, j, row)
    settle_best(folder)


def _write_partial_best(folder: pathlib.Path, program: Any, runner: Any, j: int,
                        row: dict[str, Any]) -> None:
    """The member's policy, whole, into ``.best.partial/`` (its
    ``evaluation.json`` last); :func:`settle_best` swaps it into ``best/``
    once its row is appended."""
    member = program.runs[j]
    tmp = folder / PARTIAL
    if tmp.exists():
        shutil.rmtree(_set_aside(tmp))
    export_policy(tmp, program.algo, program.runner_of(runner, j), member.env.settings,
                  {"trained_env_steps": row["env_steps"], "best_of_periodic_evaluations": row})
    atomic_write(tmp / "evaluation.json", json.dumps(row, indent=2))


__all__ = ["BEST", "BEST_FOLDERS", "EVALUATIONS", "best_row", "better", "check_best",
           "copy_evaluations", "dropped_folders", "periodic_evaluator", "recorded_best", "replay_rows", "settle_best",
           "trim_evaluations"]
