#!/usr/bin/env python
"""Render the saved core-throughput JSON into BENCHMARKS.md.

Replaces the text between ``<!-- core-throughput:begin -->`` and
``<!-- core-throughput:end -->`` (appending the block if absent); other
sections of BENCHMARKS.md are left as they are. A ``--reset-cost`` JSON
(``benchmarks/reset_cost.json``) renders into its own block,
``<!-- reset-cost:begin -->`` ... ``<!-- reset-cost:end -->``.

Usage: ``python scripts/render_benchmarks.py [benchmarks/core_throughput.json] [BENCHMARKS.md]``
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

BEGIN, END = "<!-- core-throughput:begin -->", "<!-- core-throughput:end -->"
RESET_BEGIN, RESET_END = "<!-- reset-cost:begin -->", "<!-- reset-cost:end -->"


def _machine_line(m: dict, s: dict) -> str:
    return (f"Measured {m['date']} on {m['cpu_count']} CPU cores ({m['processor']}), device "
            f"`{m['device_platform']}` ({m['device_kind']}); jax {m['jax']}, gymnax "
            f"{m['gymnax']}, plume_jax {m['plume_jax']}. {s['steps']} steps per run, "
            f"{s['actions']} actions")


def render_reset_cost(payload: dict) -> str:
    """The block of a ``--reset-cost`` run: each preset's steps/s with
    ``vmap(env.step)`` (speculative auto-reset), ``env.step_batch`` (reset
    only where an episode ended) and ``vmap(env.step_env)`` (no reset),
    measured back to back, and the share of the step spent on the reset."""
    m, s = payload["machine"], payload["settings"]
    sizes = sorted({r["num_envs"] for r in payload["results"]})
    by = {(r["env"], r["num_envs"], r.get("step", "step")): r["steps_per_second"]
          for r in payload["results"]}
    compile_s = {(r["env"], r["num_envs"], r.get("step", "step")): r["compile_seconds"]
                 for r in payload["results"]}
    envs = list(dict.fromkeys(r["env"] for r in payload["results"]))
    lines = [
        RESET_BEGIN,
        "### What the speculative auto-reset costs",
        "",
        _machine_line(m, s) + f"; median of {s['repeats']} runs after one warm-up, the "
        "programs of a cell measured back to back. `vmap(env.step)` computes a fresh "
        "episode's start and first observation for every env on every step (under `vmap` "
        "both branches of the auto-reset run); `env.step_batch` returns the same results "
        "with the reset computed only for the envs that ended; `vmap(env.step_env)` is the "
        "transition without any reset (episodes run on past their end, so it is a bound, "
        "not a way to run episodes). Produced by "
        "`python scripts/benchmark.py --reset-cost` (data: `benchmarks/reset_cost.json`).",
        "",
        *([f"Load average (1/5/15 min) when the run ended: "
           f"{', '.join(f'{x:.1f}' for x in m['load_average_1_5_15min'])} on "
           f"{m['cpu_count']} cores.", ""] if m.get("load_average_1_5_15min") else []),
        "Env steps per second, `vmap(step)` / `step_batch` / `vmap(step_env)`, then the "
        "share of `vmap(step)`'s time spent on the reset (1 − step/step_env) and "
        "`step_batch`'s speed-up over `vmap(step)`; last, the compile time (s) of the "
        f"`vmap(step)` / `step_batch` programs at batch {sizes[-1]}:",
        "",
        "| env | " + " | ".join(f"batch {n}" for n in sizes) + " | compile (s) |",
        "|---|" + "---:|" * (len(sizes) + 1),
    ]
    for env in envs:
        cells = []
        for n in sizes:
            step, batch, bare = (by.get((env, n, f)) for f in ("step", "step_batch", "step_env"))
            if not (step and bare):
                cells.append("")
                continue
            cells.append(f"{step / 1e6:.2f} / {f'{batch / 1e6:.2f}' if batch else '—'} / "
                         f"{bare / 1e6:.2f} M ({1 - step / bare:.0%}"
                         + (f", {batch / step:.2f}×)" if batch else ")"))
        c_step = compile_s.get((env, sizes[-1], "step"))
        c_batch = compile_s.get((env, sizes[-1], "step_batch"))
        cells.append("" if c_step is None else
                     f"{c_step:.1f} / {'—' if c_batch is None else f'{c_batch:.1f}'}")
        lines.append(f"| {env} | " + " | ".join(cells) + " |")
    lines.append(RESET_END)
    return "\n".join(lines)


def render(payload: dict) -> str:
    m = payload["machine"]
    s = payload["settings"]
    rows = defaultdict(dict)
    compile_s = defaultdict(dict)
    sizes = sorted({r["num_envs"] for r in payload["results"]})
    for r in payload["results"]:
        if r.get("step", "step") != "step":
            continue
        rows[r["env"]][r["num_envs"]] = r["steps_per_second"]
        compile_s[r["env"]][r["num_envs"]] = r["compile_seconds"]
    lines = [
        BEGIN,
        "## Core throughput: jitted `lax.scan` of vmapped `env.step`",
        "",
        _machine_line(m, s) + f", auto-reset on; median of {s['repeats']} runs after one "
        "warm-up; every observation and the final state are program outputs (nothing "
        "optimised away); compile time is the stepping program's. Produced by "
        "`python scripts/benchmark.py` (data: `benchmarks/core_throughput.json`).",
        "",
        *([f"Load average (1/5/15 min) when the run ended: "
           f"{', '.join(f'{x:.1f}' for x in m['load_average_1_5_15min'])} on {m['cpu_count']} "
           "cores. Above the core count the machine was shared with other jobs and every "
           "figure is depressed; compare rows of one run (the ratios) rather than absolute "
           "numbers.", ""] if m.get("load_average_1_5_15min") else []),
        "Env steps per second:",
        "",
        "| env | " + " | ".join(f"batch {n}" for n in sizes) + " | compile (s) at batch " + str(sizes[-1]) + " |",
        "|---|" + "---:|" * (len(sizes) + 1),
    ]
    for env, by_size in rows.items():
        cells = " | ".join(f"{by_size[n]:,.0f}" if n in by_size else "" for n in sizes)
        lines.append(f"| {env} | {cells} | {compile_s[env].get(sizes[-1], float('nan')):.2f} |")
    ref = next((e for e in rows if "reference" in e), None)
    if ref:
        lines += ["", f"Ratio to {ref} in the same run (batch {sizes[-1]}):", ""]
        for env, by_size in rows.items():
            if env != ref and sizes[-1] in by_size:
                lines.append(f"- {env}: {by_size[sizes[-1]] / rows[ref][sizes[-1]]:.2f}x")
    agents = payload.get("multi_agent") or []
    if agents:
        counts = sorted({r["num_agents"] for r in agents})
        batches = sorted({r["num_envs"] for r in agents})
        table = {(r["num_agents"], r["num_envs"]): r for r in agents}
        lines += [
            "",
            f"### Many agents in one plume: `{agents[0]['env']}` with `num_agents` overridden",
            "",
            f"Agent-steps per second (env steps x agents), {s.get('multi_agent_steps')} steps per "
            "run, random actions, collisions on; compile time in brackets:",
            "",
            "| num_agents | " + " | ".join(f"batch {b}" for b in batches) + " |",
            "|---:|" + "---:|" * len(batches),
        ]
        for a in counts:
            cells = [f"{table[a, b]['agent_steps_per_second']:,.0f} "
                     f"({table[a, b]['compile_seconds']:.1f} s)" if (a, b) in table else ""
                     for b in batches]
            lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines.append(END)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    data_path = argv[0] if argv else "benchmarks/core_throughput.json"
    md_path = argv[1] if len(argv) > 1 else "BENCHMARKS.md"
    with open(data_path) as f:
        payload = json.load(f)
    if payload.get("benchmark") == "reset_cost":
        block, begin, end = render_reset_cost(payload), RESET_BEGIN, RESET_END
    else:
        block, begin, end = render(payload), BEGIN, END
    try:
        with open(md_path) as f:
            text = f.read()
    except FileNotFoundError:
        text = "# Benchmarks\n\nAll figures below were measured, not estimated; each section says how.\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(md_path, "w") as f:
        f.write(text)
    print(f"updated {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
