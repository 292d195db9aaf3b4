#!/usr/bin/env python
"""Render the saved benchmark JSON into BENCHMARKS.md.

Replaces the text between ``<!-- core-throughput:begin -->`` and
``<!-- core-throughput:end -->`` (appending the block if absent); other
sections of BENCHMARKS.md are left as they are. A ``--reset-cost`` JSON
(``benchmarks/reset_cost.json``) renders into its own block,
``<!-- reset-cost:begin -->`` ... ``<!-- reset-cost:end -->``; a
``--before`` run (``benchmarks/before_after.json``) into
``<!-- before-after:... -->``, and ``scripts/bench/roofline.py``'s JSON
(``benchmarks/roofline.json``) into ``<!-- roofline:... -->``.

Usage: ``python scripts/bench/render_markdown.py [benchmarks/core_throughput.json] [BENCHMARKS.md]``
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict

BEGIN, END = "<!-- core-throughput:begin -->", "<!-- core-throughput:end -->"
RESET_BEGIN, RESET_END = "<!-- reset-cost:begin -->", "<!-- reset-cost:end -->"
ROOFLINE_BEGIN, ROOFLINE_END = "<!-- roofline:begin -->", "<!-- roofline:end -->"


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
        "`python scripts/bench/throughput.py --reset-cost` (data: `benchmarks/reset_cost.json`).",
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


def _load_line(m: dict) -> list[str]:
    if not m.get("load_average_1_5_15min"):
        return []
    return [f"Load average (1/5/15 min) when the run ended: "
            f"{', '.join(f'{x:.1f}' for x in m['load_average_1_5_15min'])} on "
            f"{m['cpu_count']} cores.", ""]


def _memory(row: dict) -> str:
    """KiB per env: the carried state + XLA's scratch buffers."""
    if "state_bytes_per_env" not in row:
        return ""
    return (f"{row['state_bytes_per_env'] / 1024:.2f} + "
            f"{row.get('temp_bytes_per_env', 0.0) / 1024:.2f}")


def render_comparison(payload: dict, name: str = "before-after") -> str:
    """The block of a ``--before`` run: each program's steps/s with the old
    code and this code (their runs interleaved), the speed-up, the ratio to
    gymnax CartPole in the same run, compile times and memory per env.
    ``name``: the block's marker (one block per data file)."""
    m, s = payload["machine"], payload["settings"]
    rows = payload["results"]
    by = {(r["env"], r["num_envs"], r.get("step", "step"), r.get("code", "after")): r
          for r in rows}
    envs = ", ".join(f"`{e}`" for e in dict.fromkeys(r["env"] for r in rows))
    lines = [
        f"<!-- {name}:begin -->",
        f"### Before and after, in one run: {envs}",
        "",
        _machine_line(m, s) + f"; median of {s['repeats']} interleaved rounds (every program "
        "once per round) after one warm-up run each. *before*: the code of the commit whose "
        "source tree was given as `--before`; *after*: this code; each in its own worker "
        "process. Produced by `python scripts/bench/throughput.py --before TREE` (data: "
        f"`benchmarks/{name.replace('-', '_')}.json`).",
        "",
        *_load_line(m),
        "Env steps per second (M); speed-up after/before, in wall-clock time and in CPU time "
        "of the worker processes (less distorted by other jobs' load); after ÷ gymnax "
        "CartPole-v1 at the same batch in the same run; compile time (s) before / after; "
        "memory per env after (KiB: carried state + XLA scratch):",
        "",
        "| env | step form | batch | before | after | after/before | per CPU-s | ÷ CartPole "
        "| compile (s) | KiB/env |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    keys = list(dict.fromkeys((r["env"], r.get("step", "step"), r["num_envs"]) for r in rows))
    for env, form, n in keys:
        before = by.get((env, n, form, "before"))
        after = by.get((env, n, form, "after"))
        ref = by.get(("gymnax/CartPole-v1 (reference)", n, "step", "after"))
        if after is None:
            continue

        def rate(r):
            return "—" if r is None else f"{r['steps_per_second'] / 1e6:.3f}"

        speedup = "" if before is None else \
            f"{after['steps_per_second'] / before['steps_per_second']:.2f}×"
        vs_ref = "" if ref is None else f"{after['steps_per_second'] / ref['steps_per_second']:.2f}×"
        per_cpu = "" if before is None or "steps_per_cpu_second" not in after else \
            f"{after['steps_per_cpu_second'] / before['steps_per_cpu_second']:.2f}×"
        compile_s = ("—" if before is None else f"{before['compile_seconds']:.1f}") + \
            f" / {after['compile_seconds']:.1f}"
        lines.append(f"| {env} | `{form}` | {n} | {rate(before)} | {rate(after)} | {speedup} | "
                     f"{per_cpu} | {vs_ref} | {compile_s} | {_memory(after)} |")
    agents = payload.get("multi_agent") or []
    if agents:
        lines += ["", f"Many agents in one plume (`{agents[0]['env']}`, collisions on): agent-steps "
                  "per second (M), before / after:", "",
                  "| num_agents | batch | before | after | after/before |",
                  "|---:|---:|---:|---:|---:|"]
        table = {(r["num_agents"], r["num_envs"], r.get("code", "after")): r for r in agents}
        for a, n in dict.fromkeys((r["num_agents"], r["num_envs"]) for r in agents):
            before, after = table.get((a, n, "before")), table.get((a, n, "after"))
            if after is None:
                continue
            b = "—" if before is None else f"{before['agent_steps_per_second'] / 1e6:.3f}"
            ratio = "" if before is None else \
                f"{after['agent_steps_per_second'] / before['agent_steps_per_second']:.2f}×"
            lines.append(f"| {a} | {n} | {b} | {after['agent_steps_per_second'] / 1e6:.3f} | "
                         f"{ratio} |")
    lines.append(f"<!-- {name}:end -->")
    return "\n".join(lines)


def render_roofline(payload: dict) -> str:
    """The block of ``scripts/bench/roofline.py``: measured peaks, work per step,
    the fraction of the peaks reached and where the time goes."""
    m, s, peaks = payload["machine"], payload["settings"], payload["peaks"]
    envs = [p for p in payload["programs"] if "flops_per_step" in p]
    decisions = [p for p in payload["programs"] if "flops_per_decision" in p]
    lines = [
        ROOFLINE_BEGIN,
        "## Roofline",
        "",
        f"Measured {m['date']} on {m['cpu_count']} CPU cores ({m['processor']}), device "
        f"`{m['device_platform']}`; jax {m['jax']}. Produced by `python scripts/bench/roofline.py` "
        "(data: `benchmarks/roofline.json`).",
        "",
        *_load_line(m),
        "What the machine can do (measured, median of "
        f"{s['repeats']} runs): fused elementwise kernel ({peaks['elementwise_kernel']}) "
        f"**{peaks['elementwise_flops_per_second'] / 1e9:.1f} GFLOP/s**; matmul "
        f"({peaks['matmul_kernel']}) **{peaks['matmul_flops_per_second'] / 1e9:.1f} "
        f"GFLOP/s**; streaming ({peaks['stream_kernel']}) "
        f"**{peaks['stream_bytes_per_second'] / 1e9:.2f} GB/s**.",
        "",
        f"Work per env step of `vmap(env.step)` at batch {s['batch']} (XLA's HLO cost analysis "
        "of the compiled one-step program, divided by the batch; bytes are XLA's operand + "
        "result bytes of every operation, mostly cache-resident, not DRAM traffic), random "
        "32-bit words drawn (jaxpr count: per transition + per episode start), the measured "
        "rate and the fraction of the elementwise peak it reaches (flops/step × steps/s ÷ "
        "peak), and the bound that peak sets (peak ÷ flops/step); last, the env state per env "
        "(KiB) and the bound the streaming peak sets when a step reads and writes it once "
        "from memory (streaming peak ÷ 2 × state bytes; it applies where the batch's state "
        "does not fit in cache):",
        "",
        "| program | flops/step | bytes/step | transcendentals/step | random words | steps/s "
        "| of elementwise peak | bound at peak (steps/s) | state (KiB/env) | bound by state "
        "traffic (steps/s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in envs:
        rate = p["steps_per_second"]["step"]
        lines.append(
            f"| {p['program']} (`{p['preset']}`) | {p['flops_per_step']:,.0f} | "
            f"{p['bytes_per_step']:,.0f} | {p['transcendentals_per_step']:,.0f} | "
            f"{p['random_words_per_transition']} + {p['random_words_per_episode_start']} | "
            f"{rate / 1e6:.3f} M | {p['elementwise_fraction']:.0%} | "
            f"{peaks['elementwise_flops_per_second'] / max(p['flops_per_step'], 1.0) / 1e6:.2f} M | "
            + (f"{p['state_bytes_per_env'] / 1024:.2f} | "
               f"{peaks['stream_bytes_per_second'] / (2 * p['state_bytes_per_env']) / 1e6:.2f} M |"
               if p.get("state_bytes_per_env") else "| |"))
    for p in decisions:
        lines.append(
            f"| {p['program']} (`{p['preset']}`, batch {p['num_envs']}) | "
            f"{p['flops_per_decision']:,.0f} | {p['bytes_per_decision']:,.0f} | "
            f"{p['transcendentals_per_decision']:,.0f} | — | {p['decisions_per_second']:,.0f} "
            f"decisions/s | {p['elementwise_fraction']:.0%} | "
            f"{peaks['elementwise_flops_per_second'] / p['flops_per_decision']:,.0f} | | |")
    lines += [
        "",
        "Where the time goes: microseconds per env step of the whole step (`vmap(env.step)`, "
        "resets only where episodes ended), the speculative form (`vmap(env.step_speculative)`, "
        "a fresh start computed for every env on every step), the transition alone "
        "(`vmap(env.step_env)`, no reset), and, timed on their own in the same harness, the "
        "plume's advance and the plume read at the agents' positions:",
        "",
        "| program | step | step_speculative | step_env | plume advance | plume read |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p in envs:
        t = p["seconds_per_step"]
        lines.append(f"| {p['program']} | " + " | ".join(
            f"{t[k] * 1e6:.3f}" for k in ("step", "step_speculative", "step_env",
                                          "plume_advance", "plume_read")) + " |")
    lines.append(ROOFLINE_END)
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
        "`python scripts/bench/throughput.py` (data: `benchmarks/core_throughput.json`).",
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
    elif payload.get("benchmark") == "roofline":
        block, begin, end = render_roofline(payload), ROOFLINE_BEGIN, ROOFLINE_END
    elif payload.get("settings", {}).get("before"):
        name = os.path.splitext(os.path.basename(data_path))[0].replace("_", "-")
        block = render_comparison(payload, name)
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    else:
        block, begin, end = render(payload), BEGIN, END
    splice_block(md_path, block, begin, end)
    return 0


def splice_block(md_path: str, block: str, begin: str, end: str) -> None:
    """Replace the text from ``begin`` to ``end`` in the Markdown file
    ``md_path`` with ``block`` (which starts with ``begin`` and ends with
    ``end``), or append ``block`` where the markers are absent; creates the
    file if missing. Other text is left as it is."""
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


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
