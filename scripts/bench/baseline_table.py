#!/usr/bin/env python
"""Every baseline agent on every preset: success rate, steps, path efficiency.

For each (preset, agent) pair the agent is built for the preset's env; pairs
where the env lacks what the agent needs (e.g. chemotaxis without antennae)
are listed with the reason. Each runnable pair is one scenario run
(``plume_jax.evaluate.scenario.run_scenario``: one jitted, vmapped rollout of
``--episodes`` seeded episodes). Writes ``benchmarks/baselines.json`` and
``docs/baselines.md``.

Usage: ``python scripts/bench/baseline_table.py [--episodes 500] [--presets ...] [--agents ...]``;
``--update`` reruns only the given presets and agents and replaces their rows in
the existing JSON (same episodes and seed), leaving the other rows as they were.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

DEFAULT_AGENTS = ["random_walk", "klinotaxis", "chemotaxis", "cast_and_surge", "infotaxis",
                  "space_aware_infotaxis"]


def main(argv: list[str] | None = None) -> int:
    import plume_jax
    from agents.registry import FUNCTIONAL_AGENTS, make_agent
    from plume_jax.evaluate import scenario as sc
    from scripts.bench.throughput import machine

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--presets", nargs="*", default=list(plume_jax.PRESETS))
    parser.add_argument("--agents", nargs="*", default=DEFAULT_AGENTS)
    parser.add_argument("--json", default="benchmarks/baselines.json")
    parser.add_argument("--markdown", default="docs/baselines.md")
    parser.add_argument("--update", action="store_true",
                        help="replace only the rows of the given presets x agents in --json")
    args = parser.parse_args(argv)
    kept: list[dict] = []
    if args.update:
        with open(args.json) as f:
            old = json.load(f)
        if (old["episodes"], old["seed"]) != (args.episodes, args.seed):
            parser.error(f"--update needs the saved table's --episodes {old['episodes']} and "
                         f"--seed {old['seed']} (got {args.episodes} and {args.seed})")
        kept = [r for r in old["rows"]
                if not (r["preset"] in args.presets and r["agent"] in args.agents)]

    rows = []
    for preset in args.presets:
        env, _ = plume_jax.make(preset)
        for agent in args.agents:
            if agent not in FUNCTIONAL_AGENTS:
                rows.append({"preset": preset, "agent": agent, "skipped": "agent not available"})
                continue
            try:
                make_agent(agent, env)
            except plume_jax.ValidationError as error:
                rows.append({"preset": preset, "agent": agent, "skipped": error.allowed})
                continue
            scenario = sc.validate_scenario({"name": preset, "env": {"preset": preset},
                                             "agent": agent, "episodes": args.episodes,
                                             "seed": args.seed})
            t0 = time.perf_counter()
            report = sc.run_scenario(scenario)
            wall = time.perf_counter() - t0
            m = report["metrics"]
            rows.append({"preset": preset, "agent": agent, "metrics": m,
                         "max_steps": report["max_steps"], "wall_seconds": wall})
            print(f"{preset:34s} {agent:22s} success {m['success_rate']:.3f} "
                  f"steps {m['mean_steps']} ({wall:.0f} s)", flush=True)

    if args.update:
        order = {p: i for i, p in enumerate(plume_jax.PRESETS)}
        agent_order = {a: i for i, a in enumerate(DEFAULT_AGENTS)}
        rows = sorted(kept + rows, key=lambda r: (order.get(r["preset"], len(order)),
                                                  agent_order.get(r["agent"], len(agent_order))))
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"machine": machine(), "episodes": args.episodes, "seed": args.seed,
                   "rows": rows}, f, indent=2)
    with open(args.markdown, "w") as f:
        f.write(render(rows, args.episodes, args.seed))
    print(f"wrote {args.json} and {args.markdown}")
    return 0


def render(rows: list[dict], episodes: int, seed: int) -> str:
    lines = [
        "# Baseline agents on every preset",
        "",
        f"Each cell: {episodes} seeded episodes (seed {seed}) in one jitted, vmapped rollout "
        "(`plume_jax.evaluate`); success rate with its Wilson 95% interval; mean ± standard "
        "error and median steps to the source over successful episodes; path efficiency = "
        "(start distance − goal radius) / path length, Euclidean, over successful episodes "
        "(grid moves cannot exceed about 0.71 on a diagonal approach). For the multi-agent "
        "preset the outcome is the team's (first arrival). Generated by "
        "`python scripts/bench/baseline_table.py` (data: `benchmarks/baselines.json`).",
        "",
        "| preset | agent | success (95% CI) | mean steps ± SE | median steps | path efficiency |",
        "|---|---|---|---:|---:|---:|",
    ]
    skipped = []
    for r in rows:
        if "skipped" in r:
            skipped.append(f"- {r['preset']} / {r['agent']}: needs {r['skipped']}")
            continue
        m = r["metrics"]
        lo, hi = m["success_ci95"]
        steps = "—" if m["mean_steps"] is None else \
            f"{m['mean_steps']:.1f}" + (f" ± {m['sem_steps']:.1f}" if m["sem_steps"] else "")
        median = "—" if m["median_steps"] is None else f"{m['median_steps']:.0f}"
        eff = "—" if m["path_efficiency"] is None else f"{m['path_efficiency']:.2f}"
        lines.append(f"| {r['preset']} | {r['agent']} | {m['success_rate']:.3f} "
                     f"({lo:.3f}–{hi:.3f}) | {steps} | {median} | {eff} |")
    if skipped:
        lines += ["", "Pairs not run (the env lacks what the agent needs):", ""] + skipped
    lines += ["", "Infotaxis and space-aware infotaxis on the Poisson benchmark presets, with "
              "thousands of searches each, next to an independent re-implementation of the "
              "published code (otto): "
              "[infotaxis.md](infotaxis.md)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
