"""``plume-jax tune`` against one process per trial (issue 43, item 6).

The same search space (``configs/tune_gaussian.yaml``'s parameters on
``configs/train_gaussian.yaml``, PPO on ``PlumeNav-Gaussian-v0``), the same
trial budget and sampler (TPE, seed 0), no pruning, tuned three ways, each
in its own process(es), one after the other in one run:

- ``tune-<B>``: ``plume-jax tune --batch-size B`` (each batch of trials one
  vmapped program);
- ``per-process``: RL Zoo's way: an Optuna study in this process whose
  objective starts ``plume-jax train`` on the trial's config (one process,
  one compile per trial) and reads its greedy success from ``summary.json``;
- ``shipped``: ``configs/train_gaussian.yaml`` itself at the same budget and
  evaluation (the space's ``set``; one ``plume-jax train``), the bar the
  best trial is compared with.

Measured per mode: wall time to finish, trials per hour, compile seconds
(summed over programs or processes), the best greedy success and its mean
steps to the goal, and the machine's load average before and after (the
machine may be shared)::

    python scripts/bench/tune.py --out benchmarks/tune.json
    python scripts/bench/tune.py --quick --out /tmp/tune_quick.json   # a small look
    python scripts/bench/tune.py --pruning --out benchmarks/tune_pruning.json

``--pruning`` measures what pruning saves: one batch trained with half its
trials pruned at the halfway evaluation (``tune``'s way: the program rebuilt
with the survivors, one more compile) against the same batch with none
pruned, which is what masking the pruned members would cost (``vmap``
computes a masked member all the same).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

try:
    from scripts.bench.harness import ROOT, load_rounded, machine_info, write_json
except ImportError:  # run as a file: scripts/ is on sys.path
    from harness import ROOT, load_rounded, machine_info, write_json

CONFIG = ROOT / "configs" / "train_gaussian.yaml"
SPACE = ROOT / "configs" / "tune_gaussian.yaml"
#: --quick: a tiny env and budget, to check the script end to end in a minute or two.
QUICK_SET = {"env.overrides.grid_size": [16, 16], "env.overrides.max_steps": 40,
             "algo.num_envs": 16, "algo.num_steps": 32, "network.hidden_sizes": [8],
             "eval.num_envs": 32}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="benchmarks/tune.json")
    p.add_argument("--trials", type=int, default=None, help="default 32 (--quick: 4)")
    p.add_argument("--total-steps", type=int, default=None,
                   help="env steps per trial (default 500000, the space's; --quick: 2048)")
    p.add_argument("--batches", type=int, nargs="+", default=None,
                   help="tune batch sizes (default 8 16; --quick: 2)")
    p.add_argument("--eval-envs", type=int, default=None,
                   help="final greedy evaluation episodes (default the space's 500)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--pruning", action="store_true",
                   help="only the pruning comparison: one batch (the first --batches) with "
                   "half its trials pruned halfway (program rebuilt) against none pruned")
    p.add_argument("--work", default=None, help="folder for the runs (default a temporary one)")
    args = p.parse_args(argv)
    q = args.quick
    args.trials = args.trials or (4 if q else 32)
    args.total_steps = args.total_steps or (2048 if q else 500_000)
    args.batches = args.batches or ([2] if q else [8, 16])
    return args


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The dotted overrides every mode trains with (and the shipped config)."""
    sets: dict[str, Any] = {"algo.total_steps": args.total_steps, "eval.every": None}
    if args.quick:
        sets.update(QUICK_SET)
    if args.eval_envs:
        sets["eval.num_envs"] = args.eval_envs
    return sets


def _space_file(work: pathlib.Path, sets: dict[str, Any]) -> pathlib.Path:
    from plume_jax.train.config import dump_yaml, read_yaml

    space = read_yaml(SPACE)
    space["set"] = {**(space.get("set") or {}), **sets}
    space["pruner"] = "none"
    path = work / "space.yaml"
    path.write_text(dump_yaml(space))
    return path


def _run(cmd: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-P", "-m", "plume_jax", *cmd, "--quiet"], env=env,
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"plume-jax {' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - t0


def _mode(name: str, wall: float, trials: int, compile_s: float, best: dict[str, Any],
          load: list[float]) -> dict[str, Any]:
    return {"mode": name, "wall_seconds": wall, "trials": trials,
            "trials_per_hour": 3600.0 * trials / wall, "compile_seconds": compile_s,
            "best_success": best.get("success"), "best_mean_steps": best.get("steps"),
            "best_params": best.get("params"), "load_before": load, "load_after": load_rounded()}


def tune_mode(work: pathlib.Path, batch: int, args: argparse.Namespace,
              space: pathlib.Path) -> dict[str, Any]:
    out = work / f"tune-{batch}"
    load = load_rounded()
    wall = _run(["tune", "--config", str(CONFIG), "--space", str(space), "--trials",
                 str(args.trials), "--out", str(out), "--batch-size", str(batch)])
    results = json.loads((out / "results.json").read_text())
    best = results["best"] or {}
    return {**_mode(f"tune-{batch}", wall, args.trials, results["timing"]["compile"],
                    {"success": best.get("value"), "steps": best.get("mean_steps_to_goal"),
                     "params": best.get("params")}, load),
            "programs": results["timing"]["programs"]}


def _train(config: dict[str, Any], out: pathlib.Path) -> dict[str, Any]:
    from plume_jax.train.config import dump_yaml

    out.parent.mkdir(parents=True, exist_ok=True)
    path = out.with_suffix(".yaml")
    path.write_text(dump_yaml(config))
    _run(["train", "--config", str(path), "--out", str(out)])
    return json.loads((out / "summary.json").read_text())


def per_process_mode(work: pathlib.Path, args: argparse.Namespace,
                     space_file: pathlib.Path) -> dict[str, Any]:
    """One ``plume-jax train`` process per trial, asked for by an Optuna
    study with the same sampler (RL Zoo's way)."""
    import optuna

    from plume_jax.train.config import read_yaml
    from plume_jax.train.tune.space import space_from_mapping
    from plume_jax.train.tune.study import suggest

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = space_from_mapping(read_yaml(space_file), read_yaml(CONFIG), str(CONFIG.parent))
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(
        seed=space.seed, n_startup_trials=min(10, max(2, space.batch_size))))
    compile_s = [0.0]

    def objective(trial: Any) -> float:
        values = suggest(trial, space)
        summary = _train(space.raw_config(values), work / "per-process" / f"{trial.number:05d}")
        compile_s[0] += summary["compile_seconds"]
        trial.set_user_attr("mean_steps_to_goal", summary["evaluation"]["mean_steps_to_goal"])
        return float(summary["evaluation"]["success_rate"])

    load = load_rounded()
    t0 = time.perf_counter()
    study.optimize(objective, n_trials=args.trials)
    wall = time.perf_counter() - t0
    best = sorted(study.trials, key=lambda t: (-t.value, t.user_attrs["mean_steps_to_goal"]
                                               or float("inf")))[0]
    return _mode("per-process", wall, args.trials, compile_s[0],
                 {"success": best.value, "steps": best.user_attrs["mean_steps_to_goal"],
                  "params": best.params}, load)


def shipped_mode(work: pathlib.Path, sets: dict[str, Any]) -> dict[str, Any]:
    from plume_jax.train.config import read_yaml, with_overrides

    load = load_rounded()
    t0 = time.perf_counter()
    summary = _train(with_overrides(read_yaml(CONFIG), sets), work / "shipped" / "run")
    wall = time.perf_counter() - t0
    e = summary["evaluation"]
    return _mode("shipped", wall, 1, summary["compile_seconds"],
                 {"success": e["success_rate"], "steps": e["mean_steps_to_goal"]}, load)


class _PruneHalf:
    """An Optuna pruner that prunes the odd-numbered trials at their first
    report: half of a batch, at a known update."""

    def prune(self, study: Any, trial: Any) -> bool:
        return trial.number % 2 == 1


def pruning_mode(work: pathlib.Path, args: argparse.Namespace, sets: dict[str, Any]
                 ) -> dict[str, Any]:
    """One batch of ``args.batches[0]`` trials trained in one process, twice:
    with half of them pruned at the halfway evaluation (the program rebuilt
    with the survivors, as ``tune`` prunes) and with none pruned (what a
    masked member costs: ``vmap`` computes it anyway)."""
    import optuna

    from plume_jax.progress import ProgressBar
    from plume_jax.train.config import read_yaml
    from plume_jax.train.tune.programs import TrialRun, train_group
    from plume_jax.train.tune.space import space_from_mapping

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = space_from_mapping({"params": {"algo.learning_rate": {
        "type": "float", "low": 3e-4, "high": 3e-3}}, "set": sets}, read_yaml(CONFIG),
        str(CONFIG.parent))
    updates = space.config({"algo.learning_rate": 1e-3}).num_updates
    space = dataclasses.replace(space, set={**sets, "eval.every": max(1, updates // 2)})
    out: dict[str, Any] = {"members": args.batches[0], "updates": updates,
                           "pruned_at_update": max(1, updates // 2)}
    for name, pruner in (("rebuild", _PruneHalf()), ("no_pruning", optuna.pruners.NopPruner())):
        study = optuna.create_study(direction="maximize", pruner=pruner)
        runs = []
        for k in range(args.batches[0]):
            trial = study.ask()
            values = {"algo.learning_rate": 3e-4 + 3e-4 * k}
            runs.append(TrialRun(trial, values, space.config(values),
                                 work / f"pruning-{name}" / str(k)))
        load = load_rounded()
        t0 = time.perf_counter()
        spent = train_group(runs, stop=None, prune=True, bar=ProgressBar(1, "x", quiet=True))
        out[name] = {"wall_seconds": time.perf_counter() - t0, **spent,
                     "pruned": sum(r.pruned_at is not None for r in runs),
                     "load_before": load, "load_after": load_rounded()}
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    sets = settings(args)
    if args.pruning:
        with tempfile.TemporaryDirectory() as tmp:
            result = pruning_mode(pathlib.Path(args.work or tmp), args, sets)
        write_json({"benchmark": "tune_pruning", "settings": sets, **result,
                    "machine": machine_info("platform", "cpu_model", "cpu_count", "jax",
                                            "jax_backend", "git_commit", "date")},
                   args.out, announce=True)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        space = _space_file(work, sets)
        modes = [tune_mode(work, b, args, space) for b in args.batches]
        modes.append(per_process_mode(work, args, space))
        from plume_jax.train.config import read_yaml

        modes.append(shipped_mode(work, {**(read_yaml(space).get("set") or {}), **sets}))
    per = next(m for m in modes if m["mode"] == "per-process")
    for m in modes:
        if m["mode"].startswith("tune-"):
            m["speedup_vs_per_process"] = per["wall_seconds"] / m["wall_seconds"]
    payload = {"benchmark": "tune", "config": str(CONFIG.relative_to(ROOT)),
               "space": str(SPACE.relative_to(ROOT)), "settings": sets,
               "trials": args.trials, "quick": args.quick, "modes": modes,
               "machine": machine_info("platform", "cpu_model", "cpu_count", "jax",
                                       "jax_backend", "version:optuna", "git_commit", "date")}
    write_json(payload, args.out, announce=True)
    for m in modes:
        print(f"{m['mode']:>12}: {m['wall_seconds']:8.1f} s, {m['trials_per_hour']:7.1f} "
              f"trials/h, compile {m['compile_seconds']:7.1f} s, best success "
              f"{m['best_success']}, steps {m['best_mean_steps']}, load {m['load_before']} -> "
              f"{m['load_after']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
