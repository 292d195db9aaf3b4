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
import random
import time
import uuid
from collections.abc import Mapping
from typing import Any, TextIO

from plume_jax.core.errors import ValidationError
from plume_jax.progress import ProgressBar
from plume_jax.train.loop import Interrupted, stop_on_signals
from plume_jax.files import atomic_create, is_temporary
from plume_jax.train.config import read_yaml, with_overrides
from plume_jax.files import atomic_write as write_text
from plume_jax.train.tune import study as studies
from plume_jax.train.tune.programs import TrialRun, groups, train_group
from plume_jax.train.tune.report import write_report
from plume_jax.train.tune.space import GRID_MAX, Space, space_from_mapping

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


def _conflicts(overrides: Mapping[str, Any], space_raw: dict[str, Any]) -> dict[str, Any]:
    """The space's ``set`` less what the command line's ``--set`` gives
    (the command line wins); a ``--set`` of a tuned parameter, or a ``set``
    key holding a ``--set`` key's section, is refused naming both."""
    fixed = space_raw.get("set")
    params = space_raw.get("params")
    if not isinstance(fixed, Mapping) or not overrides:
        fixed_out = fixed
    else:
        fixed_out = {}
        for name, value in fixed.items():
            if any(name == k or str(name).startswith(f"{k}.") for k in overrides):
                continue  # the command line's value wins
            inside = [k for k in overrides if str(k).startswith(f"{name}.")]
            if inside:
                raise ValidationError.for_parameter(
                    f"--set {inside[0]}", overrides[inside[0]], f"a key the search space's "
                    f"set does not give as a whole section (set: {name}: ...): set "
                    f"{inside[0]} in one of the two")
            fixed_out[name] = value
    if isinstance(params, Mapping):
        for k in overrides:
            tuned = [n for n in params if n == k or str(n).startswith(f"{k}.")
                     or str(k).startswith(f"{n}.")]
            if tuned:
                raise ValidationError.for_parameter(
                    f"--set {k}", overrides[k], f"a setting the search space does not tune "
                    f"(params: {tuned[0]} is sampled): drop one of the two")
    return {**space_raw, "set": fixed_out} if "set" in space_raw else space_raw


def new_record(config: str | pathlib.Path, space: str | pathlib.Path, *, trials: int,
               out: str | pathlib.Path, overrides: Mapping[str, Any] | None = None,
               space_overrides: Mapping[str, Any] | None = None, storage: str | None = None,
               study_name: str | None = None) -> dict[str, Any]:
    """The record of a new study (``tune.json``): the raw base config (its
    file with ``overrides``), the raw space (its file with
    ``space_overrides``; a key of its ``set`` that ``overrides`` gives too
    is dropped: the command line wins), the storage (a file inside ``out``
    recorded relative to it), study name, budget and the folder's id (the
    trials of a study shared by several folders record theirs)."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValidationError.for_parameter("--trials", trials, "a positive integer")
    out = pathlib.Path(out)
    config = pathlib.Path(config)
    space_raw = read_yaml(space, parameter="--space")
    space_raw.update({k: v for k, v in (space_overrides or {}).items() if v is not None})
    space_raw = _conflicts(dict(overrides or {}), space_raw)
    return {"config": with_overrides(read_yaml(config), overrides),
            "config_dir": str(config.resolve().parent), "space": space_raw,
            "storage": studies.storage_url(storage, out),
            "study_name": study_name or out.resolve().name, "trials": trials,
            "out": str(out), "out_id": uuid.uuid4().hex}


def _space(record: dict[str, Any]) -> Space:
    return space_from_mapping(record["space"], record["config"], record["config_dir"])


def _check_out(out: pathlib.Path, record: dict[str, Any], resume: bool) -> None:
    """A new study needs a new or empty folder, or one holding this very
    study (a second process joining it); ``resume`` needs the record. A
    record another process is writing at this moment (its temporary file)
    does not count as a file."""
    path = out / RECORD
    if resume or (path.is_file() and _same_study(_load_record(out), record)):
        return
    if out.exists() and (not out.is_dir() or any(not is_temporary(f.name)
                                                 for f in out.iterdir())):
        raise ValidationError.for_parameter(
            "--out", str(out), "a new or empty folder (this one holds other files; continue "
            f"a study in it with plume-jax tune --resume {out})")


def claim_folder(out: pathlib.Path, record: dict[str, Any], resume: bool) -> bool:
    """Make ``out`` this study's folder, or join the study in it: checked
    (:func:`_check_out`), then its record written (``resume``: replaced) or,
    for a new study, created only where none is. Several processes starting
    one study at once (``--storage journal``) each find the folder empty or
    holding that study's record, whole: one of them creates it and the
    others check it as a second process joining (taking its ``out_id``).
    Returns whether this call created the record of a new study."""
    _check_out(out, record, resume)
    text = json.dumps({k: v for k, v in record.items() if k != "out"}, indent=2)
    if resume:
        write_text(out / RECORD, text)
        return False
    if atomic_create(out / RECORD, text):
        return True
    _check_out(out, record, resume=False)  # another process made it first
    record["out_id"] = _load_record(out).get("out_id", record["out_id"])
    return False


def _same_study(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("config", "space", "storage", "study_name")
    return all(json.dumps(a.get(k), sort_keys=True) == json.dumps(b.get(k), sort_keys=True)
               for k in keys)


#: The largest ``tune.json`` read (a record is a few kilobytes).
MAX_RECORD_BYTES = 1 << 20

#: A record's keys and their types.
RECORD_KEYS = {"config": dict, "config_dir": str, "space": dict, "storage": str,
               "study_name": str, "trials": int}


def _load_record(out: pathlib.Path) -> dict[str, Any]:
    """``out/tune.json``, checked: a bounded JSON object with the keys of
    :data:`RECORD_KEYS`, each of its type; else one line naming what is
    wrong."""
    from plume_jax.files.safe_io import load_json_file

    path = out / RECORD
    record = load_json_file(path, "--resume", max_bytes=MAX_RECORD_BYTES)
    if not isinstance(record, dict):
        raise ValidationError.for_parameter("--resume", str(path), "a tune.json holding a "
                                            f"JSON object (this one holds a "
                                            f"{type(record).__name__})")
    for name, kind in RECORD_KEYS.items():
        value = record.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValidationError.for_parameter(
                "--resume", str(path), f"a tune.json with {name!r} ({kind.__name__}); this "
                f"one has {'none' if value is None else type(value).__name__} (damaged? "
                "written by plume-jax tune, not by hand)")
    if record["trials"] < 1:
        raise ValidationError.for_parameter("--resume", str(path),
                                            "a tune.json whose trials is a positive integer")
    return record


def read_record(out: str | pathlib.Path, trials: int | None = None) -> dict[str, Any]:
    """The record of the study in ``out`` (``tune --resume``), its budget
    raised to ``trials`` when given; its ``out`` is the folder given (what a
    resume writes goes there, wherever the folder was before)."""
    path = pathlib.Path(out) / RECORD
    if not path.is_file():
        raise ValidationError.for_parameter("--resume", str(out),
                                            f"a plume-jax tune folder (it has no {RECORD})")
    record = _load_record(pathlib.Path(out))
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise ValidationError.for_parameter("--trials", trials, "a positive integer")
        record["trials"] = trials
    record["out"] = str(out)
    record.setdefault("out_id", uuid.uuid4().hex)
    return record


def _where(t: Any, out: pathlib.Path, record: dict[str, Any]) -> pathlib.Path | None:
    """The run folder of trial ``t``: in this study folder, in the folder of
    the process that trained it (a study shared by several folders), or
    None where it cannot be reached from here."""
    folder = t.user_attrs.get("folder")
    if not isinstance(folder, str):
        return None
    if t.user_attrs.get("out_id", record.get("out_id")) == record.get("out_id"):
        return out / folder
    other = t.user_attrs.get("out")
    if isinstance(other, str) and (pathlib.Path(other) / folder).is_dir():
        return pathlib.Path(other) / folder
    return None


def _finish_orphan(study: Any, t: Any, kind: str, summary: dict[str, Any]) -> bool:
    """Tell a trial whose process was killed after it finished training,
    before it told Optuna: as it ended (its folder's ``summary.json``)."""
    optuna = studies._optuna()
    trial = optuna.trial.Trial(study, t._trial_id)
    tune = summary.get("tune") or {}
    try:
        for name, value in (("config", summary.get("config")),
                            ("programs", tune.get("programs"))):
            if value is not None:
                trial.set_user_attr(name, value)
        if kind == "complete":
            steps = summary["evaluation"].get("mean_steps_to_goal")
            trial.set_user_attr("mean_steps_to_goal", steps)
            study.tell(trial, float(summary["evaluation"]["success_rate"]))
        else:
            trial.set_user_attr("pruned_at_update", tune["pruned_at_update"])
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    except (ValueError, RuntimeError):  # another process told it first
        return False
    return True


def _orphans(study: Any, out: pathlib.Path, record: dict[str, Any]) -> list[int]:
    return studies.requeue_orphans(study, lambda t: _where(t, out, record), _finish_orphan)


def _free_point(study: Any, space: Space, rng: random.Random) -> dict[str, Any] | None:
    """A point of a finite space (at most GRID_MAX points) no trial holds."""
    size = space.size()
    if size is None or size > GRID_MAX:
        return None
    held = studies.taken(study.get_trials(deepcopy=False), space)
    free = [p for p in space.points() if studies.key(space, p, encoded=False) not in held]
    return {k: studies.encode(None, v) for k, v in rng.choice(free).items()} if free else None


def _ask(study: Any, space: Space, out: pathlib.Path, n: int, goal: int,
         record: dict[str, Any], rng: random.Random) -> tuple[list[TrialRun], bool]:
    """Up to ``n`` new trials, claimed by this process, with their configs;
    and whether the study has no more to give (over budget, grid done). A
    trial over budget or holding another's values is skipped
    (:func:`~.study.skip_reason`; a finite space's sampler that proposed a
    held point gets a free one enqueued); a sampled combination the config
    refuses is a failed trial (named)."""
    runs: list[TrialRun] = []
    for _ in range(n):
        trial = study.ask()
        studies.claim(trial)
        try:
            values = studies.suggest(trial, space)
        except studies.GridExhausted:
            studies.skip(study, trial, "grid exhausted")
            return runs, True
        folder = trial_folder(trial.number)
        trial.set_user_attr("folder", str(folder))
        trial.set_user_attr("out_id", record["out_id"])
        trial.set_user_attr("out", str(out.resolve()))
        reason = studies.skip_reason(study, trial, space, goal)
        if reason is not None:
            studies.skip(study, trial, reason)
            if reason.startswith("over budget"):
                return runs, True
            if (point := _free_point(study, space, rng)) is not None:
                study.enqueue_trial(point, user_attrs={"instead_of": trial.number})
            continue
        try:
            config = space.config(values)
        except ValidationError as error:
            trial.set_user_attr("error", str(error))
            trial.set_user_attr("refused", True)
            study.tell(trial, state=studies._optuna().trial.TrialState.FAIL)
            continue
        runs.append(TrialRun(trial, values, config, out / folder))
    return runs, False


def _tell(study: Any, run: TrialRun) -> str:
    """Tell Optuna how ``run`` ended: complete (its greedy success), pruned
    (at an update), or unfinished (failed and enqueued again). A finished
    trial's config and programs go with it (its best config is written
    from them wherever its folder is)."""
    optuna = studies._optuna()
    if run.evaluation is not None or run.pruned_at is not None:
        run.trial.set_user_attr("config", run.config.to_dict())
        run.trial.set_user_attr("programs", run.programs)
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


def _undo(out: pathlib.Path, made_folder: bool) -> None:
    """Remove what a new study's start wrote before it failed to open its
    storage: the record, an empty storage file, the folder it made."""
    for name in (RECORD, "study.db", "study.journal"):
        path = out / name
        if path.is_file() and (name == RECORD or path.stat().st_size == 0):
            path.unlink()
    if made_folder and out.is_dir() and not any(out.iterdir()):
        out.rmdir()


def tune(record: dict[str, Any], *, resume: bool = False, progress: bool = True,
         stream: TextIO | None = None) -> dict[str, Any]:
    """Run (or continue, ``resume``) the study of ``record`` (:func:`new_record`
    or :func:`read_record`) until ``record["trials"]`` trials count
    (:mod:`.study`); write the report. Returns ``results.json``'s content,
    with ``timing``: this call's wall, compile, init and train seconds, its
    programs and their segments (a pruning rebuild adds one). Nothing is
    written before the study can start (Optuna installed, the space and
    its policies checked, the storage opened)."""
    t_wall = time.perf_counter()
    out = pathlib.Path(record["out"])
    space = _space(record)
    first = space.config({p.name: p.lowest() for p in space.params})
    _check_policies(space)
    studies._optuna()
    made_folder = not out.exists()
    created = claim_folder(out, record, resume)
    try:
        study = studies.open_study(record["storage"], out, record["study_name"], space,
                                   first.num_updates, first.eval["every"], must_exist=resume)
    except ValidationError:
        if created:
            _undo(out, made_folder)
        raise
    seed = studies.use_sampler(study, space, first=created and not study.get_trials(
        deepcopy=False))
    rng = random.Random(seed)
    timing = {"compile": 0.0, "train": 0.0, "init": 0.0, "segments": 0.0, "programs": 0}
    idle = 0
    with stop_on_signals() as stop:
        goal = studies.budget(space, record["trials"])
        while True:
            _orphans(study, out, record)
            n = min(space.batch_size, studies.to_ask(study, goal))
            if n <= 0:
                break
            runs, done = _ask(study, space, out, n, goal, record, rng)
            if not runs:
                idle += 1
                if done or idle > 100:  # a sampler that proposes only held points
                    break
                continue
            idle = 0
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
            if done:
                break
    timing["wall"] = time.perf_counter() - t_wall
    return write_report(study, out, record, timing)


def _check_policies(space: Space) -> None:
    """Every ``run.init_from`` the space can give (fixed, or each choice of
    a categorical) names a policy this trial's network can start from
    (:func:`~plume_jax.train.warm_start.check_init_from`): a missing or
    incompatible one is refused before anything is written, not when its
    batch's program is built."""
    from plume_jax.train.warm_start import check_init_from

    values = {q.name: q.lowest() for q in space.params}
    configs = [space.config(values)]
    for p in space.params:
        if p.name == "run.init_from":
            configs = [space.config({**values, p.name: c}) for c in p.choices]
    seen = set()
    for config in configs:
        source = config.run.get("init_from")
        if source is None or source in seen:
            continue
        seen.add(source)
        try:
            check_init_from(config)
        except ValidationError as error:
            raise ValidationError.for_parameter(
                "run.init_from", source, "a policy to start from, for every value the search "
                f"space gives ({error})") from None


__all__ = ["RECORD", "TuneStopped", "claim_folder", "new_record", "read_record",
           "trial_folder", "tune"]
