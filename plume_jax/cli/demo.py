"""``plume-jax demo``: the main job on its embedded default.

Thousands of seeded episodes of a klinotaxis (run-and-tumble) policy on
``PlumeNav-Gaussian-v0`` in one jitted, vmapped rollout; prints the success
rate, mean steps to source and env steps per second, and writes a figure of
several episodes' paths over the plume (title with the outcome, a colour bar
for concentration). Every option is checked before the rollout compiles.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from plume_jax.cli.common import check_output_file
from plume_jax.settings import parse_overrides
from plume_jax.core.errors import ValidationError
from plume_jax.core.seeding import seed_key

DEMO_DEFAULTS = {
    "preset": "PlumeNav-Gaussian-v0",
    "num_envs": 4096,
    "seed": 0,
    "out": "plume_jax_demo.png",
    "scale": 4,
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="batch rollout of an odour-following policy (default job)")
    demo.add_argument("--preset", default=DEMO_DEFAULTS["preset"], help="preset id (see `list`)")
    demo.add_argument("--num-envs", type=int, default=DEMO_DEFAULTS["num_envs"],
                      help="episodes run in parallel (default %(default)s)")
    demo.add_argument("--num-steps", type=int, default=None,
                      help="steps per env (default: the preset's max_steps)")
    demo.add_argument("--seed", type=int, default=DEMO_DEFAULTS["seed"],
                      help="an integer in [0, 2**63) (default %(default)s)")
    demo.add_argument("--out", default=DEMO_DEFAULTS["out"],
                      help="figure of the first episodes' paths: .png, .pdf, .svg, ... "
                      "('' to skip; default %(default)s)")
    demo.add_argument("--scale", type=int, default=DEMO_DEFAULTS["scale"],
                      help="pixels per grid cell of the figure's map, 1-64 (the map is kept "
                      "between about 4 and 16 inches wide; default %(default)s)")
    demo.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                      help="override a preset setting, e.g. --set sigma=10 (repeatable)")
    demo.add_argument("--json", action="store_true", help="print the figures as JSON")
    demo.add_argument("--quiet", action="store_true", help="no progress bar or lines")


def run_demo(preset: str, num_envs: int, num_steps: int | None, seed: int, out: str | None,
             scale: int, overrides: dict[str, Any], quiet: bool = True) -> dict[str, Any]:
    """Run the demo and return its figures (also used by tests).

    ``quiet=False`` shows a progress bar (plain lines when stderr is not a
    terminal) while the rollout compiles and runs.
    """
    import jax

    from plume_jax.core.agents_package import check_agents_package

    check_agents_package()
    from agents import KlinotaxisPolicy
    from plume_jax.evaluate import rollout
    from plume_jax.evaluate.figures import outcome_text, run_figure
    from plume_jax.envs.presets import make
    from plume_jax.evaluate.scenario import summarise
    from plume_jax.progress import ProgressBar

    env, params = make(preset, **overrides)
    num_steps = int(params.max_steps) if num_steps is None else num_steps
    policy = KlinotaxisPolicy.for_env(env)
    key = seed_key(seed)

    with ProgressBar(num_steps, "demo", unit="steps", quiet=quiet, stream=sys.stderr) as bar:
        progress = None if quiet else (lambda steps, finished: bar.update(
            int(steps), f"{int(finished):,}/{num_envs:,} first episodes ended"))
        bar.update(0, "compiling")
        t0 = time.perf_counter()
        compiled = rollout.lower(env, params, policy, key, num_envs, num_steps,
                                 progress=progress).compile()
        compile_s = time.perf_counter() - t0
        bar.restart_clock()
        t0 = time.perf_counter()
        result = jax.block_until_ready(compiled(params, key))
        run_s = time.perf_counter() - t0

    metrics = summarise(result, float(params.goal_radius), team=env.is_multi_agent)
    figures = {
        "preset": preset,
        "policy": "klinotaxis",
        "num_envs": num_envs,
        "num_steps": num_steps,
        "seed": seed,
        "success_rate": metrics["success_rate"],
        "success_ci95": metrics["success_ci95"],
        "successes": metrics["successes"],
        "mean_steps_to_source": metrics["mean_steps"],
        "sem_steps_to_source": metrics["sem_steps"],
        "env_steps": num_envs * num_steps,
        "run_seconds": run_s,
        "compile_seconds": compile_s,
        "env_steps_per_second": num_envs * num_steps / run_s,
    }
    if out:
        cells = max(env.grid.width, env.grid.height)
        title = f"plume-jax demo: {preset} — klinotaxis\n{outcome_text(metrics)}"
        run_figure(env, params, result, title,
                   panel_inches=min(max(cells * scale / 110.0, 4.0), 16.0)).savefig(out, dpi=110)
        figures["png"] = out
    return figures


def print_demo(f: dict[str, Any]) -> None:
    mean_steps = "n/a (no success)" if f["mean_steps_to_source"] is None \
        else f"{f['mean_steps_to_source']:.1f} (successful episodes)"
    print(f"plume-jax demo: {f['preset']}, {f['policy']} policy, "
          f"{f['num_envs']} seeded episodes x up to {f['num_steps']} steps (seed {f['seed']})")
    print(f"success rate:         {100 * f['success_rate']:.1f}% ({f['successes']}/{f['num_envs']})")
    print(f"mean steps to source: {mean_steps}")
    print(f"env steps per second: {f['env_steps_per_second']:,.0f} "
          f"({f['env_steps']:,} steps in {f['run_seconds']:.2f} s; compile {f['compile_seconds']:.1f} s)")
    if "png" in f:
        print(f"trajectory figure:    {f['png']}")


def run(args: argparse.Namespace) -> int:
    from plume_jax.evaluate.scenario import validate_seed

    for name, high in (("num_envs", 2**24), ("num_steps", 2**31 - 1), ("scale", 64)):
        value = getattr(args, name)
        if value is not None and not 1 <= value <= high:
            raise ValidationError.for_parameter(f"--{name.replace('_', '-')}", value,
                                                f"an integer in [1, {high}]")
    validate_seed(args.seed, "--seed")
    overrides = parse_overrides(args.set)
    if args.out:
        from matplotlib.backend_bases import FigureCanvasBase

        formats = tuple("." + s for s in sorted(FigureCanvasBase.get_supported_filetypes()))
        check_output_file(args.out, "--out", formats)
    figures = run_demo(args.preset, args.num_envs, args.num_steps, args.seed,
                       args.out or None, args.scale, overrides, quiet=args.quiet)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_demo(figures)
    return 0
