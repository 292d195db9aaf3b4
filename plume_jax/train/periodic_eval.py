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
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import shutil
from typing import Any, Callable

import jax

from plume_jax.train.checkpoint import _atomic_write, export_policy
from plume_jax.train.distributed import host_copy, is_main_process
from plume_jax.safe_io import load_json_file
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


def best_row(folder: pathlib.Path) -> dict[str, Any] | None:
    """The row of the policy in ``folder/best/`` (None when there is none)."""
    path = folder / BEST / "evaluation.json"
    if not (path.is_file() and (folder / BEST / "policy.npz").is_file()):
        return None
    return load_json_file(path, "best/evaluation.json")


def trim_evaluations(folder: pathlib.Path, update: int) -> None:
    """Before a run folder resumes at ``update``: drop the periodic
    evaluation rows past it (an atomic replacement) and a ``best/`` policy
    found past it (it belongs to a trajectory the resume retrains; the next
    evaluation writes ``best/`` anew). Call it after any later state was set
    aside (:func:`plume_jax.train.run_folder.set_aside_later_state`)."""
    trim_jsonl(folder / EVALUATIONS, update)
    best = best_row(folder)
    if best is not None and int(best["update"]) > update:
        shutil.rmtree(folder / BEST)


def copy_evaluations(source: pathlib.Path, folder: pathlib.Path, update: int) -> None:
    """A run resumed into a new folder from ``source``'s checkpoint at
    ``update``: its periodic evaluation rows up to ``update`` and its
    ``best/`` when found by then, as the metrics rows are copied."""
    if (source / EVALUATIONS).is_file():
        write_jsonl(folder / EVALUATIONS, rows_up_to(source / EVALUATIONS, update))
    best = best_row(source)
    if best is not None and int(best["update"]) <= update and not (folder / BEST).exists():
        shutil.copytree(source / BEST, folder / BEST)


def replay_rows(folder: pathlib.Path) -> list[dict[str, Any]]:
    """The periodic evaluation rows of a run folder (none: ``[]``)."""
    path = folder / EVALUATIONS
    return read_jsonl(path) if path.is_file() else []


#: The keys of an evaluation summary a periodic evaluation row keeps.
ROW_KEYS = ("success_rate", "mean_steps_to_goal", "mean_return", "episodes", "seed")


def periodic_evaluator(program: Any, loggers: list[Any], *, note: Callable[[int, str], None]
                       ) -> Callable[[Any, int], None] | None:
    """The ``on_evaluation(runner, update)`` of
    :func:`~plume_jax.train.chunks.run_in_chunks` for ``program`` (a
    :class:`~plume_jax.train.driver.Program`), or None when its config has
    no ``eval.every``. ``loggers``: each member's ``RunLoggers`` or None;
    ``note(update, text)``: one progress line per evaluation."""
    from plume_jax.train.driver import eval_num_steps, member_evaluation
    from plume_jax.train.evaluation import evaluate

    cfg = program.config
    if not cfg.eval["every"]:
        return None
    num_steps = eval_num_steps(cfg, program.env_params)
    best: list[dict[str, Any] | None] = [
        best_row(m.folder) if m.folder is not None else None for m in program.runs]

    def on_evaluation(runner: Any, update: int) -> None:
        if jax.process_count() > 1:  # every process: a collective, as for the final evaluation
            runner = host_copy(runner)
        spec, arrays = program.algo.policy(runner)
        evaluation = evaluate(program.env, spec, arrays, program.env_params,
                              cfg.eval["periodic_seed"], cfg.eval["periodic_episodes"],
                              num_steps, greedy=True, batched=program.batched)
        steps = update * cfg.steps_per_update
        texts = []
        for j, member in enumerate(program.runs):
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
            if member.folder is None or not is_main_process():
                continue
            if row["best"]:
                _write_best(member.folder, program, runner, j, row)
            append_jsonl(member.folder / EVALUATIONS, [row])
        note(update, f"evaluation at update {update} ({cfg.eval['periodic_episodes']} episodes): "
             + "; ".join(texts))

    return on_evaluation


def _write_best(folder: pathlib.Path, program: Any, runner: Any, j: int,
                row: dict[str, Any]) -> None:
    """The member's policy into ``best/``: written whole into a sibling
    folder, then swapped in by renames, so a kill leaves the old or the new
    best, never a mix."""
    member = program.runs[j]
    tmp = folder / f".{BEST}.partial"
    if tmp.exists():
        shutil.rmtree(tmp)
    export_policy(tmp, program.algo, program.runner_of(runner, j), member.env.settings,
                  {"trained_env_steps": row["env_steps"], "best_of_periodic_evaluations": row})
    _atomic_write(tmp / "evaluation.json", json.dumps(row, indent=2).encode())
    old = folder / f".{BEST}.old"
    if old.exists():
        shutil.rmtree(old)
    if (folder / BEST).exists():
        os.replace(folder / BEST, old)
    os.replace(tmp, folder / BEST)
    if old.exists():
        shutil.rmtree(old)


__all__ = ["BEST", "EVALUATIONS", "best_row", "better", "copy_evaluations",
           "periodic_evaluator", "replay_rows", "trim_evaluations"]
