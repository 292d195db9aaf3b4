"""The Optuna side of ``plume-jax tune``: storage, sampler, pruner, the
trial budget and the clean-up of trials a killed process left running.

Storage: ``sqlite:///<out>/study.db`` by default; ``--storage journal``
(Optuna's journal file storage in ``<out>/study.journal``, for several
processes or machines on a shared filesystem), ``journal:PATH``, or any
Optuna storage URL (``sqlite:///...``, ``postgresql://...``).

Budget: ``--trials N`` counts the study's trials that finished (complete or
pruned), are running or wait to run; a failed trial does not count, so a
trial re-run after a kill is counted once. Each running trial records the
host and process that trains it (user attributes ``host``, ``pid``); a
resume marks the running trials of processes that are gone on this host as
failed and enqueues their parameters again (user attribute ``rerun_of``),
so the budget is met with every trial counted once.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import socket
from typing import Any

from plume_jax.core.errors import ValidationError
from plume_jax.train.tune.space import Param, Space

#: The states a trial counts against the budget in.
COUNTED = ("COMPLETE", "PRUNED", "RUNNING", "WAITING")


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as error:
        raise ValidationError.for_parameter(
            "tune", "optuna", "optuna installed: pip install 'plume-jax[tune]'") from error
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def storage_url(storage: str | None, out: pathlib.Path) -> str:
    """The storage a study in ``out`` lives in (module docstring), as text."""
    if storage in (None, "sqlite"):
        return f"sqlite:///{(out / 'study.db').resolve()}"
    if storage == "journal":
        return f"journal:{(out / 'study.journal').resolve()}"
    if storage.startswith("journal:"):
        return f"journal:{pathlib.Path(storage.removeprefix('journal:')).resolve()}"
    if "://" not in storage:
        raise ValidationError.for_parameter(
            "--storage", storage, "sqlite, journal, journal:PATH or an Optuna storage URL "
            "(sqlite:///PATH, postgresql://...)")
    return storage


def open_storage(url: str) -> Any:
    """The Optuna storage object of :func:`storage_url`'s text."""
    optuna = _optuna()
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(url.removeprefix("journal:")))
    return url


def sampler(space: Space) -> Any:
    """The space's sampler: TPE with the constant liar (trials in flight are
    not sampled twice), random, or grid; seeded with ``space.seed``."""
    optuna = _optuna()
    if space.sampler == "random":
        return optuna.samplers.RandomSampler(seed=space.seed)
    if space.sampler == "grid":
        grid = {p.name: [encode(p, v) for v in p.values()] for p in space.params}
        return optuna.samplers.GridSampler(grid, seed=space.seed)
    return optuna.samplers.TPESampler(seed=space.seed, constant_liar=True,
                                      n_startup_trials=min(10, max(2, space.batch_size)))


def pruner(space: Space, num_updates: int, eval_every: int | None) -> Any:
    """The space's pruner; steps are training updates (where the periodic
    evaluations are reported)."""
    optuna = _optuna()
    if space.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0)
    if space.pruner == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=eval_every or 1)
    if space.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=eval_every or 1,
                                              max_resource=num_updates)
    return optuna.pruners.NopPruner()


def open_study(url: str, name: str, space: Space, num_updates: int,
               eval_every: int | None) -> Any:
    """The study ``name`` in ``url`` (created when new), maximising the greedy
    success rate."""
    optuna = _optuna()
    return optuna.create_study(storage=open_storage(url), study_name=name,
                               sampler=sampler(space),
                               pruner=pruner(space, num_updates, eval_every),
                               direction="maximize", load_if_exists=True)


def encode(p: Param, value: Any) -> Any:
    """A value as Optuna stores it: categorical lists and mappings as JSON
    text (Optuna's choices are scalars)."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def decode(p: Param, value: Any) -> Any:
    if p.type == "categorical" and isinstance(value, str) and any(
            isinstance(c, (list, dict)) and json.dumps(c) == value for c in p.choices):
        return json.loads(value)
    return value


def suggest(trial: Any, space: Space) -> dict[str, Any]:
    """Ask ``trial`` for every parameter; the decoded values by name."""
    values = {}
    for p in space.params:
        if p.type == "categorical":
            raw = trial.suggest_categorical(p.name, [encode(p, c) for c in p.choices])
        elif p.type == "int":
            raw = trial.suggest_int(p.name, p.low, p.high, step=int(p.step or 1), log=p.log)
        else:
            raw = trial.suggest_float(p.name, p.low, p.high, step=p.step, log=p.log)
        values[p.name] = decode(p, raw)
    return values


def counted(study: Any) -> int:
    """The trials that count against the budget (module docstring)."""
    return sum(t.state.name in COUNTED for t in study.get_trials(deepcopy=False))


def budget(space: Space, trials: int) -> int:
    """The trials to run: ``trials``, at most the grid's size with the grid
    sampler (which has nothing new to give after that)."""
    if space.sampler != "grid":
        return trials
    return min(trials, math.prod(len(v) for v in space.grid().values()))


def to_ask(study: Any, budget: int) -> int:
    """How many trials to ask for to meet ``budget``: the uncounted ones,
    plus those that wait (enqueued: asking for one runs it, counting it no
    second time)."""
    trials = study.get_trials(deepcopy=False)
    return budget - counted(study) + sum(t.state.name == "WAITING" for t in trials)


def claim(trial: Any) -> None:
    """Record which process trains ``trial``."""
    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("pid", os.getpid())


def _gone(attrs: dict[str, Any]) -> bool:
    if attrs.get("host") != socket.gethostname() or not isinstance(attrs.get("pid"), int):
        return False  # another machine's: its own resume cleans it up
    if attrs["pid"] == os.getpid():
        return False
    try:
        os.kill(attrs["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def requeue(study: Any, trial_number: int, params: dict[str, Any]) -> None:
    """Mark a trial that did not finish as failed and enqueue its parameters
    again (re-run once, counted once)."""
    optuna = _optuna()
    study.tell(trial_number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
    study.enqueue_trial(params, user_attrs={"rerun_of": trial_number}, skip_if_exists=False)


def requeue_orphans(study: Any) -> list[int]:
    """The running trials of processes that are gone (killed) on this host:
    failed and enqueued again (:func:`requeue`); their numbers."""
    done = []
    for t in study.get_trials(deepcopy=False):
        if t.state.name == "RUNNING" and _gone(t.user_attrs):
            requeue(study, t.number, dict(t.params))
            done.append(t.number)
    return done


__all__ = ["COUNTED", "budget", "claim", "counted", "decode", "encode", "open_storage", "open_study",
           "pruner", "requeue", "requeue_orphans", "sampler", "storage_url", "suggest",
           "to_ask"]
