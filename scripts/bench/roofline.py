#!/usr/bin/env python
"""Roofline of the env step on this machine.

For the Gaussian, filament, Poisson and movie steps (``vmap(env.step)``,
batch ``--batch``) and for one infotaxis decision (a lockstep batch of
``InfotaxisPolicy.act`` on the Poisson 53x53 case) this script records

1. the work per env step: float operations and bytes accessed from XLA's
   HLO cost analysis of the compiled one-step batch program (divided by
   the batch; for infotaxis, whose batch is a loop, of one env's
   decision). "Bytes accessed" is XLA's count of every operation's operand
   and result bytes, most of which stay in cache: its ratio to the
   streaming peak can exceed 1 and says how far the program is from being
   bound by memory traffic, not a DRAM measurement. Random words drawn:
   32-bit words of ``random_bits`` in the jaxpr of one env's transition
   and of one episode start, counted separately since the batched step
   starts episodes only where they ended;
2. what the machine can do, measured here: the peak of a fused elementwise
   kernel (a degree-32 polynomial per element: compute bound), of a
   streaming kernel (``y = 2x + 1`` over 256 MiB: memory bound) and of a
   float32 matmul;
3. each program's measured rate (median of ``--repeats`` runs of a jitted
   ``lax.scan`` of ``--steps`` steps) and the fraction of the limits it
   reaches;
4. where the time goes, measured by timing the parts on their own in the
   same harness: the transition without reset (``vmap(env.step_env)``),
   the plume's advance alone and the plume read at the agents' positions
   alone.

Usage::

    python scripts/bench/roofline.py                    # -> benchmarks/roofline.json
    python scripts/bench/roofline.py --device gpu       # the same on an accelerator
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
from jax.extend import core as jax_core

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import build, machine, save_json, time_run  # noqa: E402

PROGRAMS = {
    "gaussian": "PlumeNav-Gaussian-v0",
    "filament": "PlumeNav-Filament-v0",
    "poisson": "PlumeNav-Poisson-v0",
    "movie": "PlumeNav-Movie-v0",
}
INFOTAXIS_PRESET = "PlumeNav-Poisson-Iso53x53-v0"


def median_seconds(fn: Any, args: tuple, repeats: int) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peaks(repeats: int) -> dict[str, float]:
    """Measured peaks: fused elementwise flop/s, streaming bytes/s, matmul flop/s."""
    degree, n = 32, 1 << 22
    x = jax.random.uniform(jax.random.key(0), (n,), jnp.float32)

    @jax.jit
    def polynomial(x):
        y = jnp.full_like(x, 0.5)
        for i in range(degree):            # Horner: one multiply and one add per degree
            y = y * x + (0.1 + 0.01 * i)
        return y

    poly_s = median_seconds(polynomial, (x,), repeats)
    m = 1 << 26                             # 256 MiB of float32
    big = jnp.ones((m,), jnp.float32)
    stream_s = median_seconds(jax.jit(lambda v: 2.0 * v + 1.0), (big,), repeats)
    del big
    k = 2048
    a = jax.random.normal(jax.random.key(1), (k, k), jnp.float32)
    matmul_s = median_seconds(jax.jit(lambda a, b: a @ b), (a, a), repeats)
    return {"elementwise_flops_per_second": 2 * degree * n / poly_s,
            "stream_bytes_per_second": 2 * 4 * m / stream_s,
            "matmul_flops_per_second": 2 * k ** 3 / matmul_s,
            "elementwise_kernel": f"degree-{degree} polynomial (Horner) on {n} float32",
            "stream_kernel": f"y = 2x + 1 on {m} float32 (read + write)",
            "matmul_kernel": f"float32 {k}x{k} @ {k}x{k}"}


def cost(compiled: Any) -> dict[str, float]:
    """XLA's HLO cost analysis of a compiled program (flops, bytes accessed,
    transcendentals), or zeros where the backend reports none."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):        # older jax: one dict per computation
        analysis = analysis[0] if analysis else {}
    analysis = analysis or {}
    return {"flops": float(analysis.get("flops", 0.0)),
            "bytes_accessed": float(analysis.get("bytes accessed", 0.0)),
            "transcendentals": float(analysis.get("transcendentals", 0.0))}


def random_words(jaxpr: Any) -> int:
    """32-bit words drawn by ``random_bits`` in a closed jaxpr, sub-jaxprs
    included (both branches of a ``cond`` counted, a loop body once)."""
    words = 0
    for eqn in jaxpr.jaxpr.eqns if hasattr(jaxpr, "jaxpr") else jaxpr.eqns:
        if eqn.primitive.name == "random_bits":
            bits = int(eqn.outvars[0].aval.size) * int(eqn.params["bit_width"])
            words += -(-bits // 32)
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(sub, (jax_core.Jaxpr, jax_core.ClosedJaxpr)):
                    words += random_words(sub)
    return words


def one_step_program(env: Any, params: Any, num_envs: int):
    """``(compiled, args)``: one batch step, ``vmap(env.step)``, compiled."""
    keys = jax.random.split(jax.random.key(0), num_envs)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    actions = jnp.zeros((num_envs,), jnp.int32)
    step = jax.jit(lambda k, s, a: jax.vmap(env.step, in_axes=(0, 0, 0, None))(k, s, a, params))
    return step.lower(keys, state, actions).compile(), (keys, state, actions)


def part_rate(fn: Any, state: Any, num_envs: int, steps: int, repeats: int) -> float:
    """Env steps/s of ``lax.scan`` over ``steps`` applications of
    ``fn(key, state) -> state`` to a batch."""

    @jax.jit
    def run(state, key):
        def body(s, k):
            return fn(jax.random.split(k, num_envs), s), None
        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    return num_envs * steps / median_seconds(run, (state, jax.random.key(1)), repeats)


def measure_env(name: str, preset: str, num_envs: int, steps: int, repeats: int,
                limits: dict[str, float]) -> dict[str, Any]:
    import plume_jax

    env, params = plume_jax.make(preset)
    compiled, (keys, state, _) = one_step_program(env, params, num_envs)
    work = {k: v / num_envs for k, v in cost(compiled).items()}
    one_key = jax.random.key(0)
    _, one_state = env.reset(one_key, params)
    transition_words = random_words(jax.make_jaxpr(
        lambda k, s: env.step_env(k, s, 0, params))(one_key, one_state))
    start_words = random_words(jax.make_jaxpr(
        lambda k, s: env.auto_reset(k, s, params))(one_key, one_state))
    rates = {}
    for form in ("step", "step_speculative", "step_env"):
        run, run_state, figures = build(env, params, num_envs, steps, form)
        rates[form] = num_envs * steps / statistics.median(
            [time_run(run, run_state, i + 1) for i in range(repeats)])
    vmapped = jax.vmap(env.plume.advance, in_axes=(0, 0, None))
    rates["plume_advance"] = part_rate(lambda k, s: vmapped(k, s, params.plume), state.plume,
                                       num_envs, steps, repeats)

    def read(k, s):
        c = jax.vmap(lambda st, p: env.plume.concentration(st, p, env.grid, params.plume))(
            state.plume, s)
        return s + c[:, None] * 1e-9      # a dependent update keeps every read
    rates["plume_read"] = part_rate(read, state.agent.position, num_envs, steps, repeats)
    step_rate = rates["step"]
    return {
        "program": name, "preset": preset, "num_envs": num_envs,
        "flops_per_step": work["flops"], "bytes_per_step": work["bytes_accessed"],
        "transcendentals_per_step": work["transcendentals"],
        "random_words_per_transition": transition_words,
        "random_words_per_episode_start": start_words,
        # the env state a step reads and writes: at batch sizes whose state
        # does not fit in cache, 2 x this / the streaming peak bounds a step
        "state_bytes_per_env": figures["state_bytes_per_env"],
        "steps_per_second": rates,
        "elementwise_fraction": work["flops"] * step_rate / limits["elementwise_flops_per_second"],
        "stream_fraction": work["bytes_accessed"] * step_rate / limits["stream_bytes_per_second"],
        # seconds per env step spent in each part, from the parts' own rates
        "seconds_per_step": {k: 1.0 / v for k, v in rates.items()},
    }


def measure_infotaxis(num_envs: int, repeats: int, limits: dict[str, float]) -> dict[str, Any]:
    import plume_jax
    from agents.infotaxis import InfotaxisPolicy

    env, params = plume_jax.make(INFOTAXIS_PRESET)
    policy = InfotaxisPolicy.for_env(env)
    keys = jax.random.split(jax.random.key(0), num_envs)
    obs, _ = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    carry = jax.vmap(policy.init)(keys)
    act = jax.jit(jax.vmap(policy.act))
    compiled = act.lower(carry, obs, keys).compile()
    # the batched decision is a loop over the batch (lax.map), whose body
    # XLA's cost analysis counts once: analyse one env's decision instead
    one = jax.jit(policy.act).lower(jax.tree.map(lambda x: x[0], carry), obs[0],
                                    keys[0]).compile()
    work = cost(one)
    decision_s = median_seconds(compiled, (carry, obs, keys), repeats)
    rate = num_envs / decision_s
    return {"program": "infotaxis decision", "preset": INFOTAXIS_PRESET, "num_envs": num_envs,
            "flops_per_decision": work["flops"], "bytes_per_decision": work["bytes_accessed"],
            "transcendentals_per_decision": work["transcendentals"],
            "decisions_per_second": rate,
            "elementwise_fraction": work["flops"] * rate / limits["elementwise_flops_per_second"],
            "matmul_fraction": work["flops"] * rate / limits["matmul_flops_per_second"],
            "stream_fraction": work["bytes_accessed"] * rate / limits["stream_bytes_per_second"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--programs", nargs="*", default=list(PROGRAMS) + ["infotaxis"])
    parser.add_argument("--infotaxis-batch", type=int, default=1024)
    parser.add_argument("--device", default=None, help="JAX platform (cpu, gpu, tpu)")
    parser.add_argument("--out", default=os.path.join("benchmarks", "roofline.json"))
    args = parser.parse_args(argv)
    device = jax.devices(args.device)[0] if args.device else jax.devices()[0]
    with jax.default_device(device):
        limits = peaks(args.repeats)
        print(json.dumps(limits, indent=1), flush=True)
        rows = []
        for name in args.programs:
            if name == "infotaxis":
                row = measure_infotaxis(args.infotaxis_batch, args.repeats, limits)
            else:
                row = measure_env(name, PROGRAMS[name], args.batch, args.steps, args.repeats,
                                  limits)
            print(json.dumps(row), flush=True)
            rows.append(row)
    payload = {"benchmark": "roofline",
               "machine": {**machine(), "load_average_1_5_15min": list(os.getloadavg())},
               "settings": {"batch": args.batch, "steps": args.steps, "repeats": args.repeats,
                            "infotaxis_batch": args.infotaxis_batch},
               "peaks": limits, "programs": rows}
    save_json(payload, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
