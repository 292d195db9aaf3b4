#!/usr/bin/env python
"""Throughput of multi-agent PPO training: agent steps per second of
``plume-jax train`` (its ``train`` function; compile, init and the compiled
updates timed separately) on ``PlumeNav-Swarm-v0`` with ``num_agents``
overridden, the shipped ``configs/train_swarm.yaml`` otherwise (shared GRU
policy, 16 envs x 128 steps, 4 epochs x 4 minibatches), and the same with
an MLP policy. Writes ``benchmarks/multi_agent_training.json``.

An agent step is one agent's transition: an env step of an env with ``A``
agents is ``A`` agent steps (one network row each, one plume step shared).

Usage::

    python scripts/bench/multi_agent_training.py                 # 1, 8 and 64 agents
    python scripts/bench/multi_agent_training.py --agents 8 --updates 2

The machine may be shared: the load average before and after each run is
recorded next to its timings.
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from scripts.bench.training import bench_ours, load, machine, save  # noqa: E402


def swarm_config(num_agents: int, network: str, updates: int) -> dict[str, Any]:
    """The shipped swarm config with ``num_agents`` agents and ``updates``
    updates; ``network`` "gru" (as shipped) or "mlp" ([64, 64] on the same inputs)."""
    from plume_jax.train.config import read_yaml

    data = copy.deepcopy(read_yaml(ROOT / "configs" / "train_swarm.yaml"))
    data["env"].setdefault("overrides", {})["num_agents"] = num_agents
    algo = data["algo"]
    algo["total_steps"] = algo["num_envs"] * algo["num_steps"] * updates
    if network == "mlp":
        data["network"] = {**data["network"], "type": "mlp", "hidden_sizes": [64, 64]}
        data["network"].pop("gru_size", None)
    data["run"] = {**data.get("run", {}), "devices": 1}
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--networks", nargs="+", default=["gru", "mlp"], choices=["gru", "mlp"])
    parser.add_argument("--updates", type=int, default=3,
                        help="updates per run (each 16 envs x 128 steps)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "multi_agent_training.json"))
    args = parser.parse_args(argv)

    payload: dict[str, Any] = {"benchmark": "multi_agent_training", "machine": machine(),
                               "settings": {"preset": "PlumeNav-Swarm-v0",
                                            "config": "configs/train_swarm.yaml",
                                            "updates": args.updates},
                               "load_at_start": load(), "results": []}
    print(f"machine load average at start: {payload['load_at_start']}", flush=True)
    for network in args.networks:
        for agents in args.agents:
            data = swarm_config(agents, network, args.updates)
            row = bench_ours(data, f"{network}, {agents} agents")
            row.update(network=network, num_agents=agents, num_envs=data["algo"]["num_envs"],
                       num_steps=data["algo"]["num_steps"],
                       agent_steps_per_second_excl_compile=(
                           agents * row["steps_per_second_excl_compile"]),
                       agent_steps_per_second_incl_compile=(
                           agents * row["steps_per_second_incl_compile"]))
            print(f"  = {row['agent_steps_per_second_excl_compile']:,.0f} agent steps/s excl. "
                  "compile", flush=True)
            payload["results"].append(row)
    save(payload, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
