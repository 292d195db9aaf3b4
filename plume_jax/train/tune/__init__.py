"""``plume-jax tune``: hyperparameter search with Optuna, each batch of
trials trained as vmapped programs.

Loop: ask Optuna for ``batch_size`` trials (TPE with the constant liar by
default, so trials in flight are not sampled twice), build each trial's
config (the base config, the space's ``set``, the sampled values), group
the batch by static structure (:func:`~plume_jax.train.sweep.program_groups`:
trials that differ only in dynamic settings share one compiled program),
train each group (:mod:`.programs`: periodic evaluations reported as
intermediate values, pruned members dropped from the program), tell Optuna
each trial's greedy success rate, and repeat until the budget is met.

Output folder::

    tune.json            what the study is (config, space, storage, budget):
                         plume-jax tune --resume DIR reads it
    study.db             the Optuna study (default storage; or study.journal)
    trials/<number>/     one run folder per trial (train's rules), its number
                         zero-padded to 5 digits: trials/00003/ (:func:`trial_folder`)
    best_config.yaml     the best trial's config: plume-jax train reproduces it
    summary.md, results.json, trials.csv, optimization_history.png,
    parallel_coordinate.png   (:mod:`.report`)
"""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Mapping
from typing import Any, TextIO

from plume_jax.core.errors import ValidationError
from plume_jax.progress import ProgressBar
from plume_jax.train.chunks import Interrupted, stop_on_signals
from plume_jax.files import atomic_create, is_temporary
from plume_jax.train.config import read_yaml, with_overrides
from plume_jax.train.driver import write_text
from plume_jax.train.tune import study as studies
from plume_jax.train.tune.programs import TrialRun, groups, train_group
from plume_jax.train.tune.report import write_report
from plume_jax.train.tune.space import Space, space_from_mapping

RECORD = "tune.json"


def trial_folder(number: int) -> pathlib.Path:
    """Trial ``number``'s run folder in the study's: ``trials/00003``."""
    return pathlib.Path("trials") / f"{number:05d}"


class TuneStopped(Interrupted):
    """``tune`` stopped on SIGINT / SIGTERM: the finished trials are in the
    study, the unfinished ones failed and enqueued again."""

    def __init__(self, signal_name: str, resume: str, requeued: int):
        super().__init__(signal_name, 0, resume)
        self.args = (f"interrupted by {signal_name}: finished trials are in the study, "
                     f"{requeued} unfinished trial(s) enqueued to run again; continue with: "
                     f"{resume}",)


def new_record(config: str | pathlib.Path, space: str | pathlib.Path, *, trials: int,
               out: str | pathlib.Path, overrides: Mapping[str, Any] | None = None,
               space_overrides: Mapping[str, Any] | None = None, storage: str | None = None,
               study_name: str | None = None) -> dict[str, Any]:
    """The record of a new study (``tune.json``): the raw base config (its
    file with ``overrides``), the raw space (its file with
    ``space_overrides``), the storage URL, study name and budget."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValidationError.for_parameter("--trials", trials, "a positive integer")
    out = pathlib.Path(out)
    config = pathlib.Path(config)
    space_raw = read_yaml(space, parameter="--space")
    space_raw.update({k: v for k, v in (space_overrides or {}).items() if v is not None})
    return {"config": with_overrides(read_yaml(config), overrides),
            "config_dir": str(config.resolve().parent), "space": space_raw,
            "storage": studies.storage_url(storage, out),
            "study_name": study_name or out.resolve().name, "trials": trials,
            "out": str(out)}


def _space(record: dict[str, Any]) -> Space:
    return space_from_mapping(record["space"], record["config"], record["config_dir"])


def _check_out(out: pathlib.Path, record: dict[str, Any], resume: bool) -> None:
    """A new study needs a new or empty folder, or one holding this very
    study (a second process joining it); ``resume`` needs the record. A
    record another process is writing at this moment (its temporary file)
    does not count as a file."""
    path = out / RECORD
    if resume or (path.is_file() and _same_study(json.loads(path.read_text()), record)):
        return
    if out.exists() and (not out.is_dir() or any(not is_temporary(f.name)
                                                 for f in out.iterdir())):
        raise ValidationError.for_parameter(
            "--out", str(out), "a new or empty folder (this one holds other files; continue "
            f"a study in it with plume-jax tune --resume {out})")


def claim_folder(out: pathlib.Path, record: dict[str, Any], resume: bool) -> None:
    """Make ``out`` this study's folder, or join the study in it: checked
    (:func:`_check_out`), then its record written (``resume``: replaced) or,
    for a new study, created only where none is. Several processes starting
    one study at once (``--storage journal``) each find the folder empty or
    holding that study's record, whole: one of them creates it and the
    others check it as a second process joining."""
    _check_out(out, record, resume)
    text = json.dumps(record, indent=2)
    if resume:
        write_text(out / RECORD, text)
    elif not atomic_create(out / RECORD, text):  # another process made it first
        _check_out(out, record, resume=False)


def _same_study(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("config", "space", "storage", "study_name")
    return all(json.dumps(a.get(k), sort_keys=True) == json.dumps(b.get(k), sort_keys=True)
               for k in keys)


def read_record(out: str | pathlib.Path, trials: int | None = None) -> dict[str, Any]:
    """The record of the study in ``out`` (``tune --resume``), its budget
    raised to ``trials`` when given."""
    path = pathlib.Path(out) / RECORD
    if not path.is_file():
        raise ValidationError.for_parameter("--resume", str(out),
                                            f"a plume-jax tune folder (it has no {RECORD})")
    record = json.loads(path.read_text())
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise ValidationError.for_parameter("--trials", trials, "a positive integer")
        record["trials"] = trials
    return record


def _ask(study: Any, space: Space, out: pathlib.Path, n: int) -> list[TrialRun]:
    """``n`` new trials, claimed by this process, with their configs; a
    sampled combination the config refuses is a failed trial (named)."""
    runs = []
    for _ in range(n):
        trial = study.ask()
        studies.claim(trial)
        values = studies.suggest(trial, space)
        folder = trial_folder(trial.number)
        trial.set_user_attr("folder", str(folder))
        try:
            config = space.config(values)
        except ValidationError as error:
            trial.set_user_attr("error", str(error))
            study.tell(trial, state=studies._optuna().trial.TrialState.FAIL)
            continue
        runs.append(TrialRun(trial, values, config, out / folder))
    return runs


def _tell(study: Any, run: TrialRun) -> str:
    """Tell Optuna how ``run`` ended: complete (its greedy success), pruned
    (at an update), or unfinished (failed and enqueued again)."""
    optuna = studies._optuna()
    if run.evaluation is not None:
        steps = run.evaluation.get("mean_steps_to_goal")
        run.trial.set_user_attr("mean_steps_to_goal", steps)
        study.tell(run.trial, float(run.evaluation["success_rate"]))
        return "complete"
    if run.pruned_at is not None:
        run.trial.set_user_attr("pruned_at_update", run.pruned_at)
        study.tell(run.trial, state=optuna.trial.TrialState.PRUNED)
        return "pruned"
    studies.requeue(study, run.trial.number, dict(run.trial.params))
    return "requeued"


def tune(record: dict[str, Any], *, resume: bool = False, progress: bool = True,
         stream: TextIO | None = None) -> dict[str, Any]:
    """Run (or continue, ``resume``) the study of ``record`` (:func:`new_record`
    or :func:`read_record`) until ``record["trials"]`` trials count
    (:mod:`.study`); write the report. Returns ``results.json``'s content,
    with ``timing``: this call's wall, compile, init and train seconds, its
    programs and their segments (a pruning rebuild adds one)."""
    t_wall = time.perf_counter()
    out = pathlib.Path(record["out"])
    space = _space(record)
    first = space.config({p.name: p.lowest() for p in space.params})
    claim_folder(out, record, resume)
    study = studies.open_study(record["storage"], record["study_name"], space,
                               first.num_updates, first.eval["every"])
    studies.requeue_orphans(study)
    timing = {"compile": 0.0, "train": 0.0, "init": 0.0, "segments": 0.0, "programs": 0}
    with stop_on_signals() as stop:
        goal = studies.budget(space, record["trials"])
        while (n := min(space.batch_size, studies.to_ask(study, goal))) > 0:
            runs = _ask(study, space, out, n)
            total = sum(r.config.num_updates * r.config.steps_per_update for r in runs)
            bar = ProgressBar(total, "tune", unit="trial steps", stream=stream,
                              quiet=not progress, min_interval_s=0.0,
                              elapsed_from=t_wall)  # one bar a batch, elapsed from the start
            try:
                for group in groups(runs):
                    spent = train_group([runs[i] for i in group], stop=stop,
                                        prune=space.pruner != "none", bar=bar)
                    timing = {k: timing[k] + spent.get(k, 1) for k in timing}
                    if stop:
                        break
            finally:
                bar.close()
                ends = [_tell(study, r) for r in runs]
            if stop:
                write_report(study, out, record)
                raise TuneStopped(stop.signal_name or "a stop request",
                                  f"plume-jax tune --resume {out}", ends.count("requeued"))
    timing["wall"] = time.perf_counter() - t_wall
    return write_report(study, out, record, timing)


__all__ = ["RECORD", "TuneStopped", "claim_folder", "new_record", "read_record",
           "trial_folder", "tune"]
