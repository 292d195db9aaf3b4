"""The run driver: trains the members of one compiled *program* for any
:class:`~plume_jax.train.algorithms.base.Algorithm`, for ``plume-jax train`` (a
program of one member) and ``plume-jax sweep`` (programs of members grouped
by static structure).

A :class:`Program` is what one XLA program trains: the algorithm, its
members (each a :class:`Member`: a config, its env and a run folder), their
hyperparameters and env params — stacked along a leading *member* axis when
the program is ``batched`` (a sweep: ``Algorithm.run`` vmapped over
members) and plain when it is not (a single run, or a sweep member of an
algorithm that is not ``sweepable``) — and the folder its checkpoints go to
(``checkpoint/``, ``checkpoints/update_N/``). For a single run that folder
is the member's run folder; for a sweep it is ``programs/<k>``.

What the driver owns, the same for both front ends:

- the runner: a fresh ``init`` (:func:`init_runner`) or a checkpoint,
  checked against the program (:func:`load_runner`), placed on the mesh;
- training in chunks (:func:`run_program`: :mod:`plume_jax.train.chunks`),
  every chunk's metrics rows appended to each member's ``metrics.jsonl``
  (and to its live loggers), checkpoints every ``run.checkpoint_minutes`` /
  ``run.checkpoint_every``, Ctrl-C / SIGTERM answered with a checkpoint and
  :class:`~plume_jax.train.chunks.Interrupted`;
- the greedy evaluation (:func:`evaluate_members`: one batched call for a
  batched program), and with ``eval.every`` periodic evaluations during
  training with each member's best policy kept in ``best/``
  (:mod:`plume_jax.train.periodic_eval`);
- each member's finished run folder (:func:`write_member`: its checkpoint,
  exported policy, ``metrics.csv``, ``summary.json`` — results first — and
  the learning-curve figure);
- the multi-process rules: every process runs the same calls, process 0
  alone writes (:mod:`plume_jax.train.distributed`).

Both front ends call these through one run function,
:func:`plume_jax.train.run.run` (a ``train`` is a sweep of one member); the
folder and resume rules it follows are :mod:`plume_jax.train.run_folder`'s.
``sweep`` (:mod:`plume_jax.train.sweep`) adds only the grid, the grouping
of members into programs and the ranking of the results.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import pathlib
import platform
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.files import atomic_write
from plume_jax.progress import ProgressBar
from plume_jax.core.seeding import keys_from_seeds, seed_key
from plume_jax.train.algorithms.base import Algorithm, algorithm_class
from plume_jax.train.checkpoint import export_policy, load_checkpoint, \
    save_checkpoint
from plume_jax.train.chunks import ChunkStats, checkpointer, run_in_chunks
from plume_jax.train.config import TrainConfig, current_form
from plume_jax.train.distributed import host_copy, is_main_process
from plume_jax.train.evaluation import MAX_INHERITED_EVAL_STEPS, eval_num_steps, evaluate, \
    member_evaluation
from plume_jax.train.lane_schedule import LaneSchedule
from plume_jax.train.lanes import Lanes, evaluate_in_lanes, init_in_lanes
from plume_jax.train.warm_start import check_member, warm_start_program
from plume_jax.train.loggers import RunLoggers
from plume_jax.train.members import member_of, stack_members, vmap_members
from plume_jax.train.periodic_eval import best_row, periodic_evaluator
from plume_jax.train.progress import Progress, append_jsonl, metric_rows, write_csv
from plume_jax.train.distributed import mesh as make_mesh, resolve_devices, shard_members, \
    shard_runner



def machine_info() -> dict[str, Any]:
    """Where a run trained: platform, CPU count, Python, JAX, backend, devices."""
    import os

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "processes": jax.process_count(),
    }


def write_text(path: pathlib.Path, text: str) -> None:
    """``path`` replaced atomically by ``text`` (readers see the old file or
    the new one, whole)."""
    atomic_write(path, text)


@dataclasses.dataclass
class Member:
    """One run trained by a program.

    Attributes:
        config: its validated config.
        env, env_params: the env it trains on (``config.make_env()``).
        folder: its run folder (None: nothing written).
        name: its name in a sweep (``""`` for a single run).
        summary: extra ``summary.json`` fields (a sweep member's grid values).
    """

    config: TrainConfig
    env: Any
    env_params: Any
    folder: pathlib.Path | None = None
    name: str = ""
    summary: dict[str, Any] = dataclasses.field(default_factory=dict)


def update_of(runner: Any) -> int:
    """The update ``runner`` is at (every member's is the same), read from
    this process's first shard: across several processes a sweep's runner
    spans devices this process cannot read."""
    update = runner.update
    if isinstance(update, jax.Array) and not update.is_fully_addressable:
        update = update.addressable_data(0)
    return int(np.asarray(update).reshape(-1)[0])


def _stack(trees: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *trees)


@dataclasses.dataclass
class Program:
    """Members trained by one compiled program (module docstring).

    ``hp``, ``env_params`` and ``keys`` have a leading member axis when
    ``batched``; ``mesh`` shards that axis (batched) or the env batch (a
    single run of an algorithm that ``shards_env_batch``). ``members``:
    the members' indices in their sweep (``[0]`` for a single run).
    ``lanes``: a single run's ``run.lanes`` (None: the plain unbatched
    program; else its :class:`~plume_jax.train.lane_schedule.LaneSchedule`:
    trained and evaluated as lane 0 of that many copies, a width schedule's
    segments each in its own compiled program, :mod:`plume_jax.train.lanes`).
    """

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
    def env(self) -> Any:
        return self.runs[0].env

    @property
    def envs(self) -> list[Any]:
        return [m.env for m in self.runs]

    @property
    def num_updates(self) -> int:
        return self.config.num_updates

    @property
    def devices(self) -> int:
        return 1 if self.mesh is None else int(self.mesh.size)

    def meta(self, update: int) -> dict[str, Any]:
        """A checkpoint's metadata at ``update``: a single run's config, or
        a batched program's member names and configs."""
        if not self.batched:
            return {"config": self.config.to_dict(), "update": update,
                    "num_updates": self.num_updates}
        return {"members": [m.name for m in self.runs],
                "configs": [m.config.to_dict() for m in self.runs], "update": update,
                "num_updates": self.num_updates}

    def runner_of(self, runner: Any, j: int) -> Any:
        """Member ``j``'s runner (the stacked runner's slice when batched)."""
        return jax.tree.map(lambda x: x[j], runner) if self.batched else runner


def build_program(runs: list[Member], *, batched: bool, folder: pathlib.Path | None = None,
                  members: list[int] | None = None, label: str = "") -> Program:
    """The :class:`Program` of ``runs``, which must share static settings
    and env structure (the caller groups them). ``batched``: stack their
    hyperparameters, env params and keys along a member axis (several
    members, or a sweep's program of one); otherwise ``runs`` is one
    member trained unbatched, as ``plume-jax train`` does."""
    first = runs[0]
    cls = algorithm_class(first.config.algo["algorithm"])
    mesh = None
    lanes = None
    if batched:
        _refuse_lanes(runs)
        n_dev = resolve_devices(first.config.run["devices"], len(runs),
                                "number of sweep members")
        mesh = make_mesh(n_dev, "members") if n_dev > 1 else None
        algo = cls.build(first.config, first.env, first.env_params)
        hp = _stack([algo.hparams(m.config, m.env_params) for m in runs])
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
    for m in runs:  # refused now, before a folder is written
        check_member(algo, m.config, m.env_params, m.name)
    return Program(algo=algo, runs=list(runs), hp=hp, env_params=env_params, keys=keys,
                   batched=batched, mesh=mesh, folder=folder,
                   members=list(range(len(runs))) if members is None else list(members),
                   label=label, lanes=lanes)


def _lanes(config: TrainConfig, cls: type[Algorithm]) -> LaneSchedule | None:
    """A single run's ``run.lanes`` (a width or a width schedule) as a
    :class:`~plume_jax.train.lane_schedule.LaneSchedule`, checked: a
    sweepable algorithm, one device (``run.devices`` auto or 1), one
    process."""
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


def _refuse_lanes(runs: list[Member]) -> None:
    """A batched program's members have no ``run.lanes``: their program's
    width is their number."""
    for m in runs:
        if m.config.run["lanes"] is not None:
            raise ValidationError.for_parameter(
                "run.lanes", m.config.run["lanes"], "null in a sweep or tune member (its "
                "program's width is the number of members it trains with; run.lanes is for "
                f"plume-jax train){f' ({m.name})' if m.name else ''}")


def _init(p: Program) -> Any:
    if not p.batched and p.lanes is not None:
        return init_in_lanes(p.algo, p.keys, p.hp, p.env_params, p.lanes.training_width(0))
    if not p.batched:
        return p.algo.init(p.keys, p.hp, p.env_params)
    if p.algo.sweepable:
        return vmap_members(p.algo.init, p.keys, p.hp, p.env_params)
    first = member_of((p.keys, p.hp, p.env_params), 0)
    return jax.tree.map(lambda x: x[None], p.algo.init(*first))


def _place(p: Program, runner: Any) -> Any:
    if p.mesh is None:
        return runner
    return shard_members(runner, p.mesh, "members") if p.batched else \
        shard_runner(runner, p.mesh, "envs")


def init_runner(p: Program) -> Any:
    """A fresh runner (``algo.init`` of every member, then each member whose
    ``run.init_from`` is set started from that policy:
    :mod:`plume_jax.train.warm_start`), on the program's mesh."""
    runner = jax.block_until_ready(jax.jit(lambda: _init(p))())
    return _place(p, warm_start_program(p, runner))


def load_runner(p: Program, checkpoint: pathlib.Path) -> tuple[Any, int]:
    """The runner of ``checkpoint`` (checked against the program: a batched
    program's checkpoint must hold its members and configs), on the mesh,
    and its update."""
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
    return _place(p, runner), int(meta.get("update", 0))


class _OneMember:
    """A batched program of one member of an algorithm that is not
    ``sweepable``: ``run`` takes and gives the stacked form (a leading
    member axis of size 1) and runs the algorithm unbatched."""

    def __init__(self, algo: Algorithm):
        self.algo = algo

    def __getattr__(self, name: str) -> Any:
        return getattr(self.algo, name)

    def run(self, runner: Any, hp: Any, env_params: Any, num_updates: int,
            callback: Any = None, log_every: int = 1, batched: bool = True, count: Any = None):
        def first(tree: Any) -> Any:
            return member_of(tree, 0)

        inner = None if callback is None else (
            lambda m: callback(jax.tree.map(lambda x: np.asarray(x)[None], m)))
        runner, metrics = self.algo.run(first(runner), first(hp), first(env_params),
                                        num_updates, callback=inner, log_every=log_every,
                                        batched=False, count=count)
        return (jax.tree.map(lambda x: x[None], runner),
                jax.tree.map(lambda x: x[:, None], metrics))


@dataclasses.dataclass
class ProgramResult:
    """A trained program: its final ``runner``, per-member metrics ``rows``
    (one list of per-update rows per member, from update 1), timings, the
    update it started from (0: fresh) and ``interrupted`` (the signal that
    stopped it early, after a checkpoint)."""

    setup: Program
    runner: Any
    rows: list[list[dict[str, Any]]]
    init_seconds: float
    stats: ChunkStats
    resumed_at_update: int = 0

    @property
    def compile_seconds(self) -> float:
        return self.stats.compile_seconds

    @property
    def train_seconds(self) -> float:
        return self.stats.train_seconds

    @property
    def interrupted(self) -> str | None:
        return self.stats.interrupted

    @property
    def update(self) -> int:
        return update_of(self.runner)

    @property
    def metrics(self) -> dict[str, np.ndarray]:
        """The rows as arrays [updates, members] (NaN where a value is None)."""
        names = list(self.rows[0][0]) if self.rows and self.rows[0] else []
        return {n: np.asarray([[np.nan if r[u].get(n) is None else r[u][n] for r in self.rows]
                               for u in range(len(self.rows[0]))], np.float64) for n in names}


def run_program(p: Program, runner: Any, rows: list[list[dict[str, Any]]], *,
                bar: ProgressBar, offset: float = 0.0, init_seconds: float = 0.0,
                loggers: list[RunLoggers | None] | None = None, stop: Any = None
                ) -> ProgramResult:
    """Train ``p`` from ``runner`` (at its update; ``rows``: each member's
    metrics rows so far, extended in place) to ``p.num_updates``.

    Every chunk's rows are appended to each member's ``metrics.jsonl`` (by
    process 0) and to its ``loggers`` entry; checkpoints go to ``p.folder``
    (none when it is None). The chunking rules, timed and kept checkpoints
    and the stop request are :func:`~plume_jax.train.chunks.run_in_chunks`'s.
    """
    cfg = p.config
    done = update_of(runner)
    start = done
    main = is_main_process()
    hp, env_params = p.hp, p.env_params
    if p.batched and p.mesh is not None:
        hp = shard_members(hp, p.mesh, "members")
        env_params = shard_members(env_params, p.mesh, "members")
    loggers = loggers or [None] * len(p.runs)

    def on_chunk(metrics: dict[str, Any], _: int) -> None:
        for j, member in enumerate(p.runs):
            member_metrics = ({n: np.asarray(v)[:, j] for n, v in metrics.items()}
                              if p.batched else metrics)
            new = [{k: v for k, v in r.items() if k != "member"}
                   for r in metric_rows(member_metrics)] if p.batched else \
                metric_rows(member_metrics)
            rows[j].extend(new)
            if member.folder is not None and main:
                append_jsonl(member.folder / "metrics.jsonl", new)
            logger = loggers[j]
            if logger is not None:
                logger.log_rows(new)

    algo: Any = p.algo if (p.algo.sweepable or not p.batched) else _OneMember(p.algo)
    phases = None
    if p.lanes is not None:  # each segment's width: its own program, from its update on
        phases = [(start, Lanes(p.algo, width)) for start, width in p.lanes.segments]
        algo = phases[0][1]
    on_evaluation = periodic_evaluator(
        p, loggers, load=load_runner, note=lambda update, text: bar.update(
            offset + len(p.runs) * update * cfg.steps_per_update, message=text))
    if on_evaluation is not None and done % cfg.eval["every"] == 0 < done:
        # the evaluation of the update resumed from, if a kill interrupted it
        on_evaluation(runner, done, resumed=True)
    printer = Progress(bar, p.num_updates, cfg.steps_per_update, offset=offset,
                       members=len(p.runs), prefix=p.label)
    runner, stats = run_in_chunks(
        algo, runner, hp, env_params, done=done, num_updates=p.num_updates,
        log_every=cfg.run["log_every"], bar=bar, printer=printer, bar_offset=offset,
        bar_scale=len(p.runs), on_chunk=on_chunk,
        on_checkpoint=checkpointer(p.folder, p.meta) if p.folder is not None else None,
        every=cfg.run["checkpoint_every"], minutes=cfg.run["checkpoint_minutes"],
        batched=p.batched, label=p.label, stop=stop, eval_every=cfg.eval["every"],
        on_evaluation=on_evaluation, phases=phases)
    if jax.process_count() > 1:  # the members' state on every process, for what follows
        runner = host_copy(runner)
    return ProgramResult(setup=p, runner=runner, rows=rows, init_seconds=init_seconds,
                         stats=stats, resumed_at_update=start)


def evaluate_members(p: Program, runner: Any) -> list[dict[str, Any]]:
    """The greedy (``eval.greedy``) evaluation of every member on
    ``eval.num_envs`` fresh episodes: one batched call for a batched
    program; a single run evaluates its exported policy as reloaded from
    disk (``policy/``, written by :func:`export_member` first) when it has
    a run folder, so the figures are those of the files a user loads."""
    cfg = p.config
    num_steps = eval_num_steps(cfg, p.env_params)
    if p.batched:
        spec, arrays = p.algo.policy(runner)
        e = evaluate(p.env, spec, arrays, p.env_params, cfg.eval["seed"], cfg.eval["num_envs"],
                     num_steps, greedy=cfg.eval["greedy"], batched=True)
        return [member_evaluation(e, j) for j in range(len(p.runs))]
    from agents.trained import TrainedPolicy

    member = p.runs[0]
    greedy = cfg.eval["greedy"]
    if member.folder is not None and is_main_process():
        policy = TrainedPolicy.load(member.folder / "policy", greedy=greedy)
    else:
        spec, arrays = p.algo.policy(runner)
        policy = TrainedPolicy({**spec, "env": p.env.settings},
                               {k: np.asarray(v) for k, v in arrays.items()}, greedy=greedy)
    if p.lanes is not None:  # at the width of the program that trained the last update
        return [evaluate_in_lanes(p.env, policy.spec, policy.params, p.env_params,
                                  cfg.eval["seed"], cfg.eval["num_envs"], num_steps, greedy,
                                  p.lanes.evaluation_width(update_of(runner)))]
    return [evaluate(p.env, policy.spec, policy.params, p.env_params, cfg.eval["seed"],
                     cfg.eval["num_envs"], num_steps, greedy=greedy)]


def export_member(p: Program, result: ProgramResult, j: int) -> None:
    """Member ``j``'s final state into its run folder (process 0): its
    checkpoint — unless the program's checkpoints already go there and one
    holds this update — and its exported policy."""
    member = p.runs[j]
    if member.folder is None or not is_main_process():
        return
    runner = p.runner_of(result.runner, j)
    done = result.update
    cfg = member.config
    own = p.folder is not None and p.folder.resolve() == member.folder.resolve()
    if not own or done == result.resumed_at_update:  # nothing trained: write it
        save_checkpoint(member.folder / "checkpoint", runner,
                        {"config": cfg.to_dict(), "update": done, "num_updates": cfg.num_updates})
    export_policy(member.folder / "policy", p.algo, runner, member.env.settings,
                  {"trained_env_steps": done * cfg.steps_per_update})


def member_summary(p: Program, result: ProgramResult, j: int) -> dict[str, Any]:
    """The ``summary.json`` fields every run folder has: env, config, budget."""
    member = p.runs[j]
    cfg = member.config
    done = result.update
    out = {"env": member.env.settings.get("id", member.env.name), "config": cfg.to_dict(),
           "num_updates": cfg.num_updates, "env_steps_total": done * cfg.steps_per_update,
           **member.summary}
    best = best_row(member.folder) if member.folder is not None else None
    if best is not None:  # the periodic evaluations' best policy, in best/
        out["best_periodic_evaluation"] = best
    return out


def write_member(p: Program, result: ProgramResult, j: int, summary: dict[str, Any], *,
                 rows: list[dict[str, Any]] | None = None, loggers: RunLoggers | None = None,
                 curve: Callable[[pathlib.Path, list[dict[str, Any]]], None] | None = None,
                 figure: str = "learning_curve.png") -> None:
    """Finish member ``j``'s run folder (process 0), results first:
    ``metrics.csv`` (of ``rows``, default the member's rows of this call)
    and ``summary.json`` (atomic replacements), the
    evaluation logged to ``loggers``, then the figure ``curve(folder /
    figure, rows)`` — a figure that fails is a warning that loses nothing."""
    member = p.runs[j]
    if member.folder is None or not is_main_process():
        return
    folder = member.folder
    rows = result.rows[j] if rows is None else rows
    write_csv(folder / "metrics.csv", rows)
    summary.setdefault("finished_at", dt.datetime.now(dt.timezone.utc).isoformat(
        timespec="seconds"))
    write_text(folder / "summary.json", json.dumps(summary, indent=2))
    if loggers is not None and summary.get("evaluation") is not None:
        loggers.log_evaluation(summary["evaluation"],
                               result.update * member.config.steps_per_update)
    if curve is None:
        return
    try:
        curve(folder / figure, rows)
    except Exception as exc:  # results first: a figure that fails loses nothing
        import warnings

        warnings.warn(f"{figure} was not written ({type(exc).__name__}: {exc}); "
                      "the results are in summary.json and metrics.csv", RuntimeWarning,
                      stacklevel=2)


__all__ = ["MAX_INHERITED_EVAL_STEPS", "Member", "Program", "ProgramResult", "build_program",
           "eval_num_steps", "evaluate_members", "export_member", "init_runner", "load_runner",
           "machine_info", "member_summary", "run_program", "update_of", "write_member",
           "write_text"]
