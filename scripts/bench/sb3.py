"""SB3 PPO training throughput: PlumeSB3VecEnv vs DummyVecEnv over PlumeGymEnvs.

Both variants train the same PPO (same settings, same seed) on the same
preset with the same number of environments, in the same process, with the
repeats interleaved (adapter, dummy, adapter, dummy, ...) so that a change in
machine load hits both alike. Each variant is warmed up first (one short
``learn``), so jit compilation is not timed. Reported: environment steps per
second of ``model.learn`` (rollout collection *and* gradient updates), the
median over repeats and the ratio of medians; and, separately, the
collection-only rate (``VecEnv.step`` with random actions, no PPO).

Writes the results as JSON (figures, settings, machine, versions) and prints
a markdown table::

    python scripts/bench/sb3.py --markdown BENCHMARKS.md   # data + BENCHMARKS.md section
    python scripts/bench/sb3.py --repeats 3 --out /tmp/sb3.json
    python scripts/bench/sb3.py --render-only --markdown BENCHMARKS.md  # from saved data
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "sb3_vecenv.json"
BEGIN, END = "<!-- sb3-vecenv:begin -->", "<!-- sb3-vecenv:end -->"
HEADING = "## SB3: vectorised adapter vs DummyVecEnv"

if __package__:  # imported as scripts.bench.sb3
    from scripts.bench.harness import machine_info as machine_info_of
    from scripts.bench.harness import write_json
else:  # run as `python scripts/bench/sb3.py` (this folder is sys.path[0])
    from harness import machine_info as machine_info_of
    from harness import write_json


def machine_info() -> dict[str, Any]:
    return machine_info_of("platform", ("cpu", "cpu_model"), "cpu_count",
                           ("load_average_at_start", "load_average"), "jax_backend",
                           "jax_devices", "python")


def versions() -> dict[str, Any]:
    return machine_info_of(*(f"version:{name}" for name in ("jax", "jaxlib", "gymnasium",
                                                            "stable-baselines3", "torch",
                                                            "numpy")),
                           "plume_jax", "git_commit")


def build_venvs(preset: str, overrides: dict[str, Any], num_envs: int):
    """``{"adapter": PlumeSB3VecEnv, "dummy": DummyVecEnv}`` over the same env."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    import plume_jax
    from plume_jax.gym import PlumeGymEnv
    from plume_jax.gym.sb3 import PlumeSB3VecEnv

    env, params = plume_jax.make(preset, **overrides)
    return {
        "adapter": PlumeSB3VecEnv(env, params, num_envs=num_envs),
        "dummy": DummyVecEnv([lambda: PlumeGymEnv(env, params) for _ in range(num_envs)]),
    }


def time_learn(model: Any, timesteps: int) -> float:
    """Steps per second of one ``learn`` call of ``timesteps`` steps."""
    before = model.num_timesteps
    start = time.perf_counter()
    model.learn(timesteps, reset_num_timesteps=False)
    return (model.num_timesteps - before) / (time.perf_counter() - start)


def time_collection(venv: Any, steps: int, seed: int) -> float:
    """Env steps per second of ``venv.step`` with uniformly random actions."""
    rng = np.random.default_rng(seed)
    n = venv.num_envs
    actions = rng.integers(0, venv.action_space.n, (steps, n))
    venv.reset()
    venv.step(actions[0])  # warm
    start = time.perf_counter()
    for a in actions:
        venv.step(a)
    return steps * n / (time.perf_counter() - start)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(args.torch_threads)
    overrides = json.loads(args.overrides)
    ppo_kwargs = {"n_steps": args.n_steps, "batch_size": args.batch_size,
                  "n_epochs": args.n_epochs, "learning_rate": 3e-4, "gamma": 0.99,
                  "device": "cpu", "seed": 0, "verbose": 0}
    rollout = args.num_envs * args.n_steps
    timesteps = rollout * args.rollouts
    venvs = build_venvs(args.preset, overrides, args.num_envs)
    models = {}
    for name, venv in venvs.items():
        venv.seed(0)
        models[name] = PPO("MlpPolicy", venv, **ppo_kwargs)
        # Warm-up: compiles the adapter's step, the single env's step, torch's kernels.
        models[name].learn(rollout)

    learn_rates: dict[str, list[float]] = {name: [] for name in venvs}
    for _ in range(args.repeats):
        for name, model in models.items():
            learn_rates[name].append(time_learn(model, timesteps))

    collect_rates: dict[str, list[float]] = {name: [] for name in venvs}
    for r in range(args.repeats):
        for name, venv in venvs.items():
            collect_rates[name].append(time_collection(venv, args.collection_steps, r))

    def summary(rates: dict[str, list[float]]) -> dict[str, Any]:
        out = {name: {"steps_per_s": [round(v, 1) for v in values],
                      "median_steps_per_s": round(statistics.median(values), 1)}
               for name, values in rates.items()}
        out["ratio_adapter_over_dummy"] = round(
            statistics.median(rates["adapter"]) / statistics.median(rates["dummy"]), 2)
        return out

    return {
        "benchmark": "sb3_vecenv",
        "description": "SB3 PPO training steps/s: PlumeSB3VecEnv (one compiled call for all "
                       "envs) vs DummyVecEnv over PlumeGymEnvs; same PPO settings, same run, "
                       "interleaved repeats, warm-up excluded",
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {
            "preset": args.preset, "overrides": overrides, "num_envs": args.num_envs,
            "policy": "MlpPolicy", "ppo": ppo_kwargs, "timesteps_per_repeat": timesteps,
            "repeats": args.repeats, "collection_steps_per_repeat": args.collection_steps,
            "torch_threads": args.torch_threads,
        },
        "ppo_learn": summary(learn_rates),
        "collection_only": summary(collect_rates),
        "machine": machine_info(),
        "versions": versions(),
    }


def markdown(result: dict[str, Any]) -> str:
    """The results table (what the script prints): medians, ranges, ratio."""
    lines = [
        "| measure | PlumeSB3VecEnv: median (range), steps/s | "
        "DummyVecEnv of PlumeGymEnv: median (range), steps/s | ratio of medians |",
        "|---|---:|---:|---:|",
    ]

    def cell(r: dict[str, Any]) -> str:
        lo, hi = min(r["steps_per_s"]), max(r["steps_per_s"])
        return f"{r['median_steps_per_s']:,.0f} ({lo:,.0f}–{hi:,.0f})"

    for key, label in (("ppo_learn", "PPO `learn` (collection + updates)"),
                       ("collection_only", "`VecEnv.step` only, random actions")):
        r = result[key]
        lines.append(f"| {label} | {cell(r['adapter'])} | {cell(r['dummy'])} | "
                     f"{r['ratio_adapter_over_dummy']:.2f}x |")
    return "\n".join(lines)


def benchmarks_section(result: dict[str, Any]) -> str:
    """The BENCHMARKS.md section, between its markers."""
    s, m, v = result["settings"], result["machine"], result["versions"]
    ppo = s["ppo"]
    overrides = f" with overrides `{json.dumps(s['overrides'])}`" if s["overrides"] else ""
    load = m.get("load_average_at_start")
    return "\n".join([
        BEGIN,
        HEADING,
        "",
        f"Measured {result['timestamp']} on {m['cpu_count']} CPU cores ({m['cpu']}), JAX "
        f"backend `{m['jax_backend']}`; jax {v['jax']}, stable-baselines3 "
        f"{v['stable-baselines3']}, torch {v['torch']} ({s['torch_threads']} thread), "
        f"gymnasium {v['gymnasium']}." + (
            f" Load average at start: {load[0]:.1f} on {m['cpu_count']} cores" if load else "")
        + (" (other jobs shared the machine, hence the wide ranges; the interleaved repeats "
           "expose both variants to them alike)." if load and load[0] > m["cpu_count"] else
           "." if load else ""),
        "",
        f"SB3 PPO (`MlpPolicy`, n_steps={ppo['n_steps']}, batch_size={ppo['batch_size']}, "
        f"n_epochs={ppo['n_epochs']}, seed {ppo['seed']}) on `{s['preset']}`{overrides} with "
        f"{s['num_envs']} environments, either `PlumeSB3VecEnv` (all environments in one "
        f"compiled call) or SB3's `DummyVecEnv` over {s['num_envs']} `PlumeGymEnv`s (one "
        "compiled call per environment). Same settings, same process; repeats interleaved; "
        f"each repeat is {s['timesteps_per_repeat']:,} steps of `model.learn` after a "
        "one-rollout warm-up (so compilation is not timed); median of "
        f"{s['repeats']} repeats. The second row times `VecEnv.step` alone "
        f"({s['collection_steps_per_repeat']} calls with random actions), i.e. without "
        "PPO's own work.",
        "",
        markdown(result),
        "",
        "Produced by `python scripts/bench/sb3.py` (data: `benchmarks/sb3_vecenv.json`, "
        "with every repeat).",
        END,
    ])


def update_benchmarks_md(result: dict[str, Any], path: Path) -> None:
    """Replace this benchmark's section of ``path`` (appending it if absent);
    other sections are left as they are."""
    block = benchmarks_section(result)
    try:
        text = path.read_text()
    except FileNotFoundError:
        text = ("# Benchmarks\n\nAll figures below were measured, not estimated; "
                "each section says how.\n")
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="PlumeNav-Gaussian-v0")
    p.add_argument("--overrides", default="{}", help="JSON dict of plume_jax.make overrides")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--n-steps", type=int, default=128, help="PPO n_steps (per env per rollout)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--n-epochs", type=int, default=4)
    p.add_argument("--rollouts", type=int, default=4, help="PPO rollouts per timed repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--collection-steps", type=int, default=200,
                   help="VecEnv.step calls per collection-only repeat")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--markdown", type=Path, default=None,
                   help="also update this file's SB3 section (e.g. BENCHMARKS.md)")
    p.add_argument("--render-only", action="store_true",
                   help="do not measure: render --out's saved JSON into --markdown")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.render_only:
        result = json.loads(args.out.read_text())
    else:
        result = run(args)
        write_json(result, args.out, trailing_newline=True)
        print(f"written to {args.out}\n")
    print(markdown(result))
    if args.markdown is not None:
        update_benchmarks_md(result, args.markdown)
        print(f"\nupdated {args.markdown}")
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
