"""The adapters' step next to the env's own jitted step: ``--adapters`` of
``scripts/bench/throughput.py`` (kept in this module so that the two scripts'
other forms stay independent).

For each preset and batch size, env steps per second of

- ``jit step_batch``: one jitted ``lax.scan`` of ``env.step_batch`` (random
  actions drawn on the device; :func:`scripts.bench.throughput.build`), the env's
  own cost with no host in the loop;
- ``PlumeVectorEnv.step`` and ``PlumeSB3VecEnv.step`` (SB3's
  ``step_async`` + ``step_wait``), one call per batch step with NumPy
  actions from the host, as a user's loop makes them; each twice: as
  shipped (only the envs that ended are reset) and with the adapters'
  reference path, the speculative reset of every env on every step
  (``BatchCore.compiled_step(..., speculative=True)``, what the adapters did
  before), so the ratio is the reset-only-what-ended path's gain;
- the PettingZoo ``PlumeParallelEnv.step`` over the preset made with
  ``num_agents`` agents in one env (a dict of actions per step; agent-steps
  per second), next to the jitted ``vmap(env.step)`` of that one
  multi-agent env. It has no speculative reset to compare (its episode ends
  with its agent list; the loop calls ``reset`` then, and that is timed).

The cells of one preset and size are timed in interleaved rounds (each once
per round, median of the rounds). ``env share`` = the jitted step's time per
batch step ÷ the adapter's: what is left (1 − share) is the host
round-trip — argument checks, the transfer of actions in and of
observations, rewards, flags and infos out, Python bookkeeping.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any, Callable, Sequence

import numpy as np

if __package__:  # imported as scripts.bench.adapters
    from scripts.bench.harness import time_run
    from scripts.bench.programs import build
else:  # imported from a script run from this folder
    from harness import time_run
    from programs import build

#: Presets measured by default.
ADAPTER_PRESETS = ("PlumeNav-Gaussian-v0", "PlumeNav-Filament-v0")


def _adapter_loop(step: Callable[[np.ndarray], Any], actions: np.ndarray) -> Callable[[], float]:
    """A timer: seconds for one call of ``step`` per row of ``actions``."""
    def timed() -> float:
        t0 = time.perf_counter()
        for a in actions:
            step(a)
        return time.perf_counter() - t0
    return timed


def _speculative(core: Any) -> None:
    """Make a ``BatchCore`` step through its reference path (every env's
    reset computed on every step and selected)."""
    core.compiled_step = functools.partial(type(core).compiled_step, core, speculative=True)


def vector_cells(env: Any, params: Any, num_envs: int, num_steps: int, seed: int = 0
                 ) -> dict[tuple[str, str], Callable[[], float]]:
    """Timers of ``PlumeVectorEnv.step`` and ``PlumeSB3VecEnv.step`` (as
    shipped and speculative) on ``num_steps`` host-drawn random actions per
    round, each adapter reset and stepped once (its compile) before."""
    from plume_jax.gym import PlumeSB3VecEnv, PlumeVectorEnv

    cells = {}
    for path in ("ended only", "speculative"):
        vec = PlumeVectorEnv(env, params, num_envs=num_envs)
        sb3 = PlumeSB3VecEnv(env, params, num_envs=num_envs)
        if path == "speculative":
            _speculative(vec._core)
            _speculative(sb3._core)
        n = vec.single_action_space.n
        actions = np.random.default_rng(seed).integers(0, n, (num_steps, num_envs))
        vec.reset(seed=seed)
        sb3.seed(seed)
        sb3.reset()
        vec.step(actions[0])
        sb3.step(actions[0])
        cells[("PlumeVectorEnv.step", path)] = _adapter_loop(vec.step, actions)
        cells[("PlumeSB3VecEnv.step", path)] = _adapter_loop(sb3.step, actions)
    return cells


def pettingzoo_cell(preset: str, num_agents: int, num_steps: int, seed: int = 0
                    ) -> Callable[[], float]:
    """Timer of ``PlumeParallelEnv.step`` with ``num_agents`` agents (a dict
    of every live agent's random action per step; ``reset`` when the agent
    list empties)."""
    import plume_jax
    from plume_jax.gym.pettingzoo_env import PlumeParallelEnv

    env, params = plume_jax.make(preset, num_agents=num_agents)
    par = PlumeParallelEnv(env, params)
    n = par.action_space(par.possible_agents[0]).n
    actions = np.random.default_rng(seed).integers(0, n, (num_steps, num_agents))
    par.reset(seed=seed)
    par.step({a: 0 for a in par.agents})

    def timed() -> float:
        t0 = time.perf_counter()
        for row in actions:
            if not par.agents:
                par.reset()
            par.step({a: row[i] for i, a in enumerate(par.agents)})
        return time.perf_counter() - t0
    return timed


def jit_cell(env: Any, params: Any, num_envs: int, num_steps: int, form: str
             ) -> tuple[Callable[[], float], float]:
    """Timer of the jitted scan of ``form`` (see
    :func:`scripts.bench.programs.scan_program`) and its compile seconds."""
    compiled, state, figures = build(env, params, num_envs, num_steps, form)
    seeds = iter(range(1, 1 << 30))
    return (lambda: time_run(compiled, state, next(seeds))), figures["compile_seconds"]


def interleave(cells: dict[Any, Callable[[], float]], rounds: int) -> dict[Any, float]:
    """Median seconds per cell over ``rounds`` rounds, each cell once per round."""
    times: dict[Any, list[float]] = {k: [] for k in cells}
    for _ in range(rounds):
        for k, timed in cells.items():
            times[k].append(timed())
    return {k: statistics.median(v) for k, v in times.items()}


def measure_adapters(presets: Sequence[str], batch_sizes: Sequence[int],
                     agent_counts: Sequence[int], num_steps: int, rounds: int,
                     log: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    """Rows ``{env, program, path, num_envs | num_agents, steps_per_second,
    seconds_per_step, env_share}`` for every preset and size (see the
    module docstring)."""
    import plume_jax

    rows = []
    for preset in presets:
        env, params = plume_jax.make(preset)
        for n in batch_sizes:
            timer, compile_s = jit_cell(env, params, n, num_steps, "step_batch")
            cells = {("jit step_batch", "ended only"): timer,
                     **vector_cells(env, params, n, num_steps)}
            medians = interleave(cells, rounds)
            env_s = medians[("jit step_batch", "ended only")] / num_steps
            for (program, path), seconds in medians.items():
                per_step = seconds / num_steps
                rows.append({"env": preset, "program": program, "path": path, "num_envs": n,
                             "steps_per_second": n / per_step, "seconds_per_step": per_step,
                             "env_share": env_s / per_step,
                             **({"compile_seconds": compile_s}
                                if program == "jit step_batch" else {})})
            log(f"adapters: {preset} at {n} envs done")
        for a in agent_counts:
            menv, mparams = plume_jax.make(preset, num_agents=a)
            timer, compile_s = jit_cell(menv, mparams, 1, num_steps, "step")
            medians = interleave({"jit": timer, "pz": pettingzoo_cell(preset, a, num_steps)},
                                 rounds)
            env_s = medians["jit"] / num_steps
            for key, program in (("jit", "jit vmap(step), 1 env"),
                                 ("pz", "PlumeParallelEnv.step")):
                per_step = medians[key] / num_steps
                rows.append({"env": preset, "program": program, "path": "no reset speculated",
                             "num_agents": a, "steps_per_second": a / per_step,
                             "seconds_per_step": per_step, "env_share": env_s / per_step,
                             **({"compile_seconds": compile_s} if key == "jit" else {})})
            log(f"adapters: {preset} with {a} agents (PettingZoo) done")
    return rows


def render_adapters(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown: per env and batch size, each program's steps/s (M = 1e6, k =
    1e3), time per batch step, the env's share of it, and the speculative
    path's figure with the shipped/speculative ratio where there is one."""
    def rate(x: float) -> str:
        return f"{x / 1e6:.3f} M" if x >= 1e5 else f"{x / 1e3:.1f} k"

    spec = {(r["env"], r["program"], r.get("num_envs")): r for r in rows
            if r["path"] == "speculative"}
    lines = ["| env | program | batch | steps/s | ms per batch step | env share | "
             "speculative reset: steps/s | shipped ÷ speculative |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["path"] == "speculative":
            continue
        batch = f"{r['num_envs']}" if "num_envs" in r else f"{r['num_agents']} agents"
        s = spec.get((r["env"], r["program"], r.get("num_envs")))
        lines.append(
            f"| `{r['env']}` | `{r['program']}` | {batch} | {rate(r['steps_per_second'])} | "
            f"{1e3 * r['seconds_per_step']:.3f} | {100 * r['env_share']:.0f}% | "
            + (f"{rate(s['steps_per_second'])} | "
               f"{r['steps_per_second'] / s['steps_per_second']:.2f}× |" if s else "— | — |"))
    return "\n".join(lines)
