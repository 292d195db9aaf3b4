"""A movie-plume seed sweep with its env params stacked per member (as
sweeps did up to 0.1.x) against shared ones (leaves no member varies kept
once, :mod:`plume_jax.train.members`): env steps/s, compile time, the
env params' bytes and the process's peak memory, at 1, 8 and 16 members.

Each (mode, members) point runs in its own process, so its peak resident
memory (``ru_maxrss``; on an accelerator also the device's
``peak_bytes_in_use``) is its own; the points alternate between the modes
so that a change of load on a shared machine touches both alike. The
"stacked" mode is today's code with the member stacking of 0.1.x put back
(every leaf stacked), so the two differ in that alone::

    python scripts/bench/sweep_sharing.py --out benchmarks/sweep_sharing.json
    python scripts/bench/sweep_sharing.py --members 1 2 --updates 1  # a quick look

The sweep is the ``movie-gru`` zoo entry's config (the bundled movie,
160 x 64 x 128 float32 frames; 64 envs x 128 steps an update) with
``run.seed`` swept, trained for ``--updates`` updates after its compile.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import time
from typing import Any

try:
    from scripts.bench.harness import ROOT, load_rounded, machine_info, write_json
except ImportError:  # run as a file: scripts/ is on sys.path
    from harness import ROOT, load_rounded, machine_info, write_json

CONFIG = ROOT / "configs" / "zoo" / "movie-gru" / "1" / "config.yaml"
MODES = ("stacked", "shared")


def _stack_every_leaf(trees: list[Any]) -> Any:
    """0.1.x's member stacking: every leaf gets a member axis."""
    import jax
    import jax.numpy as jnp

    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *trees)


def measure(mode: str, members: int, updates: int, config: pathlib.Path) -> dict[str, Any]:
    """Train a ``members``-seed sweep of ``config`` for ``updates`` updates
    in this process, with env params ``mode`` (``stacked`` / ``shared``)."""
    import jax

    from plume_jax.train import loop as driver
    from plume_jax.train.config import read_yaml
    from plume_jax.train.sweep import run_sweep, setup, sweep_config

    if mode == "stacked":
        driver.stack_members = _stack_every_leaf
    base = read_yaml(config)
    probe = sweep_config({"base": base, "grid": {"run.seed": [0]}})
    per_update = probe.base.steps_per_update
    base["algo"]["total_steps"] = updates * per_update
    base.setdefault("eval", {})["every"] = None
    sweep = sweep_config({"base": base, "grid": {"run.seed": list(range(members))}})
    env_bytes = sum(int(getattr(x, "nbytes", 0))
                    for x in jax.tree.leaves(setup(sweep).env_params))
    t0 = time.perf_counter()
    result = run_sweep(sweep, None, progress=False, evaluate_members=False)
    wall = time.perf_counter() - t0
    s = result.summary
    steps = members * updates * per_update
    stats = jax.devices()[0].memory_stats() or {}
    return {"mode": mode, "members": members, "updates": updates,
            "env_steps": steps, "compile_seconds": round(s["compile_seconds"], 2),
            "train_seconds": round(s["train_seconds"], 3),
            "env_steps_per_second": round(steps / s["train_seconds"]),
            "wall_seconds": round(wall, 2), "env_params_mib": round(env_bytes / 2**20, 2),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "device_peak_mib": (round(stats["peak_bytes_in_use"] / 2**20, 1)
                                if "peak_bytes_in_use" in stats else None)}


def _child(mode: str, members: int, updates: int, config: pathlib.Path) -> dict[str, Any]:
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--child", mode,
           "--members", str(members), "--updates", str(updates), "--config", str(config)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"{mode} x {members} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--updates", type=int, default=3,
                        help="updates each point trains after its compile (default 3)")
    parser.add_argument("--config", type=pathlib.Path, default=CONFIG)
    parser.add_argument("--out", type=pathlib.Path, default=None, help="write the JSON here")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.members[0], args.updates, args.config)))
        return 0
    rows, before = [], load_rounded()
    for members in args.members:
        for mode in MODES:
            row = _child(mode, members, args.updates, args.config)
            rows.append(row)
            print(f"{mode:>7} x {members:>2}: {row['env_steps_per_second']:>9,} env steps/s, "
                  f"compile {row['compile_seconds']:.1f} s, env params "
                  f"{row['env_params_mib']:.1f} MiB, peak RSS {row['peak_rss_mib']:.0f} MiB",
                  flush=True)
    payload = {"benchmark": "sweep env params stacked per member vs shared",
               "config": str(args.config.relative_to(ROOT) if args.config.is_relative_to(ROOT)
                             else args.config),
               "machine": machine_info("date", "platform", "cpu_count", "cpu_model",
                                       ("device", "device_str"), "jax", "git_commit"),
               "load_before": before, "load_after": load_rounded(), "rows": rows}
    if args.out is not None:
        write_json(payload, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
