"""``plume-jax demo``: the main job on its embedded default.

Thousands of seeded episodes of a klinotaxis (run-and-tumble) policy on
``PlumeNav-Gaussian-v0`` in one jitted, vmapped rollout; prints the success
rate, mean steps to source and env steps per second, and writes a PNG of
one trajectory over the plume.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from plume_jax.cli.common import parse_overrides
from plume_jax.errors import ValidationError

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
    demo.add_argument("--seed", type=int, default=DEMO_DEFAULTS["seed"])
    demo.add_argument("--out", default=DEMO_DEFAULTS["out"],
                      help="PNG of env 0's trajectory ('' to skip; default %(default)s)")
    demo.add_argument("--scale", type=int, default=DEMO_DEFAULTS["scale"], help="pixels per cell")
    demo.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                      help="override a preset setting, e.g. --set sigma=10 (repeatable)")
    demo.add_argument("--json", action="store_true", help="print the figures as JSON")


def run_demo(preset: str, num_envs: int, num_steps: int | None, seed: int, out: str | None,
             scale: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """Run the demo and return its figures (also used by tests)."""
    import jax
    import numpy as np

    import plume_jax
    from plume_jax.agents_package import check_agents_package

    check_agents_package()
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
        print(f"trajectory image:     {f['png']}")


def run(args: argparse.Namespace) -> int:
    for name in ("num_envs", "num_steps", "scale"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValidationError.for_parameter(f"--{name.replace('_', '-')}", value,
                                                "an integer >= 1")
    figures = run_demo(args.preset, args.num_envs, args.num_steps, args.seed,
                       args.out or None, args.scale, parse_overrides(args.set))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_demo(figures)
    return 0
