#!/usr/bin/env python
"""Throughput benchmark of the functional core.

Measures env steps per second of one jitted ``lax.scan`` of vmapped
``env.step`` (random actions, auto-reset on) at several batch sizes, the
compile time of that program and its memory per env, for each preset and,
as a reference measured in the same run with the same harness, gymnax's
CartPole-v1. The programs of one batch size are built first and then timed
in interleaved rounds (each program once per round, median of the rounds),
so that load changing during the run hits them alike. Each code tree runs
in its own worker process, which is how ``--before`` measures an older
commit's code against this one in the same run. Results are saved as JSON
(figures, batch sizes, machine, device, versions, load); render them into
BENCHMARKS.md with ``scripts/bench/render_markdown.py``.

Usage::

    python scripts/bench/throughput.py                       # all presets, default sizes
    python scripts/bench/throughput.py --presets PlumeNav-Gaussian-v0 --batch-sizes 1 64 --steps 200
    python scripts/bench/throughput.py --device gpu          # the same tables on an accelerator
    # before/after in one run: the old code from a source tree of its commit
    git archive REV | tar -x -C /tmp/before
    python scripts/bench/throughput.py --before /tmp/before --forms step step_batch
    # what the auto-reset costs: vmap(env.step), vmap(env.step_speculative),
    # env.step_batch and vmap(env.step_env) (no reset)
    python scripts/bench/throughput.py --reset-cost        # -> benchmarks/reset_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from typing import Any

import jax

if __package__:  # imported as scripts.bench.throughput
    from scripts.bench.harness import (machine_info, time_run, time_run_cpu,  # noqa: F401
                                       write_json)
    from scripts.bench.programs import (SHARED_PLUME_FORM, STEP_FORMS, build,  # noqa: F401
                                        scan_program, shared_plume_form)
else:  # run as `python scripts/bench/throughput.py` (this folder is sys.path[0]; sys.path is
    # left alone, so `--before TREE` workers import that tree's plume_jax)
    from harness import machine_info, time_run, time_run_cpu, write_json  # noqa: F401
    from programs import (SHARED_PLUME_FORM, STEP_FORMS, build,  # noqa: F401
                                scan_program, shared_plume_form)

# re-exported: tests and older callers import these from here
__all__ = ["SHARED_PLUME_FORM", "STEP_FORMS", "build", "scan_program", "shared_plume_form",
           "time_run", "time_run_cpu", "machine", "save_json", "main"]


def measure(env: Any, params: Any, num_envs: int, num_steps: int, repeats: int,
            form: str = "step") -> dict[str, Any]:
    """One program alone: its :func:`build` figures and the median of
    ``repeats`` timed runs."""
    compiled, state, figures = build(env, params, num_envs, num_steps, form)
    return summarise(figures, [time_run_cpu(compiled, state, i + 1) for i in range(repeats)])


def summarise(figures: dict[str, Any], runs: list[tuple[float, float]]) -> dict[str, Any]:
    """``figures`` with the runs' ``(wall, cpu)`` seconds and their medians
    as steps per second and steps per CPU-second."""
    times, cpu_times = [r[0] for r in runs], [r[1] for r in runs]
    median = statistics.median(times)
    steps = figures["num_envs"] * figures["num_steps"]
    return {**figures, "run_seconds": times, "median_run_seconds": median,
            "steps_per_second": steps / median, "cpu_seconds": cpu_times,
            "steps_per_cpu_second": steps / max(statistics.median(cpu_times), 1e-9)}


# -- programs of one or two code trees, timed interleaved --------------------------

REFERENCE = "gymnax/CartPole-v1 (reference)"


def reference_name(gymnax_id: str) -> str:
    """The row label of a gymnax env measured as a reference, e.g.
    :data:`REFERENCE` for ``"CartPole-v1"``."""
    return f"gymnax/{gymnax_id} (reference)"


def make_env(name: str, num_agents: int | None = None):
    """``(env, params)`` of a preset id, or of a gymnax env named as
    :func:`reference_name` names it (:data:`REFERENCE`: gymnax's CartPole)."""
    if name.startswith("gymnax/") and name.endswith(" (reference)"):
        import gymnax

        return gymnax.make(name[len("gymnax/"):-len(" (reference)")])
    import plume_jax

    return plume_jax.make(name, **({"num_agents": num_agents} if num_agents else {}))


def serve(device: str | None) -> int:
    """Worker loop (``--serve``): builds and times programs of the plume_jax
    on this process's path, one JSON request per stdin line, one JSON reply
    per stdout line. Requests: ``{"op": "build", "env", "form", "num_envs",
    "num_steps", "num_agents"}`` -> figures (or ``{"skip": why}``);
    ``{"op": "run", "id", "seed"}`` -> ``{"seconds"}``; ``{"op": "clear"}``;
    ``{"op": "machine"}``."""
    import sys

    programs = []
    with jax.default_device(jax.devices(device)[0] if device else jax.devices()[0]):
        for line in sys.stdin:
            req = json.loads(line)
            if req["op"] == "build":
                env, params = make_env(req["env"], req.get("num_agents"))
                form = req["form"]
                if form not in ("step", SHARED_PLUME_FORM) and not hasattr(env, form):
                    reply = {"skip": f"this code has no {form}"}
                else:
                    compiled, state, figures = build(env, params, req["num_envs"],
                                                     req["num_steps"], form,
                                                     req.get("agents_per_plume", 1))
                    programs.append((compiled, state))
                    reply = {"id": len(programs) - 1, **figures}
            elif req["op"] == "run":
                compiled, state = programs[req["id"]]
                reply = {"seconds": time_run_cpu(compiled, state, req["seed"])}
            elif req["op"] == "clear":
                programs.clear()
                reply = {}
            else:
                reply = machine()
            print(json.dumps(reply), flush=True)
    return 0


class Worker:
    """A ``--serve`` process whose ``plume_jax`` is imported from ``tree``
    (a source tree, e.g. an older commit's ``git archive``), or the one this
    Python imports when ``tree`` is None."""

    def __init__(self, tree: str | None, device: str | None):
        import subprocess
        import sys

        env = dict(os.environ)
        if tree:
            env["PYTHONPATH"] = os.pathsep.join(
                [os.path.abspath(tree)] + [p for p in [env.get("PYTHONPATH")] if p])
        cmd = [sys.executable, os.path.abspath(__file__), "--serve"]
        if device:
            cmd += ["--device", device]
        self.process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env)

    def ask(self, **request: Any) -> dict[str, Any]:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark worker died on {request}")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def measure_interleaved(cells: list[tuple[Worker, dict[str, Any], dict[str, Any]]],
                        repeats: int) -> list[dict[str, Any]]:
    """Build every program of ``cells`` (``(worker, request, labels)``), then
    time ``repeats`` rounds, each running every program once in turn, so
    that load changes during the run hit every program alike. Returns one
    row per program (labels, figures, times, median steps/s)."""
    built = []
    for worker, request, labels in cells:
        reply = worker.ask(op="build", **request)
        if "skip" not in reply:
            built.append((worker, reply, labels))
    times: list[list[tuple[float, float]]] = [[] for _ in built]
    for i in range(repeats):
        for j, (worker, reply, _) in enumerate(built):
            times[j].append(tuple(worker.ask(op="run", id=reply["id"], seed=i + 1)["seconds"]))
    for worker in {id(w): w for w, _, _ in built}.values():
        worker.ask(op="clear")
    return [{**labels, **summarise({k: v for k, v in reply.items() if k != "id"}, t)}
            for (_, reply, labels), t in zip(built, times)]


def shared_plume_cells(form: str, agents_per_plume: list[int]) -> list[dict[str, Any]]:
    """The extra request fields of one form's cells: one per
    ``--agents-per-plume`` value for ``step_batch_shared``, else none."""
    if form != SHARED_PLUME_FORM:
        return [{}]
    return [{"agents_per_plume": k} for k in agents_per_plume]


def check_shared_plume_cells(presets: list[str], batch_sizes: list[int],
                             agents_per_plume: list[int]) -> None:
    """``ValidationError`` (naming ``agents_per_plume``) before any worker
    starts if a ``--agents-per-plume`` value does not fit a preset (a plume
    that cannot be shared) or a batch size (not a divisor)."""
    import plume_jax
    from plume_jax.envs.shared_plume import check_agents_per_plume

    for name in presets:
        env, _ = plume_jax.make(name)
        for n in batch_sizes:
            for k in agents_per_plume:
                check_agents_per_plume(k, env, n)


def machine() -> dict[str, Any]:
    return machine_info("date", "platform", "processor", "cpu_count", "device_platform",
                        "device_kind", "device_count", "python", "jax", "version:gymnax",
                        "plume_jax", "load_average_1_5_15min")


def main(argv: list[str] | None = None) -> int:
    import plume_jax

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    single = sorted(p for p in plume_jax.PRESETS if not plume_jax.envs.presets.is_multi_agent(p))
    parser.add_argument("--presets", nargs="*", default=single)
    parser.add_argument("--batch-sizes", nargs="*", type=int, default=[1, 64, 1024, 4096])
    parser.add_argument("--steps", type=int, default=1000, help="scan length per run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--forms", nargs="*", choices=STEP_FORMS, default=None,
                        help="step forms to measure (default: step; with --reset-cost: all)")
    parser.add_argument("--agents-per-plume", nargs="*", type=int, default=[4],
                        help="agents per plume realisation of the step_batch_shared form "
                             "(one row per value)")
    parser.add_argument("--no-reference", action="store_true", help="skip gymnax CartPole")
    parser.add_argument("--device", default=None,
                        help="JAX platform to run on (cpu, gpu, tpu; default: JAX's default)")
    parser.add_argument("--before", default=None, metavar="TREE",
                        help="also measure the plume_jax of this source tree (e.g. an older "
                             "commit: git archive REV | tar -x -C TREE), its programs "
                             "interleaved with this code's, rows labelled code=before/after")
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
                        help="measure each preset and batch with every step form: "
                             "vmap(env.step), vmap(env.step_speculative), env.step_batch and "
                             "vmap(env.step_env) (the transition without any reset; episodes "
                             "then run on past their end), single-agent presets only")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--adapters", action="store_true",
                        help="the vector, SB3 and PettingZoo adapters' step (host actions) "
                        "next to the jitted step_batch, with the speculative reset's figure "
                        "(scripts/bench/adapters.py; --adapter-* options; "
                        "-> benchmarks/adapters.json)")
    parser.add_argument("--adapter-presets", nargs="*", default=None,
                        help="with --adapters (default: Gaussian and Filament)")
    parser.add_argument("--adapter-steps", type=int, default=100,
                        help="with --adapters: batch steps per timed round")
    parser.add_argument("--adapter-agents", nargs="*", type=int, default=[2, 64, 1024],
                        help="with --adapters: agent counts (>= 2) of the PettingZoo rows")
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.device)
    if args.adapters:
        return run_adapters(args)
    if args.out is None:
        args.out = os.path.join("benchmarks",
                                "reset_cost.json" if args.reset_cost else "core_throughput.json")
    forms = args.forms or (STEP_FORMS if args.reset_cost else ("step",))
    if SHARED_PLUME_FORM in forms:
        from plume_jax.core.errors import ValidationError

        try:
            check_shared_plume_cells(args.presets, args.batch_sizes, args.agents_per_plume)
        except ValidationError as error:
            parser.error(f"--agents-per-plume: {error}")

    codes = {"after": Worker(None, args.device)}
    if args.before:
        codes = {"before": Worker(args.before, args.device), **codes}
    current = codes["after"]
    label = (lambda code: {"code": code}) if args.before else (lambda code: {})

    def report(row: dict[str, Any], what: str) -> None:
        memory = row["state_bytes_per_env"] + row.get("temp_bytes_per_env", 0.0)
        print(f"{row.get('code', ''):6s} {what}: {row['steps_per_second']:14,.0f} steps/s, "
              f"{row['steps_per_cpu_second']:14,.0f} per CPU-second (medians of "
              f"{args.repeats}), compile {row['compile_seconds']:.2f} s, "
              f"{memory / 1024:.1f} KiB/env", flush=True)

    results = []
    for n in args.batch_sizes:
        cells = [(worker, {"env": name, "form": form, "num_envs": n, "num_steps": args.steps,
                           **shared}, {"env": name, "step": form, **shared, **label(code)})
                 for name in args.presets for form in forms
                 for shared in shared_plume_cells(form, args.agents_per_plume)
                 for code, worker in codes.items()]
        if not args.no_reference:
            cells.append((current, {"env": REFERENCE, "form": "step", "num_envs": n,
                                    "num_steps": args.steps},
                          {"env": REFERENCE, "step": "step", **label("after")}))
        for row in measure_interleaved(cells, args.repeats):
            results.append(row)
            shared = f" k={row['agents_per_plume']}" if "agents_per_plume" in row else ""
            report(row, f"{row['env']:34s} batch {n:5d} {row['step'] + shared:22s}")

    multi_agent = []
    if not (args.skip_multi_agent or args.reset_cost):
        for a in args.agents:
            for n in args.agent_batch_sizes:
                cells = [(worker, {"env": args.multi_agent_preset, "form": "step",
                                   "num_envs": n, "num_steps": args.agent_steps,
                                   "num_agents": a},
                          {"env": args.multi_agent_preset, "num_agents": a, **label(code)})
                         for code, worker in codes.items()]
                for row in measure_interleaved(cells, args.repeats):
                    row["agent_steps_per_second"] = row["steps_per_second"] * a
                    multi_agent.append(row)
                    report(row, f"{args.multi_agent_preset} agents {a:3d} batch {n:5d}")

    payload = {"benchmark": "reset_cost" if args.reset_cost else "core_throughput",
               "machine": {**current.ask(op="machine"),
                           "load_average_1_5_15min": list(os.getloadavg())},
               "settings": {"steps": args.steps, "repeats": args.repeats,
                            "actions": "uniform random", "step_forms": list(forms),
                            "interleaved": True, "before": args.before,
                            "agents_per_plume": args.agents_per_plume,
                            "multi_agent_steps": args.agent_steps},
               "results": results, "multi_agent": multi_agent}
    for worker in codes.values():
        worker.close()
    save_json(payload, args.out)
    return 0


def run_adapters(args: argparse.Namespace) -> int:
    """``--adapters``: see :mod:`scripts.bench.adapters`; in this
    process (``--device`` is passed on through JAX_PLATFORMS)."""
    import sys

    if __package__:
        from scripts.bench.adapters import (ADAPTER_PRESETS, measure_adapters,
                                                render_adapters)
    else:  # run as `python scripts/bench/throughput.py`
        from adapters import ADAPTER_PRESETS, measure_adapters, render_adapters

    if args.device:
        jax.config.update("jax_platforms", args.device)
    rows = measure_adapters(args.adapter_presets or ADAPTER_PRESETS, args.batch_sizes,
                            args.adapter_agents, args.adapter_steps, args.repeats,
                            log=lambda line: print(line, file=sys.stderr, flush=True))
    payload = {"benchmark": "adapters", "machine": machine(),
               "settings": {"steps_per_round": args.adapter_steps, "rounds": args.repeats,
                            "actions": "uniform random (NumPy, from the host)"},
               "results": rows}
    save_json(payload, args.out or os.path.join("benchmarks", "adapters.json"))
    print(render_adapters(rows))
    return 0


def save_json(payload: dict[str, Any], path: str) -> None:
    """Write a benchmark's results (creating the folder) and say where."""
    write_json(payload, path, announce=True)


if __name__ == "__main__":
    raise SystemExit(main())
