#!/usr/bin/env python
"""Throughput benchmark of the functional core.

Measures env steps per second of one jitted ``lax.scan`` of vmapped
``env.step`` (random actions, auto-reset on) at several batch sizes, and the
compile time of that program, for each preset and, as a reference measured
in the same run with the same harness, gymnax's CartPole-v1. Results are
saved as JSON (figures, batch sizes, machine, device, versions); render them
into BENCHMARKS.md with ``scripts/render_benchmarks.py``.

Usage::

    python scripts/benchmark.py                       # all presets, default sizes
    python scripts/benchmark.py --presets PlumeNav-Gaussian-v0 --batch-sizes 1 64 --steps 200
    # what the speculative auto-reset costs: vmap(env.step), env.step_batch and
    # vmap(env.step_env) (no reset), back to back
    python scripts/benchmark.py --reset-cost        # -> benchmarks/reset_cost.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import time
from typing import Any

import jax
import jax.numpy as jnp


STEP_FORMS = ("step", "step_batch", "step_env")


def scan_program(env: Any, params: Any, num_envs: int, num_steps: int, form: str = "step"):
    """``(reset, run)``, jitted: ``reset(key)`` gives a batch of states;
    ``run(state, key)`` scans ``num_steps`` batch steps with uniformly random
    actions. ``form``: ``"step"``, ``vmap(env.step)`` (auto-reset on);
    ``"step_batch"``, ``env.step_batch`` (the same results, the reset computed
    only for the envs that ended; plume envs only); ``"step_env"``,
    ``vmap(env.step_env)``, the transition without the reset that ``step``
    computes speculatively on every step (episodes then run on past their
    end; only for measuring what the reset costs). Only ``run`` is timed, so
    an explicit reset's cost (a filament plume's warm-up) is not counted as
    stepping.

    Every step's observation (summed), reward and episode ends, and the whole
    final state, are outputs, so XLA can drop none of the work a user's
    program would need (an earlier version returned only rewards and one
    state leaf, which let XLA remove the sensor reads and, for dynamic
    plumes, the plume update)."""
    space = env.actions.action_space if hasattr(env, "actions") else None
    num_agents = getattr(env, "num_agents", None)
    shape = (num_envs,) if num_agents is None else (num_envs, num_agents)

    def random_actions(key):
        """The same draw for every discrete env, ours and gymnax's reference."""
        if space is None or hasattr(space, "n"):
            n = env.action_space(params).n
            return jax.random.randint(key, shape, 0, n)
        keys = jax.random.split(key, math.prod(shape))
        return jax.vmap(space.sample)(keys).reshape(shape + tuple(space.shape))

    def reset(key):
        return jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, num_envs), params)[1]

    if form not in STEP_FORMS:
        raise ValueError(f"form must be one of {STEP_FORMS}, got {form!r}")

    def step(keys, state, actions):
        if form == "step_batch":
            return env.step_batch(keys, state, actions, params)
        fn = env.step if form == "step" else env.step_env
        return jax.vmap(fn, in_axes=(0, 0, 0, None))(keys, state, actions, params)

    def run(state, key):
        def body(state, k):
            k_act, k_step = jax.random.split(k)
            actions = random_actions(k_act)
            out = step(jax.random.split(k_step, num_envs), state, actions)
            # (obs, state, reward, terminated, truncated, info), or gymnax's own
            # step_env: (obs, state, reward, done, info)
            obs, state, reward, ends = out[0], out[1], out[2], out[3]
            if len(out) == 6:
                ends = ends | out[4]
            obs_sum = sum(jnp.sum(leaf) for leaf in jax.tree.leaves(obs))
            return state, (reward.sum(), ends.sum(), obs_sum)

        state, (rewards, ends, obs_sums) = jax.lax.scan(body, state,
                                                       jax.random.split(key, num_steps))
        return rewards.sum(), ends.sum(), obs_sums.sum(), state

    return jax.jit(reset), jax.jit(run)


def measure(env: Any, params: Any, num_envs: int, num_steps: int, repeats: int,
            form: str = "step") -> dict[str, Any]:
    reset, run = scan_program(env, params, num_envs, num_steps, form)
    key = jax.random.key(0)
    state = jax.block_until_ready(reset(key))
    t0 = time.perf_counter()
    compiled = run.lower(state, key).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(state, key))  # warm-up run
    times, cpu_times = [], []
    for i in range(repeats):
        k = jax.random.key(i + 1)
        t0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(compiled(state, k))
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    median = statistics.median(times)
    return {
        "num_envs": num_envs,
        "num_steps": num_steps,
        "compile_seconds": compile_s,
        "run_seconds": times,
        "median_run_seconds": median,
        "steps_per_second": num_envs * num_steps / median,
        # CPU time of this process (all its threads) per run: on a machine
        # shared with other jobs, steps per CPU-second is less distorted by
        # their load than steps per wall-clock second
        "cpu_seconds": cpu_times,
        "steps_per_cpu_second": num_envs * num_steps / statistics.median(cpu_times),
    }


def machine() -> dict[str, Any]:
    from importlib.metadata import version

    import plume_jax

    device = jax.devices()[0]
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "device_platform": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "gymnax": version("gymnax"),
        "plume_jax": plume_jax.__version__,
        "load_average_1_5_15min": list(os.getloadavg()),
    }


def main(argv: list[str] | None = None) -> int:
    import gymnax

    import plume_jax

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    single = sorted(p for p in plume_jax.PRESETS if not plume_jax.registry.is_multi_agent(p))
    parser.add_argument("--presets", nargs="*", default=single)
    parser.add_argument("--batch-sizes", nargs="*", type=int, default=[1, 64, 1024, 4096])
    parser.add_argument("--steps", type=int, default=1000, help="scan length per run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-reference", action="store_true", help="skip gymnax CartPole")
    parser.add_argument("--out", default=None,
                        help="JSON output (default benchmarks/core_throughput.json, or "
                             "benchmarks/reset_cost.json with --reset-cost)")
    parser.add_argument("--agents", nargs="*", type=int, default=[1, 8, 64],
                        help="num_agents values for the multi-agent section")
    parser.add_argument("--agent-batch-sizes", nargs="*", type=int, default=[1, 16, 256],
                        help="env batch sizes for the multi-agent section")
    parser.add_argument("--agent-steps", type=int, default=200,
                        help="scan length per run in the multi-agent section")
    parser.add_argument("--multi-agent-preset", default="PlumeNav-Swarm-v0")
    parser.add_argument("--skip-multi-agent", action="store_true")
    parser.add_argument("--reset-cost", action="store_true",
                        help="measure each preset and batch three times, back to back: "
                             "vmap(env.step), env.step_batch and vmap(env.step_env) (the "
                             "transition without the speculative reset; episodes then run on "
                             "past their end), single-agent presets only")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = os.path.join("benchmarks",
                                "reset_cost.json" if args.reset_cost else "core_throughput.json")
    forms = STEP_FORMS if args.reset_cost else ("step",)

    targets = [(pid, *plume_jax.make(pid)) for pid in args.presets]
    if not args.no_reference:
        cartpole, cartpole_params = gymnax.make("CartPole-v1")
        targets.append(("gymnax/CartPole-v1 (reference)", cartpole, cartpole_params))

    results = []
    for name, env, params in targets:
        for n in args.batch_sizes:
            for form in forms:
                if form == "step_batch" and not hasattr(env, "step_batch"):
                    continue
                row = {"env": name, "step": form,
                       **measure(env, params, n, args.steps, args.repeats, form)}
                results.append(row)
                print(f"{name:40s} batch {n:5d} {form:10s}: "
                      f"{row['steps_per_second']:14,.0f} steps/s, "
                      f"{row['steps_per_cpu_second']:14,.0f} per CPU-second "
                      f"(medians of {args.repeats}), "
                      f"compile {row['compile_seconds']:.2f} s", flush=True)

    multi_agent = []
    if not (args.skip_multi_agent or args.reset_cost):
        for a in args.agents:
            env, params = plume_jax.make(args.multi_agent_preset, num_agents=a)
            for n in args.agent_batch_sizes:
                row = {"env": args.multi_agent_preset, "num_agents": a,
                       **measure(env, params, n, args.agent_steps, args.repeats)}
                row["agent_steps_per_second"] = row["steps_per_second"] * a
                multi_agent.append(row)
                print(f"{args.multi_agent_preset} agents {a:3d} batch {n:5d}: "
                      f"{row['agent_steps_per_second']:14,.0f} agent-steps/s, compile "
                      f"{row['compile_seconds']:.2f} s", flush=True)

    payload = {"benchmark": "reset_cost" if args.reset_cost else "core_throughput",
               "machine": machine(),
               "settings": {"steps": args.steps, "repeats": args.repeats,
                            "actions": "uniform random", "step_forms": list(forms),
                            "multi_agent_steps": args.agent_steps},
               "results": results, "multi_agent": multi_agent}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(payload, f, indent=2)
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
