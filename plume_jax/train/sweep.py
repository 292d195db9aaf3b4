"""Sweeps: a grid of training runs, one compiled program per static
structure, every member a run folder you can evaluate, load and resume.
The programs are run by the driver (:mod:`plume_jax.train.driver`), as a
single run is; this module expands the grid, groups the members and ranks
the results.

``Algorithm.update`` (for PPO, ``PPO.update``) is ``vmap``ped over a leading *member* axis of the runner, of
the hyperparameters (:class:`~plume_jax.train.algorithms.ppo.Hparams`) and of the env
params, and ``lax.scan``ned over updates: one XLA program trains every
member of a *program group*. Members whose static settings (network shape,
batch sizes, ``algo.total_steps``, grid size, component types, ...) and env
structure are equal form one group; members that differ only in array
leaves — the seed, the dynamic algorithm settings (``algo.learning_rate``,
``algo.ent_coef``, ``algo.gamma``, ``algo.gae_lambda``, ``algo.clip_eps``,
``algo.vf_coef``, ``algo.max_grad_norm``) and dynamic env settings
(``env.sigma``, ``env.max_steps``, ``env.reward.scale``, ...) — share a
program. A sweep over static settings runs one program per group, one after
the other, and writes one summary for all; the output says which members
shared a program.

Sweep YAML::

    base: train_gaussian.yaml      # a training config (path relative to
                                   # this file), or an inline mapping
    set:                           # optional: overrides of the base
      algo.total_steps: 500000
    grid:                          # the swept values (any setting by its
      run.seed: [0, 1]             # dotted name, see config.apply_dotted)
      algo.learning_rate: [0.0003, 0.001]
      env.reward.scale: [0.05, 0.1]
      network.hidden_sizes: [[32], [64, 64]]    # static: two programs
    mode: product                  # product (every combination) | zip

Output folder::

    sweep.yaml           the resolved sweep (base config, grid, mode)
    summary.md           settings ranked by greedy evaluation success (mean
                         and spread over seeds), the best named; programs
    results.csv/.json    one row per member; results.json has everything
    metrics.jsonl        per-update metrics of every member
    eval_success.png     greedy success per setting (seeds as dots)
    eval_steps.png       mean steps to the goal per setting
    train_success.png    training success rate per setting (seed mean, range;
                         points of at least 20 ended episodes, the count
                         below)
    train_return.png     training return per setting (likewise)
    members/<name>/      one run folder per member, named by its grid values
                         (learning_rate-0.001_seed-0: no quotes needed in a
                         shell, see member_names; sweep --resume renames
                         the learning_rate=0.001,seed=0 folders of older
                         sweeps): config.yaml, metrics.jsonl/.csv, tensorboard/,
                         checkpoint/ (resume with plume-jax train --resume),
                         policy/ (agents.trained.TrainedPolicy.load),
                         summary.json
    programs/<k>/        checkpoint/ of program k (its members' stacked
                         training state), every run.checkpoint_minutes;
                         plume-jax sweep --resume DIR continues from them

Vmapped members run in lock-step: on a CPU with few cores a sweep of M
members costs about M single runs (the work is the same and a single run
already keeps the cores busy), but each group compiles once and runs as one
program; with several devices the members are sharded across them
(``run.devices``) and nothing is communicated, so the sweep scales with the
device count. Across several processes (:mod:`plume_jax.train.distributed`)
the members of a program shard over every device of every process (their
number must be a multiple of the device count); process 0 writes the
outputs, from the members' state gathered to every process. Because
``vmap`` changes the order of floating-point reductions, a member agrees
with the single run of the same seed and hyperparameters to float tolerance
over the first updates; over long runs the two drift apart (PPO is chaotic
in its parameters) and agree only statistically. A member resumed with
``plume-jax train --resume`` continues as a single run.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import itertools
import json
import math
import pathlib
import re
import time
from collections.abc import Mapping
from typing import Any, TextIO

import numpy as np

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.progress import ProgressBar
from plume_jax.train import driver
from plume_jax.train.algorithms.base import algorithm_class
from plume_jax.train.checkpoint import checkpoint_update, read_meta
from plume_jax.train.chunks import Interrupted, stop_on_signals
from plume_jax.train.config import TrainConfig, apply_dotted, dump_yaml, read_yaml, \
    static_signature, train_config
from plume_jax.train.distributed import barrier, check_joined, is_main_process
from plume_jax.train.driver import Member, Program, ProgramResult, build_program, \
    export_member, init_runner, load_runner, machine_info, member_summary, run_program, \
    write_member, write_text
from plume_jax.train.loggers import RunLoggers, check_wandb
from plume_jax.train.plots import plot_setting_bars, plot_setting_curves
from plume_jax.train.progress import episode_mean, read_jsonl, rows_up_to, write_csv, \
    write_jsonl
from plume_jax.train.periodic_eval import check_best, trim_evaluations
from plume_jax.train.run_folder import FolderLock, check_out_dir, check_writable_logdir, \
    clear_outputs, make_out_dir, set_aside_later_state

SWEEP_KEYS = ("base", "set", "grid", "mode")

#: What ``sweep`` writes into its folder (``overwrite`` deletes these).
SWEEP_OUTPUTS = ("sweep.yaml", "summary.md", "results.csv", "results.json", "metrics.jsonl",
                 "eval_success.png", "eval_steps.png", "train_success.png", "train_return.png",
                 "members", "programs")

SEED_KEY = "run.seed"


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A validated sweep: the base config, one assignment dict, config and
    folder name per member."""

    base: TrainConfig
    grid: dict[str, list[Any]]
    mode: str
    members: list[dict[str, Any]]
    configs: list[TrainConfig]
    names: list[str] = dataclasses.field(default_factory=list)


def _split_sweep_overrides(overrides: Mapping[str, Any]) -> tuple[dict, dict, Any]:
    """Command-line ``--set`` items of a sweep -> (base settings, grid
    entries, mode)."""
    sets, grid, mode = {}, {}, None
    for key, value in overrides.items():
        if key == "mode":
            mode = value
        elif key.startswith("grid."):
            grid[key.removeprefix("grid.")] = value
        elif key in SWEEP_KEYS:
            raise ValidationError.for_parameter(
                "--set", key, "a dotted setting of the base config, grid.KEY=[...] or mode=...")
        else:
            sets[key] = value
    return sets, grid, mode


def sweep_config(data: Mapping[str, Any], *, base_dir: str | pathlib.Path | None = None,
                 overrides: Mapping[str, Any] | None = None) -> SweepConfig:
    """Validate a sweep mapping (see the module docstring).

    ``overrides``: dotted ``--set`` items: a setting of the base config
    (added to ``set``), ``grid.KEY`` (replaces or adds a grid entry) or
    ``mode``.
    """
    if not isinstance(data, Mapping):
        raise ValidationError.for_parameter("sweep", data, f"a mapping with keys {SWEEP_KEYS}")
    unknown = sorted(set(data) - set(SWEEP_KEYS))
    if unknown:
        raise ValidationError.for_parameter(unknown[0], data[unknown[0]],
                                            f"a sweep key: one of {list(SWEEP_KEYS)}")
    extra_set, extra_grid, extra_mode = _split_sweep_overrides(overrides or {})
    base = data.get("base")
    base_dir = pathlib.Path(base_dir) if base_dir is not None else pathlib.Path(".")
    if isinstance(base, str):
        path = pathlib.Path(base)
        if not path.is_absolute() and not path.exists():
            path = base_dir / path
        raw = read_yaml(path, parameter="base")
        raw_dir = path.parent
    elif isinstance(base, Mapping):
        raw, raw_dir = copy.deepcopy(dict(base)), base_dir
    else:
        raise ValidationError.for_parameter("base", base,
                                            "a training config path or an inline mapping")
    sets = data.get("set") or {}
    if not isinstance(sets, Mapping):
        raise ValidationError.for_parameter("set", sets, "a mapping of SECTION.KEY: value")
    for key, value in {**sets, **extra_set}.items():
        apply_dotted(raw, key, value, "set")
    base_cfg = train_config(raw, base_dir=raw_dir)

    mode = extra_mode if extra_mode is not None else data.get("mode", "product")
    if mode not in ("product", "zip"):
        raise ValidationError.for_parameter("mode", mode, "'product' or 'zip'")
    grid = data.get("grid")
    if not isinstance(grid, Mapping) or not (grid or extra_grid):
        raise ValidationError.for_parameter("grid", grid,
                                            "a non-empty mapping of SECTION.KEY: [values]")
    grid = {**grid, **extra_grid}
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)) or not values:
            raise ValidationError.for_parameter(f"grid.{key}", values, "a non-empty list")
    keys = list(grid)
    if mode == "zip":
        lengths = {len(v) for v in grid.values()}
        if len(lengths) != 1:
            raise ValidationError.for_parameter("grid", dict(grid),
                                                "lists of one length (mode: zip)")
        combos = list(zip(*grid.values()))
    else:
        combos = list(itertools.product(*grid.values()))
    members = [dict(zip(keys, combo)) for combo in combos]
    configs = []
    for i, assignment in enumerate(members):
        member_raw = copy.deepcopy(raw)
        for key, value in assignment.items():
            apply_dotted(member_raw, key, value, f"grid.{key}")
        try:
            cfg = train_config(member_raw, base_dir=raw_dir)
        except ValidationError as exc:
            raise ValidationError(f"sweep member {i} {assignment}: {exc}", parameter=exc.parameter,
                                  value=exc.value, allowed=exc.allowed) from None
        configs.append(cfg)
    return SweepConfig(base=base_cfg, grid={k: list(v) for k, v in grid.items()}, mode=mode,
                       members=members, configs=configs, names=member_names(members))


def load_sweep_config(path: str | pathlib.Path, overrides: Mapping[str, Any] | None = None
                      ) -> SweepConfig:
    """Read and validate a sweep YAML file, with optional ``--set`` items
    (see :func:`sweep_config`)."""
    return sweep_config(read_yaml(path), base_dir=pathlib.Path(path).parent, overrides=overrides)


# ------------------------------------------------------------------ names
def short_key(key: str) -> str:
    """``algo.learning_rate`` -> ``learning_rate``; ``env.overrides.reward.scale``
    and ``env.reward.scale`` -> ``reward.scale``."""
    parts = key.split(".")
    if parts[0] == "env" and len(parts) > 1:
        parts = parts[2:] if parts[1] == "overrides" and len(parts) > 2 else parts[1:]
    elif len(parts) > 1:
        parts = parts[1:]
    return ".".join(parts)


@dataclasses.dataclass(frozen=True)
class _NameStyle:
    """How :func:`member_names` spells a member's grid values."""

    key_value: str      # between a key and its value
    entries: str        # between two grid entries
    mapping: str        # between the items of a mapping value
    unsafe: re.Pattern  # characters replaced by ``_``
    strip: str          # leading characters removed


#: Shell-safe folder names: letters, digits and ``-_.`` only
#: (``learning_rate-0.001_seed-0``), never starting with ``-`` or ``.``.
SHELL_SAFE = _NameStyle("-", "_", "_", re.compile(r"[^A-Za-z0-9._-]+"), ".-")

#: The names older sweeps gave their members, before names were shell-safe
#: (``learning_rate=0.001,seed=0``: ``=`` and ``,`` need quoting in a
#: shell); ``sweep --resume`` renames such member folders (see
#: :func:`rename_legacy_member_folders`).
LEGACY = _NameStyle("=", ",", "+", re.compile(r"[^A-Za-z0-9._=+-]+"), ".")


def _value_text(value: Any, style: _NameStyle) -> str:
    if isinstance(value, (list, tuple)):
        return "x".join(_value_text(v, style) for v in value)
    if isinstance(value, Mapping):
        return style.mapping.join(f"{k}{style.key_value}{_value_text(v, style)}"
                                  for k, v in value.items())
    return str(value)


def member_names(members: list[dict[str, Any]], max_length: int = 100,
                 style: _NameStyle = SHELL_SAFE) -> list[str]:
    """Folder names from the grid values (``learning_rate-0.001_seed-0``):
    letters, digits and ``-_.`` only, so a shell needs no quotes around
    them, never starting with ``-`` or ``.``, at most ``max_length``
    characters, and unique: a name that clashes with an earlier member's
    (also one differing only in case, or in characters replaced by ``_``)
    gets ``-<member index>``. ``style=LEGACY`` gives the names of older
    sweeps."""
    names: list[str] = []
    seen: set[str] = set()
    for i, assignment in enumerate(members):
        short = {k: short_key(k) for k in assignment}
        if len(set(short.values())) < len(short):  # two keys with one short name
            short = {k: k for k in assignment}
        parts = [style.unsafe.sub("_", f"{short[k]}{style.key_value}{_value_text(v, style)}")
                 for k, v in assignment.items()]
        name = style.entries.join(parts).lstrip(style.strip) or f"member{i}"
        name = name[:max_length]
        clash, extra = name, 0
        while name.casefold() in seen:  # -i, then -i-1, -i-2, ... until it is new
            suffix = f"-{i}" + (f"-{extra}" if extra else "")
            name, extra = f"{clash[:max_length - max(8, len(suffix))]}{suffix}", extra + 1
        seen.add(name.casefold())
        names.append(name)
    return names


def legacy_member_names(members: list[dict[str, Any]]) -> list[str]:
    """The folder names older sweeps gave their members
    (``learning_rate=0.001,seed=0``), for :func:`rename_legacy_member_folders`."""
    return member_names(members, style=LEGACY)


def member_label(assignment: dict[str, Any]) -> str:
    """``learning_rate=0.001, seed=0``."""
    return ", ".join(f"{short_key(k)}={v}" for k, v in assignment.items())


# ------------------------------------------------------------------ programs
def _env_structure(env: Any) -> Any:
    """What members must share to run in one program: the env's static
    structure (``PlumeEnv.structure``: everything but its default params)."""
    return env.structure


def _program_key(cfg: TrainConfig, env: Any) -> tuple[str, Any]:
    static = {**static_signature(cfg), **{f"eval.{k}": v for k, v in cfg.eval.items()}}
    return json.dumps(static, sort_keys=True, default=str), _env_structure(env)


def program_groups(sweep: SweepConfig) -> list[list[int]]:
    """The members of each compiled program, in member order: members share
    a program when their static settings and env structure are equal and
    their algorithm is ``sweepable`` (else every member is a program)."""
    keys: list[tuple[str, Any]] = []
    groups: list[list[int]] = []
    for i, cfg in enumerate(sweep.configs):
        env, _ = cfg.make_env()
        key = _program_key(cfg, env)
        if not algorithm_class(cfg.algo["algorithm"]).sweepable:
            keys.append(key)
            groups.append([i])
            continue
        for k, group in zip(keys, groups):
            if k == key:
                group.append(i)
                break
        else:
            keys.append(key)
            groups.append([i])
    return groups


def setup(sweep: SweepConfig, members: list[int] | None = None,
          out: pathlib.Path | None = None, program: int = 1) -> Program:
    """The batched :class:`~plume_jax.train.driver.Program` of ``members``
    (default: all) — their envs built, checked to share one program
    (:func:`program_groups`), hyperparameters, env params and keys stacked
    along the member axis. With ``out`` (the sweep folder) the members' run
    folders are ``out/members/<name>`` and the program's checkpoints go to
    ``out/programs/<program>``."""
    members = list(range(len(sweep.configs))) if members is None else list(members)
    runs: list[Member] = []
    ref = None
    for i in members:
        cfg = sweep.configs[i]
        env, env_params = cfg.make_env()
        key = _program_key(cfg, env)
        if ref is None:
            ref = key
        elif key != ref:
            changed = [k for k in sweep.members[i] if k.startswith("env.")]
            raise ValidationError.for_parameter(
                changed[0] if changed else "sweep", sweep.members[i],
                "members of one program: the same static settings and env structure (grid size, "
                "component types); run_sweep groups members into programs by these")
        runs.append(Member(cfg, env, env_params, name=sweep.names[i],
                           folder=None if out is None else out / "members" / sweep.names[i],
                           summary={"sweep": str(out), "member": i,
                                    "grid_values": sweep.members[i], "program": program}))
    return build_program(runs, batched=True, members=members,
                         folder=None if out is None else out / "programs" / str(program))


@dataclasses.dataclass
class SweepResult:
    """What :func:`run_sweep` returns: ``summary`` (also ``results.json``)
    and one :class:`~plume_jax.train.driver.ProgramResult` per program.
    ``runner``, ``metrics`` and ``setup`` are those of a one-program sweep."""

    summary: dict[str, Any]
    programs: list[ProgramResult]

    def _only(self) -> ProgramResult:
        if len(self.programs) != 1:
            raise ValidationError.for_parameter("programs", len(self.programs),
                                                "one program (use .programs)")
        return self.programs[0]

    @property
    def runner(self) -> Any:
        return self._only().runner

    @property
    def metrics(self) -> dict[str, np.ndarray]:
        return self._only().metrics

    @property
    def setup(self) -> Program:
        return self._only().setup


# ------------------------------------------------------------------ running
def _resume_rows(p: Program, done: int, legacy: list[str]) -> list[list[dict[str, Any]]]:
    """Each member's metrics rows up to ``done``, the update of its program's
    checkpoint (already loaded and checked), their run folders'
    ``metrics.jsonl`` trimmed to them (atomic replacements, every row kept)
    and a later state of the program folder set aside. ``legacy``: the
    sweep's members' older names (:func:`legacy_member_names`)."""
    assert p.folder is not None  # resumed from the checkpoint in its folder
    members_dir = p.folder.parent.parent / "members"
    rows = [_member_rows(members_dir, m.name, done, legacy[i])
            for m, i in zip(p.runs, p.members)]
    if is_main_process():  # reads; process 0 writes the files
        for m, kept in zip(p.runs, rows):
            assert m.folder is not None  # a program with a folder writes every member
            make_out_dir(m.folder)
            write_jsonl(m.folder / "metrics.jsonl", kept)
            trim_evaluations(m.folder, done)
        set_aside_later_state(p.folder, done, p.folder / "checkpoint", [])
    return rows


def _member_rows(members_dir: pathlib.Path, name: str, done: int,
                 legacy_name: str | None = None) -> list[dict[str, Any]]:
    """The metrics rows of member ``name`` for updates 1..``done``: from its
    run folder, or — when that file was deleted or lost rows — from the
    sweep's own ``metrics.jsonl`` (written when the sweep last finished,
    naming the member ``name`` or, in an older sweep, ``legacy_name``).
    ``StateError`` naming the member when neither holds them all."""
    def complete(rows: list[dict[str, Any]]) -> bool:
        return {int(r["update"]) for r in rows} >= set(range(1, done + 1))

    rows = rows_up_to(members_dir / name / "metrics.jsonl", done)
    if complete(rows):
        return rows
    sweep_rows = [{k: v for k, v in r.items() if k not in ("member", "name")}
                  for r in read_jsonl(members_dir.parent / "metrics.jsonl")
                  if r.get("name") in (name, legacy_name) and int(r["update"]) <= done]
    if complete(sweep_rows):
        return sweep_rows
    raise StateError(
        f"sweep --resume: member {name!r} has metrics rows for {len(rows)} of the {done} updates "
        f"its program's checkpoint holds (members/{name}/metrics.jsonl was deleted or cut), and "
        "the sweep's metrics.jsonl does not hold them either; restore the file, or run the "
        "sweep anew with --overwrite")


def member_folders(out: pathlib.Path, sweep: SweepConfig, *, resume: bool = False
                   ) -> list[pathlib.Path]:
    """Each member's run folder in the sweep folder ``out``:
    ``members/<name>``; when ``resume`` and only the folder of its older
    name (:func:`legacy_member_names`) exists, that one, which
    :func:`rename_legacy_member_folders` renames. ``ValidationError`` naming
    both when a member has a folder under each name."""
    folders = []
    old_names = legacy_member_names(sweep.members) if resume else sweep.names
    for name, old in zip(sweep.names, old_names):
        new_dir, old_dir = out / "members" / name, out / "members" / old
        if old == name or not old_dir.is_dir():
            folders.append(new_dir)
        elif new_dir.exists():
            raise ValidationError.for_parameter(
                "--resume", str(out),
                f"one folder per member: members/{old} (the member's older name) and "
                f"members/{name} (its name now) are both there; move the one that is not "
                "this sweep's member out of the sweep folder")
        else:
            folders.append(old_dir)
    return folders


def rename_legacy_member_folders(out: pathlib.Path, sweep: SweepConfig,
                                 locks: Mapping[pathlib.Path, FolderLock] | None = None
                                 ) -> list[tuple[pathlib.Path, pathlib.Path]]:
    """For ``sweep --resume`` of a sweep written with the older member names
    (``learning_rate=0.001,seed=0``, :data:`LEGACY`): rename each member
    folder that has only its older name to its name now, one atomic
    ``rename`` per folder. If a rename fails, the folders renamed so far
    are renamed back before the ``StateError`` (naming the folder) is
    raised, so the sweep is left as it was; a process killed between two
    renames leaves folders of both names, which the next resume finishes
    (:func:`member_folders` finds each member under either). The checkpoints
    of the sweep's programs name the members the older way until the
    program's next checkpoint (:func:`_load_program` accepts both), and the
    sweep's tables are written anew, with the new names, when it finishes.
    ``locks``: the member folders' :class:`FolderLock` by folder; each moves
    with its folder. Returns the (older, new) folders renamed."""
    moves = [(folder, out / "members" / name)
             for folder, name in zip(member_folders(out, sweep, resume=True), sweep.names)
             if folder.name != name]
    done: list[tuple[pathlib.Path, pathlib.Path]] = []
    for old, new in moves:
        try:
            old.rename(new)
        except OSError as exc:
            for renamed, back in reversed(done):
                renamed.rename(back)
            raise StateError(
                f"sweep --resume: the member folder {old} could not be renamed to {new.name} "
                f"({exc}); the member folders are as they were") from None
        done.append((new, old))
    for old, new in moves:
        lock = (locks or {}).get(old)
        if lock is not None:  # the flock follows the folder; its holder file moved with it
            lock.folder, lock.path = new, new / lock.path.name
    return moves


def _check_members_not_ahead(out: pathlib.Path, sweep: SweepConfig,
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


def _load_program(p: Program, checkpoint: pathlib.Path, legacy: list[str]) -> tuple[Any, int]:
    """The driver's :func:`~plume_jax.train.driver.load_runner`, which checks
    that ``checkpoint`` holds ``p``'s members by name; a checkpoint of an
    older sweep names them by their older names (``legacy``, the sweep's
    :func:`legacy_member_names`), and is checked against those. The
    checkpoints written from then on name the members as they are named
    now."""
    old = [legacy[i] for i in p.members]
    if old != [m.name for m in p.runs] and read_meta(checkpoint).get("members") == old:
        p = dataclasses.replace(p, runs=[dataclasses.replace(m, name=n)
                                         for m, n in zip(p.runs, old)])
    return load_runner(p, checkpoint)


def _run_program(p: Program, bar: ProgressBar, offset: float, resume: bool,
                 stop: Any, legacy: list[str]) -> ProgramResult:
    """Train the members of one program (the driver's
    :func:`~plume_jax.train.driver.run_program`), from its checkpoint when
    ``resume`` and there is one. ``legacy``: the older names of the sweep's
    members (:func:`legacy_member_names`)."""
    t0 = time.perf_counter()
    if resume and p.folder is not None and (p.folder / "checkpoint").exists():
        # checked (checksums, this sweep's members and configs) before any file changes
        runner, done = _load_program(p, p.folder / "checkpoint", legacy)
        rows = _resume_rows(p, done, legacy)
    else:
        runner, rows = init_runner(p), [[] for _ in p.runs]
        if p.folder is not None and is_main_process():  # rows of a killed attempt that
            for m in p.runs:                             # reached no checkpoint
                if m.folder is not None:
                    (m.folder / "metrics.jsonl").unlink(missing_ok=True)
    return run_program(p, runner, rows, bar=bar, offset=offset,
                       init_seconds=time.perf_counter() - t0, stop=stop)


def _training_tail(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A member's training figures over the episodes that ended in the last
    10% of its updates (``rows``; :func:`~plume_jax.train.progress.episode_mean`):
    success rate (actions sampled from the policy), mean return and length
    — None where no episode ended — and the number of those episodes
    (None: the algorithm reports no ``episodes``)."""
    tail = rows[-max(1, len(rows) // 10):]
    success, episodes = episode_mean(tail, "success_rate")
    return {"train_success_rate_last10pct": success,
            "train_episodes_last10pct": episodes,
            "train_return_last10pct": episode_mean(tail, "return_mean")[0],
            "train_length_last10pct": episode_mean(tail, "length_mean")[0]}


def _write_member(p: ProgramResult, j: int, evaluation: dict[str, Any] | None,
                  sweep_name: str) -> None:
    """Member ``j`` of program ``p`` as a finished run folder (see the module
    docstring; its config.yaml and metrics.jsonl are written as it trains).
    Its TensorBoard files are written anew from all its rows (a resumed
    sweep's member has some from before)."""
    s = p.setup
    member = s.runs[j]
    assert member.folder is not None  # written only for a sweep with a folder
    cfg = member.config
    export_member(s, p, j)
    summary = member_summary(s, p, j)
    if evaluation is not None:
        summary["evaluation"] = evaluation
    with RunLoggers(member.folder, tensorboard=cfg.run["tensorboard"],
                    wandb_project=cfg.run["wandb_project"], name=f"{sweep_name}/{member.name}",
                    config=cfg.to_dict(), group=sweep_name, history=[]) as loggers:
        loggers.log_rows(p.rows[j])
        write_member(s, p, j, summary, loggers=loggers)


def _static_differences(sweep: SweepConfig, groups: list[list[int]]) -> list[dict[str, Any]]:
    """Per program: what sets it apart from the other programs — the static
    settings whose values differ between programs, and the swept env
    settings that are constant within every program but not across them
    (those changed the env's structure)."""
    sigs = [static_signature(sweep.configs[g[0]]) for g in groups]
    keys = [k for k in sigs[0] if len({json.dumps(s[k]) for s in sigs}) > 1]
    values = [{k: sig[k] for k in keys} for sig in sigs]
    for k in (k for k in sweep.grid if k.startswith("env.")):
        per_program = [{json.dumps(sweep.members[i][k], default=str) for i in g} for g in groups]
        if all(len(v) == 1 for v in per_program) and len(set().union(*per_program)) > 1:
            for d, g in zip(values, groups):
                d[k] = sweep.members[g[0]][k]
    return values


def run_sweep(sweep: SweepConfig, out_dir: str | pathlib.Path | None = None, *,
              progress: bool = True, stream: TextIO | None = None,
              evaluate_members: bool = True, overwrite: bool = False,
              resume: bool = False) -> SweepResult:
    """:func:`_run_sweep` holding the sweep folder's lock
    (:class:`~plume_jax.train.run_folder.FolderLock`) and those of its
    existing member folders (a ``plume-jax train --resume`` of a member at
    the same time is refused, naming it) from before the folder is checked
    until everything is written."""
    check_joined(sweep.base.run["distributed"])
    run = functools.partial(_run_sweep, sweep, out_dir, progress=progress, stream=stream,
                            evaluate_members=evaluate_members, overwrite=overwrite, resume=resume)
    if out_dir is None or not is_main_process():
        return run()
    out = pathlib.Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValidationError.for_parameter("--out", str(out), "a folder (this is a file)")
    with FolderLock(out, "sweep"), contextlib.ExitStack() as members:
        locks = {}
        if not overwrite:  # a member folder trained on by another process is refused
            for folder in member_folders(out, sweep, resume=resume):
                if folder.is_dir():
                    locks[folder] = members.enter_context(FolderLock(folder, "sweep"))
        return run(member_locks=locks)


def _run_sweep(sweep: SweepConfig, out_dir: str | pathlib.Path | None = None, *,
               progress: bool = True, stream: TextIO | None = None,
               evaluate_members: bool = True, overwrite: bool = False,
               resume: bool = False,
               member_locks: Mapping[pathlib.Path, FolderLock] | None = None) -> SweepResult:
    """Train every member of ``sweep``, one compiled program per group of
    :func:`program_groups`; write the outputs of the module docstring to
    ``out_dir`` (new or empty unless ``overwrite``: then the outputs of an
    earlier sweep there, :data:`SWEEP_OUTPUTS`, are deleted first).

    Each program checkpoints its members' stacked training state to
    ``out_dir/programs/<k>/checkpoint`` every ``run.checkpoint_minutes``
    (and ``run.checkpoint_every`` updates); ``resume`` continues the sweep in
    ``out_dir`` from them (programs that finished are evaluated and written
    again, those that had not started start; member folders of an older
    sweep are renamed first, :func:`rename_legacy_member_folders`, moving
    ``member_locks`` along). Everything is checked before anything is
    written or compiled."""
    t_wall = time.perf_counter()
    check_joined(sweep.base.run["distributed"])
    main = is_main_process()
    out = pathlib.Path(out_dir) if out_dir is not None else None
    if resume and out is None:
        raise ValidationError.for_parameter("out_dir", None, "the folder of the sweep to resume")
    if out is not None:
        check_out_dir(out, overwrite=overwrite, resuming_here=resume, command="sweep")
        folders = member_folders(out, sweep, resume=resume)
        if resume:
            _check_members_not_ahead(out, sweep, folders)
            for folder in folders:  # what the resume reads, before anything moves
                if folder.is_dir():
                    check_best(folder)
        if main:
            for cfg, folder in zip(sweep.configs, folders):
                if cfg.run["tensorboard"] and folder.is_dir():
                    check_writable_logdir(folder)
    for cfg in sweep.configs:
        check_wandb(cfg.run["wandb_project"])
    groups = program_groups(sweep)
    setups = [setup(sweep, g, out, k + 1) for k, g in enumerate(groups)]
    for k, s in enumerate(setups):
        s.label = f"program {k + 1}/{len(setups)}" if len(setups) > 1 else ""
    legacy = legacy_member_names(sweep.members)
    if resume and out is not None and main:  # the first change, before the others read
        rename_legacy_member_folders(out, sweep, member_locks)
    barrier("plume_jax.sweep: checked")  # before process 0 writes
    if out is not None and main:
        if overwrite and out.exists():
            clear_outputs(out, SWEEP_OUTPUTS)
        make_out_dir(out)
        (out / "sweep.yaml").write_text(dump_yaml({"base": sweep.base.to_dict(),
                                                   "grid": sweep.grid, "mode": sweep.mode}))
        for i, name in enumerate(sweep.names):
            make_out_dir(out / "members" / name)
            (out / "members" / name / "config.yaml").write_text(
                dump_yaml(sweep.configs[i].to_dict()))
    sizes = [len(g) * sweep.configs[g[0]].num_updates * sweep.configs[g[0]].steps_per_update
             for g in groups]
    bar = ProgressBar(sum(sizes), "sweep", unit="member steps", quiet=not (progress and main),
                      stream=stream, min_interval_s=0.0)
    for note in dict.fromkeys(n for n in (c.steps_note() for c in sweep.configs) if n):
        bar.update(0, message=f"note: {note}")
    programs: list[ProgramResult] = []
    evaluations: list[list[dict[str, Any]] | None] = []
    try:
        with stop_on_signals() as stop:
            for k, s in enumerate(setups):
                programs.append(_run_program(s, bar, float(sum(sizes[:k])), resume, stop,
                                             legacy))
                if programs[-1].interrupted:
                    raise Interrupted(programs[-1].interrupted, programs[-1].update,
                                      f"plume-jax sweep --resume {out}" if out is not None
                                      else "(no sweep folder: nothing was saved)")
                evaluations.append(driver.evaluate_members(s, programs[-1].runner)
                                   if evaluate_members else None)
    finally:
        bar.close()

    by_member: dict[int, dict[str, Any]] = {}  # every member is in one program
    all_rows: list[dict[str, Any]] = []
    name = out.name if out is not None else "sweep"
    for k, (p, evaluation) in enumerate(zip(programs, evaluations)):
        for j, i in enumerate(p.setup.members):
            member_eval = evaluation[j] if evaluation is not None else None
            rows = p.rows[j]
            row = {"member": i, "name": sweep.names[i], "program": k + 1, **sweep.members[i],
                   **_training_tail(rows)}
            if member_eval is not None:
                row["eval_success_rate"] = member_eval["success_rate"]
                row["eval_mean_steps_to_goal"] = member_eval["mean_steps_to_goal"]
            by_member[i] = row
            all_rows += [{"member": i, "name": sweep.names[i], **r} for r in rows]
            if out is not None and main:
                _write_member(p, j, member_eval, name)

    results = [by_member[i] for i in range(len(sweep.members))]
    statics = _static_differences(sweep, groups)
    steps_total = sum(sizes)
    steps_trained = sum(len(g) * (sweep.configs[g[0]].num_updates - p.resumed_at_update)
                        * sweep.configs[g[0]].steps_per_update for g, p in zip(groups, programs))
    train_s = sum(p.train_seconds for p in programs)
    per_member = [sweep.configs[g[0]].num_updates * sweep.configs[g[0]].steps_per_update
                  for g in groups]
    summary = {
        "members": len(sweep.members),
        "grid": sweep.grid,
        "mode": sweep.mode,
        "num_updates": sweep.base.num_updates,
        "env_steps_per_member": per_member[0] if len(set(per_member)) == 1 else per_member,
        "env_steps_total": steps_total,
        "env_steps_this_call": steps_trained,
        "programs": [{"program": k + 1, "members": [sweep.names[i] for i in g],
                      "static_settings": statics[k], "devices": 1 if p.setup.mesh is None
                      else p.setup.mesh.size, "init_seconds": p.init_seconds,
                      "compile_seconds": p.compile_seconds, "train_seconds": p.train_seconds,
                      "env_steps_per_member": per_member[k],
                      "resumed_at_update": p.resumed_at_update}
                     for k, (g, p) in enumerate(zip(groups, programs))],
        "devices": max(1 if p.setup.mesh is None else p.setup.mesh.size for p in programs),
        "init_seconds": sum(p.init_seconds for p in programs),
        "compile_seconds": sum(p.compile_seconds for p in programs),
        "train_seconds": train_s,
        "steps_per_second_excl_compile": steps_trained / train_s if train_s > 0 else None,
        "base_config": sweep.base.to_dict(),
        "results": results,
        "settings": rank_settings(sweep, results),
    }
    evaluated = [v for v in evaluations if v is not None]  # all, or none
    if evaluated:
        e = evaluated[0][0]
        summary["eval"] = {"episodes": e["episodes"], "seed": e["seed"], "greedy": e["greedy"],
                           "seconds_incl_compile": sum(v[0]["seconds_incl_compile"]
                                                       for v in evaluated)}
    summary["wall_seconds"] = time.perf_counter() - t_wall
    summary["machine"] = machine_info()
    if out is not None and main:  # results first (atomic replacements), figures last
        write_jsonl(out / "metrics.jsonl", all_rows)
        write_csv(out / "results.csv", results)
        summary["wall_seconds"] = time.perf_counter() - t_wall
        write_text(out / "results.json", json.dumps(summary, indent=2))
        write_text(out / "summary.md", summary_markdown(summary, sweep))
        try:
            _plots(out, sweep, summary, all_rows)
        except Exception as exc:  # a figure never loses the results
            import warnings

            warnings.warn(f"sweep figures were not written ({type(exc).__name__}: {exc}); "
                          "the results are in results.json", RuntimeWarning, stacklevel=2)
    barrier("plume_jax.sweep: written")  # no process leaves before process 0 has written
    return SweepResult(summary=summary, programs=programs)


# ------------------------------------------------------------------ summary
def _stats(values: list[float | None]) -> dict[str, Any]:
    v = np.asarray([x for x in values if x is not None], np.float64)
    if v.size == 0:
        return {"mean": None, "sd": None, "min": None, "max": None, "n": 0}
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0,
            "min": float(v.min()), "max": float(v.max()), "n": int(v.size)}


def rank_settings(sweep: SweepConfig, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per setting (a grid point without ``run.seed``), ranked:
    by greedy evaluation success (mean over seeds, highest first), then mean
    steps to the goal (fewest first); by training success over the last 10%
    of updates when there is no evaluation."""
    settings: dict[str, dict[str, Any]] = {}
    for i, assignment in enumerate(sweep.members):
        point = {k: v for k, v in assignment.items() if k != SEED_KEY}
        key = json.dumps(point, sort_keys=True, default=str)
        entry = settings.setdefault(key, {"setting": point, "label": member_label(point)
                                          or "(base config)", "members": []})
        entry["members"].append(i)
    ranked = []
    for entry in settings.values():
        rows = [results[i] for i in entry["members"]]
        entry["seeds"] = [sweep.configs[i].run["seed"] for i in entry["members"]]
        entry["member_names"] = [sweep.names[i] for i in entry["members"]]
        entry["programs"] = sorted({r["program"] for r in rows})
        entry["eval_success_rate"] = _stats([r.get("eval_success_rate") for r in rows])
        entry["eval_mean_steps_to_goal"] = _stats([r.get("eval_mean_steps_to_goal") for r in rows])
        entry["train_success_rate_last10pct"] = _stats(
            [r.get("train_success_rate_last10pct") for r in rows])
        counts = [r.get("train_episodes_last10pct") for r in rows]
        entry["train_episodes_last10pct"] = None if None in counts else sum(counts)
        ranked.append(entry)
    evaluated = any(e["eval_success_rate"]["n"] for e in ranked)
    primary = "eval_success_rate" if evaluated else "train_success_rate_last10pct"

    def order(e: dict[str, Any]) -> tuple[float, float]:
        success = e[primary]["mean"]
        steps = e["eval_mean_steps_to_goal"]["mean"]
        return (-(success if success is not None else -1.0),
                steps if steps is not None else math.inf)

    ranked.sort(key=order)
    for rank, e in enumerate(ranked, 1):
        e["rank"] = rank
        e["ranked_by"] = primary
    return ranked


#: What the figures of a sweep's tables are (``summary.md``).
FIGURES_EXPLAINED = (
    "*Greedy success*: the share of the fresh evaluation episodes in which the trained "
    "policy, taking its most likely action at every step, reached the goal; settings are "
    "ranked by it. *Training success*: the share of the training episodes that ended in the "
    "last 10% of updates that reached the goal, while the policy sampled its actions "
    "(exploration included), with the number of those episodes. In a short run the episodes "
    "that end are mostly the quick successes (the others are still running), so training "
    "success can read 100 % beside a low greedy success; where no training episode ended "
    "there is no rate.")


def _pct(s: dict[str, Any], empty: str) -> str:
    """Seed statistics of a rate (:func:`_stats`) in percent, ``empty``
    where there is none."""
    if s["mean"] is None:
        return empty
    text = f"{100 * s['mean']:.1f}"
    if s["n"] > 1:
        text += f" ± {100 * s['sd']:.1f} ({100 * s['min']:.1f}–{100 * s['max']:.1f})"
    return text


def _num(s: dict[str, Any], empty: str) -> str:
    if s["mean"] is None:
        return empty
    return f"{s['mean']:.1f}" + (f" ± {s['sd']:.1f}" if s["n"] > 1 else "")


def _greedy(success: dict[str, Any], steps: dict[str, Any]) -> tuple[str, str]:
    """The greedy success (%) and mean steps to the goal: ``not
    evaluated`` without an evaluation; no steps where no greedy episode
    reached the goal."""
    return (_pct(success, "not evaluated"),
            _num(steps, "not evaluated" if success["mean"] is None else "none reached it"))


def _training(success: dict[str, Any], episodes: int | None, unit: str = "") -> str:
    """The training success (seed statistics, :func:`_stats`) with the
    number of episodes it is over (``unit`` after the rate); no rate where
    no episode ended."""
    if success["mean"] is None or episodes == 0:
        return "no episode ended"
    count = "" if episodes is None else f", {episodes:,} episode{'s' if episodes != 1 else ''}"
    return f"{_pct(success, '')}{unit}{count}"


def best_setting_line(summary: dict[str, Any]) -> str:
    """One sentence naming the best setting and its figures."""
    best = summary["settings"][0]
    if best["ranked_by"] == "eval_success_rate":
        success, steps = _greedy(best["eval_success_rate"], best["eval_mean_steps_to_goal"])
        what = f"greedy success {success} %, mean steps to the goal {steps}"
    else:
        what = ("training success (sampled actions, last 10% of updates) "
                + _training(best["train_success_rate_last10pct"],
                            best["train_episodes_last10pct"], " %")
                + " (no evaluation was run)")
    seeds = len(best["members"])
    return (f"Best setting: {best['label']} — {what} (mean ± sd over {seeds} "
            f"seed{'s' if seeds > 1 else ''})")


def summary_markdown(summary: dict[str, Any], sweep: SweepConfig) -> str:
    """``summary.md``: the ranked settings, the best named, what the figures
    are, the programs and the members."""
    lines = [f"# Sweep: {summary['members']} members, {len(summary['settings'])} settings, "
             f"{len(summary['programs'])} compiled program"
             f"{'s' if len(summary['programs']) > 1 else ''}", ""]
    ev = summary.get("eval")
    if ev:
        lines.append(f"Greedy evaluation: {ev['episodes']} fresh episodes per member (evaluation "
                     f"seed {ev['seed']}). Figures are mean ± sd over seeds (min–max).")
    else:
        lines.append("No evaluation was run: settings are ranked by training success.")
    training = "training success % (sampled actions, last 10% of updates)"
    lines += ["", FIGURES_EXPLAINED, "",
              f"**{best_setting_line(summary)}.** Its members: "
              + ", ".join(f"`members/{n}/`" for n in summary["settings"][0]["member_names"]), "",
              "## Settings, ranked", "",
              f"| rank | setting | seeds | greedy success % | mean steps to goal | {training} "
              "| program |", "|---|---|---|---|---|---|---|"]
    for e in summary["settings"]:
        success, steps = _greedy(e["eval_success_rate"], e["eval_mean_steps_to_goal"])
        tr = _training(e["train_success_rate_last10pct"], e["train_episodes_last10pct"])
        lines.append(f"| {e['rank']} | {e['label']} | {len(e['members'])} | {success} | {steps} | "
                     f"{tr} | {', '.join(map(str, e['programs']))} |")
    lines += ["", "## Compiled programs", "",
              "Members of one program were trained together, vmapped, by one compiled XLA "
              "program.", "", "| program | static settings | members | compile s | train s |",
              "|---|---|---|---|---|"]
    for p in summary["programs"]:
        static = ", ".join(f"{short_key(k)}={v}" for k, v in p["static_settings"].items()) \
            or "(all the same)"
        lines.append(f"| {p['program']} | {static} | {', '.join(p['members'])} | "
                     f"{p['compile_seconds']:.1f} | {p['train_seconds']:.1f} |")
    lines += ["", "## Members", "", "| member | folder | greedy success % | mean steps to goal | "
              f"{training} | program |", "|---|---|---|---|---|---|"]
    for r in summary["results"]:
        success, steps = _greedy(_stats([r.get("eval_success_rate")]),
                                 _stats([r.get("eval_mean_steps_to_goal")]))
        tr = _training(_stats([r.get("train_success_rate_last10pct")]),
                       r.get("train_episodes_last10pct"))
        lines.append(f"| {r['member']} | `members/{r['name']}/` | {success} | {steps} | {tr} | "
                     f"{r['program']} |")
    lines += ["", "Each member folder is a run folder: `agents.trained.TrainedPolicy.load("
              "\"<folder>/policy\")` loads its policy, `plume-jax evaluate --agent trained "
              "--agent-param path=<folder>/policy` evaluates it, `plume-jax train --resume "
              "<folder> --total-steps N` trains it further.", ""]
    return "\n".join(lines)


def _plots(out: pathlib.Path, sweep: SweepConfig, summary: dict[str, Any],
           rows: list[dict[str, Any]]) -> None:
    settings = summary["settings"]
    labels = [e["label"] for e in settings]
    results = summary["results"]
    if "eval" in summary:
        plot_setting_bars(out / "eval_success.png", labels,
                          [[results[i]["eval_success_rate"] for i in e["members"]]
                           for e in settings],
                          "greedy evaluation success (%)", scale=100.0,
                          title=f"Greedy success on {summary['eval']['episodes']} fresh episodes "
                          "per member (bar: seed mean, dots: seeds)")
        plot_setting_bars(out / "eval_steps.png", labels,
                          [[results[i]["eval_mean_steps_to_goal"] for i in e["members"]]
                           for e in settings],
                          "mean steps to the goal (successful greedy episodes)",
                          title="Steps to the goal (bar: seed mean, dots: seeds)")
    by_member: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_member.setdefault(r["member"], []).append(r)
    curves = {e["label"]: [by_member[i] for i in e["members"]] for e in settings}
    plot_setting_curves(out / "train_success.png", curves, "success_rate",
                        "training success, sampled actions (%)", scale=100.0,
                        title="Training success per setting (line: seed mean, band: range)")
    plot_setting_curves(out / "train_return.png", curves, "return_mean",
                        "mean episode return (training reward)",
                        title="Training return per setting (line: seed mean, band: range)")


def print_results(summary: dict[str, Any], stream: TextIO | None = None) -> None:
    """The programs, the settings ranked and the best setting."""
    import sys

    stream = stream or sys.stdout
    p = functools.partial(print, file=stream)
    n_prog = len(summary["programs"])
    sps = summary["steps_per_second_excl_compile"]
    p(f"sweep: {summary['members']} members in {n_prog} compiled program"
      f"{'s' if n_prog > 1 else ''}: compile {summary['compile_seconds']:.1f} s, train "
      f"{summary['train_seconds']:.1f} s"
      + (f" ({sps:,.0f} env steps/s over all members)" if sps else "")
      + f", wall {summary['wall_seconds']:.1f} s")
    for prog in summary["programs"]:
        static = ", ".join(f"{short_key(k)}={v}" for k, v in prog["static_settings"].items())
        p(f"  program {prog['program']}{' (' + static + ')' if static else ''} shared by "
          f"{len(prog['members'])} members: {', '.join(prog['members'])}")
    evaluated = summary["settings"][0]["ranked_by"] == "eval_success_rate"
    p("settings ranked" + (" by greedy evaluation success (mean ± sd over seeds; training "
                          "success: sampled actions, the episodes that ended in the last 10% "
                          "of updates):" if evaluated else
                          " by training success (sampled actions, the episodes that ended in "
                          "the last 10% of updates; no evaluation):"))
    for e in summary["settings"]:
        greedy = ""
        if evaluated:
            success, steps = _greedy(e["eval_success_rate"], e["eval_mean_steps_to_goal"])
            greedy = f"greedy success {success} %, steps {steps}, "
        p(f"  {e['rank']}. {e['label']}: {greedy}training success "
          f"{_training(e['train_success_rate_last10pct'], e['train_episodes_last10pct'], ' %')}"
          f" ({len(e['members'])} seed{'s' if len(e['members']) > 1 else ''})")
    p(best_setting_line(summary))
