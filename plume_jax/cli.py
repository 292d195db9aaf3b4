"""The ``plume-jax`` command line.

``plume-jax demo`` runs the main job on its embedded default: thousands of
seeded episodes of a klinotaxis (run-and-tumble) policy on
``PlumeNav-Gaussian-v0`` in one jitted, vmapped rollout, then prints the
success rate, mean steps to source and env steps per second, and writes a
PNG of one trajectory over the plume. ``plume-jax list`` lists the presets.
``plume-jax train --config FILE`` trains a PPO policy (``plume_jax.train``)
and ``plume-jax sweep --config FILE`` trains a grid of configurations as one
compiled program.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

DEMO_DEFAULTS = {
    "preset": "PlumeNav-Gaussian-v0",
    "num_envs": 4096,
    "seed": 0,
    "out": "plume_jax_demo.png",
    "scale": 4,
}


def _parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["sigma=10", "grid_size=[64, 64]"]`` -> dict, values parsed as YAML."""
    import yaml

    from plume_jax.errors import ValidationError

    out = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise ValidationError.for_parameter("--set", item, "NAME=VALUE (VALUE in YAML syntax)")
        out[name.strip()] = yaml.safe_load(raw)
    return out


def run_demo(preset: str, num_envs: int, num_steps: int | None, seed: int, out: str | None,
             scale: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """Run the demo and return its figures (also used by tests)."""
    import jax
    import numpy as np

    import plume_jax
    from agents import KlinotaxisPolicy
    from plume_jax.evaluate import rollout
    from plume_jax.png import write_png
    from plume_jax.render import render_frame

    env, params = plume_jax.make(preset, **overrides)
    num_steps = int(params.max_steps) if num_steps is None else num_steps
    policy = KlinotaxisPolicy.for_env(env)
    key = jax.random.key(seed)

    t0 = time.perf_counter()
    compiled = rollout.lower(env, params, policy, key, num_envs, num_steps).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = jax.block_until_ready(compiled(params, key))
    run_s = time.perf_counter() - t0

    success = np.asarray(result.success)
    lengths = np.asarray(result.episode_length)
    figures = {
        "preset": preset,
        "policy": "klinotaxis",
        "num_envs": num_envs,
        "num_steps": num_steps,
        "seed": seed,
        "success_rate": float(success.mean()),
        "successes": int(success.sum()),
        "mean_steps_to_source": float(lengths[success].mean()) if success.any() else None,
        "env_steps": num_envs * num_steps,
        "run_seconds": run_s,
        "compile_seconds": compile_s,
        "env_steps_per_second": num_envs * num_steps / run_s,
    }
    if out:
        image = render_frame(env, result.final_plume, result.final_agent, params,
                             trail=result.trajectory, trail_valid=result.trajectory_valid,
                             scale=scale)
        write_png(out, np.asarray(image))
        figures["png"] = out
    return figures


def _print_demo(f: dict[str, Any]) -> None:
    mean_steps = "n/a (no success)" if f["mean_steps_to_source"] is None \
        else f"{f['mean_steps_to_source']:.1f} (successful episodes)"
    print(f"plume-jax demo: {f['preset']}, {f['policy']} policy, "
          f"{f['num_envs']} seeded episodes x up to {f['num_steps']} steps (seed {f['seed']})")
    print(f"success rate:         {100 * f['success_rate']:.1f}% ({f['successes']}/{f['num_envs']})")
    print(f"mean steps to source: {mean_steps}")
    print(f"env steps per second: {f['env_steps_per_second']:,.0f} "
          f"({f['env_steps']:,} steps in {f['run_seconds']:.2f} s; compile {f['compile_seconds']:.1f} s)")
    if "png" in f:
        print(f"trajectory image:     {f['png']}")


def _scenario_files(paths: list[str]) -> list[str]:
    import os

    files = []
    for path in paths:
        if os.path.isdir(path):
            files += sorted(os.path.join(path, f) for f in os.listdir(path)
                            if f.endswith((".yaml", ".yml")))
        else:
            files.append(path)
    return files


def run_evaluate(args: argparse.Namespace) -> int:
    """``plume-jax evaluate``: exit 0 when every expectation holds and nothing
    regressed against ``--baseline``, 1 otherwise (2 for bad input)."""
    from plume_jax.errors import ValidationError
    from plume_jax.evaluate import scenario as sc

    if args.episodes is not None and args.episodes < 1:
        raise ValidationError.for_parameter("--episodes", args.episodes, "an integer >= 1")
    agent_params = _parse_overrides(args.agent_param) if args.agent_param else None
    if agent_params and not args.agent:
        raise ValidationError.for_parameter("--agent-param", args.agent_param,
                                            "to be used together with --agent")
    baseline = {}
    if args.baseline:
        try:
            with open(args.baseline) as f:
                baseline = {(r["scenario"], r["agent"]["name"]): r["metrics"]
                            for r in json.load(f)["reports"]}
        except (OSError, KeyError, ValueError) as error:
            raise ValidationError.for_parameter("--baseline", args.baseline,
                                                f"a report JSON written by --save-baseline ({error})")
    reports = []
    for path in _scenario_files(args.scenario):
        scenario = sc.load_scenario(path)
        for agent in (args.agent or [None]):
            report = sc.run_scenario(scenario, agent=agent, agent_params=agent_params,
                                     episodes=args.episodes, seed=args.seed)
            key = (report["scenario"], report["agent"]["name"])
            report["regressions"] = sc.compare_to_baseline(report["metrics"], baseline[key]) \
                if key in baseline else []
            reports.append(report)
    sc.write_outputs(reports, args.out)
    if args.save_baseline:
        with open(args.save_baseline, "w") as f:
            json.dump({"reports": [sc.public(r) for r in reports]}, f, indent=2)
    print(sc.markdown_table(reports))
    print(f"\nreports, summary.md and trajectory PNGs in {args.out}/")
    failed = [r for r in reports if r["failures"] or r["regressions"]]
    if failed:
        print(f"{len(failed)} of {len(reports)} runs failed an expectation or regressed",
              file=sys.stderr)
    return 1 if failed else 0


def _default_out(config: str) -> str:
    import pathlib

    return str(pathlib.Path("runs") / pathlib.Path(config).stem)


def _run_train(args: argparse.Namespace) -> int:
    """``plume-jax train``: see :mod:`plume_jax.train.trainer`."""
    from plume_jax.errors import ValidationError
    from plume_jax.train.config import load_train_config
    from plume_jax.train.trainer import print_summary, train

    config = load_train_config(args.config)
    if args.total_steps is not None:
        if args.total_steps < 1:
            raise ValidationError.for_parameter("--total-steps", args.total_steps,
                                                "an integer >= 1")
        config = config.replace(algo={"total_steps": args.total_steps})
    if args.seed is not None:
        config = config.replace(run={"seed": args.seed})
    out = args.out or _default_out(args.config)
    result = train(config, out, progress=not args.quiet, resume=args.resume)
    print_summary(result.summary)
    print(f"outputs in {out}/ (metrics.jsonl, metrics.csv, learning_curve.png, checkpoint/, "
          "policy/, summary.json)")
    return 0


def _run_sweep(args: argparse.Namespace) -> int:
    """``plume-jax sweep``: see :mod:`plume_jax.train.sweep`."""
    from plume_jax.train.sweep import load_sweep_config, print_results, run_sweep

    sweep = load_sweep_config(args.config)
    out = args.out or _default_out(args.config)
    result = run_sweep(sweep, out, progress=not args.quiet)
    print_results(result.summary)
    print(f"outputs in {out}/ (results.csv, results.json, metrics.jsonl, learning_curves.png)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="plume-jax", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="batch rollout of an odour-following policy (default job)")
    demo.add_argument("--preset", default=DEMO_DEFAULTS["preset"], help="preset id (see `list`)")
    demo.add_argument("--num-envs", type=int, default=DEMO_DEFAULTS["num_envs"],
                      help="episodes run in parallel (default %(default)s)")
    demo.add_argument("--num-steps", type=int, default=None,
                      help="steps per env (default: the preset's max_steps)")
    demo.add_argument("--seed", type=int, default=DEMO_DEFAULTS["seed"])
    demo.add_argument("--out", default=DEMO_DEFAULTS["out"],
                      help="PNG of env 0's trajectory ('' to skip; default %(default)s)")
    demo.add_argument("--scale", type=int, default=DEMO_DEFAULTS["scale"], help="pixels per cell")
    demo.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                      help="override a preset setting, e.g. --set sigma=10 (repeatable)")
    demo.add_argument("--json", action="store_true", help="print the figures as JSON")

    sub.add_parser("list", help="list the presets")

    train = sub.add_parser("train", help="train a PPO policy from a YAML config (see configs/)")
    train.add_argument("--config", required=True, help="training config YAML, e.g. "
                       "configs/train_gaussian.yaml")
    train.add_argument("--total-steps", type=int, default=None,
                       help="env steps to train (overrides algo.total_steps)")
    train.add_argument("--seed", type=int, default=None, help="training seed (overrides run.seed)")
    train.add_argument("--out", default=None,
                       help="output folder (default runs/<config name>)")
    train.add_argument("--resume", default=None, metavar="CHECKPOINT",
                       help="continue from a checkpoint folder (e.g. runs/x/checkpoint)")
    train.add_argument("--quiet", action="store_true", help="no progress lines")

    sweep = sub.add_parser("sweep", help="train a grid of configurations as one compiled program")
    sweep.add_argument("--config", required=True, help="sweep YAML, e.g. "
                       "configs/sweep_gaussian.yaml")
    sweep.add_argument("--out", default=None, help="output folder (default runs/<config name>)")
    sweep.add_argument("--quiet", action="store_true", help="no progress lines")

    ev = sub.add_parser("evaluate", help="run evaluation scenarios (agent x scenario x seeds)")
    ev.add_argument("--scenario", nargs="+", required=True,
                    help="scenario YAML file(s) or folder(s) of them (configs/scenarios/)")
    ev.add_argument("--agent", nargs="+", default=None,
                    help="agent name(s) to run instead of each scenario's own agent")
    ev.add_argument("--agent-param", action="append", default=[], metavar="NAME=VALUE",
                    help="parameter for --agent (repeatable, VALUE in YAML syntax)")
    ev.add_argument("--episodes", type=int, default=None, help="override each scenario's episodes")
    ev.add_argument("--seed", type=int, default=None, help="override each scenario's seed")
    ev.add_argument("--out", default="eval_out", help="folder for JSON, summary.md and PNGs")
    ev.add_argument("--baseline", default=None, help="saved report JSON to compare against")
    ev.add_argument("--save-baseline", default=None, help="write this run's reports as a baseline")

    args = parser.parse_args(argv)
    from plume_jax.errors import ValidationError

    try:
        if args.command == "list":
            from plume_jax.registry import list_presets

            for pid, description in list_presets().items():
                print(f"{pid}\n    {description}")
            return 0
        if args.command == "evaluate":
            return run_evaluate(args)
        if args.command == "demo":
            for name in ("num_envs", "num_steps", "scale"):
                value = getattr(args, name)
                if value is not None and value < 1:
                    raise ValidationError.for_parameter(f"--{name.replace('_', '-')}", value,
                                                        "an integer >= 1")
            figures = run_demo(args.preset, args.num_envs, args.num_steps, args.seed,
                               args.out or None, args.scale, _parse_overrides(args.set))
            print(json.dumps(figures, indent=2)) if args.json else _print_demo(figures)
            return 0
        if args.command == "train":
            return _run_train(args)
        if args.command == "sweep":
            return _run_sweep(args)
    except ValidationError as error:
        print(f"plume-jax: error: {error}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
