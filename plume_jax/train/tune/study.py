"""The Optuna side of ``plume-jax tune``: storage, sampler, pruner, the
trial budget, which process trains which trial, and the clean-up of trials
a killed process left running.

Storage (``--storage``): ``sqlite`` (the default: ``<out>/study.db``),
``journal`` (Optuna's journal file, ``<out>/study.journal``: several
processes, or machines on a shared filesystem), ``journal:PATH``,
``sqlite:///PATH``, or a ``postgresql://`` / ``mysql://`` URL (with its
driver installed). A file inside the study folder is recorded relative to
it (``tune.json``), so a moved folder resumes where it now is; a file
elsewhere is recorded as an absolute path; an in-memory database is
refused (the study would vanish at exit). A journal whose last line a kill
or a full disk cut short is repaired on opening (the cut line never took
effect); a damaged line elsewhere is refused, naming it.

Budget: ``--trials N`` counts the study's trials that finished (complete or
pruned), are running or wait to run; a failed trial does not count. A
trial is trained only when fewer than N counted trials have a smaller
number (:func:`skip_reason`), so processes asking at once never overshoot
N; it is skipped too (marked failed, ``skipped``) when another trial holds
the same values (two processes sampling alike), so no point is trained
twice.

Claims: each trial records the host, process id, the process's start time
and a nonce of the process that trains it (user attributes ``host``,
``pid``, ``pid_start``, ``nonce``). A running trial is an orphan when its
process is gone on this host (or its pid now belongs to another process),
or when it has no claim and started over :data:`CLAIM_GRACE_S` seconds ago
(its process was killed between Optuna's ``ask()`` and the claim): a
trial whose folder holds its finished result is told as it ended, any
other is marked failed and its parameters enqueued again (user attribute
``rerun_of``), so the budget is met with every trial counted once.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import pathlib
import random
import socket
import uuid
from typing import Any

from plume_jax.core.errors import ValidationError
from plume_jax.train.tune.space import GRID_MAX, Param, Space

#: The states a trial counts against the budget in.
COUNTED = ("COMPLETE", "PRUNED", "RUNNING", "WAITING")

#: A running trial with no claim older than this (seconds) is an orphan: a
#: live process claims its trial right after asking for it. The environment
#: variable ``PLUME_JAX_TUNE_CLAIM_GRACE_S`` replaces it (tests; a very slow
#: shared storage).
CLAIM_GRACE_S = 60.0

#: This process's nonce (claims, derived sampler seeds).
NONCE = uuid.uuid4().hex

#: The storages accepted, for messages.
STORAGES = ("sqlite (default: DIR/study.db), journal (DIR/study.journal), journal:PATH, "
            "sqlite:///PATH, postgresql://... or mysql://... (with their driver installed)")


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as error:
        raise ValidationError.for_parameter(
            "tune", "optuna", "optuna installed: pip install 'plume-jax[tune]'") from error
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


# ------------------------------------------------------------------ storage
def _record_path(path: pathlib.Path, out: pathlib.Path) -> str:
    """``path`` relative to the study folder when inside it, else absolute."""
    path, root = path.resolve(), out.resolve()
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def storage_url(storage: str | None, out: pathlib.Path) -> str:
    """The storage of a study in ``out`` as ``tune.json`` records it:
    ``sqlite:FILE`` or ``journal:FILE`` (FILE relative to the study folder
    when inside it), or a server URL. Refuses what cannot hold a study
    (module docstring), in one line."""
    if storage is None or storage == "sqlite":
        return "sqlite:study.db"
    if not isinstance(storage, str) or not storage.strip() or "\n" in storage:
        raise ValidationError.for_parameter("--storage", storage, STORAGES)
    if storage == "journal":
        return "journal:study.journal"
    if storage.startswith("journal:"):
        path = storage.removeprefix("journal:")
        if not path.strip():
            raise ValidationError.for_parameter("--storage", storage,
                                                "journal:PATH with a file path")
        return "journal:" + _record_path(pathlib.Path(path), out)
    scheme = storage.split("://", 1)[0].split("+", 1)[0].lower() if "://" in storage else ""
    if scheme == "sqlite":
        path = storage.split("://", 1)[1]
        if path in ("", "/", "/:memory:") or ":memory:" in path or "mode=memory" in path:
            raise ValidationError.for_parameter(
                "--storage", storage, "a storage that outlives the process (an in-memory "
                "SQLite database vanishes at exit): sqlite:///PATH, or " + STORAGES)
        return "sqlite:" + _record_path(pathlib.Path(path.removeprefix("/")), out)
    if scheme in ("postgresql", "mysql"):
        return storage
    raise ValidationError.for_parameter("--storage", storage, STORAGES)


def storage_file(url: str, out: pathlib.Path) -> tuple[str, pathlib.Path | None]:
    """``(kind, file)`` of a recorded storage: kind ``sqlite``, ``journal``
    or ``url``; the file resolved against the study folder ``out`` (None
    for a server URL). Records of earlier versions (``sqlite:////ABS``)
    read as their absolute file."""
    if url.startswith("sqlite:///"):
        return "sqlite", pathlib.Path(url.removeprefix("sqlite:///"))
    for kind in ("sqlite", "journal"):
        if url.startswith(kind + ":") and "://" not in url:
            return kind, out / url.split(":", 1)[1]
    return "url", None


def shown(url: str, out: pathlib.Path) -> str:
    """A recorded storage as a person reads it (the file where it now is)."""
    kind, path = storage_file(url, out)
    return url if path is None else f"{kind}:{path}"


def _repair_journal(path: pathlib.Path, backend: Any) -> None:
    """Cut a journal's last line when a kill or a full disk left it
    unfinished (no newline: Optuna never applied it, and the next line
    appended to it would damage both); refuse a damaged line elsewhere,
    naming it. Done under the journal's own lock."""
    from optuna.storages.journal._file import get_lock_file

    with get_lock_file(backend._lock):
        size = path.stat().st_size
        if size == 0:
            return
        with open(path, "rb+") as f:
            f.seek(max(0, size - 1))
            if f.read(1) != b"\n":
                f.seek(0)
                data = f.read()
                f.truncate(data.rfind(b"\n") + 1)
        with open(path, "rb") as f:
            for number, line in enumerate(f, start=1):
                try:
                    json.loads(line)
                except ValueError:
                    raise ValidationError.for_parameter(
                        "--storage", f"journal:{path}", f"a journal whose every line is one "
                        f"JSON record (line {number} is damaged: keep a copy, then remove "
                        f"line {number} and the ones after it to go on from before it)"
                    ) from None


def _check_sqlite(path: pathlib.Path) -> None:
    if path.is_file() and path.stat().st_size:
        with open(path, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                raise ValidationError.for_parameter(
                    "--storage", f"sqlite:{path}", "an SQLite database (this file is not one)")


def open_storage(url: str, out: pathlib.Path, *, must_exist: bool = False) -> Any:
    """The Optuna storage of a recorded storage (:func:`storage_url`), its
    file resolved against ``out``. ``must_exist``: a resume, whose file
    storage must be there (a missing one would silently start a new study)."""
    optuna = _optuna()
    kind, path = storage_file(url, out)
    if path is not None:
        if must_exist and not path.is_file():
            raise ValidationError.for_parameter(
                "--resume", str(out), f"a study folder whose storage is there ({path} is "
                "missing: a folder of an earlier version moved? it records the absolute path "
                "of its storage)")
        if not path.parent.is_dir():
            raise ValidationError.for_parameter("--storage", f"{kind}:{path}",
                                                "a file in a folder that exists")
    if path is None:
        return url
    if kind == "journal":
        from optuna.storages.journal import JournalFileBackend

        backend = JournalFileBackend(str(path))
        if path.is_file():
            _repair_journal(path, backend)
        return optuna.storages.JournalStorage(backend)
    _check_sqlite(path)
    return f"sqlite:///{path.resolve()}"


def open_study(url: str, out: pathlib.Path, name: str, space: Space, num_updates: int,
               eval_every: int | None, *, must_exist: bool = False) -> Any:
    """The study ``name`` in the recorded storage ``url`` (created when
    new), maximising the greedy success rate; its sampler is set by
    :func:`use_sampler`. A storage that cannot be opened (a missing driver,
    a server that does not answer, a damaged file) is one line."""
    optuna = _optuna()
    storage = open_storage(url, out, must_exist=must_exist)
    try:
        return optuna.create_study(storage=storage, study_name=name,
                                   sampler=optuna.samplers.RandomSampler(),
                                   pruner=pruner(space, num_updates, eval_every),
                                   direction="maximize", load_if_exists=True)
    except ValidationError:
        raise
    except Exception as error:  # the storage's own error, whatever its library
        text = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        raise ValidationError.for_parameter(
            "--storage", shown(url, out), f"a storage that opens ({text}); one of "
            + STORAGES) from None


# ------------------------------------------------------------------ sampling
def derived_seed(space: Space, study: Any, first: bool) -> int | None:
    """The sampler's seed: the space's for the first process of a new
    study (a fresh study replays), else one derived from it, the trials
    already in the study and this process's nonce, so a resumed study or
    a joining process never replays the values sampled before."""
    if first:
        return space.seed
    text = f"{space.seed}:{len(study.get_trials(deepcopy=False))}:{NONCE}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def _grid_sampler(space: Space, seed: int | None, first: bool) -> Any:
    """A sampler that gives each trial one grid point no trial holds
    (:func:`taken`), in order for the first process, at random for the
    others; none left: :class:`GridExhausted` at the first suggestion."""
    optuna = _optuna()
    points = space.points()
    refused = space.refused(points)
    valid = [p for k, p in enumerate(points) if k not in refused]
    rng = random.Random(seed)

    class GridPoints(optuna.samplers.BaseSampler):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self.chosen: dict[int, dict[str, Any]] = {}

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            return {}

        def sample_relative(self, study: Any, trial: Any, search_space: Any) -> dict[str, Any]:
            return {}

        def sample_independent(self, study: Any, trial: Any, param_name: str,
                               param_distribution: Any) -> Any:
            if trial.number not in self.chosen:
                held = taken(study.get_trials(deepcopy=False), space, exclude=trial.number)
                free = [p for p in valid if key(space, p, encoded=False) not in held]
                if not free:
                    raise GridExhausted()
                self.chosen[trial.number] = free[0] if first else rng.choice(free)
            return encode(None, self.chosen[trial.number][param_name])

    sampler = GridPoints()
    sampler.valid = valid  # type: ignore[attr-defined]
    return sampler


class GridExhausted(Exception):
    """The grid sampler has no point left that no trial holds."""


def use_sampler(study: Any, space: Space, first: bool) -> int | None:
    """Give ``study`` the space's sampler (TPE with the constant liar:
    trials in flight are not sampled twice; random; or grid,
    :func:`_grid_sampler`), seeded with :func:`derived_seed`; the seed."""
    optuna = _optuna()
    seed = derived_seed(space, study, first)
    if space.sampler == "random":
        study.sampler = optuna.samplers.RandomSampler(seed=seed)
    elif space.sampler == "grid":
        study.sampler = _grid_sampler(space, seed, first)
    else:
        study.sampler = optuna.samplers.TPESampler(
            seed=seed, constant_liar=True, n_startup_trials=min(10, max(2, space.batch_size)))
    return seed


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


def encode(p: Param | None, value: Any) -> Any:
    """A value as Optuna stores it: categorical lists and mappings as JSON
    text (Optuna's choices are scalars)."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def decode(p: Param, value: Any) -> Any:
    if p.type == "categorical" and isinstance(value, str) and any(
            isinstance(c, (list, dict)) and json.dumps(c) == value for c in p.choices):
        return json.loads(value)
    return value


def suggest(trial: Any, space: Space) -> dict[str, Any]:
    """Ask ``trial`` for every parameter; the decoded values by name. With
    the grid sampler every parameter is a categorical of its grid values."""
    values = {}
    for p in space.params:
        if p.type == "categorical" or space.sampler == "grid":
            raw = trial.suggest_categorical(p.name, [encode(p, c) for c in p.values()])
        elif p.type == "int":
            raw = trial.suggest_int(p.name, p.low, p.high, step=int(p.step or 1), log=p.log)
        else:
            raw = trial.suggest_float(p.name, p.low, p.high, step=p.step, log=p.log)
        values[p.name] = decode(p, raw)
    return values


def key(space: Space, values: dict[str, Any], *, encoded: bool = True) -> str | None:
    """A point's identity: its values by parameter name (None: not every
    parameter has one)."""
    if any(p.name not in values for p in space.params):
        return None
    return json.dumps([values[p.name] if encoded else encode(p, values[p.name])
                       for p in space.params], sort_keys=True)


def _held(t: Any) -> dict[str, Any] | None:
    """The values a trial holds: its parameters, or a waiting trial's
    enqueued ones; None for a trial that holds none (failed, skipped)."""
    state = t.state.name
    if state == "WAITING":
        return t.system_attrs.get("fixed_params") or None
    if state in ("COMPLETE", "PRUNED", "RUNNING") or t.user_attrs.get("refused"):
        return t.params
    return None


def taken(trials: list[Any], space: Space, exclude: int | None = None) -> set[str]:
    """The points the trials hold (:func:`_held`), but trial ``exclude``."""
    out = set()
    for t in trials:
        if t.number != exclude and (values := _held(t)) is not None:
            if (k := key(space, values)) is not None:
                out.add(k)
    return out


# ------------------------------------------------------------------- budget
def counted(study: Any) -> int:
    """The trials that count against the budget (module docstring)."""
    return sum(t.state.name in COUNTED for t in study.get_trials(deepcopy=False))


def budget(space: Space, trials: int) -> int:
    """The trials to run: ``trials``, at most the number of points of a
    finite space (the grid's, less the points the config refuses)."""
    if space.sampler == "grid":
        return min(trials, len(_grid_points(space)))
    size = space.size()
    return trials if size is None else min(trials, size)


def _grid_points(space: Space) -> list[dict[str, Any]]:
    points = space.points()
    refused = space.refused(points)
    return [p for k, p in enumerate(points) if k not in refused]


def to_ask(study: Any, budget: int) -> int:
    """How many trials to ask for to meet ``budget``: the uncounted ones,
    plus those that wait (enqueued: asking for one runs it, counting it no
    second time)."""
    trials = study.get_trials(deepcopy=False)
    return budget - counted(study) + sum(t.state.name == "WAITING" for t in trials)


def skip_reason(study: Any, trial: Any, space: Space, goal: int) -> str | None:
    """Why ``trial`` (asked, claimed, its values suggested) must not be
    trained: ``goal`` counted trials have smaller numbers (another process
    asked at the same time), or another trial holds its values (a running
    one too: of two processes that sampled alike, the later to look gives
    way); None: train it."""
    trials = study.get_trials(deepcopy=False)
    before = sum(t.state.name in COUNTED for t in trials if t.number < trial.number)
    if before >= goal:
        return f"over budget: {before} counted trials before it"
    mine = key(space, dict(trial.params))
    for t in trials:
        if t.number != trial.number and (values := _held(t)) is not None \
                and key(space, values) == mine:
            return f"duplicate of trial {t.number}"
    return None


def skip(study: Any, trial: Any, reason: str) -> None:
    """Mark ``trial`` failed, not trained, with ``reason``."""
    trial.set_user_attr("skipped", reason)
    study.tell(trial, state=_optuna().trial.TrialState.FAIL)


# ------------------------------------------------------------------- claims
def _start_time(pid: int) -> int | None:
    """A process's start time (clock ticks since boot, /proc), None where
    unknown: with the pid, it names one process (a pid is reused)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def claim(trial: Any) -> None:
    """Record which process trains ``trial``."""
    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("pid", os.getpid())
    trial.set_user_attr("pid_start", _start_time(os.getpid()))
    trial.set_user_attr("nonce", NONCE)


def _grace() -> float:
    try:
        return float(os.environ.get("PLUME_JAX_TUNE_CLAIM_GRACE_S", CLAIM_GRACE_S))
    except ValueError:
        return CLAIM_GRACE_S


def _gone(t: Any) -> bool:
    """Whether running trial ``t``'s process is gone (module docstring)."""
    attrs = t.user_attrs
    if "pid" not in attrs and "host" not in attrs:  # killed between ask() and its claim
        started = t.datetime_start
        if started is None:
            return False
        age = (datetime.datetime.now() - started).total_seconds()
        return age > _grace()
    if attrs.get("host") != socket.gethostname() or not isinstance(attrs.get("pid"), int) \
            or isinstance(attrs.get("pid"), bool):
        return False  # another machine's: its own resume cleans it up
    pid = attrs["pid"]
    if attrs.get("nonce") == NONCE:
        return False  # this very process's
    if pid == os.getpid():
        return True  # an earlier process with this pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False  # another user's process: alive
    recorded = attrs.get("pid_start")
    return isinstance(recorded, int) and _start_time(pid) not in (None, recorded)


def requeue(study: Any, trial_number: int, params: dict[str, Any]) -> bool:
    """Mark a trial that did not finish as failed and enqueue its parameters
    again (re-run once, counted once); False when another process did first
    (the trial was finished already)."""
    optuna = _optuna()
    try:
        study.tell(trial_number, state=optuna.trial.TrialState.FAIL)
    except (ValueError, RuntimeError):  # finished meanwhile, by another process
        return False
    if params:
        study.enqueue_trial(params, user_attrs={"rerun_of": trial_number},
                            skip_if_exists=False)
    return True


def _finished_result(t: Any, out_of: Any) -> tuple[str, dict[str, Any]] | None:
    """A trial a process finished training but was killed before telling:
    ``("complete", summary)`` or ``("pruned", summary)`` from its folder's
    ``summary.json`` (``out_of(t)``: the folder), or None."""
    from plume_jax.files.safe_io import load_json_file

    folder = out_of(t)
    if folder is None or not (folder / "summary.json").is_file():
        return None
    try:
        summary = load_json_file(folder / "summary.json", "summary.json")
    except (ValidationError, OSError):
        return None
    tune = summary.get("tune") if isinstance(summary, dict) else None
    if not isinstance(tune, dict) or tune.get("trial") != t.number:
        return None
    evaluation = summary.get("evaluation")
    if isinstance(evaluation, dict) and isinstance(evaluation.get("success_rate"),
                                                   (int, float)):
        return "complete", summary
    if isinstance(tune.get("pruned_at_update"), int):
        return "pruned", summary
    return None


def requeue_orphans(study: Any, out_of: Any = lambda t: None,
                    finish: Any = None) -> list[int]:
    """The running trials whose process is gone (:func:`_gone`): told as
    they ended when their folder holds their result (``out_of(trial)``: the
    folder, ``finish(study, trial, kind, summary)``: tell it), else failed
    and enqueued again (:func:`requeue`); their numbers."""
    done = []
    for t in study.get_trials(deepcopy=False):
        if t.state.name != "RUNNING" or not _gone(t):
            continue
        result = _finished_result(t, out_of) if finish is not None else None
        if result is not None:
            if finish(study, t, *result):
                done.append(t.number)
            continue
        params = dict(t.system_attrs.get("fixed_params") or {}) if not t.params else \
            dict(t.params)
        if requeue(study, t.number, params):
            done.append(t.number)
    return done


__all__ = ["CLAIM_GRACE_S", "COUNTED", "GRID_MAX", "GridExhausted", "budget", "claim",
           "counted", "decode", "derived_seed", "encode", "key", "open_storage", "open_study",
           "pruner", "requeue", "requeue_orphans", "shown", "skip", "skip_reason",
           "storage_file", "storage_url", "suggest", "taken", "to_ask", "use_sampler"]
