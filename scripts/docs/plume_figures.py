#!/usr/bin/env python
"""Figures for docs/plumes.md.

Writes into ``docs/``:

- ``filament_snapshot.png``: instantaneous fields of the filament presets
  (meandering, constant, switching, sparse, linearised travelling-gust and
  Farrell's self-advected winds) and the bundled movie;
- ``filament_wind_field.png``: the wind of PlumeNav-Filament-Gusty-v0 (its
  gust field over the plume), and the cross-wind velocity along the
  centreline over time (gusts travel downwind) in the self-advected field of
  PlumeNav-Filament-Farrell-v0, the linearised one of Gusty and the
  meandering preset's uniform wind;

and, from the long runs of ``scripts/validation/plume_validation.py`` (means over
independent runs, bands of ±2 standard errors):

- ``filament_mean_field.png``: time-averaged fields;
- ``filament_profiles.png``: time-averaged cross-wind profiles of the
  constant-wind plume against the Gaussian of the predicted width, and every
  preset's cross-wind variance against distance;
- ``filament_intermittency.png``: fraction of time above the threshold on
  the centreline against distance;
- ``poisson_hit_rates.png``: the hit-rate fields of the three standard
  infotaxis benchmarks (log scale).

Needs matplotlib.

Usage::

    python scripts/validation/plume_validation.py --mean-field-every 200   # the long runs (JSON)
    python scripts/docs/plume_figures.py [--validation benchmarks/plume_validation.json] [--out docs]
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import plume_jax  # noqa: E402

SNAPSHOT_PRESETS = ("PlumeNav-Filament-v0", "PlumeNav-Filament-Constant-v0",
                    "PlumeNav-Filament-SwitchOnce-v0", "PlumeNav-Filament-SwitchMany-v0",
                    "PlumeNav-Filament-Sparse-v0", "PlumeNav-Filament-Gusty-v0",
                    "PlumeNav-Filament-Farrell-v0", "PlumeNav-Movie-v0")
LABELS = {"PlumeNav-Filament-Constant-v0": "constant wind",
          "PlumeNav-Filament-v0": "meandering wind (uniform, OU)",
          "PlumeNav-Filament-SwitchMany-v0": "frequent switches",
          "PlumeNav-Filament-Sparse-v0": "sparse (0.2 puffs/step), meander",
          "PlumeNav-Filament-Gusty-v0": "travelling gusts (linearised field), 2-D puffs",
          "PlumeNav-Filament-Farrell-v0": "self-advected field, 3-D puffs (Farrell)"}


def snapshot(pid: str, steps: int = 60) -> np.ndarray:
    """The field of a preset ``steps`` steps after its reset (the plume alone)."""
    env, params = plume_jax.make(pid)

    @jax.jit
    def run(key):
        _, state = env.reset(key, params)
        plume = jax.lax.fori_loop(
            0, steps, lambda i, s: env.plume.advance(jax.random.fold_in(key, i), s, params.plume),
            state.plume)
        return env.render_field(state.replace(plume=plume), params)

    return np.asarray(run(jax.random.key(0)))


def centreline_wind(pid: str, steps: int = 300):
    """``(distances, f32[steps, D] cross-wind velocity on the centreline, a
    last state, env, params)`` of a preset's plume."""
    env, params = plume_jax.make(pid)
    p = params.plume
    sx, sy = (float(v) for v in p.source)
    xs = np.arange(0.0, env.grid.width - sx, 2.0)
    line = jnp.asarray(np.stack([sx + xs, np.full_like(xs, sy)], -1), jnp.float32)

    @jax.jit
    def run(key):
        state = env.plume.init(key, p)

        def body(s, k):
            s = env.plume.advance(k, s, p)
            return s, env.plume.wind(s, line, p)[:, 1]

        return jax.lax.scan(body, state, jax.random.split(key, steps))

    state, v = run(jax.random.key(1))
    return xs, np.asarray(v), state, env, params


def band(ax, x, stat, label, scale=2.0, **kw):
    """A line with a ±``scale`` SE band."""
    mean, se = np.asarray(stat["mean"]), np.asarray(stat["se"])
    line, = ax.plot(x, mean, label=label, **kw)
    ax.fill_between(x, mean - scale * se, mean + scale * se, color=line.get_color(), alpha=0.25)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs")
    parser.add_argument("--validation", default="benchmarks/plume_validation.json")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(args.validation) as f:
        validation = json.load(f)
    runs = validation["presets"]
    settings = validation["settings"]
    length = f"{settings['runs']} runs x {settings['steps']} steps"

    # -- snapshots ----------------------------------------------------------
    fig, axes = plt.subplots(4, 2, figsize=(11, 13.5))
    for ax, pid in zip(axes.ravel(), SNAPSHOT_PRESETS):
        field = snapshot(pid)
        ax.imshow(field, origin="lower", cmap="viridis", vmin=0, vmax=max(0.5, float(field.max())))
        ax.set_title(pid, fontsize=9)
        ax.set_xlabel("x (cells)")
        ax.set_ylabel("y (cells)")
    fig.suptitle("Instantaneous concentration (mean wind toward +x)")
    fig.tight_layout()
    fig.savefig(out / "filament_snapshot.png", dpi=80)
    plt.close(fig)

    # -- the travelling-gust wind ---------------------------------------------
    fig, axes = plt.subplots(1, 4, figsize=(20, 4),
                             gridspec_kw={"width_ratios": [1.4, 1, 1, 1]})
    xs, v_gust, state, env, params = centreline_wind("PlumeNav-Filament-Gusty-v0")
    field = np.asarray(env.plume.field(state, env.grid, params.plume))
    axes[0].imshow(field, origin="lower", cmap="viridis", vmin=0, vmax=0.5)
    nodes = np.asarray(env.plume.gust_field.node_positions()).reshape(-1, 2)
    wind = np.asarray(env.plume.wind(state, jnp.asarray(nodes), params.plume))
    axes[0].quiver(nodes[:, 0], nodes[:, 1], wind[:, 0], wind[:, 1], color="w", scale=30,
                   width=0.003)
    axes[0].set_title("PlumeNav-Filament-Gusty-v0: wind at the field's nodes", fontsize=9)
    _, v_meander, *_ = centreline_wind("PlumeNav-Filament-v0")
    _, v_farrell, *_ = centreline_wind("PlumeNav-Filament-Farrell-v0")
    for ax, v, title in [(axes[1], v_farrell, "self-advected field (Farrell)"),
                         (axes[2], v_gust, "linearised field (Gusty)"),
                         (axes[3], v_meander, "uniform meander (Filament-v0)")]:
        lim = float(np.abs(v).max())
        im = ax.imshow(v, origin="lower", aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim,
                       extent=[xs[0], xs[-1], 0, v.shape[0]])
        ax.set_xlabel("distance downwind of the source (cells)")
        ax.set_ylabel("step")
        ax.set_title(f"cross-wind velocity on the centreline:\n{title}", fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.8, label="cells/step")
    fig.tight_layout()
    fig.savefig(out / "filament_wind_field.png", dpi=80)
    plt.close(fig)

    # -- mean fields --------------------------------------------------------
    means = [pid for pid in runs if "mean_field" in runs[pid]]
    if means:
        fig, axes = plt.subplots(1, len(means), figsize=(5.5 * len(means), 4), squeeze=False)
        for ax, pid in zip(axes[0], means):
            im = ax.imshow(np.asarray(runs[pid]["mean_field"]), origin="lower", cmap="viridis")
            ax.set_title(f"{pid}: time mean, {length}", fontsize=8)
            fig.colorbar(im, ax=ax, shrink=0.8)
        fig.tight_layout()
        fig.savefig(out / "filament_mean_field.png", dpi=80)
        plt.close(fig)

    # -- intermittency --------------------------------------------------------
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for pid, s in runs.items():
        band(ax, s["distances"], s["intermittency"], LABELS.get(pid, pid))
    ax.set_xlabel("distance downwind of the source (cells)")
    ax.set_ylabel(f"fraction of time with c > {settings['threshold']}")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    ax.set_title(f"Intermittency on the centreline ({length}; bands ±2 SE)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "filament_intermittency.png", dpi=80)
    plt.close(fig)

    # -- cross-wind profiles ------------------------------------------------------
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    constant = runs.get("PlumeNav-Filament-Constant-v0")
    if constant is not None:
        ys = np.asarray(constant["offsets"])
        profiles = np.asarray(constant["profiles"]["mean"])
        predicted = np.asarray(constant["constant_wind_variance"])
        for i, x in enumerate(constant["transects"]):
            m = profiles[i]
            centre = (m * ys).sum() / m.sum()
            gauss = m.sum() / math.sqrt(2 * math.pi * predicted[i]) * np.exp(
                -(ys - centre) ** 2 / (2 * predicted[i]))
            axes[0].plot(ys, m, "o", ms=3, label=f"x = {x:.0f}")
            axes[0].plot(ys, gauss, "k-", lw=0.8)
        axes[0].set_xlabel("cross-wind offset (cells)")
        axes[0].set_ylabel("time-averaged concentration")
        axes[0].legend(fontsize=8)
        axes[0].set_title("constant wind: profiles (dots) and predicted Gaussians (lines)",
                          fontsize=9)
        axes[1].plot(constant["transects"], predicted, "k--", lw=0.8,
                     label="r0² + 2 (growth + dispersion) x / U")
    for pid, s in runs.items():
        var = s["profile_variance"]
        axes[1].errorbar(s["transects"], var["mean"], yerr=2 * np.asarray(var["se"]), marker="o",
                         ms=3, capsize=2, label=LABELS.get(pid, pid))
    axes[1].set_xlabel("distance downwind (cells)")
    axes[1].set_ylabel("cross-wind variance of the mean profile (cells²)")
    axes[1].legend(fontsize=7)
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
