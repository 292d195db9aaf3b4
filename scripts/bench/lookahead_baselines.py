#!/usr/bin/env python
"""How good is the look-ahead's starting point? Paired search times of
space-aware infotaxis and of the model look-ahead that ``lookahead_vi``
starts from (its network's correction is 0 before training).

``lookahead_vi`` (``plume_jax.train.algorithms.lookahead``) acts by
``argmin_a [1 + Σ_h P(h | b, a) V(b'_{a,h})]`` with ``V`` = network output +
baseline, the baseline being the search-time estimate ``E = D + 2^(H-1) -
1/2`` compressed to ``K ln(1 + E/K)`` (``algo.baseline_scale`` = ``K``; 0 for
``E`` itself). Before any training that is a hand-made policy; this script
runs it with ``V`` = the baseline alone, for each ``K`` given, looking
``--depth`` moves ahead (2 = expectimax over two moves and their readings,
144 leaves per decision), next to space-aware infotaxis on the same preset
and seed. The belief sensor draws exactly the hits of the bare hits sensor,
so the runs see the same sources and, while their moves agree, the same
readings: the per-search differences are paired.

Usage::

    python scripts/bench/lookahead_baselines.py --searches 2000 --seed 5 --scales 0 3.3 8
    python scripts/bench/lookahead_baselines.py --searches 1000 --seed 5 --scales 3.3 --depth 2

Prints one line per policy (found, mean ± SE, median, p90 of the steps of
the searches that found the source) and the paired difference from
space-aware infotaxis (mean ± SE over searches both finished); ``--out``
writes the same as JSON. docs/infotaxis.md quotes its results.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: The shipped learned-searcher config: its env (the preset with the belief
#: sensor over the preset's own hits sensor and law) is the one ``lookahead_vi``
#: trains on; space-aware infotaxis runs on the bare preset ``env.id``.
CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / \
    "train_poisson_iso19x19_belief.yaml"


@dataclasses.dataclass(frozen=True, eq=False)
class BaselineLookahead:
    """The look-ahead with ``V`` = the compressed search-time estimate
    (``scale`` ``K``, steps), ``depth`` moves deep; a functional policy
    (``init``, ``act``) over the belief sensor's observation f32[D]."""

    image_shape: tuple[int, int, int]
    likelihood: np.ndarray
    move_deltas: np.ndarray
    move_ids: np.ndarray
    scale: float
    depth: int

    @classmethod
    def for_env(cls, env: Any, scale: float, depth: int) -> "BaselineLookahead":
        from plume_jax.actions.discrete_grid import grid_moves

        move_ids, move_deltas = grid_moves(env.action_names, env.action_ids,
                                           int(env.settings["actions"].get("step_size", 1)))
        sensor = env.sensor
        return cls((sensor.channels,) + tuple(sensor.image_shape),
                   np.asarray(sensor.likelihood(), np.float32),
                   np.asarray(move_deltas, np.int32), np.asarray(move_ids, np.int32),
                   float(scale), int(depth))

    def __hash__(self) -> int:
        return id(self)

    def scores(self, obs: jax.Array, depth: int) -> jax.Array:
        """f32[M]: expected steps after each move, +inf off the grid."""
        from agents.trained import lookahead_successors
        from plume_jax.plumes.poisson_posterior import compressed_estimate

        succ, estimate, mass, valid = lookahead_successors(
            self.image_shape, self.likelihood, self.move_deltas, obs)
        value = compressed_estimate(estimate, self.scale)
        if depth > 1:
            deeper = jax.vmap(lambda o: jnp.min(self.scores(o, depth - 1)))(succ)
            value = jnp.where(jnp.isfinite(deeper), deeper, value)
        q = 1.0 + jnp.sum(mass * value.reshape(mass.shape), axis=-1)
        return jnp.where(valid, q, jnp.inf)

    def init(self, key: jax.Array) -> jax.Array:
        return jnp.zeros((), jnp.int32)

    def act(self, carry: jax.Array, obs: jax.Array, key: jax.Array):
        return jnp.asarray(self.move_ids)[jnp.argmin(self.scores(obs, self.depth))], carry


def run(env: Any, params: Any, policy: Any, searches: int, seed: int) -> dict[str, Any]:
    """Every search to its end (``until_done``) at the env's own horizon."""
    from plume_jax.evaluate.rollout import rollout

    horizon = int(env.settings["max_steps"])
    fn = jax.jit(lambda k: rollout(env, params, policy, k, searches, horizon, until_done=True))
    start = time.perf_counter()
    result = jax.block_until_ready(fn(jax.random.key(seed)))
    found = np.asarray(result.success)
    steps = np.asarray(result.episode_length)
    ok = steps[found]
    return {"found": int(found.sum()), "searches": searches,
            "mean": float(ok.mean()), "se": float(ok.std(ddof=1) / np.sqrt(ok.size)),
            "median": float(np.median(ok)), "p90": float(np.percentile(ok, 90)),
            "seconds": time.perf_counter() - start, "_steps": steps, "_found": found}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--searches", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=5,
                        help="not the scenarios' seed 0, which is kept for the comparison")
    parser.add_argument("--scales", type=float, nargs="+", default=[0.0, 3.3, 8.0],
                        help="K values (steps); 0 = the uncompressed estimate")
    parser.add_argument("--depth", type=int, default=1, choices=(1, 2))
    parser.add_argument("--out", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    if args.searches < 2:
        parser.error(f"--searches must be at least 2 (got {args.searches})")
    if any(not np.isfinite(k) or k < 0 for k in args.scales):
        parser.error(f"--scales must be finite and >= 0 (got {args.scales})")
    if args.out is not None:  # checked before minutes of searches, not after
        if args.out.is_dir():
            parser.error(f"--out must be a file path; {args.out} is a folder")
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--out {args.out}: cannot create its folder ({exc})")

    import plume_jax
    from agents import make_agent
    from plume_jax.train.config import load_train_config

    config = load_train_config(CONFIG)
    preset = config.env["id"]
    env, params = plume_jax.make(preset)
    results = {"space_aware_infotaxis": run(env, params, make_agent("space_aware_infotaxis", env),
                                            args.searches, args.seed)}
    belief_env, belief_params = config.make_env()
    for k in args.scales:
        policy = BaselineLookahead.for_env(belief_env, k, args.depth)
        results[f"lookahead depth {args.depth}, K = {k:g}"] = run(
            belief_env, belief_params, policy, args.searches, args.seed)
    ref = results["space_aware_infotaxis"]
    report = {"preset": preset, "seed": args.seed, "searches": args.searches,
              "depth": args.depth, "policies": {}}
    for name, r in results.items():
        line = (f"{name:32s} found {r['found']}/{r['searches']}  mean {r['mean']:.3f} ± "
                f"{r['se']:.3f}  median {r['median']:g}  p90 {r['p90']:.1f}  "
                f"({r['seconds']:.0f} s)")
        entry = {k: v for k, v in r.items() if not k.startswith("_")}
        if r is not ref:
            both = r["_found"] & ref["_found"]
            diff = (r["_steps"] - ref["_steps"])[both].astype(np.float64)
            entry["paired_difference"] = float(diff.mean())
            entry["paired_se"] = float(diff.std(ddof=1) / np.sqrt(diff.size))
            line += f"  paired - SAI {diff.mean():+.3f} ± {entry['paired_se']:.3f}"
        report["policies"][name] = entry
        print(line, flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
