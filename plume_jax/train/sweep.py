"""Sweeps (``plume-jax sweep``): a grid of training runs, every member a run
folder (``members/<name>/``) you can evaluate, load and resume. This module
validates a sweep, groups its members into programs (members whose static
settings and env structure are equal share one ``vmap`` of
``Algorithm.update`` over a member axis) and trains them through
:func:`plume_jax.train.run.run` under :class:`plume_jax.train.folder.Sweep`'s
folder rules. Sweep YAML (docs/training.md, "Sweeps")::

    base: train_gaussian.yaml      # a training config (relative to this file) or a mapping
    set: {algo.total_steps: 500000}  # optional: overrides of the base
    grid:                          # any setting by its dotted name
      run.seed: [0, 1]
      network.hidden_sizes: [[32], [64, 64]]    # static: two programs
    mode: product                  # product (every combination) | zip
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import pathlib
import time
import warnings
from collections.abc import Mapping
from typing import Any, TextIO

import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms.base import algorithm_class
from plume_jax.train.config import TrainConfig, apply_dotted, current_form, read_yaml, \
    static_signature, train_config
from plume_jax.train.distributed import is_main_process
from plume_jax.files import atomic_write as write_text
from plume_jax.train.loop import Member, Program, ProgramResult, build_program, machine_info
from plume_jax.train.member_names import member_names
from plume_jax.train.progress import write_csv, write_jsonl
from plume_jax.train.report import rank_settings, summary_markdown, sweep_figures, \
    training_tail
from plume_jax.train.run import RunResult, run
from plume_jax.train.folder import Sweep

SWEEP_KEYS = ("base", "set", "grid", "mode")


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
                 overrides: Mapping[str, Any] | None = None,
                 written: bool = False) -> SweepConfig:
    """Validate a sweep mapping (module docstring). ``overrides``: dotted
    ``--set`` items: a base setting (added to ``set``), ``grid.KEY`` or
    ``mode``. ``written``: a sweep folder's own ``sweep.yaml`` (its base read
    in this version's form, :func:`~plume_jax.train.config.current_form`)."""
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
        raw, raw_dir = read_yaml(path, parameter="base"), path.parent
    elif isinstance(base, Mapping):
        raw, raw_dir = copy.deepcopy(dict(base)), base_dir
    else:
        raise ValidationError.for_parameter("base", base,
                                            "a training config path or an inline mapping")
    if written:
        raw = current_form(raw)
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
        if len({len(v) for v in grid.values()}) != 1:
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


def load_sweep_config(path: str | pathlib.Path, overrides: Mapping[str, Any] | None = None,
                      *, written: bool = False) -> SweepConfig:
    """Read and validate a sweep YAML file, with optional ``--set`` items
    (see :func:`sweep_config`; ``written``: a sweep folder's own file)."""
    return sweep_config(read_yaml(path), base_dir=pathlib.Path(path).parent, overrides=overrides,
                        written=written)


def member_sweep(base: Mapping[str, Any], members: list[Mapping[str, Any]], *,
                 base_dir: str | pathlib.Path | None = None) -> SweepConfig:
    """A sweep of the given members (e.g. the trials a tuner picked): each is
    ``base`` (a training config mapping) with its dotted settings
    (``{"env.overrides.sigma": 10.0, "run.seed": 1}``) applied, written as a
    ``zip`` grid so ``sweep --resume`` reproduces exactly these members.
    ``ValidationError`` unless every member names the same settings."""
    keys = list(members[0]) if members else []
    if not keys:
        raise ValidationError.for_parameter("members", list(members),
                                            "at least one member naming at least one setting")
    for i, member in enumerate(members):
        if set(member) != set(keys):
            raise ValidationError.for_parameter(
                f"members[{i}]", dict(member), f"the settings every member names, {keys}")
    return sweep_config({"base": dict(base), "grid": {k: [m[k] for m in members] for k in keys},
                         "mode": "zip"}, base_dir=base_dir)


# ------------------------------------------------------------------ programs
def _program_key(cfg: TrainConfig, env: Any) -> tuple[str, Any]:
    """What members of one program share: static settings and the env's
    structure (``PlumeEnv.structure``: everything but its default params)."""
    static = {**static_signature(cfg), **{f"eval.{k}": v for k, v in cfg.eval.items()}}
    return json.dumps(static, sort_keys=True, default=str), env.structure


def program_groups(sweep: SweepConfig) -> list[list[int]]:
    """The members of each compiled program, in member order: members share
    a program when their static settings and env structure are equal and
    their algorithm is ``sweepable`` (else every member is a program)."""
    keys: list[tuple[str, Any]] = []
    groups: list[list[int]] = []
    for i, cfg in enumerate(sweep.configs):
        key = _program_key(cfg, cfg.make_env()[0])
        if algorithm_class(cfg.algo["algorithm"]).sweepable and key in keys:
            groups[keys.index(key)].append(i)
        else:
            keys.append(key)
            groups.append([i])
    return groups


def setup(sweep: SweepConfig, members: list[int] | None = None,
          out: pathlib.Path | None = None, program: int = 1) -> Program:
    """The batched :class:`~plume_jax.train.loop.Program` of ``members``
    (default: all; ``ValidationError`` unless they share one program); with
    ``out`` (the sweep folder) their run folders are ``out/members/<name>``
    and the program's checkpoints ``out/programs/<program>``."""
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
    and one :class:`~plume_jax.train.loop.ProgramResult` per program;
    ``runner`` and ``metrics`` are those of a one-program sweep."""

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


# ------------------------------------------------------------------ running
def _static_differences(sweep: SweepConfig, groups: list[list[int]]) -> list[dict[str, Any]]:
    """Per program, what sets it apart: the static settings whose values
    differ between programs, and the swept env settings constant within
    each program but not across them (they changed the env's structure)."""
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
    """Train every member of ``sweep``, one compiled program per group of
    :func:`program_groups`, and write :data:`~plume_jax.train.folder.SWEEP_FILES`
    to ``out_dir`` (None: nothing written) under the folder rules of
    :class:`~plume_jax.train.folder.Sweep` (``overwrite``, ``resume``, locks),
    all checked before anything is written or compiled."""
    t_wall = time.perf_counter()
    out = pathlib.Path(out_dir) if out_dir is not None else None
    folders = Sweep(out, sweep, resume)

    def build() -> list[Program]:
        setups = [setup(sweep, g, out, k + 1) for k, g in enumerate(program_groups(sweep))]
        for k, s in enumerate(setups):
            s.label = f"program {k + 1}/{len(setups)}" if len(setups) > 1 else ""
        return setups

    def finish(result: RunResult) -> dict[str, Any]:
        summary, rows = _sweep_summary(sweep, result, t_wall)
        if out is None or not is_main_process():
            return summary
        write_jsonl(out / "metrics.jsonl", rows)  # results first (atomic), figures last
        write_csv(out / "results.csv", summary["results"])
        summary["wall_seconds"] = time.perf_counter() - t_wall
        write_text(out / "results.json", json.dumps(summary, indent=2))
        write_text(out / "summary.md", summary_markdown(summary))
        try:
            sweep_figures(out, summary, rows)
        except Exception as exc:  # a figure never loses the results
            warnings.warn(f"sweep figures were not written ({type(exc).__name__}: {exc}); "
                          "the results are in results.json", RuntimeWarning, stacklevel=1)
        return summary

    result = run(folders, build, sweep.configs, progress=progress, stream=stream,
                 evaluate=evaluate_members, overwrite=overwrite, finish=finish)
    return SweepResult(summary=result.finished, programs=result.programs)


def _member_results(sweep: SweepConfig, result: RunResult
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One ``results.csv`` row per member, in member order, and every
    member's metrics rows (the sweep's ``metrics.jsonl``)."""
    by_member: dict[int, dict[str, Any]] = {}  # every member is in one program
    all_rows: list[dict[str, Any]] = []
    for k, p in enumerate(result.programs):
        for j, i in enumerate(p.setup.members):
            rows = p.rows[j]
            row = {"member": i, "name": sweep.names[i], "program": k + 1, **sweep.members[i],
                   **training_tail(rows)}
            evaluation = result.evaluations[i]
            if evaluation is not None:
                row["eval_success_rate"] = evaluation["success_rate"]
                row["eval_mean_steps_to_goal"] = evaluation["mean_steps_to_goal"]
            by_member[i] = row
            all_rows += [{"member": i, "name": sweep.names[i], **r} for r in rows]
    return [by_member[i] for i in range(len(sweep.members))], all_rows


def _sweep_summary(sweep: SweepConfig, result: RunResult, t_wall: float
                   ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``results.json``: the budget, the programs (what sets each apart,
    timings in seconds), the members' results and the ranked settings; and
    every member's metrics rows."""
    results, all_rows = _member_results(sweep, result)
    programs = result.programs
    groups = [p.setup.members for p in programs]
    statics = _static_differences(sweep, groups)
    per_member = [sweep.configs[g[0]].num_updates * sweep.configs[g[0]].steps_per_update
                  for g in groups]
    steps_trained = sum(len(g) * (sweep.configs[g[0]].num_updates - p.resumed_at_update)
                        * sweep.configs[g[0]].steps_per_update for g, p in zip(groups, programs))
    train_s = sum(p.train_seconds for p in programs)
    summary = {
        "members": len(sweep.members),
        "grid": sweep.grid,
        "mode": sweep.mode,
        "num_updates": sweep.base.num_updates,
        "env_steps_per_member": per_member[0] if len(set(per_member)) == 1 else per_member,
        "env_steps_total": sum(len(g) * n for g, n in zip(groups, per_member)),
        "env_steps_this_call": steps_trained,
        "programs": [{"program": k + 1, "members": [sweep.names[i] for i in g],
                      "static_settings": statics[k], "devices": p.setup.devices,
                      "init_seconds": p.init_seconds,
                      "compile_seconds": p.compile_seconds, "train_seconds": p.train_seconds,
                      "env_steps_per_member": per_member[k],
                      "resumed_at_update": p.resumed_at_update}
                     for k, (g, p) in enumerate(zip(groups, programs))],
        "devices": max(p.setup.devices for p in programs),
        "init_seconds": sum(p.init_seconds for p in programs),
        "compile_seconds": sum(p.compile_seconds for p in programs),
        "train_seconds": train_s,
        "steps_per_second_excl_compile": steps_trained / train_s if train_s > 0 else None,
        "base_config": sweep.base.to_dict(),
        "results": results,
        "settings": rank_settings(sweep, results),
    }
    firsts = [result.evaluations[p.setup.members[0]] for p in programs]
    evaluated = [e for e in firsts if e is not None]  # all, or none
    if evaluated:
        e = evaluated[0]
        summary["eval"] = {"episodes": e["episodes"], "seed": e["seed"], "greedy": e["greedy"],
                           "seconds_incl_compile": sum(v["seconds_incl_compile"]
                                                       for v in evaluated)}
    summary["wall_seconds"] = time.perf_counter() - t_wall
    summary["machine"] = machine_info()
    return summary, all_rows

