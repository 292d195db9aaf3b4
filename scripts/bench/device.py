#!/usr/bin/env python
"""Device benchmark: every preset family, gymnax references and the trainer, in one run.

One command measures, on the device JAX runs on (a GPU where there is one),

- ``reference``: gymnax ``CartPole-v1`` and the heavier ``Breakout-MinAtar``
  (``lax.scan`` of ``vmap(env.step)``), at every batch size;
- ``core_step`` and ``core_step_batch``: every preset family (Gaussian,
  GaussianOriented, GaussianBinary, Filament and its regimes, Farrell,
  Poisson Iso19x19 / Iso53x53 / Windy81x41, Movie on the bundled synthetic
  movie, Swarm) through ``lax.scan`` of ``vmap(env.step)`` and of
  ``env.step_batch``, batch sizes ascending, a family stopping at the first
  batch that runs out of memory (recorded as such) or would pass the box;
- ``training``: ``plume-jax train`` PPO (MLP and GRU) on Gaussian and
  Filament at several env counts: env steps/s of the compiled updates, and
  the share of an update the env takes (the env alone, stepping the same
  envs for the same rollout length with random actions, timed as its own
  program; the rest of the update is the network: the policy in the
  rollout, GAE and the PPO epochs);
- ``sweep``: 16 members (4 seeds x 4 learning rates) trained as ONE vmapped
  program.

The programs are the other benchmarks' own (``scripts/bench/programs.py``'s
``build``, ``scripts/bench/throughput.py``'s ``summarise`` and ``make_env``,
``scripts/bench/training.py``'s matched PPO config and vmapped sweep).
Every section has a time box (seconds; ``--box-SECTION``) and the run a
budget (``--budget-s``): a section starts no measurement that its box or the
budget has no room left for, judged by the last measurement's duration.
Each row is appended to ``OUT/rows.jsonl`` (flushed) as it is measured, so a
run killed by a timeout leaves everything measured so far. The last step
(also ``--render-only``) turns the rows into ``summary.json``, ``table.md``
and ``scaling.png`` (a panel per family: batch on x, steps/s on y, a curve
per device and step form, with the rows of the sibling folders of ``--out``,
e.g. the CPU run beside a GPU run).

Usage::

    python scripts/bench/device.py --out benchmarks/device/h100/   # full: < 8 min on a GPU
    python scripts/bench/device.py --quick --out /tmp/device-quick   # < 3 min on 2 CPU cores
    python scripts/bench/device.py --render-only --out benchmarks/device/h100/
    bash scripts/bench/device_run.sh     # on a lent GPU machine (wheels carried): see BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Iterable

import jax

if __package__:  # imported as scripts.bench.device
    from scripts.bench.harness import (machine_info, package_version, time_run, time_run_cpu,
                                       write_json)
    from scripts.bench.programs import build
    from scripts.bench.throughput import make_env, reference_name, summarise
    from scripts.bench.training import matched_config, run_vmapped_sweep
    from scripts.bench.render_markdown import splice_block
else:  # run as `python scripts/bench/device.py` (this folder is sys.path[0])
    from harness import (machine_info, package_version, time_run, time_run_cpu,
                               write_json)
    from programs import build
    from throughput import make_env, reference_name, summarise
    from training import matched_config, run_vmapped_sweep
    from render_markdown import splice_block

#: Every preset family of the issue, in the order they are measured.
FAMILIES = (
    "PlumeNav-Gaussian-v0", "PlumeNav-GaussianOriented-v0", "PlumeNav-GaussianBinary-v0",
    "PlumeNav-Filament-v0", "PlumeNav-Filament-Constant-v0", "PlumeNav-Filament-SwitchOnce-v0",
    "PlumeNav-Filament-SwitchMany-v0", "PlumeNav-Filament-Sparse-v0",
    "PlumeNav-Filament-Gusty-v0", "PlumeNav-Filament-Farrell-v0",
    "PlumeNav-Poisson-Iso19x19-v0", "PlumeNav-Poisson-Iso53x53-v0",
    "PlumeNav-Poisson-Windy81x41-v0", "PlumeNav-Movie-v0", "PlumeNav-Swarm-v0",
)
REFERENCES = ("CartPole-v1", "Breakout-MinAtar")
TRAIN_PRESETS = ("PlumeNav-Gaussian-v0", "PlumeNav-Filament-v0")
NETWORKS = {"mlp": {"type": "mlp", "hidden_sizes": [64, 64], "activation": "tanh"},
            "gru": {"type": "gru", "hidden_sizes": [64, 64], "gru_size": 64}}
#: The sweep's 16 members: 4 seeds x 4 learning rates, one vmapped program.
SWEEP_GRID = {"run.seed": [0, 1, 2, 3], "algo.learning_rate": [1e-4, 3e-4, 1e-3, 3e-3]}
SECTIONS = ("reference", "core_step", "core_step_batch", "training", "sweep")
ROWS, SUMMARY, TABLE, PLOT = "rows.jsonl", "summary.json", "table.md", "scaling.png"

#: Settings of the full run (one GPU, < 8 min with compiles) and what --quick changes.
DEFAULTS: dict[str, Any] = {
    "batches": [2 ** 10, 2 ** 14, 2 ** 17, 2 ** 20], "target_steps": 2 ** 23,
    "min_steps": 16, "max_steps": 200, "repeats": 3,
    "box_reference": 25.0, "box_core_step": 170.0, "box_core_step_batch": 60.0,
    "box_training": 110.0, "box_sweep": 40.0, "budget_s": 440.0,
    "train_envs": [2 ** 11, 2 ** 12, 2 ** 13, 2 ** 14], "train_steps": 128, "train_updates": 3,
    "train_epochs": 4, "train_minibatches": 4,
    "sweep_envs": 256, "sweep_steps": 128, "sweep_updates": 5,
}
QUICK: dict[str, Any] = {
    "batches": [2 ** 6, 2 ** 10], "target_steps": 2 ** 15, "min_steps": 8, "max_steps": 64,
    "box_reference": 12.0, "box_core_step": 45.0, "box_core_step_batch": 15.0,
    "box_training": 25.0, "box_sweep": 45.0, "budget_s": 145.0,
    "train_envs": [2 ** 7], "train_steps": 16, "train_updates": 2, "train_epochs": 1,
    "train_minibatches": 2, "sweep_envs": 8, "sweep_steps": 16, "sweep_updates": 2,
}


# -- machine and rows -----------------------------------------------------------------


def driver_version(device: Any) -> str | None:
    """The accelerator driver's version: ``nvidia-smi``'s on an NVIDIA GPU,
    else what the PJRT client reports; None on the CPU."""
    if device.platform == "cpu":
        return None
    if device.platform == "gpu" and shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30, check=True)
            return out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    return str(getattr(device.client, "platform_version", "")) or None


def device_name(device: Any) -> str:
    """The device as the rows name it: the accelerator's kind (e.g. ``NVIDIA
    H100 80GB HBM3``), or ``cpu (<model>, <n> cores)``."""
    if device.platform == "cpu":
        m = machine_info("cpu_model", "cpu_count")
        return f"cpu ({m['cpu_model']}, {m['cpu_count']} cores)"
    return str(device.device_kind)


def peak_device_bytes(device: Any) -> int | None:
    """``device.memory_stats()["peak_bytes_in_use"]``: the process's peak so
    far (JAX has no reset), or None where the backend keeps no statistics
    (the CPU)."""
    stats = device.memory_stats()
    return None if not stats else stats.get("peak_bytes_in_use")


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is XLA running out of device memory."""
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


class Rows:
    """``rows.jsonl`` of one run: each row stamped with the device, driver,
    jax and jaxlib versions and the date, appended and flushed to disk as it
    is measured."""

    def __init__(self, path: pathlib.Path, device: Any):
        self.path = path
        self.device = device
        self.stamp = {"device": device_name(device), "platform": device.platform,
                      "driver": driver_version(device), "jax": jax.__version__,
                      "jaxlib": package_version("jaxlib")}
        self.rows: list[dict[str, Any]] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "w")

    def add(self, row: dict[str, Any]) -> dict[str, Any]:
        row = {**row, **self.stamp,
               "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        self.rows.append(row)
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())
        print(describe(row), flush=True)
        return row

    def close(self) -> None:
        self.file.close()


def describe(row: dict[str, Any]) -> str:
    """One log line for a row."""
    what = " ".join(str(row[k]) for k in ("section", "env", "form", "network", "num_envs")
                    if row.get(k) is not None)
    if row["status"] == "ok" and "steps_per_second" in row:
        extra = (f" (env {row['env_share']:.1%} of an update)" if "env_share" in row else "")
        return (f"{what}: {row['steps_per_second']:,.0f} steps/s, compile "
                f"{row['compile_seconds']:.1f} s{extra}")
    return f"{what}: {row['status']}" + (f" ({row['reason']})" if row.get("reason") else "")


# -- time boxes -----------------------------------------------------------------------


def now() -> float:
    """The clock of the time boxes (seconds, monotonic)."""
    return time.monotonic()


class Box:
    """A section's time box inside the run's budget: :meth:`room` says
    whether a measurement expected to take ``estimate`` seconds still fits
    both; :meth:`reason` says which one it did not fit."""

    def __init__(self, seconds: float, deadline: float):
        self.seconds = seconds
        self.start = now()
        self.deadline = deadline

    def elapsed(self) -> float:
        return now() - self.start

    def room(self, estimate: float) -> bool:
        return now() + estimate <= min(self.start + self.seconds, self.deadline)

    def reason(self) -> str:
        if self.deadline < self.start + self.seconds:
            return "the run's budget (--budget-s) left no room"
        return f"its time box ({self.seconds:g} s) left no room after {self.elapsed():.1f} s"


class Skip(Exception):
    """A cell that does not apply (e.g. an env without ``step_batch``)."""


def cell_group(labels: dict[str, Any]) -> tuple:
    """A cell's labels but its batch size: a failure skips the rest of its group."""
    return tuple(sorted((k, v) for k, v in labels.items() if k != "num_envs"))


def run_section(rows: Rows, section: str, box: Box,
                cells: Iterable[tuple[dict[str, Any], Callable[[], dict[str, Any]]]],
                group: Callable[[dict[str, Any]], Any] = cell_group,
                prior: list[float] | None = None) -> list[float]:
    """Measure ``cells`` (``(labels, measure)``) in order inside ``box``.
    ``measure()`` returns a row's figures; an exception becomes a row with
    status ``oom`` (out of device memory) or ``error``, and the rest of its
    ``group`` (e.g. the larger batches of one family) is skipped. Before
    each cell, its expected duration must still fit the box, else the
    section stops with a ``stopped`` row naming what it did not measure:
    expected is the duration of its group's last cell (the same family at
    the previous batch), else the median of this section's cells so far,
    else that of ``prior`` (the previous section's cell durations).
    Returns this section's cell durations."""
    cells = list(cells)
    failed: set[Any] = set()
    first = statistics.median(prior) if prior else 0.0
    own: list[float] = []
    by_group: dict[Any, float] = {}
    for i, (labels, measure) in enumerate(cells):
        if group(labels) in failed:
            continue
        expected = by_group.get(group(labels), statistics.median(own) if own else first)
        if not box.room(expected):
            left = [c for c, _ in cells[i:] if group(c) not in failed]
            rows.add({"section": section, "status": "stopped", "reason": box.reason(),
                      "not_measured": left})
            return own
        t0 = now()
        try:
            figures = measure()
            row = {"section": section, **labels, "status": "ok", **figures}
        except Skip as why:
            row = {"section": section, **labels, "status": "skip", "reason": str(why)}
            failed.add(group(labels))
        except Exception as error:  # noqa: BLE001 (every failure becomes a row)
            message = (str(error).strip().splitlines() or [type(error).__name__])[0]
            row = {"section": section, **labels,
                   "status": "oom" if is_out_of_memory(error) else "error",
                   "reason": f"{type(error).__name__}: {message[:300]}"}
            failed.add(group(labels))
        own.append(now() - t0)
        by_group[group(labels)] = own[-1]
        row["cell_seconds"] = own[-1]
        row["peak_device_bytes"] = peak_device_bytes(rows.device)
        rows.add(row)
    return own


# -- what each section measures ---------------------------------------------------------


def scan_steps(num_envs: int, args: argparse.Namespace) -> int:
    """Scan length of one timed run: about ``--target-steps`` env steps,
    within ``--min-steps`` and ``--max-steps``."""
    return max(args.min_steps, min(args.max_steps, args.target_steps // num_envs))


def measure_stepping(name: str, form: str, num_envs: int,
                     args: argparse.Namespace) -> Callable[[], dict[str, Any]]:
    """A cell of the stepping sections: :func:`build`'s program of ``form``
    for ``name`` (a preset, or a :func:`reference_name`), median of
    ``--repeats`` timed runs after one warm-up."""

    def measure() -> dict[str, Any]:
        env, params = make_env(name)
        if form != "step" and not hasattr(env, form):
            raise Skip(f"{name} has no {form}")
        compiled, state, figures = build(env, params, num_envs, scan_steps(num_envs, args), form)
        runs = [time_run_cpu(compiled, state, i + 1) for i in range(args.repeats)]
        row = summarise(figures, runs)
        agents = getattr(env, "num_agents", 1) if getattr(env, "is_multi_agent", False) else 1
        if agents > 1:
            row["num_agents"] = agents
            row["agent_steps_per_second"] = row["steps_per_second"] * agents
        return row

    return measure


def stepping_cells(names: Iterable[str], form: str, args: argparse.Namespace):
    """Every env at the smallest batch, then every env at the next, ...: a
    section cut short by its box still has every env at its small batches."""
    for n in args.batches:
        for name in names:
            yield {"env": name, "form": form, "num_envs": n}, measure_stepping(name, form, n, args)


def train_data(preset: str, network: str, num_envs: int, num_steps: int, updates: int,
               args: argparse.Namespace) -> dict[str, Any]:
    """The training config of a cell: ``scripts/bench/training.py``'s
    matched PPO config with the named network."""
    data = matched_config(preset, num_envs, num_steps, args.train_epochs,
                          args.train_minibatches, updates)
    data["network"] = dict(NETWORKS[network])
    return data


def measure_training(preset: str, network: str, num_envs: int,
                     args: argparse.Namespace) -> Callable[[], dict[str, Any]]:
    """A training cell: ``--train-updates`` PPO updates through the trainer
    (``plume-jax train``'s ``train``), then the env alone for one rollout
    (``num_envs`` envs x ``--train-steps`` steps, random actions, its own
    program): the env's share of an update is its time over an update's."""

    def measure() -> dict[str, Any]:
        import plume_jax
        from plume_jax.train.config import train_config
        from plume_jax.train.run import train

        steps, updates = args.train_steps, args.train_updates
        t0 = time.perf_counter()
        result = train(train_config(train_data(preset, network, num_envs, steps, updates, args)),
                       None, progress=False, evaluate=False)
        wall = time.perf_counter() - t0
        s = result.summary
        update_s = s["train_seconds"] / updates
        env, params = plume_jax.make(preset)
        compiled, state, _ = build(env, params, num_envs, steps, "step")
        env_s = statistics.median(time_run(compiled, state, i + 1) for i in range(args.repeats))
        return {"num_steps": steps, "updates": updates, "env_steps": s["env_steps_this_call"],
                "compile_seconds": s["compile_seconds"], "init_seconds": s["init_seconds"],
                "train_seconds": s["train_seconds"], "wall_seconds": wall,
                "steps_per_second": s["env_steps_this_call"] / s["train_seconds"],
                "update_seconds": update_s, "env_rollout_seconds": env_s,
                "env_share": env_s / update_s, "network_share": 1.0 - env_s / update_s}

    return measure


def training_cells(args: argparse.Namespace):
    for n in args.train_envs:
        for preset in TRAIN_PRESETS:
            for network in NETWORKS:
                yield ({"env": preset, "network": network, "num_envs": n},
                       measure_training(preset, network, n, args))


def measure_sweep(args: argparse.Namespace) -> dict[str, Any]:
    """The sweep cell: :data:`SWEEP_GRID`'s 16 members of the Gaussian MLP
    config, one vmapped program (``scripts/bench/training.py``)."""
    from plume_jax.train.sweep import sweep_config

    base = train_data(TRAIN_PRESETS[0], "mlp", args.sweep_envs, args.sweep_steps,
                      args.sweep_updates, args)
    sweep = sweep_config({"base": base, "grid": SWEEP_GRID, "mode": "product"})
    out = run_vmapped_sweep(sweep)
    steps = out["members"] * out["env_steps_per_member"]
    return {**out, "num_steps": args.sweep_steps, "updates": args.sweep_updates,
            "env_steps": steps, "steps_per_second": steps / out["train_seconds"]}


def measure_all(args: argparse.Namespace, out: pathlib.Path) -> None:
    """Every selected section, in order, rows to ``out/rows.jsonl``."""
    started = now()
    deadline = started + args.budget_s
    device = jax.devices(args.device)[0] if args.device else jax.devices()[0]
    rows = Rows(out / ROWS, device)
    rows.add({"section": "machine", "status": "machine",
              "machine": machine_info("date", "platform", "cpu_model", "cpu_count",
                                      "device_platform", "device_kind", "device_count",
                                      "python", "jax", "version:jaxlib", "version:gymnax",
                                      "version:flax", "plume_jax", "git_commit",
                                      "load_average"),
              "settings": {k: getattr(args, k) for k in DEFAULTS} | {
                  "quick": args.quick, "sections": args.sections, "presets": args.presets}})
    references = [reference_name(r) for r in args.references]
    durations: list[float] = []  # the previous section's cells
    try:
        with jax.default_device(device):
            for section in args.sections:
                box = Box(getattr(args, f"box_{section}"), deadline)
                if section == "reference":
                    cells = stepping_cells(references, "step", args)
                elif section.startswith("core_"):
                    cells = stepping_cells(args.presets, section[len("core_"):], args)
                elif section == "training":
                    cells = training_cells(args)
                else:
                    cells = iter([({"env": TRAIN_PRESETS[0], "network": "mlp",
                                    "members": 16, "num_envs": args.sweep_envs},
                                   lambda: measure_sweep(args))])
                durations = run_section(rows, section, box, cells, prior=durations) or durations
    finally:
        rows.add({"section": "end", "status": "end", "elapsed_seconds": now() - started,
                  **machine_info("load_average")})
        rows.close()


# -- rendering ------------------------------------------------------------------------


def read_rows(folder: pathlib.Path) -> list[dict[str, Any]]:
    """The rows of ``folder/rows.jsonl``; a last line cut off by a kill is
    left out."""
    rows = []
    for line in (folder / ROWS).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def summarise_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What a run measured: the machine and settings, each stepping env's
    best rate per form (and its ratio to CartPole's best on the same device),
    the training and sweep rows, and what was stopped, skipped or failed."""
    machine = next((r for r in rows if r["status"] == "machine"), {})
    ok = [r for r in rows if r["status"] == "ok"]
    best: dict[str, dict[str, Any]] = {}
    for r in ok:
        if r["section"] == "reference" or r["section"].startswith("core_"):
            cur = best.setdefault(r["env"], {}).get(r["form"])
            if cur is None or r["steps_per_second"] > cur["steps_per_second"]:
                best[r["env"]][r["form"]] = {k: r[k] for k in (
                    "num_envs", "steps_per_second", "compile_seconds", "peak_device_bytes")}
    cartpole = best.get(reference_name("CartPole-v1"), {}).get("step")
    for forms in best.values():
        for b in forms.values():
            if cartpole:
                b["of_cartpole_best"] = b["steps_per_second"] / cartpole["steps_per_second"]
    end = next((r for r in rows if r["status"] == "end"), None)
    return {"machine": machine.get("machine"), "settings": machine.get("settings"),
            "load_average_at_end": end and end.get("load_average"),
            "stamp": {k: machine.get(k) for k in ("device", "platform", "driver", "jax",
                                                  "jaxlib", "date")},
            "elapsed_seconds": end and end["elapsed_seconds"],
            "best": best,
            "training": [r for r in ok if r["section"] == "training"],
            "sweep": [r for r in ok if r["section"] == "sweep"],
            "not_ok": [r for r in rows if r["status"] in ("oom", "error", "stopped")]}


def _rate(x: float | None) -> str:
    return "" if x is None else f"{x / 1e6:,.3f}"


def _load(x: list[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in x)


def _mib(x: int | None) -> str:
    return "—" if x is None else f"{x / 2 ** 20:,.0f}"


def render_table(rows: list[dict[str, Any]], source: str) -> str:
    """The Markdown tables of one run's rows."""
    s = summarise_rows(rows)
    st, settings = s["stamp"], s["settings"] or {}
    batches = sorted({r["num_envs"] for r in rows if r["status"] in ("ok", "oom", "error")
                      and (r["section"] == "reference" or r["section"].startswith("core_"))})
    cells: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in rows:
        if (r["section"] == "reference" or r["section"].startswith("core_")) and \
                r["status"] in ("ok", "oom", "error"):
            cells.setdefault((r["env"], r["form"]), {})[r["num_envs"]] = r
    elapsed = s["elapsed_seconds"]
    lines = [
        f"Device **{st['device']}** (`{st['platform']}`), driver {st['driver'] or '—'}, "
        f"jax {st['jax']}, jaxlib {st['jaxlib']}; run started {st['date']}"
        + (f", {elapsed:.0f} s in all" if elapsed is not None else ", cut off before its end")
        + (" (`--quick`)" if settings.get("quick") else "") + f". Rows: `{source}`.",
        "",
        *([f"Load average (1/5/15 min) at the start: {_load(s['machine']['load_average'])}"
           + (f"; at the end: {_load(s['load_average_at_end'])}"
              if s["load_average_at_end"] else "")
           + f", on {s['machine']['cpu_count']} CPU cores.", ""]
          if (s["machine"] or {}).get("load_average") else []),
        "Env steps per second (M), `lax.scan` of the step form over a batch, random actions, "
        f"median of {settings.get('repeats', '?')} runs after a warm-up; compile seconds and "
        "the process's peak device memory (MiB, `device.memory_stats()`; — where the backend "
        "keeps none) at the largest batch measured; best ÷ the best CartPole-v1 rate on this "
        "device. *oom*: out of device memory; *error*: failed (reason in the rows).",
        "",
        "| env | step form | " + " | ".join(f"2^{n.bit_length() - 1}" for n in batches)
        + " | compile (s) | peak MiB | best ÷ CartPole |",
        "|---|---|" + "---:|" * (len(batches) + 3),
    ]
    for (env, form), by_n in cells.items():
        def cell(n: int) -> str:
            r = by_n.get(n)
            return "" if r is None else r["status"] if r["status"] != "ok" else \
                _rate(r["steps_per_second"])
        measured = [r for r in by_n.values() if r["status"] == "ok"]
        last = max(measured, key=lambda r: r["num_envs"]) if measured else None
        b = s["best"].get(env, {}).get(form, {})
        ratio = f"{b['of_cartpole_best']:.2f}×" if "of_cartpole_best" in b else ""
        lines.append(f"| {env} | `{form}` | " + " | ".join(cell(n) for n in batches) + " | "
                     + (f"{last['compile_seconds']:.1f} | {_mib(last['peak_device_bytes'])}"
                        if last else " | ") + f" | {ratio} |")
    if s["training"]:
        lines += ["", "`plume-jax train` PPO (matched settings of `scripts/bench/training.py`"
                  f", {settings.get('train_epochs')} epochs x {settings.get('train_minibatches')}"
                  " minibatches): env steps/s of the compiled updates, and the share of an "
                  "update spent in the env (the env alone stepping the same envs for one "
                  "rollout, random actions, timed as its own program) and in the network (the "
                  "rest: policy in the rollout, GAE, PPO epochs):", "",
                  "| preset | network | envs | rollout steps | env steps/s (M) | s per update "
                  "| env share | network share | compile (s) |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in s["training"]:
            lines.append(f"| {r['env']} | {r['network']} | {r['num_envs']} | {r['num_steps']} | "
                         f"{_rate(r['steps_per_second'])} | {r['update_seconds']:.3f} | "
                         f"{r['env_share']:.1%} | {r['network_share']:.1%} | "
                         f"{r['compile_seconds']:.1f} |")
    for r in s["sweep"]:
        lines += ["", f"Sweep of {r['members']} members (4 seeds x 4 learning rates, "
                  f"{r['env']} MLP, {r['num_envs']} envs x {r['num_steps']} steps each, "
                  f"{r['updates']} updates) as ONE vmapped program: "
                  f"{_rate(r['steps_per_second'])} M env steps/s over all members, compile "
                  f"{r['compile_seconds']:.1f} s."]
    stopped = [r for r in s["not_ok"] if r["status"] == "stopped"]
    if stopped:
        lines += [""] + [f"- `{r['section']}` stopped: {r['reason']}; not measured: "
                         f"{len(r['not_measured'])} cell(s)." for r in stopped]
    return "\n".join(lines) + "\n"


def plot_scaling(folders: list[pathlib.Path], path: pathlib.Path) -> None:
    """One panel per stepping env (batch on x, steps/s on y, both log), a
    curve per device and step form, from the rows of ``folders``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    curves: dict[str, dict[str, dict[int, float]]] = {}
    for folder in folders:
        for r in read_rows(folder):
            if r["status"] == "ok" and (r["section"] == "reference"
                                        or r["section"].startswith("core_")):
                label = f"{r['device']} [{folder.name}]: {r['form']}"
                curves.setdefault(r["env"], {}).setdefault(label, {})[r["num_envs"]] = \
                    r["steps_per_second"]
    envs = list(curves)
    cols = 4
    nrows = max(1, -(-len(envs) // cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    for ax, env in zip(axes.flat, envs):
        for label, points in sorted(curves[env].items()):
            xs = sorted(points)
            ax.plot(xs, [points[x] for x in xs], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        rates = [v for points in curves[env].values() for v in points.values()]
        ax.set_ylim(min(rates) / 3, max(rates) * 3)  # at least a decade: readable ticks
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(env.replace("PlumeNav-", ""), fontsize=9)
        ax.set_xlabel("batch (envs)", fontsize=8)
        ax.set_ylabel("env steps/s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(envs):]:
        ax.axis("off")
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="lower center",
                   ncol=min(3, len(handles)), fontsize=8)
    fig.tight_layout(rect=(0, 0.04 + 0.02 * (len(handles) // 3), 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def render(out: pathlib.Path, compare: list[pathlib.Path] | None = None,
           markdown: str | None = None) -> dict[str, Any]:
    """``summary.json``, ``table.md`` and ``scaling.png`` in ``out`` from its
    rows (the plot also from ``compare``: by default every sibling folder of
    ``out`` holding rows); with ``markdown``, the table also replaces the
    block ``<!-- device-<out's name>:begin/end -->`` of that file."""
    rows = read_rows(out)
    summary = summarise_rows(rows)
    write_json(summary, out / SUMMARY)
    source = out.as_posix()
    table = render_table(rows, f"{source}/{ROWS}")
    (out / TABLE).write_text(table)
    if compare is None:
        compare = sorted(p for p in out.resolve().parent.iterdir()
                         if p.is_dir() and p.resolve() != out.resolve() and (p / ROWS).exists())
    plot_scaling([out, *compare], out / PLOT)
    if markdown:
        name = f"device-{out.resolve().name}"
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        splice_block(markdown, f"{begin}\n{table}{end}", begin, end)
    print(f"rendered {out / SUMMARY}, {out / TABLE}, {out / PLOT}")
    return summary


# -- command line ---------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    import plume_jax

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder of rows.jsonl and what renders")
    parser.add_argument("--quick", action="store_true",
                        help="small batches and short boxes (< 3 min on a 2-core CPU); "
                             "options given explicitly still win")
    parser.add_argument("--render-only", action="store_true",
                        help="only turn OUT/rows.jsonl into summary.json, table.md, scaling.png")
    parser.add_argument("--compare", nargs="*", default=None,
                        help="rows folders whose curves join the plot (default: every sibling "
                             "folder of OUT with a rows.jsonl)")
    parser.add_argument("--markdown", default=None,
                        help="also splice the table into this Markdown file's "
                             "<!-- device-NAME:begin/end --> block (NAME: OUT's folder name)")
    parser.add_argument("--overwrite", action="store_true",
                        help="start afresh in an OUT that already holds rows.jsonl")
    parser.add_argument("--device", default=None, help="JAX platform (cpu, gpu; default JAX's)")
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=SECTIONS)
    parser.add_argument("--presets", nargs="+", default=list(FAMILIES))
    parser.add_argument("--references", nargs="+", default=list(REFERENCES),
                        help="gymnax env ids measured as references")
    parser.add_argument("--batches", nargs="+", type=int, help="batch sizes, ascending")
    parser.add_argument("--target-steps", type=int, help="env steps per timed run (about)")
    parser.add_argument("--min-steps", type=int, help="shortest scan per run")
    parser.add_argument("--max-steps", type=int, help="longest scan per run")
    parser.add_argument("--repeats", type=int, help="timed runs per cell (median)")
    for section in SECTIONS:
        parser.add_argument(f"--box-{section.replace('_', '-')}", type=float,
                            dest=f"box_{section}", help=f"time box (s) of the {section} section")
    parser.add_argument("--budget-s", type=float, dest="budget_s",
                        help="the whole run's measuring budget (s); sections stop inside it")
    parser.add_argument("--train-envs", nargs="+", type=int, help="env counts of training cells")
    parser.add_argument("--train-steps", type=int, help="rollout length of training cells")
    parser.add_argument("--train-updates", type=int, help="timed PPO updates per training cell")
    parser.add_argument("--train-epochs", type=int)
    parser.add_argument("--train-minibatches", type=int)
    parser.add_argument("--sweep-envs", type=int, help="envs per sweep member")
    parser.add_argument("--sweep-steps", type=int)
    parser.add_argument("--sweep-updates", type=int)
    args = parser.parse_args(argv)
    for key, value in {**DEFAULTS, **(QUICK if args.quick else {})}.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    unknown = [p for p in args.presets if p not in plume_jax.PRESETS]
    if unknown:
        parser.error(f"--presets: {unknown[0]!r} is not a preset; one of "
                     f"{', '.join(sorted(plume_jax.PRESETS))}")
    for key in ("batches", "train_envs"):
        values = getattr(args, key)
        if any(v < 1 for v in values) or values != sorted(values):
            parser.error(f"--{key.replace('_', '-')}: {values} must be positive and ascending")
    for key in ("target_steps", "min_steps", "max_steps", "repeats", "train_steps",
                "train_updates", "train_epochs", "train_minibatches", "sweep_envs",
                "sweep_steps", "sweep_updates", "budget_s", *(f"box_{s}" for s in SECTIONS)):
        if getattr(args, key) <= 0:
            parser.error(f"--{key.replace('_', '-')}: {getattr(args, key)} must be positive")
    if args.min_steps > args.max_steps:
        parser.error(f"--min-steps {args.min_steps} must be at most --max-steps "
                     f"{args.max_steps}")
    out = pathlib.Path(args.out)
    if args.render_only and not (out / ROWS).is_file():
        parser.error(f"--render-only: {out / ROWS} does not exist (run the benchmark first)")
    if not args.render_only and (out / ROWS).exists() and not args.overwrite:
        parser.error(f"--out: {out / ROWS} exists already; give a new folder or --overwrite")
    for folder in args.compare or []:
        if not (pathlib.Path(folder) / ROWS).is_file():
            parser.error(f"--compare: {pathlib.Path(folder) / ROWS} does not exist")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out = pathlib.Path(args.out)
    if not args.render_only:
        measure_all(args, out)
    render(out, None if args.compare is None else [pathlib.Path(p) for p in args.compare],
           args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
