"""Sweeps: many training runs as ONE compiled program.

``PPO.update`` is ``vmap``ped over a leading *member* axis of the runner, of
the hyperparameters (:class:`~plume_jax.train.ppo.Hparams`) and of the env
params, and ``lax.scan``ned over updates: one XLA program trains every
member. Members may differ in anything that is an array leaf — the seed,
the dynamic algorithm settings (``algo.learning_rate``, ``algo.ent_coef``,
``algo.gamma``, ``algo.gae_lambda``, ``algo.clip_eps``, ``algo.vf_coef``,
``algo.max_grad_norm``) and every dynamic env setting (``env.sigma``,
``env.max_steps``, ``env.goal_radius``, ``env.reward.scale``, ...). Static
settings (network shape, batch sizes, grid size, component types) fix the
program and must be the same for all members; a sweep over one is refused
with a ``ValidationError`` naming it.

Sweep YAML::

    base: train_gaussian.yaml      # a training config (path relative to
                                   # this file), or an inline mapping
    set:                           # optional: overrides of the base
      algo.total_steps: 500000
    grid:                          # the swept values
      run.seed: [0, 1]
      algo.learning_rate: [0.0003, 0.001]
      env.reward.scale: [0.05, 0.1]
    mode: product                  # product (every combination) | zip

``env.NAME`` is a ``plume_jax.make`` override (a bare parameter such as
``env.sigma``), ``env.SLOT.PARAM`` sets one parameter of a component slot
(``env.reward.scale``).

Vmapped members run in lock-step: on a CPU with few cores a sweep of M
members costs about M single runs (the work is the same and a single run
already keeps the cores busy), but it compiles once and runs as one
program; with several devices the members are sharded across them
(``run.devices``) and nothing is communicated, so the sweep scales with the
device count. Because ``vmap`` changes the order of floating-point
reductions, a member agrees with the single run of the same seed and
hyperparameters to float tolerance over the first updates; over long runs
the two drift apart (PPO is chaotic in its parameters) and agree only
statistically.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
import pathlib
import time
from collections.abc import Mapping
from typing import Any, TextIO

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.errors import ValidationError
from plume_jax.train.checkpoint import policy_arrays, policy_spec
from plume_jax.train.config import (DYNAMIC_KEYS, TrainConfig, dump_yaml, read_yaml,
                                    static_signature, train_config)
from plume_jax.train.evaluation import evaluate
from plume_jax.train.ppo import PPO
from plume_jax.train.progress import Progress, append_jsonl, metric_rows, \
    plot_learning_curves, write_csv
from plume_jax.train.sharding import mesh as make_mesh, resolve_devices, shard_members
from plume_jax.train.trainer import hparams, machine_info, ppo_static

SWEEP_KEYS = ("base", "set", "grid", "mode")


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A validated sweep: the base config and one assignment dict per member."""

    base: TrainConfig
    grid: dict[str, list[Any]]
    mode: str
    members: list[dict[str, Any]]
    configs: list[TrainConfig]


def _apply(data: dict[str, Any], key: str, value: Any, where: str) -> None:
    """Set ``section.key`` (or ``env.NAME`` / ``env.SLOT.PARAM``) in a raw
    config mapping."""
    parts = key.split(".")
    if len(parts) < 2:
        raise ValidationError.for_parameter(where, key, "SECTION.KEY (e.g. algo.learning_rate)")
    section = parts[0]
    if section == "env" and parts[1] not in ("id", "config", "overrides"):
        overrides = data.setdefault("env", {}).setdefault("overrides", {}) or {}
        data["env"]["overrides"] = overrides
        if len(parts) == 2:
            overrides[parts[1]] = copy.deepcopy(value)
        elif len(parts) == 3:
            slot = overrides.get(parts[1])
            slot = {"type": slot} if isinstance(slot, str) else dict(slot or {})
            slot[parts[2]] = copy.deepcopy(value)
            overrides[parts[1]] = slot
        else:
            raise ValidationError.for_parameter(where, key, "env.NAME or env.SLOT.PARAM")
        return
    if len(parts) != 2:
        raise ValidationError.for_parameter(where, key, "SECTION.KEY (e.g. algo.learning_rate)")
    target = data.setdefault(section, {})
    if not isinstance(target, dict):
        raise ValidationError.for_parameter(section, target, "a mapping")
    target[parts[1]] = copy.deepcopy(value)


def sweep_config(data: Mapping[str, Any], *, base_dir: str | pathlib.Path | None = None
                 ) -> SweepConfig:
    """Validate a sweep mapping (see the module docstring)."""
    if not isinstance(data, Mapping):
        raise ValidationError.for_parameter("sweep", data, f"a mapping with keys {SWEEP_KEYS}")
    unknown = sorted(set(data) - set(SWEEP_KEYS))
    if unknown:
        raise ValidationError.for_parameter(unknown[0], data[unknown[0]],
                                            f"a sweep key: one of {list(SWEEP_KEYS)}")
    base = data.get("base")
    base_dir = pathlib.Path(base_dir) if base_dir is not None else pathlib.Path(".")
    if isinstance(base, str):
        path = pathlib.Path(base)
        if not path.is_absolute() and not path.exists():
            path = base_dir / path
        raw = read_yaml(path)
        raw_dir = path.parent
    elif isinstance(base, Mapping):
        raw, raw_dir = copy.deepcopy(dict(base)), base_dir
    else:
        raise ValidationError.for_parameter("base", base,
                                            "a training config path or an inline mapping")
    sets = data.get("set") or {}
    if not isinstance(sets, Mapping):
        raise ValidationError.for_parameter("set", sets, "a mapping of SECTION.KEY: value")
    for key, value in sets.items():
        _apply(raw, key, value, "set")
    base_cfg = train_config(raw, base_dir=raw_dir)

    mode = data.get("mode", "product")
    if mode not in ("product", "zip"):
        raise ValidationError.for_parameter("mode", mode, "'product' or 'zip'")
    grid = data.get("grid")
    if not isinstance(grid, Mapping) or not grid:
        raise ValidationError.for_parameter("grid", grid,
                                            "a non-empty mapping of SECTION.KEY: [values]")
    allowed = ("run.seed",) + DYNAMIC_KEYS + ("env.<setting>",)
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)) or not values:
            raise ValidationError.for_parameter(f"grid.{key}", values, "a non-empty list")
        if not (key == "run.seed" or key in DYNAMIC_KEYS or key.startswith("env.")):
            raise ValidationError.for_parameter(
                f"grid.{key}", values,
                "a key that is an array leaf of the compiled program (static settings such as "
                f"network size or batch sizes cannot vary within one program): one of {allowed}")
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
    if base_cfg.algo["algorithm"] != "ppo":
        raise ValidationError.for_parameter("base.algo.algorithm", base_cfg.algo["algorithm"],
                                            "'ppo' (a sweep trains PPO members in one program)")
    signature = static_signature(base_cfg)
    for i, assignment in enumerate(members):
        member_raw = copy.deepcopy(raw)
        for key, value in assignment.items():
            _apply(member_raw, key, value, f"grid.{key}")
        try:
            cfg = train_config(member_raw, base_dir=raw_dir)
        except ValidationError as exc:
            raise ValidationError(f"sweep member {i} {assignment}: {exc}", parameter=exc.parameter,
                                  value=exc.value, allowed=exc.allowed) from None
        if static_signature(cfg) != signature:
            diff = [k for k in signature if static_signature(cfg)[k] != signature[k]]
            raise ValidationError.for_parameter(diff[0], static_signature(cfg)[diff[0]],
                                                "the same value in every member (static)")
        configs.append(cfg)
    return SweepConfig(base=base_cfg, grid={k: list(v) for k, v in grid.items()}, mode=mode,
                       members=members, configs=configs)


def load_sweep_config(path: str | pathlib.Path) -> SweepConfig:
    return sweep_config(read_yaml(path), base_dir=pathlib.Path(path).parent)


def _env_structure(env: Any) -> Any:
    fields = ("grid", "plume", "sensor", "actions", "reward", "start")
    if all(hasattr(env, f) for f in fields):
        return tuple(getattr(env, f) for f in fields)
    return env


def _stack(trees: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *trees)


def member_label(assignment: dict[str, Any]) -> str:
    return ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in assignment.items())


@dataclasses.dataclass
class SweepSetup:
    """Everything the sweep program needs (see :func:`setup`)."""

    sweep: SweepConfig
    algo: PPO
    env: Any
    hp: Any            # Hparams with a leading member axis
    env_params: Any    # EnvParams with a leading member axis
    keys: jax.Array    # one key per member
    mesh: Any


def setup(sweep: SweepConfig) -> SweepSetup:
    """Build the envs of every member, check they share one structure, and
    stack hyperparameters, env params and keys along the member axis."""
    envs, params, hps = [], [], []
    ref = None
    for i, cfg in enumerate(sweep.configs):
        env, env_params = cfg.make_env()
        if ref is None:
            ref = _env_structure(env)
        elif _env_structure(env) != ref:
            changed = [k for k in sweep.members[i] if k.startswith("env.")]
            raise ValidationError.for_parameter(
                changed[0] if changed else "env", sweep.members[i],
                "env settings that leave the env's static structure (grid size, component "
                "types and static settings) unchanged; sweep static settings in separate runs")
        envs.append(env)
        params.append(env_params)
        hps.append(hparams(cfg, env, env_params))
    base = sweep.configs[0]
    m = len(sweep.configs)
    n_dev = resolve_devices(base.run["devices"], m, "number of sweep members")
    mesh = make_mesh(n_dev, "members") if n_dev > 1 else None
    algo = PPO(envs[0], params[0], ppo_static(base))
    keys = jnp.stack([jax.random.key(cfg.run["seed"]) for cfg in sweep.configs])
    return SweepSetup(sweep=sweep, algo=algo, env=envs[0], hp=_stack(hps),
                      env_params=_stack(params), keys=keys, mesh=mesh)


def init_members(s: SweepSetup) -> Any:
    """The stacked runners (vmapped ``PPO.init``), sharded over members."""
    runner = jax.jit(jax.vmap(s.algo.init))(s.keys, s.hp, s.env_params)
    if s.mesh is not None:
        runner = shard_members(runner, s.mesh, "members")
    return runner


@dataclasses.dataclass
class SweepResult:
    """What :func:`run_sweep` returns: ``summary`` (also ``results.json``),
    the final stacked ``runner`` (leading member axis), the per-update
    ``metrics`` (arrays [updates, members]) and the :class:`SweepSetup`."""

    summary: dict[str, Any]
    runner: Any
    metrics: dict[str, np.ndarray]
    setup: SweepSetup


def run_sweep(sweep: SweepConfig, out_dir: str | pathlib.Path | None = None, *,
              progress: bool = True, stream: TextIO | None = None,
              evaluate_members: bool = True) -> SweepResult:
    """Train every member of ``sweep`` in one compiled program; write
    ``results.csv``, ``results.json``, ``metrics.jsonl`` and
    ``learning_curves.png`` to ``out_dir``."""
    t_wall = time.perf_counter()
    s = setup(sweep)
    base = sweep.base
    m = len(sweep.members)
    num_updates = base.num_updates

    t0 = time.perf_counter()
    runner = jax.block_until_ready(init_members(s))
    hp, env_params = s.hp, s.env_params
    if s.mesh is not None:
        hp = shard_members(hp, s.mesh, "members")
        env_params = shard_members(env_params, s.mesh, "members")
    init_s = time.perf_counter() - t0

    printer = Progress(num_updates, stream, label="sweep") if progress else None
    t0 = time.perf_counter()
    fn = jax.jit(functools.partial(s.algo.run, num_updates=num_updates, callback=printer,
                                   log_every=base.run["log_every"], batched=True))
    compiled = fn.lower(runner, hp, env_params).compile()
    compile_s = time.perf_counter() - t0
    if printer is not None:
        printer.restart()
    t0 = time.perf_counter()
    runner, metrics = compiled(runner, hp, env_params)
    jax.block_until_ready(runner)
    run_s = time.perf_counter() - t0
    metrics = jax.device_get(metrics)
    rows = metric_rows(metrics)

    per_update = base.steps_per_update
    evaluation = None
    if evaluate_members:
        spec = policy_spec(s.algo)
        arrays = policy_arrays(runner.params, runner.obs_stats
                               if s.algo.static.normalize_obs else None)
        num_steps = base.eval["num_steps"] or int(np.max(np.asarray(s.env_params.max_steps)))
        evaluation = evaluate(s.env, spec, arrays, s.env_params, base.eval["seed"],
                              base.eval["num_envs"], num_steps, greedy=base.eval["greedy"],
                              batched=True)

    tail = max(1, num_updates // 10)
    results = []
    for j, assignment in enumerate(sweep.members):
        def tail_mean(name: str) -> float | None:
            v = np.asarray(metrics[name])[-tail:, j].astype(np.float64)
            v = v[np.isfinite(v)]
            return float(v.mean()) if v.size else None

        row = {"member": j, **assignment,
               "train_success_rate_last10pct": tail_mean("success_rate"),
               "train_return_last10pct": tail_mean("return_mean"),
               "train_length_last10pct": tail_mean("length_mean")}
        if evaluation is not None:
            row["eval_success_rate"] = float(evaluation["success_rate"][j])
            steps = evaluation["mean_steps_to_goal"]
            row["eval_mean_steps_to_goal"] = (None if steps is None
                                              or not np.isfinite(steps[j]) else float(steps[j]))
        results.append(row)

    summary = {
        "members": m,
        "grid": sweep.grid,
        "mode": sweep.mode,
        "num_updates": num_updates,
        "env_steps_per_member": num_updates * per_update,
        "env_steps_total": num_updates * per_update * m,
        "devices": 1 if s.mesh is None else s.mesh.size,
        "init_seconds": init_s,
        "compile_seconds": compile_s,
        "train_seconds": run_s,
        "steps_per_second_excl_compile": num_updates * per_update * m / run_s,
        "wall_seconds": time.perf_counter() - t_wall,
        "base_config": base.to_dict(),
        "results": results,
        "machine": machine_info(),
    }
    if evaluation is not None:
        summary["eval"] = {"episodes": evaluation["episodes"], "seed": evaluation["seed"],
                           "greedy": evaluation["greedy"],
                           "seconds_incl_compile": evaluation["seconds_incl_compile"]}
    if out_dir is not None:
        out = pathlib.Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.yaml").write_text(dump_yaml({"base": base.to_dict(), "grid": sweep.grid,
                                                   "mode": sweep.mode}))
        (out / "metrics.jsonl").unlink(missing_ok=True)
        append_jsonl(out / "metrics.jsonl", rows)
        write_csv(out / "results.csv", results)
        (out / "results.json").write_text(json.dumps(summary, indent=2))
        curves = {member_label(a): [r for r in rows if r["member"] == j]
                  for j, a in enumerate(sweep.members)}
        plot_learning_curves(out / "learning_curves.png", curves,
                             title=f"sweep of {m} members ({base.env.get('id') or 'env'})")
    return SweepResult(summary=summary, runner=runner, metrics=metrics, setup=s)


def print_results(summary: dict[str, Any], stream: TextIO | None = None) -> None:
    import sys

    stream = stream or sys.stdout
    p = functools.partial(print, file=stream)
    p(f"sweep: {summary['members']} members x {summary['env_steps_per_member']:,} env steps, "
      f"one program: compile {summary['compile_seconds']:.1f} s, train "
      f"{summary['train_seconds']:.1f} s ({summary['steps_per_second_excl_compile']:,.0f} "
      f"env steps/s over all members), wall {summary['wall_seconds']:.1f} s")
    for r in summary["results"]:
        label = ", ".join(f"{k}={v}" for k, v in r.items()
                          if k not in ("member",) and not k.startswith(("train_", "eval_")))
        ev = r.get("eval_success_rate")
        tr = r.get("train_success_rate_last10pct")
        p(f"  [{r['member']}] {label}: eval success "
          f"{'n/a' if ev is None else f'{100 * ev:.1f}%'}, training success (last 10%) "
          f"{'n/a' if tr is None else f'{100 * tr:.1f}%'}")
