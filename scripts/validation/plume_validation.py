#!/usr/bin/env python
"""Long-run statistics of the filament plumes, with standard errors.

For each preset (the plume alone: no agent), ``--runs`` independent runs
(different keys, each warmed up by the plume's own ``init``) of ``--steps``
steps sample the concentration every ``--every`` steps at

- the centreline: 5, 10, ..., 100 cells downwind of the source along the mean
  wind direction: time-mean concentration and *intermittency*, the fraction
  of samples above ``--threshold``;
- four cross-wind transects at 10, 25, 50 and 80 cells downwind, offsets
  -40..40 cells: time-mean profiles, their variance (the plume's mean width
  squared), centre, and in-plane mass flux ``U Σ C̄ dy``.

Every statistic is computed per run; the value reported is the mean over
runs and its standard error the standard deviation over runs / √runs (runs
are independent, so this holds however correlated the samples within a
run are). Results go to a JSON file that ``scripts/docs/plume_figures.py`` draws
and that ``--compare`` checks a later run against (a code change that must
leave the plume's statistics unchanged, e.g. a speed-up, should give
``|z| < 4`` everywhere, ``z`` the difference over its combined standard
error).

Usage::

    # the numbers and figures of docs/plumes.md (over an hour on 2 busy CPU cores)
    python scripts/validation/plume_validation.py --mean-field-every 200
    # measure two presets again into the stored run (same settings)
    python scripts/validation/plume_validation.py --presets PlumeNav-Filament-Gusty-v0 \\
        PlumeNav-Filament-Farrell-v0 --mean-field-every 200 --append
    # one preset, quickly, checked against the stored run
    python scripts/validation/plume_validation.py --presets PlumeNav-Filament-v0 --runs 8 \\
        --steps 4000 --out /tmp/check.json --compare benchmarks/plume_validation.json
    # a preset with overrides, under a name of its own
    python scripts/validation/plume_validation.py --variant Meander-3d PlumeNav-Filament-v0 \\
        '{"plume": {"kernel": "3d"}}' --presets --out /tmp/v.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import plume_jax

if __package__:  # imported as scripts.validation.plume_validation
    from scripts.bench.harness import machine_info
else:  # run as `python scripts/validation/plume_validation.py`: the repository root goes on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from scripts.bench.harness import machine_info

#: Presets measured by default (the figures and numbers of docs/plumes.md).
DEFAULT_PRESETS = ("PlumeNav-Filament-Constant-v0", "PlumeNav-Filament-v0",
                   "PlumeNav-Filament-SwitchMany-v0", "PlumeNav-Filament-Sparse-v0",
                   "PlumeNav-Filament-Gusty-v0", "PlumeNav-Filament-Farrell-v0")
#: Centreline distances downwind of the source, cells.
DISTANCES = np.arange(5.0, 100.01, 5.0)
#: Transect distances downwind of the source, cells.
TRANSECTS = np.array([10.0, 25.0, 50.0, 80.0])
#: Cross-wind offsets of the transect points, cells.
OFFSETS = np.arange(-40.0, 40.01, 1.0)
#: Statistics that ``--compare`` checks.
COMPARED = ("intermittency", "centreline_mean", "profile_variance", "flux")


def sample_points(source: np.ndarray, direction: float) -> np.ndarray:
    """f32[D + T·O, 2]: the centreline points then the transect points
    (row-major over transect, offset), along and across ``direction``."""
    along = np.array([math.cos(direction), math.sin(direction)])
    across = np.array([-along[1], along[0]])
    line = source + DISTANCES[:, None] * along
    grid = source + TRANSECTS[:, None, None] * along + OFFSETS[None, :, None] * across
    return np.concatenate([line, grid.reshape(-1, 2)]).astype(np.float32)


def run_plume(env: Any, params: Any, runs: int, steps: int, every: int, threshold: float,
              seed: int, field_every: int = 0) -> dict[str, np.ndarray]:
    """Per-run time means: ``{"mean": f32[R, P], "above": f32[R, D],
    "field": f32[R, H, W] (when field_every > 0)}`` at :func:`sample_points`."""
    plume, grid, p = env.plume, env.grid, params.plume
    source = np.asarray(p.source, np.float64)
    points = jnp.asarray(sample_points(source, float(p.wind_direction)))
    n_line = DISTANCES.size
    samples = steps // every
    fields = steps // field_every if field_every else 0

    @jax.jit
    def run(key):
        def one(k):
            k_init, k_run = jax.random.split(k)
            state = plume.init(k_init, p)

            def advance(s, kk):
                return plume.advance(kk, s, p), None

            def body(carry, kk):
                s, total, above, field, i = carry
                s, _ = jax.lax.scan(advance, s, jax.random.split(kk, every))
                c = plume.concentration(s, points, grid, p)
                total = total + c
                above = above + (c[:n_line] > threshold)
                if fields:
                    field = jax.lax.cond((i + 1) % (field_every // every) == 0,
                                         lambda f: f + plume.field(s, grid, p), lambda f: f,
                                         field)
                return (s, total, above, field, i + 1), None

            init = (state, jnp.zeros(points.shape[0]), jnp.zeros(n_line),
                    jnp.zeros(grid.shape if fields else ()), 0)
            (_, total, above, field, _), _ = jax.lax.scan(body, init,
                                                          jax.random.split(k_run, samples))
            return total / samples, above / samples, field / max(fields, 1)

        return jax.vmap(one)(jax.random.split(key, runs))

    mean, above, field = (np.asarray(x, np.float64) for x in run(jax.random.key(seed)))
    out = {"mean": mean, "above": above}
    if fields:
        out["field"] = field
    return out


def _mean_se(per_run: np.ndarray) -> dict[str, list]:
    """``{"mean": ..., "se": ...}`` over the first axis (runs)."""
    n = per_run.shape[0]
    se = per_run.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.full(per_run.shape[1:], np.nan)
    return {"mean": per_run.mean(axis=0).tolist(), "se": np.asarray(se).tolist()}


def profile_statistics(profiles: np.ndarray) -> dict[str, np.ndarray]:
    """Per-run centre, variance (cells²) and sum (``Σ C̄ dy``, dy = 1) of
    profiles f[R, T, O] over :data:`OFFSETS`."""
    total = profiles.sum(-1)
    centre = (profiles * OFFSETS).sum(-1) / total
    variance = (profiles * (OFFSETS - centre[..., None]) ** 2).sum(-1) / total
    return {"centre": centre, "variance": variance, "sum": total}


def summarise(env: Any, params: Any, measured: dict[str, np.ndarray]) -> dict[str, Any]:
    """The JSON-able statistics of one preset's runs (means and SEs over runs)."""
    p = params.plume
    n_line = DISTANCES.size
    profiles = measured["mean"][:, n_line:].reshape(-1, TRANSECTS.size, OFFSETS.size)
    stats = profile_statistics(profiles)
    speed = float(p.wind_speed)
    r0, growth, dispersion = float(p.puff_radius), float(p.growth), float(p.dispersion)
    return {
        "distances": DISTANCES.tolist(),
        "intermittency": _mean_se(measured["above"]),
        "centreline_mean": _mean_se(measured["mean"][:, :n_line]),
        "transects": TRANSECTS.tolist(),
        "offsets": OFFSETS.tolist(),
        "profiles": _mean_se(profiles),
        "profile_variance": _mean_se(stats["variance"]),
        "profile_centre": _mean_se(stats["centre"]),
        "flux": _mean_se(speed * stats["sum"]),
        "emission": float(p.release_rate * p.puff_mass),
        "constant_wind_variance": (r0**2 + 2 * (growth + dispersion) * TRANSECTS / max(speed, 1e-9)
                                   ).tolist(),
        **({"mean_field": measured["field"].mean(0).tolist()} if "field" in measured else {}),
    }


def compare(new: dict[str, Any], old: dict[str, Any], limit: float) -> tuple[float, list[str]]:
    """``(largest |z|, report lines)`` over the statistics of :data:`COMPARED`
    of the presets both runs hold; ``z = (new - old) / √(se_new² + se_old²)``."""
    worst, lines = 0.0, []
    for pid in sorted(set(new["presets"]) & set(old["presets"])):
        for name in COMPARED:
            a, b = new["presets"][pid][name], old["presets"][pid][name]
            diff = np.asarray(a["mean"]) - np.asarray(b["mean"])
            se = np.sqrt(np.square(a["se"]) + np.square(b["se"]))
            z = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.where(diff == 0, 0.0, np.inf))
            k = int(np.argmax(np.abs(z)))
            worst = max(worst, float(np.abs(z[k])))
            flag = "  <-- differs" if abs(z[k]) > limit else ""
            lines.append(f"{pid:34s} {name:17s} largest |z| = {abs(z[k]):5.2f} at index {k} "
                         f"({a['mean'][k]:.4g} vs {b['mean'][k]:.4g}){flag}")
    return worst, lines


def report(pid: str, s: dict[str, Any]) -> list[str]:
    """Human-readable lines of one preset's statistics."""
    lines = [pid]
    inter = s["intermittency"]
    picks = [0, 3, 7, 11, 15, 17, 19]
    lines.append("  intermittency " + "  ".join(
        f"d={s['distances'][i]:.0f}: {inter['mean'][i]:.3f}±{inter['se'][i]:.3f}" for i in picks))
    var, flux = s["profile_variance"], s["flux"]
    for i, x in enumerate(s["transects"]):
        lines.append(f"  x={x:3.0f}: variance {var['mean'][i]:7.2f}±{var['se'][i]:.2f} "
                     f"(constant-wind theory {s['constant_wind_variance'][i]:.2f}), "
                     f"flux {flux['mean'][i]:.3f}±{flux['se'][i]:.3f} "
                     f"(emission {s['emission']:.3f})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="*", default=list(DEFAULT_PRESETS))
    parser.add_argument("--variant", nargs=3, action="append", default=[],
                        metavar=("NAME", "PRESET", "OVERRIDES_JSON"),
                        help="also measure PRESET with make() overrides, reported as NAME")
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20000, help="steps per run after warm-up")
    parser.add_argument("--every", type=int, default=4, help="steps between samples")
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mean-field-every", type=int, default=0,
                        help="also average the whole field every this many steps (0: off; "
                             "a multiple of --every)")
    parser.add_argument("--mean-field-presets", nargs="*",
                        default=["PlumeNav-Filament-v0", "PlumeNav-Filament-Constant-v0",
                                 "PlumeNav-Filament-Gusty-v0"])
    parser.add_argument("--out", default=os.path.join("benchmarks", "plume_validation.json"))
    parser.add_argument("--append", action="store_true",
                        help="keep the presets already in --out (those measured again are "
                             "replaced)")
    parser.add_argument("--compare", default=None, help="a JSON of an earlier run to check against")
    parser.add_argument("--limit", type=float, default=4.0,
                        help="--compare fails (exit 1) when some |z| exceeds this")
    args = parser.parse_args(argv)
    if args.mean_field_every % args.every:
        parser.error("--mean-field-every must be a multiple of --every")

    targets = [(pid, pid, {}) for pid in args.presets]
    targets += [(name, pid, json.loads(overrides)) for name, pid, overrides in args.variant]
    payload: dict[str, Any] = {
        "settings": {"runs": args.runs, "steps": args.steps, "every": args.every,
                     "threshold": args.threshold, "seed": args.seed,
                     "statistics": "mean over independent runs; se = std over runs / sqrt(runs)"},
        "machine": machine_info("jax", ("device", "device_kind"), "cpu_count", "plume_jax"),
        "presets": {},
    }
    if args.append and os.path.exists(args.out):
        with open(args.out) as f:
            earlier = json.load(f)
        if earlier["settings"] != payload["settings"]:
            parser.error(f"--append: {args.out} was measured with other settings "
                         f"({earlier['settings']})")
        payload["presets"] = earlier["presets"]
    for name, pid, overrides in targets:
        env, params = plume_jax.make(pid, **overrides)
        field_every = args.mean_field_every if pid in args.mean_field_presets else 0
        t0 = time.perf_counter()
        measured = run_plume(env, params, args.runs, args.steps, args.every, args.threshold,
                             args.seed, field_every)
        stats = summarise(env, params, measured)
        stats.update(preset=pid, overrides=overrides, seconds=time.perf_counter() - t0,
                     load_average=list(os.getloadavg()))
        payload["presets"][name] = stats
        print("\n".join(report(name, stats)), flush=True)
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:  # after each preset: a long run keeps what it measured
            json.dump(payload, f)
    print(f"saved {args.out}")
    if args.compare:
        with open(args.compare) as f:
            worst, lines = compare(payload, json.load(f), args.limit)
        print("\n".join(lines))
        print(f"largest |z| = {worst:.2f} (limit {args.limit})")
        return 1 if worst > args.limit else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
