#!/usr/bin/env python
"""Figures and validation numbers for docs/plumes.md.

Writes into ``docs/``:

- ``filament_snapshot.png``: instantaneous fields of PlumeNav-Filament-v0
  (meandering wind) and its Singh-regime and sparse variants;
- ``filament_mean_field.png``: time-averaged field (meander and constant wind);
- ``filament_profiles.png``: time-averaged cross-wind profiles at four
  downwind distances against the Gaussian of the predicted width, and the
  variance against distance;
- ``filament_intermittency.png``: fraction of time above a threshold on the
  centreline against distance (constant, meander, sparse);
- ``poisson_hit_rates.png``: the hit-rate fields of the three standard
  infotaxis benchmarks (log scale).

and prints the numbers quoted in docs/plumes.md. Needs matplotlib.

Usage::

    python scripts/plume_figures.py [--out docs] [--envs 8] [--steps 400]
"""

from __future__ import annotations

import argparse
import math
import pathlib

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import plume_jax  # noqa: E402


def rollout_fields(env, params, envs: int, steps: int, seed: int = 0, every: int = 0):
    """Time-mean field (sampled every ``every`` steps; none when 0), last
    fields, and centreline samples of a plume run (the agent plays no part)."""
    plume, grid, p = env.plume, env.grid, params.plume
    sx, sy = (float(v) for v in p.source)
    xs = np.arange(math.ceil(sx) + 1, grid.width - 1, dtype=np.float32)
    line = jnp.asarray(np.stack([xs, np.full_like(xs, sy)], -1))

    @jax.jit
    def run(key):
        def one(k):
            k0, k1 = jax.random.split(k)
            state = plume.init(k0, p)

            def body(carry, kk):
                s, total, i = carry
                s = plume.advance(kk, s, p)
                if every:
                    total = jax.lax.cond(i % every == 0,
                                         lambda t: t + plume.field(s, grid, p), lambda t: t, total)
                return (s, total, i + 1), plume.concentration(s, line, grid, p)

            (state, total, _), samples = jax.lax.scan(
                body, (state, jnp.zeros(grid.shape, jnp.float32), 0), jax.random.split(k1, steps))
            return total / max(1, -(-steps // max(every, 1))), plume.field(state, grid, p), samples

        return jax.vmap(one)(jax.random.split(key, envs))

    mean, last, samples = (np.asarray(x) for x in run(jax.random.key(seed)))
    return mean.mean(0), last, xs - sx, samples.reshape(-1, xs.size)


def crosswind_profiles(envs: int, steps: int):
    """Constant-wind profiles at 4 distances: (ys, xs, mean profiles, predicted variances)."""
    env, params = plume_jax.make("PlumeNav-Filament-Constant-v0")
    plume, grid, p = env.plume, env.grid, params.plume
    sx, sy = (float(v) for v in p.source)
    xs = np.array([10.0, 25.0, 50.0, 80.0])
    ys = np.arange(-30.0, 30.01, 1.0)
    pts = jnp.asarray(np.stack(np.meshgrid(sx + xs, sy + ys, indexing="ij"), -1), jnp.float32)

    @jax.jit
    def run(key):
        def one(k):
            k0, k1 = jax.random.split(k)
            state = plume.init(k0, p)

            def body(s, kk):
                s = plume.advance(kk, s, p)
                return s, plume.concentration(s, pts, grid, p)

            return jax.lax.scan(body, state, jax.random.split(k1, steps))[1]

        return jax.vmap(one)(jax.random.split(key, envs))

    samples = np.asarray(run(jax.random.key(1)))
    mean = samples.reshape(-1, xs.size, ys.size).mean(0)
    r0, g, d, u = (float(p.puff_radius), float(p.growth), float(p.dispersion), float(p.wind_speed))
    predicted = r0**2 + 2 * (g + d) * xs / u
    emission = float(p.release_rate * p.puff_mass)
    return ys, xs, mean, predicted, emission, u


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--threshold", type=float, default=0.05)
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # -- snapshots ----------------------------------------------------------
    variants = ["PlumeNav-Filament-v0", "PlumeNav-Filament-Constant-v0",
                "PlumeNav-Filament-SwitchOnce-v0", "PlumeNav-Filament-SwitchMany-v0",
                "PlumeNav-Filament-Sparse-v0", "PlumeNav-Movie-v0"]
    runs = {}
    fig, axes = plt.subplots(3, 2, figsize=(11, 10.5))
    for ax, pid in zip(axes.ravel(), variants):
        env, params = plume_jax.make(pid)
        if pid == "PlumeNav-Movie-v0":
            _, state = jax.jit(env.reset)(jax.random.key(0), params)
            for i in range(40):
                state = state.replace(plume=env.plume.advance(jax.random.key(i), state.plume,
                                                              params.plume))
            field = np.asarray(env.render_field(state, params))
        else:
            every = 8 if pid in ("PlumeNav-Filament-v0", "PlumeNav-Filament-Constant-v0") else 0
            runs[pid] = rollout_fields(env, params, args.envs, args.steps, every=every)
            field = runs[pid][1][0]
        ax.imshow(field, origin="lower", cmap="viridis", vmin=0, vmax=max(0.5, float(field.max())))
        ax.set_title(pid, fontsize=9)
        ax.set_xlabel("x (cells)")
        ax.set_ylabel("y (cells)")
    fig.suptitle("Instantaneous concentration (wind toward +x)")
    fig.tight_layout()
    fig.savefig(out / "filament_snapshot.png", dpi=80)
    plt.close(fig)

    # -- mean fields --------------------------------------------------------
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, pid in zip(axes, ["PlumeNav-Filament-v0", "PlumeNav-Filament-Constant-v0"]):
        im = ax.imshow(runs[pid][0], origin="lower", cmap="viridis")
        ax.set_title(f"{pid}: mean of {args.envs} runs x {args.steps // 8} snapshots "
                     f"(every 8 steps)", fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(out / "filament_mean_field.png", dpi=80)
    plt.close(fig)

    # -- intermittency --------------------------------------------------------
    fig, ax = plt.subplots(figsize=(6.5, 4))
    print(f"intermittency (fraction of time with c > {args.threshold}) on the centreline")
    for pid, label in [("PlumeNav-Filament-Constant-v0", "constant wind"),
                       ("PlumeNav-Filament-v0", "meandering wind"),
                       ("PlumeNav-Filament-SwitchMany-v0", "frequent switches"),
                       ("PlumeNav-Filament-Sparse-v0", "sparse (0.2 puffs/step), meander")]:
        _, _, distance, samples = runs[pid]
        frac = (samples > args.threshold).mean(0)
        ax.plot(distance, frac, label=label)
        picks = [5, 20, 40, 60, 80, 100]
        print(f"  {label:34s}", "  ".join(f"d={distance[i - 1]:.0f}: {frac[i - 1]:.2f}"
                                          for i in picks))
    ax.set_xlabel("distance downwind of the source (cells)")
    ax.set_ylabel(f"fraction of time with c > {args.threshold}")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    ax.set_title("Intermittency falls with distance")
    fig.tight_layout()
    fig.savefig(out / "filament_intermittency.png", dpi=80)
    plt.close(fig)

    # -- cross-wind profiles ------------------------------------------------------
    ys, xs, mean, predicted, emission, u = crosswind_profiles(args.envs, args.steps)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    print("constant wind, time-averaged cross-wind profiles")
    measured = []
    for i, x in enumerate(xs):
        m = mean[i]
        total = m.sum()
        centre = (m * ys).sum() / total
        var = (m * (ys - centre) ** 2).sum() / total
        gauss = total / math.sqrt(2 * math.pi * predicted[i]) * np.exp(
            -(ys - centre) ** 2 / (2 * predicted[i]))
        measured.append(var)
        axes[0].plot(ys, m, "o", ms=3, label=f"x = {x:.0f}")
        axes[0].plot(ys, gauss, "k-", lw=0.8)
        print(f"  x={x:4.0f}: flux U*sum(C)dy = {u * total:.3f} (emission {emission:.3f}), "
              f"variance {var:6.2f} vs predicted {predicted[i]:6.2f}, "
              f"max |profile - Gaussian| / peak = {np.abs(gauss - m).max() / m.max():.3f}")
    axes[0].set_xlabel("cross-wind offset (cells)")
    axes[0].set_ylabel("time-averaged concentration")
    axes[0].legend(fontsize=8)
    axes[0].set_title("profiles (dots) and the predicted Gaussians (lines)", fontsize=9)
    axes[1].plot(xs, measured, "o", label="measured variance")
    axes[1].plot(xs, predicted, "k-", label="r0² + 2 (growth + dispersion) x / U")
    axes[1].set_xlabel("distance downwind (cells)")
    axes[1].set_ylabel("cross-wind variance (cells²)")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "filament_profiles.png", dpi=80)
    plt.close(fig)

    # -- Poisson hit rates -------------------------------------------------------
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), gridspec_kw={"width_ratios": [1, 1, 1.6]})
    for ax, (pid, source) in zip(axes, [("PlumeNav-Poisson-Iso19x19-v0", [9, 9]),
                                        ("PlumeNav-Poisson-Iso53x53-v0", [26, 26]),
                                        ("PlumeNav-Poisson-Windy81x41-v0", [15, 20])]):
        env, params = plume_jax.make(
            pid, plume={"source_mode": "fixed", "observer": None, "source": source},
            start={"type": "fixed", "position": [0, 0]})
        _, state = jax.jit(env.reset)(jax.random.key(0), params)
        field = np.asarray(env.render_field(state, params))
        im = ax.imshow(np.log10(np.maximum(field, 1e-6)), origin="lower", cmap="viridis",
                       vmin=-4, vmax=0.5)
        ax.set_title(f"{pid}\nlog10 mean hits per step", fontsize=8)
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(out / "poisson_hit_rates.png", dpi=80)
    plt.close(fig)
    print(f"figures written to {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
