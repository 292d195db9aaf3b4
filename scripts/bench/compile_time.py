#!/usr/bin/env python
"""Compile time next to throughput, measured through the CLI as a user runs it.

Runs ``plume-jax train --config <config>`` and ``plume-jax demo`` in fresh
processes (``python -m plume_jax.cli ...``, so nothing is compiled or cached
beforehand), reads the figures the programs themselves report (train's
``summary.json``: ``init_seconds`` — building the initial state, its jit
compile included — ``compile_seconds``, ``train_seconds``, the steady-state
``steps_per_second_excl_compile`` and the evaluation's time; the demo's
``--json`` figures: ``compile_seconds``, ``run_seconds``,
``env_steps_per_second``) and times each process from the outside. Writes
``benchmarks/compile_time.json`` and prints a markdown table.

Usage::

    python scripts/bench/compile_time.py                        # the defaults below
    python scripts/bench/compile_time.py --filament-steps 0     # full budget for every config

The machine may be shared: the load average before and after each command is
recorded next to its timings.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import time
from typing import Any, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[2]

if __package__:  # imported as scripts.bench.compile_time
    from scripts.bench.harness import load_rounded, machine_info, write_json
else:  # run as `python scripts/bench/compile_time.py` (this folder is sys.path[0])
    from harness import load_rounded, machine_info, write_json

#: (label, config) of the training runs.
TRAIN_CONFIGS = (
    ("MLP, Gaussian", "configs/train_gaussian.yaml"),
    ("GRU, filament", "configs/train_filament_gru.yaml"),
)
DEMO_PRESETS = ("PlumeNav-Gaussian-v0", "PlumeNav-Filament-v0")


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded."""
    return load_rounded()


def cli_command(args: Sequence[str]) -> list[str]:
    """``plume-jax ARGS`` as a command line run with this interpreter."""
    return [sys.executable, "-m", "plume_jax.cli", *args]


def shown(args: Sequence[str]) -> str:
    """The command as a user types it (``plume-jax ...``)."""
    return "plume-jax " + shlex.join(args)


def run_cli(args: Sequence[str]) -> tuple[str, float, list[float], list[float]]:
    """Run ``plume-jax ARGS`` in a fresh process; its stdout, wall seconds and
    the load averages before and after. A failing command raises
    ``RuntimeError`` with its stderr."""
    before = load()
    t0 = time.perf_counter()
    done = subprocess.run(cli_command(args), cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{shown(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout, wall, before, load()


def train_row(label: str, config: str, total_steps: int | None, out: pathlib.Path
              ) -> dict[str, Any]:
    """Run ``plume-jax train`` on ``config`` into ``out``; its row."""
    args = ["train", "--config", config, "--out", str(out), "--quiet"]
    if total_steps:
        args += ["--total-steps", str(total_steps)]
    _, wall, before, after = run_cli(args)
    s = json.loads((out / "summary.json").read_text())
    return {
        "program": "train", "label": label,
        "command": shown([a if a != str(out) else "<run folder>" for a in args]),
        "env": s["env"], "env_steps": s["env_steps_this_call"],
        "init_seconds": s["init_seconds"], "compile_seconds": s["compile_seconds"],
        "first_update_seconds": s["init_seconds"] + s["compile_seconds"],
        "run_seconds": s["train_seconds"],
        "steps_per_second": s["steps_per_second_excl_compile"],
        "evaluation_seconds": s.get("evaluation", {}).get("seconds_incl_compile"),
        "wall_seconds_in_program": s["wall_seconds"], "process_wall_seconds": wall,
        "load_before": before, "load_after": after,
    }


def demo_row(preset: str | None, num_envs: int | None) -> dict[str, Any]:
    """Run ``plume-jax demo`` (on ``preset``, or the default); its row."""
    args = ["demo", "--json", "--quiet", "--out", ""]
    if preset:
        args += ["--preset", preset]
    if num_envs:
        args += ["--num-envs", str(num_envs)]
    stdout, wall, before, after = run_cli(args)
    f = json.loads(stdout)
    return {
        "program": "demo", "label": f["preset"], "command": shown(args),
        "env": f["preset"], "env_steps": f["env_steps"],
        "compile_seconds": f["compile_seconds"], "first_update_seconds": f["compile_seconds"],
        "run_seconds": f["run_seconds"], "steps_per_second": f["env_steps_per_second"],
        "process_wall_seconds": wall, "load_before": before, "load_after": after,
    }


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The table: per command, time to the first step or update, compile,
    steady-state throughput, and the process's wall time."""
    lines = [
        "| program | env | env steps | initial state (s) | compile (s) | run (s) | "
        "steady env steps/s | evaluation (s) | process wall (s) | load before → after |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lb, la = r["load_before"][0], r["load_after"][0]
        lines.append(
            f"| `{r['program']}` ({r['label']}) | `{r['env']}` | {r['env_steps']:,} | "
            f"{_s(r.get('init_seconds'))} | {_s(r['compile_seconds'])} | {_s(r['run_seconds'])} | "
            f"{r['steps_per_second']:,.0f} | {_s(r.get('evaluation_seconds'))} | "
            f"{_s(r['process_wall_seconds'])} | {lb:.2f} → {la:.2f} |")
    lines.append("")
    lines.append("Commands:")
    lines.append("")
    lines.extend(f"- `{r['command']}`" for r in rows)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", nargs="*", default=[c for _, c in TRAIN_CONFIGS],
                    help="training configs to run (default: %(default)s)")
    ap.add_argument("--total-steps", type=int, default=0,
                    help="env steps per training run (0: each config's own budget, except "
                    "the filament GRU config, see --filament-steps)")
    ap.add_argument("--filament-steps", type=int, default=327_680,
                    help="env steps for configs/train_filament_gru.yaml when --total-steps "
                    "is 0 (its full 3M-step budget takes ~6 min here; 0: the full budget)")
    ap.add_argument("--demo-presets", nargs="*", default=[""] + list(DEMO_PRESETS[1:]),
                    help="presets for plume-jax demo ('' = its default; default %(default)s)")
    ap.add_argument("--demo-num-envs", type=int, default=0,
                    help="--num-envs for the demo (0: its default)")
    ap.add_argument("--json-out", default=str(ROOT / "benchmarks" / "compile_time.json"),
                    help="where to write the results ('' to skip)")
    args = ap.parse_args(argv)

    labels = dict((c, label) for label, c in TRAIN_CONFIGS)
    rows = []
    with tempfile.TemporaryDirectory(prefix="plume_jax_compile_") as tmp:
        for i, config in enumerate(args.configs):
            steps = args.total_steps or (args.filament_steps
                                         if pathlib.Path(config).name == "train_filament_gru.yaml"
                                         else 0)
            rows.append(train_row(labels.get(config, config), config, steps or None,
                                  pathlib.Path(tmp) / f"run{i}"))
            print(f"done: {rows[-1]['command']}", file=sys.stderr)
    for preset in args.demo_presets:
        rows.append(demo_row(preset or None, args.demo_num_envs or None))
        print(f"done: {rows[-1]['command']}", file=sys.stderr)

    payload = {
        "benchmark": "compile_time",
        "machine": machine_info("date", "cpu_count", ("device", "device_str"), "jax"),
        "results": rows,
    }
    if args.json_out:
        write_json(payload, args.json_out, trailing_newline=True)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
