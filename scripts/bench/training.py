#!/usr/bin/env python
"""Training benchmarks, measured in one run: writes benchmarks/training.json.

1. Throughput: env steps per second of ``plume-jax train`` (its ``train``
   function: compile, init and the compiled updates, timed separately)
   against Stable-Baselines3 PPO on the same preset through the SB3 adapter
   (``plume_jax.gym.PlumeSB3VecEnv``), with matched PPO settings: envs,
   rollout length, minibatch size, epochs, network ([64, 64] tanh actor and
   critic), learning rate (constant), no value clipping, no entropy bonus,
   gradient clipping 0.5, no observation normalisation. Reported excluding
   and including compile (for SB3: excluding and including its set-up, i.e.
   building the model and a first update, during which the vec env's jitted
   step compiles).
2. Sweep: M configurations trained as ONE compiled program (vmap) against M
   sequential runs of one compiled single-run program (compiled once; the
   seed, hyperparameters and env params are arguments), same members.

Usage::

    python scripts/bench/training.py                      # defaults below
    python scripts/bench/training.py --ours-updates 20 --sb3-steps 16384 --sweep-updates 10

The machine may be shared: the load average before and after each part is
recorded next to the timings.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import pathlib
import time
from typing import Any

import jax

ROOT = pathlib.Path(__file__).resolve().parents[2]

if __package__:  # imported as scripts.bench.training
    from scripts.bench.harness import load_rounded, machine_info, write_json
else:  # run as `python scripts/bench/training.py` (this folder is sys.path[0])
    from harness import load_rounded, machine_info, write_json


def load() -> list[float]:
    return load_rounded()


def machine() -> dict[str, Any]:
    return machine_info("date", "platform", "processor", "cpu_count", ("device", "device_str"),
                        "device_count", "python", "jax", "version:flax", "version:optax",
                        ("stable_baselines3", "version:stable-baselines3"), "version:torch")


def save(payload: dict[str, Any], path: str | pathlib.Path) -> None:
    """Record the load average at the end in ``payload`` and write it as JSON."""
    payload["load_at_end"] = load()
    write_json(payload, path)
    print(f"saved {pathlib.Path(path)}")


def matched_config(preset: str, num_envs: int, num_steps: int, epochs: int, minibatches: int,
                   updates: int) -> dict[str, Any]:
    """The plume-jax config matched to SB3's PPO settings (see module docstring)."""
    return {
        "env": {"id": preset},
        "algo": {"total_steps": num_envs * num_steps * updates, "num_envs": num_envs,
                 "num_steps": num_steps, "update_epochs": epochs,
                 "num_minibatches": minibatches, "learning_rate": 3e-4, "anneal_lr": False,
                 "gamma": 0.99, "gae_lambda": 0.95, "clip_eps": 0.2, "clip_value": False,
                 "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5,
                 "normalize_obs": False, "normalize_advantages": True},
        "network": {"type": "mlp", "hidden_sizes": [64, 64], "activation": "tanh"},
        "run": {"seed": 0, "devices": 1},
    }


def bench_ours(data: dict[str, Any], label: str) -> dict[str, Any]:
    from plume_jax.train.config import train_config
    from plume_jax.train.run import train

    before = load()
    t0 = time.perf_counter()
    result = train(train_config(data), None, progress=False, evaluate=False)
    wall = time.perf_counter() - t0
    s = result.summary
    steps = s["env_steps_this_call"]
    row = {
        "label": label,
        "env_steps": steps,
        "compile_seconds": s["compile_seconds"],
        "init_seconds_incl_its_compile": s["init_seconds"],
        "train_seconds": s["train_seconds"],
        "wall_seconds": wall,
        "steps_per_second_excl_compile": steps / s["train_seconds"],
        "steps_per_second_incl_compile": steps / wall,
        "load_before": before, "load_after": load(),
    }
    print(f"{label}: {row['steps_per_second_excl_compile']:,.0f} steps/s excl. compile, "
          f"{row['steps_per_second_incl_compile']:,.0f} incl. (compile {s['compile_seconds']:.1f} s,"
          f" {steps:,} steps in {s['train_seconds']:.1f} s)", flush=True)
    return row


def bench_sb3(preset: str, num_envs: int, num_steps: int, epochs: int, minibatches: int,
              total_steps: int, torch_threads: int) -> dict[str, Any]:
    import torch
    from stable_baselines3 import PPO

    import plume_jax
    from plume_jax.gym.sb3 import PlumeSB3VecEnv

    torch.set_num_threads(torch_threads)
    before = load()
    t0 = time.perf_counter()
    env, params = plume_jax.make(preset)
    venv = PlumeSB3VecEnv(env, params, num_envs=num_envs, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=num_steps,
                batch_size=num_envs * num_steps // minibatches, n_epochs=epochs,
                learning_rate=3e-4, gamma=0.99, gae_lambda=0.95, clip_range=0.2,
                clip_range_vf=None, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
                normalize_advantage=True, seed=0, device="cpu", verbose=0,
                policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]},
                               "activation_fn": torch.nn.Tanh})
    setup = time.perf_counter() - t0
    # one update first: the vec env's jitted step and reset compile on first use
    t1 = time.perf_counter()
    model.learn(total_timesteps=num_envs * num_steps)
    warmup = time.perf_counter() - t1
    warm_steps = int(model.num_timesteps)
    t2 = time.perf_counter()
    model.learn(total_timesteps=total_steps, reset_num_timesteps=False)
    learn = time.perf_counter() - t2
    steps = int(model.num_timesteps) - warm_steps
    venv.close()
    row = {
        "label": "stable-baselines3 PPO via PlumeSB3VecEnv",
        "env_steps": steps,
        "setup_seconds": setup,
        "warmup_update_seconds_incl_env_compile": warmup,
        "warmup_env_steps": warm_steps,
        "learn_seconds": learn,
        "steps_per_second_excl_setup": steps / learn,
        "steps_per_second_incl_setup": (steps + warm_steps) / (setup + warmup + learn),
        "torch_threads": torch.get_num_threads(),
        "load_before": before, "load_after": load(),
    }
    print(f"SB3: {row['steps_per_second_excl_setup']:,.0f} steps/s excl. set-up and compile, "
          f"{row['steps_per_second_incl_setup']:,.0f} incl. ({steps:,} steps in {learn:.1f} s, "
          f"torch threads {row['torch_threads']})", flush=True)
    return row


def run_vmapped_sweep(sweep: Any) -> dict[str, Any]:
    """Train every member of ``sweep`` (a validated sweep config) as ONE
    vmapped program, writing nothing: its members, env steps per member,
    compile, init and training seconds, wall time and the load around it."""
    from plume_jax.train.sweep import run_sweep

    m = len(sweep.members)
    before = load()
    t0 = time.perf_counter()
    result = run_sweep(sweep, None, progress=False, evaluate_members=False)
    wall = time.perf_counter() - t0
    s = result.summary
    print(f"sweep of {m} as one program: compile {s['compile_seconds']:.1f} s, train "
          f"{s['train_seconds']:.1f} s, wall {wall:.1f} s", flush=True)
    return {"members": m,
            "env_steps_per_member": sweep.base.num_updates * sweep.base.steps_per_update,
            "compile_seconds": s["compile_seconds"],
            "init_seconds_incl_its_compile": s["init_seconds"],
            "train_seconds": s["train_seconds"], "wall_seconds": wall,
            "load_before": before, "load_after": load()}


def bench_sweep(sweep_path: pathlib.Path, updates: int) -> dict[str, Any]:
    """The sweep config's members with ``updates`` updates each: one vmapped
    program vs sequential runs of one compiled single-run program."""
    from plume_jax.train.config import read_yaml
    from plume_jax.train.members import member_of
    from plume_jax.train.algorithms.ppo import PPO
    from plume_jax.train.sweep import setup, sweep_config
    from plume_jax.train.algorithms.ppo import ppo_static

    raw = read_yaml(sweep_path)
    base_cfg = sweep_config(raw, base_dir=sweep_path.parent).base
    raw = copy.deepcopy(raw)
    raw.setdefault("set", {})["algo.total_steps"] = base_cfg.steps_per_update * updates
    raw["set"]["run.devices"] = 1
    sweep = sweep_config(raw, base_dir=sweep_path.parent)
    m = len(sweep.members)

    vmapped = run_vmapped_sweep(sweep)
    s, sweep_wall = vmapped, vmapped["wall_seconds"]

    # sequential: one compiled single-run program, called once per member
    before = load()
    t0 = time.perf_counter()
    st = setup(sweep)
    algo = PPO(st.env, member_of(st.env_params, 0), ppo_static(sweep.base))
    member = member_of
    init = jax.jit(algo.init)
    runner0 = init(st.keys[0], member(st.hp, 0), member(st.env_params, 0))
    t_c = time.perf_counter()
    program = jax.jit(functools.partial(algo.run, num_updates=sweep.base.num_updates)).lower(
        runner0, member(st.hp, 0), member(st.env_params, 0)).compile()
    compile_s = time.perf_counter() - t_c
    run_s = 0.0
    for j in range(m):
        runner = init(st.keys[j], member(st.hp, j), member(st.env_params, j))
        t_r = time.perf_counter()
        jax.block_until_ready(program(runner, member(st.hp, j), member(st.env_params, j)))
        run_s += time.perf_counter() - t_r
    seq_wall = time.perf_counter() - t0
    sequential = {"runs": m, "compile_seconds": compile_s, "train_seconds": run_s,
                  "wall_seconds": seq_wall, "load_before": before, "load_after": load()}
    print(f"{m} sequential runs of one compiled program: compile {compile_s:.1f} s, train "
          f"{run_s:.1f} s, wall {seq_wall:.1f} s", flush=True)
    return {"sweep_config": str(sweep_path.relative_to(ROOT)), "grid": sweep.grid,
            "updates_per_member": sweep.base.num_updates, "one_program": vmapped,
            "sequential": sequential,
            "train_time_ratio_sweep_over_sequential": s["train_seconds"] / run_s,
            "wall_ratio_sweep_over_sequential": sweep_wall / seq_wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="PlumeNav-Gaussian-v0")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[64, 8],
                        help="env counts to compare at (one matched comparison each)")
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--minibatches", type=int, default=4)
    parser.add_argument("--ours-steps", type=int, default=2_000_000,
                        help="env steps of each plume-jax run (rounded down to whole updates)")
    parser.add_argument("--sb3-steps", type=int, default=65_536,
                        help="env steps of each timed SB3 run (after one warm-up update)")
    parser.add_argument("--sweep-config", default=str(ROOT / "configs" / "sweep_gaussian.yaml"))
    parser.add_argument("--sweep-updates", type=int, default=30)
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch threads for SB3 (1 is fastest for these small networks "
                             "on 2 cores)")
    parser.add_argument("--skip-sb3", action="store_true")
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "training.json"))
    args = parser.parse_args(argv)

    settings = {"preset": args.preset, "num_envs": args.num_envs, "num_steps": args.num_steps,
                "update_epochs": args.epochs, "num_minibatches": args.minibatches,
                "network": "MLP [64, 64] tanh, separate actor and critic",
                "learning_rate": 3e-4, "gamma": 0.99, "gae_lambda": 0.95, "clip": 0.2,
                "value_clipping": False, "ent_coef": 0.0, "max_grad_norm": 0.5,
                "torch_threads": args.torch_threads}
    payload: dict[str, Any] = {"benchmark": "training", "machine": machine(),
                               "settings": settings, "load_at_start": load()}
    print(f"machine load average at start: {payload['load_at_start']}", flush=True)
    comparisons = []
    for n in args.num_envs:
        per_update = n * args.num_steps
        updates = max(1, args.ours_steps // per_update)
        matched = matched_config(args.preset, n, args.num_steps, args.epochs, args.minibatches,
                                 updates)
        entry: dict[str, Any] = {"num_envs": n, "num_steps": args.num_steps,
                                 "minibatch_size": per_update // args.minibatches}
        print(f"-- {n} envs x {args.num_steps} steps, {args.epochs} epochs x "
              f"{args.minibatches} minibatches of {per_update // args.minibatches}", flush=True)
        entry["plume_jax"] = bench_ours(matched, f"plume-jax train (matched to SB3), {n} envs")
        if n == args.num_envs[0]:
            shipped = json.loads(json.dumps(matched))
            shipped["network"].update({"obs_transform": "log", "obs_delta": True,
                                       "prev_action": True})
            shipped["algo"]["normalize_obs"] = True
            entry["plume_jax_shipped_inputs"] = bench_ours(
                shipped, "plume-jax train (matched, with the shipped config's inputs: log, "
                         "delta, previous action, normalised)")
        if not args.skip_sb3:
            sb3 = bench_sb3(args.preset, n, args.num_steps, args.epochs, args.minibatches,
                            args.sb3_steps, args.torch_threads)
            entry["sb3"] = sb3
            ours = entry["plume_jax"]
            entry["speedup_excl_compile"] = (ours["steps_per_second_excl_compile"]
                                             / sb3["steps_per_second_excl_setup"])
            entry["speedup_incl_compile"] = (ours["steps_per_second_incl_compile"]
                                             / sb3["steps_per_second_incl_setup"])
            print(f"plume-jax / SB3 at {n} envs: {entry['speedup_excl_compile']:.1f}x excl. "
                  f"compile, {entry['speedup_incl_compile']:.1f}x incl.", flush=True)
        comparisons.append(entry)
    payload["throughput"] = comparisons
    if not args.skip_sweep:
        payload["sweep"] = bench_sweep(pathlib.Path(args.sweep_config).resolve(),
                                       args.sweep_updates)
    save(payload, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
