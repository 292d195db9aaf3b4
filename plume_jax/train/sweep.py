"""Sweeps: a grid of training runs, one compiled program per static
structure, every member a run folder you can evaluate, load and resume.
A sweep trains through the one run function (:func:`plume_jax.train.run.run`),
as a single run does, with the sweep's folder rules
(:class:`plume_jax.train.run_folder.Sweep`); this module expands the grid,
groups the members into programs and ranks the results.

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

Output folder: the entries of :data:`plume_jax.train.run_folder.SWEEP_FILES`
(``sweep.yaml``, ``summary.md`` with the settings ranked, ``results.csv`` /
``results.json``, the figures, ``members/<name>/`` and ``programs/<k>/``).
Each member's folder is a run folder (the entries of
:data:`~plume_jax.train.run_folder.RUN_FILES` but the figure), named by its
grid values (``learning_rate-0.001_seed-0``: no quotes needed in a shell,
:mod:`plume_jax.train.member_names`); ``plume-jax train --resume`` continues
it as a single run. ``programs/<k>/checkpoint/`` holds program k's members'
stacked training state, which ``plume-jax sweep --resume DIR`` continues.

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

import copy
import dataclasses
import functools
import itertools
import json
import math
import pathlib
import time
from collections.abc import Mapping
from typing import Any, TextIO

import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms.base import algorithm_class
from plume_jax.train.config import TrainConfig, apply_dotted, current_form, read_yaml, \
    static_signature, train_config
from plume_jax.train.distributed import is_main_process
from plume_jax.train.driver import Member, Program, ProgramResult, build_program, \
    machine_info, write_text
from plume_jax.train.member_names import member_label, member_names, short_key
from plume_jax.train.plots import plot_setting_bars, plot_setting_curves
from plume_jax.train.progress import episode_mean, write_csv, write_jsonl
from plume_jax.train.run import RunResult, run
from plume_jax.train.run_folder import Sweep

SWEEP_KEYS = ("base", "set", "grid", "mode")

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
                 overrides: Mapping[str, Any] | None = None,
                 written: bool = False) -> SweepConfig:
    """Validate a sweep mapping (see the module docstring).

    ``overrides``: dotted ``--set`` items: a setting of the base config
    (added to ``set``), ``grid.KEY`` (replaces or adds a grid entry) or
    ``mode``. ``written``: the mapping is a sweep folder's own ``sweep.yaml``,
    perhaps written by an earlier version (its base config is read in this
    version's form, :func:`~plume_jax.train.config.current_form`).
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


def load_sweep_config(path: str | pathlib.Path, overrides: Mapping[str, Any] | None = None,
                      *, written: bool = False) -> SweepConfig:
    """Read and validate a sweep YAML file, with optional ``--set`` items
    (see :func:`sweep_config`; ``written``: a sweep folder's own file)."""
    return sweep_config(read_yaml(path), base_dir=pathlib.Path(path).parent, overrides=overrides,
                        written=written)


def member_sweep(base: Mapping[str, Any], members: list[Mapping[str, Any]], *,
                 base_dir: str | pathlib.Path | None = None) -> SweepConfig:
    """A sweep of the given members (e.g. the trials a tuner picked): each
    member is ``base`` (a training config mapping) with its dotted settings
    (``{"algo.learning_rate": 3e-4, "run.seed": 1}``) applied. Every member
    names the same settings; they become a ``zip`` grid, so ``sweep.yaml``
    and ``sweep --resume`` reproduce exactly these members, and
    :func:`run_sweep` trains them as any sweep (one program per static
    structure). ``ValidationError`` for no members, a member naming no
    setting, or members that name different settings."""
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
    """Train every member of ``sweep``, one compiled program per group of
    :func:`program_groups`, through the one run function
    (:func:`plume_jax.train.run.run`) with the sweep's folder rules
    (:class:`plume_jax.train.run_folder.Sweep`); write the outputs of
    :data:`~plume_jax.train.run_folder.SWEEP_FILES` to ``out_dir`` (new or
    empty unless ``overwrite``: then the outputs of an earlier sweep there,
    :data:`~plume_jax.train.run_folder.SWEEP_OUTPUTS`, are deleted first).

    The sweep folder's lock and those of its existing member folders are
    held from before the folder is checked until everything is written (a
    ``plume-jax train --resume`` of a member at the same time is refused,
    naming it). Each program checkpoints its members' stacked training
    state to ``out_dir/programs/<k>/checkpoint`` every
    ``run.checkpoint_minutes`` (and ``run.checkpoint_every`` updates);
    ``resume`` continues the sweep in ``out_dir`` from them (programs that
    finished are evaluated and written again, those that had not started
    start; member folders of an older sweep are renamed first,
    :func:`~plume_jax.train.member_names.rename_legacy_member_folders`).
    Everything is checked before anything is written or compiled."""
    t_wall = time.perf_counter()
    out = pathlib.Path(out_dir) if out_dir is not None else None
    folders = Sweep(out, sweep, resume)
    groups: list[list[int]] = []

    def build() -> list[Program]:
        groups.extend(program_groups(sweep))
        setups = [setup(sweep, g, out, k + 1) for k, g in enumerate(groups)]
        for k, s in enumerate(setups):
            s.label = f"program {k + 1}/{len(setups)}" if len(setups) > 1 else ""
        return setups

    def finish(result: RunResult) -> dict[str, Any]:
        summary, rows = _sweep_summary(sweep, groups, result, t_wall)
        if out is not None and is_main_process():
            _write_sweep(out, sweep, summary, rows, t_wall)
        return summary

    result = run(folders, build, sweep.configs, progress=progress, stream=stream,
                 evaluate=evaluate_members, overwrite=overwrite, finish=finish)
    return SweepResult(summary=result.finished, programs=result.programs)


def _member_results(sweep: SweepConfig, result: RunResult
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One ``results.csv`` row per member (grid values, training tail,
    evaluation), in member order, and every member's metrics rows (the
    sweep's ``metrics.jsonl``, each row naming its member)."""
    by_member: dict[int, dict[str, Any]] = {}  # every member is in one program
    all_rows: list[dict[str, Any]] = []
    for k, p in enumerate(result.programs):
        for j, i in enumerate(p.setup.members):
            rows = p.rows[j]
            row = {"member": i, "name": sweep.names[i], "program": k + 1, **sweep.members[i],
                   **_training_tail(rows)}
            evaluation = result.evaluations[i]
            if evaluation is not None:
                row["eval_success_rate"] = evaluation["success_rate"]
                row["eval_mean_steps_to_goal"] = evaluation["mean_steps_to_goal"]
            by_member[i] = row
            all_rows += [{"member": i, "name": sweep.names[i], **r} for r in rows]
    return [by_member[i] for i in range(len(sweep.members))], all_rows


def _sweep_summary(sweep: SweepConfig, groups: list[list[int]], result: RunResult,
                   t_wall: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``results.json``: the budget, the programs (what sets each apart,
    timings in seconds), the members' results and the ranked settings; and
    every member's metrics rows."""
    results, all_rows = _member_results(sweep, result)
    programs = result.programs
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


def _write_sweep(out: pathlib.Path, sweep: SweepConfig, summary: dict[str, Any],
                 rows: list[dict[str, Any]], t_wall: float) -> None:
    """The sweep's own files (process 0): results first (atomic
    replacements), figures last; a figure that fails is a warning."""
    write_jsonl(out / "metrics.jsonl", rows)
    write_csv(out / "results.csv", summary["results"])
    summary["wall_seconds"] = time.perf_counter() - t_wall
    write_text(out / "results.json", json.dumps(summary, indent=2))
    write_text(out / "summary.md", summary_markdown(summary, sweep))
    try:
        _plots(out, sweep, summary, rows)
    except Exception as exc:  # a figure never loses the results
        import warnings

        warnings.warn(f"sweep figures were not written ({type(exc).__name__}: {exc}); "
                      "the results are in results.json", RuntimeWarning, stacklevel=2)


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
