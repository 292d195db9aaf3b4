"""The training loop: one compiled :class:`Program` of any
:class:`~plume_jax.train.algorithms.base.Algorithm` (a single run, or sweep
members vmapped), built, initialised or loaded, trained in chunks with
checkpoints between them (:func:`train_program`; chunk lengths never change
the results: docs/training.md), evaluated periodically with each member's
best policy kept, then evaluated and written. ``train``, ``sweep`` and
``tune`` train through it, by the folder rules of
:mod:`plume_jax.train.folder`. Every process runs the same calls: chunk
lengths and checkpoint decisions are process 0's
(:func:`~plume_jax.train.distributed.agree`), and process 0 alone writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import json
import math
import os
import pathlib
import platform
import signal
import threading
import time
import warnings
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.core.seeding import keys_from_seeds, seed_key
from plume_jax.files import atomic_write
from plume_jax.progress import ProgressBar
from plume_jax.train import evaluation
from plume_jax.train.algorithms.base import Algorithm, algorithm_class
from plume_jax.train.checkpoint import checkpoint_update, export_policy, load_checkpoint, \
    save_checkpoint
from plume_jax.train.config import TrainConfig, current_form
from plume_jax.train.distributed import agree, host_copy, is_main_process, mesh as make_mesh, \
    resolve_devices, shard_members, shard_runner
from plume_jax.train.evaluation import eval_num_steps, evaluate_in_lanes, member_evaluation
from plume_jax.train.folder import BEST, best_row, better, record_evaluation, recorded_best, \
    replay_rows, settle_best, write_partial_best
from plume_jax.train.lane_schedule import LaneSchedule
from plume_jax.train.members import member_of, shared, stack_members, vmap_members
from plume_jax.train.progress import Progress, RunLoggers, append_jsonl, metric_rows, write_csv
from plume_jax.train.warm_start import check_member, warm_start_program

#: Seconds of training between two host visits (metrics written, checkpoint
#: due?); the chunk lengths follow from the measured speed.
REPORT_SECONDS = 30.0
#: Most updates one call of the compiled program runs (its metrics buffer).
MAX_CHUNK = 4096
#: The keys of an evaluation summary a periodic evaluation row keeps.
ROW_KEYS = ("success_rate", "mean_steps_to_goal", "mean_return", "episodes", "seed")


def machine_info() -> dict[str, Any]:
    """Where a run trained: platform, CPU count, Python, JAX, backend, devices."""
    return {"platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "jax": jax.__version__, "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()], "processes": jax.process_count()}


def update_of(runner: Any) -> int:
    """The update ``runner`` is at (every member's), read from this
    process's first shard (a sweep's may span devices it cannot read)."""
    update = runner.update
    if isinstance(update, jax.Array) and not update.is_fully_addressable:
        update = update.addressable_data(0)
    return int(np.asarray(update).reshape(-1)[0])


# ------------------------------------------------------------------ programs
@dataclasses.dataclass
class Member:
    """One run a program trains: ``config``, ``env``, ``env_params``, run
    ``folder`` (None: nothing written), ``name`` in a sweep and extra
    ``summary.json`` fields."""

    config: TrainConfig
    env: Any
    env_params: Any
    folder: pathlib.Path | None = None
    name: str = ""
    summary: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Program:
    """What one compiled program trains: ``algo``, its members (``runs``),
    their ``hp``, ``env_params`` and ``keys`` (a leading member axis when
    ``batched``), the ``folder`` of its checkpoints (a run folder, a sweep's
    ``programs/<k>``), the ``mesh`` sharding the member axis or the env
    batch, the members' indices in their sweep, a single run's ``lanes``."""

    algo: Algorithm
    runs: list[Member]
    hp: Any
    env_params: Any
    keys: jax.Array
    batched: bool
    mesh: Any = None
    folder: pathlib.Path | None = None
    members: list[int] = dataclasses.field(default_factory=lambda: [0])
    label: str = ""
    lanes: LaneSchedule | None = None

    @property
    def config(self) -> TrainConfig:
        """The first member's config (the static settings all members share)."""
        return self.runs[0].config

    @property
    def num_updates(self) -> int:
        return self.config.num_updates

    @property
    def devices(self) -> int:
        return 1 if self.mesh is None else int(self.mesh.size)

    def meta(self, update: int) -> dict[str, Any]:
        """A checkpoint's metadata at ``update``: a single run's config, or
        a batched program's member names and configs."""
        own = {"members": [m.name for m in self.runs],
               "configs": [m.config.to_dict() for m in self.runs]} if self.batched \
            else {"config": self.config.to_dict()}
        return {**own, "update": update, "num_updates": self.num_updates}

    def runner_of(self, runner: Any, j: int) -> Any:
        """Member ``j``'s runner (the stacked runner's slice when batched)."""
        return jax.tree.map(lambda x: x[j], runner) if self.batched else runner


def build_program(runs: list[Member], *, batched: bool, folder: pathlib.Path | None = None,
                  members: list[int] | None = None, label: str = "") -> Program:
    """The :class:`Program` of ``runs`` (sharing static settings): stacked
    along a member axis when ``batched``, else the one member of a single
    run. Every member is checked (``run.init_from`` too) before any write."""
    first = runs[0]
    cls = algorithm_class(first.config.algo["algorithm"])
    mesh = lanes = None
    if batched:
        for m in runs:
            if m.config.run["lanes"] is not None:
                raise ValidationError.for_parameter(
                    "run.lanes", m.config.run["lanes"], "null in a sweep or tune member (its "
                    "program's width is the number of members it trains with; run.lanes is for "
                    f"plume-jax train){f' ({m.name})' if m.name else ''}")
        n_dev = resolve_devices(first.config.run["devices"], len(runs), "number of sweep members")
        mesh = make_mesh(n_dev, "members") if n_dev > 1 else None
        algo = cls.build(first.config, first.env, first.env_params)
        hp = jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]),
                          *[algo.hparams(m.config, m.env_params) for m in runs])
        env_params = stack_members([m.env_params for m in runs])
        keys = keys_from_seeds([m.config.run["seed"] for m in runs])
    else:
        if len(runs) != 1:
            raise ValidationError.for_parameter("runs", len(runs), "one member when unbatched")
        lanes = _lanes(first.config, cls)
        if cls.shards_env_batch and lanes is None:  # the env batch over the local devices
            n_dev = resolve_devices(first.config.run["devices"], first.config.algo["num_envs"],
                                    "algo.num_envs")
            mesh = make_mesh(n_dev, "envs") if n_dev > 1 else None
        algo = cls.build(first.config, first.env, first.env_params, mesh=mesh)
        hp = algo.hparams(first.config, first.env_params)
        env_params = first.env_params
        keys = seed_key(first.config.run["seed"])
    for m in runs:
        check_member(algo, m.config, m.env_params, m.name)
    return Program(algo=algo, runs=list(runs), hp=hp, env_params=env_params, keys=keys,
                   batched=batched, mesh=mesh, folder=folder,
                   members=list(range(len(runs))) if members is None else list(members),
                   label=label, lanes=lanes)


def _lanes(config: TrainConfig, cls: type[Algorithm]) -> LaneSchedule | None:
    """A single run's ``run.lanes``, checked (sweepable algorithm, one device
    and process). A vmapped member depends on its program's width, not its
    position or its neighbours, so lane 0 of ``N`` copies is bit for bit a
    sweep member of width ``N``."""
    lanes = config.run["lanes"]
    if lanes is None:
        return None
    if not cls.sweepable:
        raise ValidationError.for_parameter(
            "run.lanes", lanes, f"null for algo.algorithm {config.algo['algorithm']!r}, which "
            "trains one run at a time (lanes are the members of a vmapped program)")
    if config.run["devices"] not in ("auto", 1):
        raise ValidationError.for_parameter(
            "run.lanes", lanes, f"null with run.devices {config.run['devices']} (a run in "
            "lanes trains on one device: set run.devices to 1 or auto)")
    if jax.process_count() > 1:
        raise ValidationError.for_parameter(
            "run.lanes", lanes, f"null in a run of {jax.process_count()} processes (a run in "
            "lanes trains in one process)")
    return LaneSchedule.of(lanes)


def _copies(tree: Any, lanes: int) -> Any:
    """``tree`` with a leading lane axis of ``lanes`` identical copies."""
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (lanes, *jnp.shape(x))), tree)


def _init(p: Program) -> Any:
    if not p.batched and p.lanes is not None:  # lane 0 of the first width's copies
        runner = vmap_members(p.algo.init, _copies(p.keys, p.lanes.training_width(0)),
                              _copies(p.hp, p.lanes.training_width(0)), shared(p.env_params))
        return jax.tree.map(lambda x: x[0], runner)
    if not p.batched:
        return p.algo.init(p.keys, p.hp, p.env_params)
    if p.algo.sweepable:
        return vmap_members(p.algo.init, p.keys, p.hp, p.env_params)
    return jax.tree.map(lambda x: x[None], p.algo.init(*member_of((p.keys, p.hp, p.env_params), 0)))


def place_runner(p: Program, runner: Any) -> Any:
    """``runner`` on ``p``'s mesh (as it is without one)."""
    if p.mesh is None:
        return runner
    return shard_members(runner, p.mesh, "members") if p.batched else \
        shard_runner(runner, p.mesh, "envs")


def init_runner(p: Program) -> Any:
    """A fresh runner on the mesh (``run.init_from`` policies applied)."""
    runner = jax.block_until_ready(jax.jit(lambda: _init(p))())
    return place_runner(p, warm_start_program(p, runner))


def load_runner(p: Program, checkpoint: pathlib.Path) -> tuple[Any, int]:
    """The runner of ``checkpoint`` (a batched program's: of its members
    and configs) on the mesh, and its update."""
    runner, meta = load_checkpoint(checkpoint, jax.eval_shape(lambda: _init(p)))
    if p.batched:
        expected = json.loads(json.dumps(p.meta(0)))
        saved = {"members": meta.get("members"),  # configs of 0.1.x: in this version's form
                 "configs": [current_form(c) for c in meta.get("configs") or []]}
        for key in ("members", "configs"):
            if saved[key] != expected[key]:
                raise ValidationError.for_parameter(
                    "--resume", str(checkpoint),
                    f"a checkpoint of this sweep's program (its {key} differ from sweep.yaml's)")
    return place_runner(p, runner), int(meta.get("update", 0))


class _Reshaped:
    """``algo.run`` in another runner form. ``lanes`` None: a batched
    program of one member of an algorithm that is not ``sweepable`` (run
    unbatched); else a single run trained as lane 0 of ``lanes`` copies."""

    def __init__(self, algo: Algorithm, lanes: int | None = None):
        self.algo, self.lanes = algo, lanes

    def run(self, runner: Any, hp: Any, env_params: Any, num_updates: int,
            callback: Any = None, log_every: int = 1, batched: bool = False,
            count: Any = None) -> tuple[Any, dict[str, Any]]:
        if self.lanes is None:  # member 0 in, a member axis of 1 out
            k, (runner, hp, env_params) = None, member_of((runner, hp, env_params), 0)
        else:  # the copies in, lane 0 out
            k, runner, hp = 0, _copies(runner, self.lanes), _copies(hp, self.lanes)
            env_params = shared(env_params)
        inner = None if callback is None else (
            lambda m: callback(jax.tree.map(lambda x: np.asarray(x)[k], m)))
        out, metrics = self.algo.run(runner, hp, env_params, num_updates, callback=inner,
                                     log_every=log_every, batched=self.lanes is not None,
                                     count=count)
        return jax.tree.map(lambda x: x[k], out), jax.tree.map(lambda x: x[:, k], metrics)


# ------------------------------------------------------------------ stopping
class Interrupted(Exception):
    """A run stopped on SIGINT or SIGTERM, checkpointed at ``update``;
    ``resume``: the command that continues it (exit status 130 or 143)."""

    def __init__(self, signal_name: str, update: int, resume: str):
        super().__init__(f"interrupted by {signal_name} at update {update}: the checkpoint is "
                         f"saved; continue with: {resume}")
        self.signal_name, self.update, self.resume = signal_name, update, resume


class StoppedAtOnce(KeyboardInterrupt):
    """A second SIGINT: the run stops at once, without a new checkpoint."""

    def __init__(self) -> None:
        super().__init__("stopped at once by a second SIGINT, without a new checkpoint: the "
                         "run folder keeps its last checkpoint, which --resume continues from")


class StopRequest:
    """Set by :func:`stop_on_signals` when a stop was asked for (the signal's name)."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def __bool__(self) -> bool:
        return self.signal_name is not None


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """While the block runs, the first SIGINT or SIGTERM asks the run to
    stop at the end of the chunk, checkpointed; a second SIGINT interrupts
    at once (:class:`StoppedAtOnce`). Handlers only in the main thread."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum: int, frame: Any) -> None:
        if request.signal_name is not None and signum == signal.SIGINT:
            raise StoppedAtOnce
        request.signal_name = signal.Signals(signum).name

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield request
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


# ------------------------------------------------------------------ the loop
def next_chunk(done: int, num_updates: int, *, every: int | None, seconds_per_update: float | None,
               seconds_to_checkpoint: float | None, max_chunk: int = MAX_CHUNK,
               eval_every: int | None = None) -> int:
    """How many updates the next call runs: one first (to measure the
    speed), then up to the budget, the next ``every`` or ``eval_every``
    multiple, :data:`REPORT_SECONDS` of training or the timed checkpoint."""
    n = min(num_updates - done, max_chunk)
    for period in (every, eval_every):
        if period:
            n = min(n, period - done % period)
    if seconds_per_update is None:
        return 1
    spu = max(seconds_per_update, 1e-9)
    n = min(n, max(1, math.floor(REPORT_SECONDS / spu)))
    if seconds_to_checkpoint is not None:
        n = min(n, max(1, math.ceil(seconds_to_checkpoint / spu)))
    return max(1, n)


@dataclasses.dataclass
class ProgramResult:
    """A trained program: its final ``runner``, each member's metrics
    ``rows`` (from update 1), the update it started from, timings (seconds);
    ``interrupted``: the stop (signal name) it ended on, checkpointed."""

    setup: Program
    runner: Any
    rows: list[list[dict[str, Any]]]
    init_seconds: float = 0.0
    resumed_at_update: int = 0
    compile_seconds: float = 0.0
    train_seconds: float = 0.0
    checkpoint_seconds: float = 0.0
    checkpoints: int = 0
    interrupted: str | None = None

    @property
    def update(self) -> int:
        return update_of(self.runner)

    @property
    def metrics(self) -> dict[str, np.ndarray]:
        """The rows as arrays [updates, members] (NaN where a value is None)."""
        names = list(self.rows[0][0]) if self.rows and self.rows[0] else []
        return {n: np.asarray([[np.nan if r[u].get(n) is None else r[u][n] for r in self.rows]
                               for u in range(len(self.rows[0]))], np.float64) for n in names}


def train_program(p: Program, runner: Any, rows: list[list[dict[str, Any]]], *,
                  bar: ProgressBar, offset: float = 0.0, init_seconds: float = 0.0,
                  loggers: list[Any] | None = None, stop: Any = None) -> ProgramResult:
    """Train ``p`` from ``runner`` to ``p.num_updates`` in chunks of one
    compiled program (one per width of a ``run.lanes`` schedule) taking the
    number of updates per call. ``rows``: each member's rows so far,
    extended in place; ``loggers``: each member's or None; ``stop``: a
    :class:`StopRequest` (or a tuner's) that ends the run after a chunk or
    an evaluation, checkpointed (``interrupted``)."""
    cfg, steps = p.config, p.config.steps_per_update
    result = ProgramResult(p, runner, rows, init_seconds, resumed_at_update=update_of(runner))
    done = result.resumed_at_update
    hp, env_params = p.hp, p.env_params
    if p.batched and p.mesh is not None:
        hp, env_params = (shard_members(t, p.mesh, "members") for t in (hp, env_params))
    loggers = loggers or [None] * len(p.runs)
    evaluate_now = periodic_evaluator(p, loggers, note=lambda update, text: bar.update(
        offset + len(p.runs) * update * steps, message=text))
    if evaluate_now is not None and done % cfg.eval["every"] == 0 < done:
        evaluate_now(runner, done, resumed=True)  # if a kill interrupted it
    printer = Progress(bar, p.num_updates, offset=offset, members=len(p.runs),
                       prefix=p.label)
    chunks = _Chunks(p, stop, evaluate_now, result)
    phases = [(a, _Reshaped(p.algo, w), b) for a, b, w in p.lanes.ends(p.num_updates)] \
        if p.lanes is not None else [(0, p.algo if p.algo.sweepable or not p.batched
                                      else _Reshaped(p.algo), p.num_updates)]
    for begin, algo, end in phases:
        if done >= end or result.interrupted:
            continue
        at = offset + len(p.runs) * done * steps
        bar.update(at, message=f"{p.label + ' | ' if p.label else ''}compiling the training "
                   f"program{f' (from update {begin})' if len(phases) > 1 else ''}")
        t0 = time.perf_counter()
        program = jax.jit(functools.partial(
            algo.run, num_updates=min(p.num_updates, MAX_CHUNK), callback=printer,
            log_every=cfg.run["log_every"], batched=p.batched)).lower(
            runner, hp, env_params, count=1).compile()
        result.compile_seconds += time.perf_counter() - t0
        bar.restart_clock(at)
        seconds_per_update = None
        while done < end:
            n = min(chunks.length(done, seconds_per_update), end - done)
            printer.restart(done * steps)
            t0 = time.perf_counter()
            runner, metrics = program(runner, hp, env_params, count=n)
            jax.block_until_ready(runner)
            elapsed = time.perf_counter() - t0
            result.train_seconds += elapsed
            seconds_per_update, done = elapsed / n, done + n
            _append_rows(p, rows, loggers, host_copy(jax.tree.map(lambda x: x[:n], metrics)))
            if chunks.after(runner, done, seconds_per_update):
                break
    # the members' state on every process, for what follows
    result.runner = host_copy(runner) if jax.process_count() > 1 else runner
    return result


def _append_rows(p: Program, rows: list[list[dict[str, Any]]], loggers: list[Any],
                 metrics: dict[str, Any]) -> None:
    """A chunk's ``metrics`` (members on axis 1 when batched) as rows: into
    ``rows``, each member's ``metrics.jsonl`` (process 0) and its logger."""
    for j, member in enumerate(p.runs):
        if p.batched:
            new = [{k: v for k, v in r.items() if k != "member"} for r in
                   metric_rows({n: np.asarray(v)[:, j] for n, v in metrics.items()})]
        else:
            new = metric_rows(metrics)
        rows[j].extend(new)
        if member.folder is not None and is_main_process():
            append_jsonl(member.folder / "metrics.jsonl", new)
        if loggers[j] is not None:
            loggers[j].log_rows(new)


class _Chunks:
    """What the host decides between chunks: their lengths, checkpoints (to
    ``p.folder``), the periodic evaluation and the stop, kept in ``result``."""

    def __init__(self, p: Program, stop: Any, evaluate: Callable[..., None] | None,
                 result: ProgramResult):
        self.p, self.stop, self.evaluate, self.result = p, stop, evaluate, result
        self.every, self.eval_every = p.config.run["checkpoint_every"], p.config.eval["every"]
        minutes = p.config.run["checkpoint_minutes"]
        self.interval = None if minutes is None or p.folder is None else 60.0 * minutes
        self.last = time.monotonic()

    def length(self, done: int, seconds_per_update: float | None) -> int:
        """The next chunk's length (:func:`next_chunk`; without a folder,
        nothing to write between chunks: up to the next evaluation)."""
        p = self.p
        if p.folder is None:
            n = min(p.num_updates - done, MAX_CHUNK)
            return min(n, self.eval_every - done % self.eval_every) if self.evaluate else n
        left = None if self.interval is None else self.interval - (time.monotonic() - self.last)
        return agree(next_chunk(done, p.num_updates, every=self.every,
                                seconds_per_update=seconds_per_update,
                                seconds_to_checkpoint=left, eval_every=self.eval_every))

    def after(self, runner: Any, done: int, seconds_per_update: float) -> bool:
        """After a chunk: the checkpoint when one is due (a kept
        ``checkpoint_every`` multiple, a timed one, a stop, an evaluation,
        the end), then the evaluation due; whether the run stops here."""
        p, stopping = self.p, self._stopping()
        evaluate = self.evaluate if self.eval_every and done % self.eval_every == 0 else None
        if p.folder is not None:
            kept = bool(self.every and done % self.every == 0 and done < p.num_updates)
            timed = bool(agree(self.interval is not None and (
                time.monotonic() - self.last + 0.5 * seconds_per_update >= self.interval)))
            if kept or timed or stopping or evaluate is not None or done == p.num_updates:
                t0 = time.perf_counter()
                state = host_copy(runner) if jax.process_count() > 1 else runner  # a collective
                if is_main_process():
                    save_checkpoint(p.folder / "checkpoint", state, p.meta(done))
                    if kept:
                        save_checkpoint(p.folder / "checkpoints" / f"update_{done:08d}", state,
                                        p.meta(done))
                self.result.checkpoint_seconds += time.perf_counter() - t0
                self.result.checkpoints += 1
                self.last = time.monotonic()
        if evaluate is not None:
            evaluate(runner, done)
            return stopping or self._stopping()  # a tuner prunes at an evaluation
        return stopping

    def _stopping(self) -> bool:
        """Whether a stop was asked for (every process agreeing)."""
        if self.stop is None or not bool(agree(bool(self.stop))):
            return False
        self.result.interrupted = self.stop.signal_name or "a stop request"
        return True


# ------------------------------------------------------------------ evaluations
def periodic_evaluator(p: Program, loggers: list[Any], *, note: Callable[[int, str], None]
                       ) -> Callable[..., None] | None:
    """The ``on_evaluation(runner, update, resumed=False)`` of ``p`` (None
    without ``eval.every``), called after the update's checkpoint: each
    member evaluated greedily, a row (:func:`~plume_jax.train.folder.record_evaluation`:
    a new best into ``best/``), its logger's scalars, one ``note``. A member
    whose ``evaluations.jsonl`` holds the update's row gets no second one."""
    cfg = p.config
    if not cfg.eval["every"]:
        return None
    num_steps, main = eval_num_steps(cfg, p.env_params), is_main_process()
    best: list[dict[str, Any] | None] = []  # each member's recorded best row
    for j, m in enumerate(p.runs):
        if m.folder is not None and main:
            settle_best(m.folder)
            _restore_best(p, j)
        best.append(recorded_best(m.folder) if m.folder is not None else None)

    def on_evaluation(runner: Any, update: int, resumed: bool = False) -> None:
        done = [main and m.folder is not None and any(
            int(r["update"]) == update for r in replay_rows(m.folder)) for m in p.runs]
        if resumed and agree(all(m.folder is None or d for m, d in zip(p.runs, done))):
            return  # evaluated before the run stopped (or nothing to write it to)
        if jax.process_count() > 1:  # every process: a collective
            runner = host_copy(runner)
        spec, arrays = p.algo.policy(runner)
        seed, episodes = cfg.eval["periodic_seed"], cfg.eval["periodic_episodes"]
        figures = _evaluate(p, spec, arrays, seed, episodes, num_steps, True, update)
        texts = []
        for j, member in enumerate(p.runs):
            if done[j]:
                continue
            own = member_evaluation(figures, j) if p.batched else figures
            row: dict[str, Any] = {"update": update, "env_steps": update * cfg.steps_per_update,
                                   **{k: own[k] for k in ROW_KEYS}}
            row["best"] = better(row, best[j])
            best[j] = row if row["best"] else best[j]
            steps = row["mean_steps_to_goal"]
            steps = "" if steps is None else f", {steps:.1f} steps"
            texts.append(f"{member.name + ': ' if member.name else ''}success "
                         f"{row['success_rate']:.3f}{steps}{' (new best)' if row['best'] else ''}")
            if loggers[j] is not None:
                loggers[j].log_periodic_evaluation(row)
            if member.folder is not None and main:
                record_evaluation(member.folder, row, _best_writer(p, runner, j, row))
        note(update, f"evaluation at update {update} ({episodes} episodes)"
             + (" again (a kill interrupted it)" if resumed else "") + ": " + "; ".join(texts))

    return on_evaluation


def _best_writer(p: Program, runner: Any, j: int, row: dict[str, Any]
                 ) -> Callable[[pathlib.Path], Any]:
    """What writes member ``j``'s policy as the best of ``row`` into a folder."""
    return lambda folder: export_policy(
        folder, p.algo, p.runner_of(runner, j), p.runs[j].env.settings,
        {"trained_env_steps": row["env_steps"], "best_of_periodic_evaluations": row})


def _restore_best(p: Program, j: int) -> None:
    """Member ``j``'s ``best/`` again when its recorded best row has none (a
    resume from an older update dropped a later ``best/``), exported from
    the checkpoint of that row's update, if kept (else no ``best/`` until an
    evaluation beats the row)."""
    folder = p.runs[j].folder
    row = recorded_best(folder) if folder is not None else None
    if row is None or folder is None or p.folder is None or (folder / BEST).exists() \
            or jax.process_count() > 1:  # one process loading onto a global mesh would hang
        return
    update = int(row["update"])
    for ckpt in (p.folder / "checkpoints" / f"update_{update:08d}", p.folder / "checkpoint"):
        try:
            if ckpt.is_dir() and checkpoint_update(ckpt) == update:
                runner, _ = load_runner(p, ckpt)
                break
        except ValidationError:
            continue
    else:
        return
    write_partial_best(folder, row, _best_writer(p, runner, j, row))
    settle_best(folder)


def _evaluate(p: Program, spec: dict[str, Any], arrays: Any, seed: int, episodes: int,
              num_steps: int, greedy: bool, update: int) -> dict[str, Any]:
    """The evaluation of a policy on ``p``'s env (over its members when
    batched; in lanes at the width of the program that trained ``update``)."""
    env = p.runs[0].env
    if p.lanes is not None:
        return evaluate_in_lanes(env, spec, arrays, p.env_params, seed, episodes, num_steps,
                                 greedy, p.lanes.evaluation_width(update))
    return evaluation.evaluate(env, spec, arrays, p.env_params, seed, episodes, num_steps,
                               greedy=greedy, batched=p.batched)


def evaluate_members(p: Program, runner: Any) -> list[dict[str, Any]]:
    """The final evaluation of every member (``eval.greedy``,
    ``eval.num_envs`` episodes); a single run with a run folder evaluates
    its policy as reloaded from ``policy/``, the files a user loads."""
    cfg = p.config
    num_steps = eval_num_steps(cfg, p.env_params)
    greedy, seed, episodes = cfg.eval["greedy"], cfg.eval["seed"], cfg.eval["num_envs"]
    if p.batched:
        e = _evaluate(p, *p.algo.policy(runner), seed, episodes, num_steps, greedy, 0)
        return [member_evaluation(e, j) for j in range(len(p.runs))]
    from agents.trained import TrainedPolicy

    member = p.runs[0]
    if member.folder is not None and is_main_process():
        policy = TrainedPolicy.load(member.folder / "policy", greedy=greedy)
    else:
        spec, arrays = p.algo.policy(runner)
        policy = TrainedPolicy({**spec, "env": member.env.settings},
                               {k: np.asarray(v) for k, v in arrays.items()}, greedy=greedy)
    return [_evaluate(p, policy.spec, policy.params, seed, episodes, num_steps, greedy,
                      update_of(runner))]


# ------------------------------------------------------------------ finished members
def export_member(p: Program, result: ProgramResult, j: int) -> None:
    """Member ``j``'s checkpoint (unless the program's holds this update
    there) and exported policy into its run folder (process 0)."""
    member = p.runs[j]
    if member.folder is None or not is_main_process():
        return
    runner, done, cfg = p.runner_of(result.runner, j), result.update, member.config
    own = p.folder is not None and p.folder.resolve() == member.folder.resolve()
    if not own or done == result.resumed_at_update:  # nothing trained: write it
        save_checkpoint(member.folder / "checkpoint", runner,
                        {"config": cfg.to_dict(), "update": done, "num_updates": cfg.num_updates})
    export_policy(member.folder / "policy", p.algo, runner, member.env.settings,
                  {"trained_env_steps": done * cfg.steps_per_update})


def member_summary(p: Program, result: ProgramResult, j: int) -> dict[str, Any]:
    """The ``summary.json`` fields every run folder has: env, config, budget
    (and the best periodic evaluation's row, when ``best/`` holds one)."""
    member = p.runs[j]
    cfg = member.config
    out = {"env": member.env.settings.get("id", member.env.name), "config": cfg.to_dict(),
           "num_updates": cfg.num_updates,
           "env_steps_total": result.update * cfg.steps_per_update, **member.summary}
    if member.folder is not None and (best := best_row(member.folder)) is not None:
        out["best_periodic_evaluation"] = best
    return out


def write_member(p: Program, result: ProgramResult, j: int, summary: dict[str, Any], *,
                 rows: list[dict[str, Any]], loggers: RunLoggers | None = None,
                 curve: Callable[[pathlib.Path, list[dict[str, Any]]], Any] | None = None
                 ) -> None:
    """Finish member ``j``'s run folder (process 0), results first:
    ``metrics.csv`` and ``summary.json`` (atomic), the evaluation logged,
    then ``curve(folder / "learning_curve.png", rows)`` (failing: a warning)."""
    member = p.runs[j]
    if member.folder is None or not is_main_process():
        return
    folder, figure = member.folder, "learning_curve.png"
    write_csv(folder / "metrics.csv", rows)
    summary.setdefault("finished_at", dt.datetime.now(dt.timezone.utc).isoformat(
        timespec="seconds"))
    atomic_write(folder / "summary.json", json.dumps(summary, indent=2))
    if loggers is not None and summary.get("evaluation") is not None:
        loggers.log_evaluation(summary["evaluation"],
                               result.update * member.config.steps_per_update)
    if curve is None:
        return
    try:
        curve(folder / figure, rows)
    except Exception as exc:  # results first: a figure that fails loses nothing
        warnings.warn(f"{figure} was not written ({type(exc).__name__}: {exc}); "
                      "the results are in summary.json and metrics.csv", RuntimeWarning,
                      stacklevel=2)
