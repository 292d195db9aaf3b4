#!/usr/bin/env python
"""plume_jax's Farrell plume against pompy, the reference implementation of
Farrell et al. (2002), side by side at the same settings.

pompy (github alexliberzonlab/pompy, PyPI ``pompy``) is not part of this
repository: install it (``pip install pompy``) or pass ``--pompy-path`` to
the folder that holds a fetched copy's ``pompy`` package. Under numpy 2 its
``WindModel.velocity_at_pos`` fails (``float()`` of a 1 x 1 array); this
script replaces that one method at run time by one that reads the same
spline's single value.

Settings come from a plume_jax preset (``--preset``, default
``PlumeNav-Filament-Farrell-v0``) and are mapped onto pompy, in cells and
steps:

- wind: pompy's ``WindModel`` over ``[0, W-1] x [0, H-1]`` with the preset's
  nodes (interior nodes spanning the grid, as plume_jax's field), mean wind
  ``(wind_speed, 0)``, ``k_x = k_y = wind_gust_diffusivity``, the preset's
  noise damping and bandwidth, and the noise gain that gives pompy's
  discretised noise the preset's stationary std ``wind_gust_std``
  (computed from the discrete Lyapunov equation of its Euler-Maruyama
  update). pompy's Euler-Maruyama noise is not stable at one update per
  time unit for Farrell's damping and bandwidth, so pompy's wind takes
  ``--pompy-substeps`` updates of ``dt = 1 / substeps`` per step (its
  noise approaches the continuous law, which plume_jax's exact update
  follows, as the substeps grow);
- puffs: pompy's ``PlumeModel`` at ``dt = 1`` per step: release rate
  ``release_rate``, initial radius ``puff_radius``, spread rate
  ``2 growth`` (pompy grows ``r²`` by it per time unit), centre-relative
  scale ``√(2 dispersion)`` (per-step variance ``2 dispersion``, as
  plume_jax), the sim region the grid; concentration by pompy's
  ``ConcentrationValueCalculator`` with mass ``puff_mass`` in the plane
  ``z = 0``;
- vertical dispersion: both settings, ``model_z_disp=False`` and ``True``
  (two pompy plumes in the same wind; plume_jax's ``vertical_dispersion``
  off and on).

Every run (``--runs`` independent seeds, for each model) warms up for
``--warmup`` steps, then records every ``--every`` steps over ``--steps``
steps: the concentration on the centre line (5..100 cells downwind) and on
cross-wind transects at 25, 50 and 80 cells (offsets -40..40), and the wind
at probes on the centre line. Per run: the centre-line time mean, the
fraction of samples above 0.05 and 0.02, the width ``σ_y`` (the standard
deviation of the time-mean transect profile), the mean downwind wind and
the cross-wind wind's standard deviation over time. Reported: mean over
runs ± standard error (std over runs / √runs); a statistic *matches* when
the difference is within 10 % of pompy's value or within 2 combined SEs
(``√(se_pompy² + se_ours²)``). pompy's wind field overflows in some long
runs (its centred scheme is unbounded at these gust strengths; see
docs/plumes.md): such a run is dropped and replaced by the next seed, and
the JSON lists the dropped seeds.

Writes a JSON file (``--out``) and a markdown table (``--table``); pompy's
results can be reused by a later run at the same settings (``--pompy-from``),
so a change on plume_jax's side needs only its own runs. The stored
comparison (``--runs 48``, 4000 steps per side) took 389 s for pompy (its
puff update vectorised) and 17-34 s per plume_jax batch on a 2-core CPU
shared with other jobs; the default of 12 runs gives SEs twice as large.

Usage::

    python scripts/validation/pompy_validation.py                       # full size (see docs/plumes.md)
    python scripts/validation/pompy_validation.py --runs 2 --steps 500  # a quick look
    python scripts/validation/pompy_validation.py --pompy-from benchmarks/pompy_validation.json \\
        --models field linear_field
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
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
import scipy.linalg

import plume_jax

if __package__:  # imported as scripts.validation.pompy_validation
    from scripts.bench.harness import machine_info
else:  # run as `python scripts/validation/pompy_validation.py`: the repository root goes on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from scripts.bench.harness import machine_info

#: Centre-line distances downwind of the source, cells.
DISTANCES = np.arange(5.0, 100.01, 5.0)
#: Transect distances downwind of the source, cells.
TRANSECTS = np.array([25.0, 50.0, 80.0])
#: Cross-wind offsets of the transect points, cells.
OFFSETS = np.arange(-40.0, 40.01, 1.0)
#: Distances of the wind probes downwind of the source, cells.
PROBES = np.array([10.0, 25.0, 50.0, 80.0, 100.0])
#: Concentration thresholds of the time-above statistics.
THRESHOLDS = (0.05, 0.02)
#: The vertical-dispersion settings compared (pompy's ``model_z_disp``).
Z_SETTINGS = (False, True)
#: Table rows: (label, statistic, index into its distances).
ROWS = (
    [(f"width σ_y at {d:.0f} cells", "width", i) for i, d in enumerate(TRANSECTS)]
    + [(f"centre-line mean at {d:.0f} cells", "centreline_mean", int(np.flatnonzero(
        DISTANCES == d)[0])) for d in (25.0, 50.0, 80.0, 100.0)]
    + [(f"time c > {t:g} at {d:.0f} cells", f"above_{t:g}", int(np.flatnonzero(
        DISTANCES == d)[0])) for t in THRESHOLDS for d in (25.0, 80.0, 100.0)]
)
WIND_ROWS = (
    [(f"mean downwind wind at {d:.0f} cells", "wind_mean", i) for i, d in enumerate(PROBES)]
    + [(f"cross-wind gust std at {d:.0f} cells", "gust_std", i) for i, d in enumerate(PROBES)]
)


class PompyMissing(RuntimeError):
    """pompy could not be imported."""


def import_pompy(path: str | None) -> Any:
    """pompy's ``models`` and ``processors`` modules (as a namespace), from
    ``path`` (the folder holding the ``pompy`` package) when given, else
    from the installed distribution; with ``WindModel.velocity_at_pos``
    made to work under numpy 2."""
    if path is not None:
        if not os.path.isdir(os.path.join(path, "pompy")):
            raise PompyMissing(f"--pompy-path {path!r}: no folder 'pompy' there (give the folder "
                               "that holds the pompy package of a fetched copy)")
        sys.path.insert(0, os.path.abspath(path))
    try:
        models = importlib.import_module("pompy.models")
        processors = importlib.import_module("pompy.processors")
    except ImportError as err:
        raise PompyMissing(f"cannot import pompy ({err}): pip install pompy, or pass "
                           "--pompy-path to a fetched copy") from err

    def velocity_at_pos(self: Any, x: float, y: float) -> np.ndarray:
        # pompy's own method does float() of the spline's 1 x 1 output, an
        # error under numpy 2; this reads the same value
        if not self._interp_set:
            self._set_interpolators()
        return np.array([self._interp_u(x, y)[0, 0], self._interp_v(x, y)[0, 0]])

    models.WindModel.velocity_at_pos = velocity_at_pos
    return argparse.Namespace(models=models, processors=processors,
                              VectorisedPlume=vectorised_plume_model(models))


def vectorised_plume_model(models: Any) -> type:
    """A subclass of pompy's ``PlumeModel`` whose ``update`` does what
    pompy's does, in the same order and with the same random draws, on all
    puffs at once instead of one puff at a time (pompy's Python loop over
    puffs is nearly all of its run time): release ``min(Poisson(rate dt),
    room)`` puffs at the source; read the wind spline at every puff; add
    ``centre_rel_diff_scale`` times normal draws (one ``rng.normal`` call of
    ``(puffs, dims)``, the same stream as pompy's per-puff calls); move,
    grow ``r²``; keep the puffs inside the region. Its puffs are an
    f[n, 4] array (``puff_array``), not ``Puff`` objects. A test checks
    it against pompy's own ``update`` bit for bit."""

    class VectorisedPlume(models.PlumeModel):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._puffs = np.array([tuple(p) for p in self.puffs], float).reshape(-1, 4)

        def update(self, dt: float) -> None:
            puffs = self._puffs
            if len(puffs) < self.max_num_puffs:
                count = min(self.rng.poisson(self.puff_release_rate * dt),
                            self.max_num_puffs - len(puffs))
                new = np.tile(np.asarray(self._new_puff_params, float), (count, 1))
                puffs = np.concatenate([puffs, new])
            if len(puffs):
                wind = self.wind_model
                if not wind._interp_set:
                    wind._set_interpolators()
                velocity = np.zeros((len(puffs), self._vel_dim))
                velocity[:, 0] = wind._interp_u.ev(puffs[:, 0], puffs[:, 1])
                velocity[:, 1] = wind._interp_v.ev(puffs[:, 0], puffs[:, 1])
                velocity += (self.rng.normal(size=(len(puffs), self._vel_dim))
                             * self.centre_rel_diff_scale)
                puffs = puffs.copy()
                puffs[:, :self._vel_dim] += velocity * dt
                puffs[:, 3] += self.puff_spread_rate * dt
                r = self.sim_region
                inside = ((puffs[:, 0] >= r.x_min) & (puffs[:, 0] <= r.x_max)
                          & (puffs[:, 1] >= r.y_min) & (puffs[:, 1] <= r.y_max))
                puffs = puffs[inside]
            self._puffs = puffs

        @property
        def puff_array(self) -> np.ndarray:
            return self._puffs

    return VectorisedPlume


def euler_maruyama_gain(std: float, damping: float, bandwidth: float, dt: float) -> float:
    """The ``noise_gain`` that gives pompy's Euler-Maruyama coloured noise
    (its ``ColouredNoiseGenerator`` at step ``dt``) the stationary standard
    deviation ``std``; raises ``ValueError`` when that update is unstable."""
    a = np.array([[0.0, 1.0], [-bandwidth**2, -2.0 * damping * bandwidth]])
    transition = np.eye(2) + dt * a
    if np.max(np.abs(np.linalg.eigvals(transition))) >= 1.0:
        raise ValueError(f"pompy's noise update diverges at dt = {dt:g} for damping {damping:g} "
                         f"and bandwidth {bandwidth:g}: use more --pompy-substeps")
    b = np.array([[0.0], [bandwidth**2 * math.sqrt(dt)]])  # per unit gain
    covariance = scipy.linalg.solve_discrete_lyapunov(transition, b @ b.T)
    return std / math.sqrt(covariance[0, 0])


def preset_settings(preset: str, warmup: int) -> dict[str, Any]:
    """The preset's plume settings that the comparison maps onto pompy.
    Raises ``ValueError`` when the preset is not one pompy can run (a field
    wind of constant kind blowing toward east, the 3-D kernel)."""
    env, params = plume_jax.make(preset, plume={"warmup_steps": warmup})
    plume, p = env.plume, params.plume
    if getattr(plume, "wind_model", "uniform") == "uniform" or plume.wind_kind != "constant" \
            or float(p.wind_direction) != 0.0 or plume.kernel != "3d":
        raise ValueError(f"{preset}: pompy runs a gust-field wind of kind 'constant' toward east "
                         "(wind_direction 0) with 3-D puffs")
    field = plume.gust_field
    return {
        "grid": [env.grid.width, env.grid.height],
        "nodes": list(field.nodes),
        "source": [float(v) for v in np.asarray(p.source)],
        "wind_speed": float(p.wind_speed),
        "wind_gust_std": float(p.wind_gust_std),
        "wind_gust_damping": float(p.wind_gust_damping),
        "wind_gust_bandwidth": float(p.wind_gust_bandwidth),
        "wind_gust_diffusivity": float(p.wind_gust_diffusivity),
        "release_rate": float(p.release_rate),
        "puff_mass": float(p.puff_mass),
        "puff_radius": float(p.puff_radius),
        "growth": float(p.growth),
        "dispersion": float(p.dispersion),
        "capacity": plume.capacity,
    }


def sample_points(source: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """``(points f64[D + T·O, 2], probes f64[P, 2])``: the centre-line then
    the transect points (row-major over transect, offset), and the wind
    probes, downwind (east) of ``source``."""
    sx, sy = source
    line = np.stack([sx + DISTANCES, np.full_like(DISTANCES, sy)], -1)
    tx, oy = np.meshgrid(TRANSECTS, OFFSETS, indexing="ij")
    transect = np.stack([sx + tx.ravel(), sy + oy.ravel()], -1)
    probes = np.stack([sx + PROBES, np.full_like(PROBES, sy)], -1)
    return np.concatenate([line, transect]), probes


def per_run_statistics(conc_sum: np.ndarray, above: np.ndarray, wind_sum: np.ndarray,
                       wind_sq: np.ndarray, samples: int) -> dict[str, np.ndarray]:
    """Per-run statistics from sums over the samples of one run:
    ``conc_sum`` f[D + T·O], ``above`` f[len(THRESHOLDS), D], ``wind_sum``
    and ``wind_sq`` f[P, 2] (the wind and its square at the probes)."""
    mean = conc_sum / samples
    n_line = DISTANCES.size
    profiles = mean[n_line:].reshape(TRANSECTS.size, OFFSETS.size)
    total = profiles.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN where no odour reached
        centre = (profiles * OFFSETS).sum(-1) / total
        variance = (profiles * (OFFSETS - centre[:, None]) ** 2).sum(-1) / total
    wind_mean = wind_sum / samples
    wind_var = np.maximum(wind_sq / samples - wind_mean**2, 0.0)
    out = {"centreline_mean": mean[:n_line], "width": np.sqrt(variance),
           "wind_mean": wind_mean[:, 0], "gust_std": np.sqrt(wind_var[:, 1])}
    for t, hits in zip(THRESHOLDS, above):
        out[f"above_{t:g}"] = hits / samples
    return out


def pompy_version() -> str | None:
    """The installed pompy distribution's version (pompy's module has no
    ``__version__``); None for a fetched copy that is not installed."""
    try:
        return importlib.metadata.version("pompy")
    except importlib.metadata.PackageNotFoundError:
        return None


class Diverged(RuntimeError):
    """pompy's wind field blew up (its centred scheme is not bounded when
    gusts make the cell Reynolds number large)."""


#: A wind speed past which a run counts as diverged, cells per step.
DIVERGED_SPEED = 100.0


def run_pompy(pompy: Any, s: dict[str, Any], seed: int, warmup: int, steps: int, every: int,
              substeps: int, puff_loop: bool = False) -> dict[bool, dict[str, np.ndarray]]:
    """One pompy run (one wind, a plume for each of :data:`Z_SETTINGS`):
    ``{model_z_disp: per-run statistics}``, the plumes pompy's
    ``PlumeModel`` with ``puff_loop``, else its vectorised equivalent
    (:func:`vectorised_plume_model`; the same numbers, several times
    faster). Raises :class:`Diverged` (with the step) when the wind leaves
    ``±DIVERGED_SPEED`` or is not finite."""
    models, processors = pompy.models, pompy.processors
    w, h = s["grid"]
    region = models.Rectangle(0.0, w - 1.0, 0.0, h - 1.0)
    dt = 1.0 / substeps
    gain = euler_maruyama_gain(s["wind_gust_std"], s["wind_gust_damping"],
                               s["wind_gust_bandwidth"], dt)
    seeds = np.random.SeedSequence([seed]).spawn(1 + len(Z_SETTINGS))
    wind = models.WindModel(
        region, n_x=s["nodes"][0], n_y=s["nodes"][1], u_av=s["wind_speed"], v_av=0.0,
        k_x=s["wind_gust_diffusivity"], k_y=s["wind_gust_diffusivity"], noise_gain=gain,
        noise_damp=s["wind_gust_damping"], noise_bandwidth=s["wind_gust_bandwidth"],
        rng=np.random.RandomState(np.random.MT19937(seeds[0])))
    plume_model = models.PlumeModel if puff_loop else pompy.VectorisedPlume
    plumes = {z: plume_model(
        region, (s["source"][0], s["source"][1], 0.0), wind, model_z_disp=z,
        centre_rel_diff_scale=math.sqrt(2.0 * s["dispersion"]), puff_init_rad=s["puff_radius"],
        puff_spread_rate=2.0 * s["growth"], puff_release_rate=s["release_rate"],
        init_num_puffs=0, max_num_puffs=s["capacity"],
        rng=np.random.RandomState(np.random.MT19937(sq)))
        for z, sq in zip(Z_SETTINGS, seeds[1:])}
    calculator = processors.ConcentrationValueCalculator(s["puff_mass"])
    points, probes = sample_points(s["source"])
    n_line = DISTANCES.size
    sums = {z: np.zeros(points.shape[0]) for z in Z_SETTINGS}
    above = {z: np.zeros((len(THRESHOLDS), n_line)) for z in Z_SETTINGS}
    wind_sum, wind_sq = np.zeros((PROBES.size, 2)), np.zeros((PROBES.size, 2))
    samples = 0
    for step in range(warmup + steps):
        for _ in range(substeps):
            wind.update(dt)
        if not np.all(np.abs(wind.velocity_field) < DIVERGED_SPEED):  # NaN fails too
            raise Diverged(step)
        for plume in plumes.values():
            plume.update(1.0)
        if step >= warmup and (step - warmup + 1) % every == 0:
            samples += 1
            for z, plume in plumes.items():
                puffs = plume.puff_array
                c = calculator.calc_conc_list(puffs, points[:, 0], points[:, 1], 0.0) \
                    if len(puffs) else np.zeros(points.shape[0])
                sums[z] += c
                above[z] += np.asarray([c[:n_line] > t for t in THRESHOLDS])
            v = np.array([wind.velocity_at_pos(x, y) for x, y in probes])
            wind_sum += v
            wind_sq += v**2
    return {z: per_run_statistics(sums[z], above[z], wind_sum, wind_sq, samples)
            for z in Z_SETTINGS}


def run_plume_jax(preset: str, wind_model: str, vertical: bool, s: dict[str, Any], runs: int,
                  seed: int, warmup: int, steps: int, every: int,
                  overrides: dict[str, Any] | None = None) -> list[dict[str, np.ndarray]]:
    """``runs`` independent runs of the preset's plume with ``wind_model``,
    ``vertical_dispersion=vertical`` and further plume ``overrides``
    (vmapped, one jitted program): per-run statistics."""
    env, params = plume_jax.make(preset, plume={"warmup_steps": warmup, "wind_model": wind_model,
                                                "vertical_dispersion": vertical,
                                                **(overrides or {})})
    plume, grid, p = env.plume, env.grid, params.plume
    points, probes = (jnp.asarray(a, jnp.float32) for a in sample_points(s["source"]))
    n_line = DISTANCES.size
    samples = steps // every
    thresholds = jnp.asarray(THRESHOLDS, jnp.float32)[:, None]

    @jax.jit
    def run(keys: jax.Array) -> tuple[jax.Array, ...]:
        def one(key: jax.Array) -> tuple[jax.Array, ...]:
            k_init, k_run = jax.random.split(key)
            state = plume.init(k_init, p)

            def advance(st: Any, k: jax.Array) -> tuple[Any, None]:
                return plume.advance(k, st, p), None

            def body(carry: tuple, k: jax.Array) -> tuple[tuple, None]:
                st, total, hits, wsum, wsq = carry
                st, _ = jax.lax.scan(advance, st, jax.random.split(k, every))
                c = plume.concentration(st, points, grid, p)
                v = plume.wind(st, probes, p)
                return (st, total + c, hits + (c[None, :n_line] > thresholds), wsum + v,
                        wsq + v * v), None

            init = (state, jnp.zeros(points.shape[0]), jnp.zeros((len(THRESHOLDS), n_line)),
                    jnp.zeros((PROBES.size, 2)), jnp.zeros((PROBES.size, 2)))
            (_, *sums), _ = jax.lax.scan(body, init, jax.random.split(k_run, samples))
            return tuple(sums)

        return jax.vmap(one)(keys)

    keys = jax.random.split(jax.random.key(seed), runs)
    sums = [np.asarray(x, np.float64) for x in run(keys)]
    return [per_run_statistics(*(x[r] for x in sums), samples) for r in range(runs)]


def mean_se(per_run: list[dict[str, np.ndarray]]) -> dict[str, dict[str, list[float]]]:
    """``{statistic: {"mean": [...], "se": [...]}}`` over runs."""
    out = {}
    for name in per_run[0]:
        x = np.stack([r[name] for r in per_run])
        se = x.std(axis=0, ddof=1) / math.sqrt(len(x)) if len(x) > 1 else np.full(x.shape[1:],
                                                                                  np.nan)
        out[name] = {"mean": x.mean(0).tolist(), "se": np.asarray(se).tolist()}
    return out


def verdict(ref: tuple[float, float], ours: tuple[float, float]) -> tuple[float, float, bool]:
    """``(relative difference, difference in combined SEs, matches)``: a
    match is within 10 % of the reference or within 2 combined SEs."""
    (a, sa), (b, sb) = ref, ours
    rel = (b - a) / a if a else (0.0 if b == a else math.inf)
    se = math.hypot(sa, sb)
    z = (b - a) / se if se > 0 else (0.0 if a == b else math.inf)
    return rel, z, abs(rel) <= 0.10 or abs(z) <= 2.0


def table(results: dict[str, Any], models: list[str]) -> tuple[str, dict[str, Any]]:
    """The markdown table of ``results`` and ``{model: {z: [failing rows]}}``."""
    def cell(stat: dict[str, Any], name: str, i: int) -> tuple[float, float]:
        return stat[name]["mean"][i], stat[name]["se"][i]

    def fmt(value: tuple[float, float]) -> str:
        m, se = value
        digits = 4 if abs(m) < 0.1 else 3
        return f"{m:.{digits}f} ± {se:.{digits}f}"

    lines, failing = [], {m: {} for m in models}
    for z in Z_SETTINGS:
        key = f"z_disp={z}"
        head = f"| statistic (model_z_disp={z}) | pompy |" + "".join(
            f" plume_jax `{m}` | diff |" for m in models)
        lines += [head, "|---|---:|" + "---:|---:|" * len(models)]
        for label, name, i in ROWS:
            ref = cell(results["pompy"][key], name, i)
            row = f"| {label} | {fmt(ref)} |"
            for m in models:
                ours = cell(results["plume_jax"][m][key], name, i)
                rel, zz, ok = verdict(ref, ours)
                row += f" {fmt(ours)} | {rel:+.0%} ({zz:+.1f} SE){'' if ok else ' ✗'} |"
                if not ok:
                    failing[m].setdefault(key, []).append(label)
            lines.append(row)
        lines.append("")
    head = "| wind (both settings) | pompy |" + "".join(f" plume_jax `{m}` | diff |"
                                                    for m in models)
    lines += [head, "|---|---:|" + "---:|---:|" * len(models)]
    for label, name, i in WIND_ROWS:
        ref = cell(results["pompy"]["z_disp=False"], name, i)
        row = f"| {label} | {fmt(ref)} |"
        for m in models:
            ours = cell(results["plume_jax"][m]["z_disp=False"], name, i)
            rel, zz, ok = verdict(ref, ours)
            row += f" {fmt(ours)} | {rel:+.0%} ({zz:+.1f} SE){'' if ok else ' ✗'} |"
            if not ok:
                failing[m].setdefault("wind", []).append(label)
        lines.append(row)
    return "\n".join(lines) + "\n", failing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="PlumeNav-Filament-Farrell-v0")
    parser.add_argument("--models", nargs="*", default=["field"],
                        help="plume_jax wind models to run (e.g. field linear_field)")
    parser.add_argument("--plume", default="{}",
                        help="JSON of further plume settings for plume_jax's runs (e.g. "
                             "'{\"wind_field_substeps\": 10}')")
    parser.add_argument("--runs", type=int, default=12, help="independent runs per model")
    parser.add_argument("--steps", type=int, default=4000, help="recorded steps per run")
    parser.add_argument("--warmup", type=int, default=500, help="steps before recording")
    parser.add_argument("--every", type=int, default=2, help="steps between samples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pompy-substeps", type=int, default=10,
                        help="pompy wind updates per step (dt = 1 / substeps)")
    parser.add_argument("--pompy-path", default=None,
                        help="folder holding a fetched pompy package (default: the installed one)")
    parser.add_argument("--pompy-puff-loop", action="store_true",
                        help="run pompy's own PlumeModel.update (a Python loop over puffs, "
                             "several times slower) instead of its vectorised equivalent")
    parser.add_argument("--pompy-from", default=None,
                        help="reuse pompy's results from this JSON of an earlier run with the "
                             "same settings instead of running pompy")
    parser.add_argument("--out", default=os.path.join("benchmarks", "pompy_validation.json"))
    parser.add_argument("--table", default=os.path.join("benchmarks", "pompy_validation.md"))
    args = parser.parse_args(argv)
    for name in ("runs", "steps", "every", "pompy_substeps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.runs < 2:
        parser.error("--runs must be at least 2 (the standard errors are over runs)")
    if args.steps < args.every:
        parser.error("--steps must be at least --every")

    try:
        overrides = json.loads(args.plume)
    except json.JSONDecodeError as err:
        parser.error(f"--plume: not JSON ({err})")
    if not isinstance(overrides, dict):
        parser.error("--plume: a JSON object of plume settings")
    s = preset_settings(args.preset, args.warmup)
    settings = {"preset": args.preset, "runs": args.runs, "steps": args.steps,
                "warmup": args.warmup, "every": args.every, "seed": args.seed,
                "pompy_substeps": args.pompy_substeps, "mapped": s,
                "plume_jax_overrides": overrides,
                "statistics": "mean over independent runs; se = std over runs / sqrt(runs)"}
    payload: dict[str, Any] = {
        "settings": settings,
        "machine": machine_info("jax", ("device", "device_kind"), "cpu_count", "plume_jax"),
        "distances": DISTANCES.tolist(), "transects": TRANSECTS.tolist(),
        "probes": PROBES.tolist(), "offsets": OFFSETS.tolist(),
        "plume_jax": {}, "seconds": {}}
    if args.pompy_from:
        with open(args.pompy_from) as f:
            earlier = json.load(f)
        # plume_jax's own settings may differ: pompy's runs do not depend on them
        ours_only = ("seed", "plume_jax_overrides")
        mine = {k: v for k, v in settings.items() if k not in ours_only}
        theirs = {k: v for k, v in earlier["settings"].items() if k not in ours_only}
        if mine != theirs:
            parser.error(f"--pompy-from {args.pompy_from}: measured with other settings "
                         f"({earlier['settings']})")
        payload["pompy"] = earlier["pompy"]
        payload["seconds"]["pompy"] = earlier["seconds"]["pompy"]
        payload["pompy_diverged"] = earlier["pompy_diverged"]
        payload["pompy_version"] = earlier.get("pompy_version")
        payload["pompy_puff_update"] = earlier.get("pompy_puff_update",
                                                   "pompy's PlumeModel.update")
    else:
        try:
            pompy = import_pompy(args.pompy_path)
        except PompyMissing as err:
            parser.error(str(err))
        t0 = time.perf_counter()
        per_run = {z: [] for z in Z_SETTINGS}
        diverged = []
        seed = 1_000_003 * (args.seed + 1)  # apart from plume_jax's keys: independent runs
        while len(per_run[Z_SETTINGS[0]]) < args.runs:
            try:
                out = run_pompy(pompy, s, seed, args.warmup, args.steps, args.every,
                                args.pompy_substeps, args.pompy_puff_loop)
            except Diverged as err:
                diverged.append({"seed": seed, "step": err.args[0]})
                print(f"pompy seed {seed} diverged at step {err.args[0]}: replaced", flush=True)
                if len(diverged) > 4 * args.runs:
                    parser.error("pompy's wind diverged in most runs: nothing to compare")
            else:
                for z in Z_SETTINGS:
                    per_run[z].append(out[z])
                print(f"pompy run {len(per_run[Z_SETTINGS[0]])}/{args.runs} done "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
            seed += 1
        payload["pompy"] = {f"z_disp={z}": mean_se(per_run[z]) for z in Z_SETTINGS}
        payload["pompy_diverged"] = diverged
        payload["seconds"]["pompy"] = time.perf_counter() - t0
        payload["pompy_version"] = pompy_version()
        payload["pompy_puff_update"] = ("pompy's PlumeModel.update" if args.pompy_puff_loop
                                        else "vectorised equivalent (vectorised_plume_model)")
    for m in args.models:
        payload["plume_jax"][m] = {}
        for z in Z_SETTINGS:
            t0 = time.perf_counter()
            per_run_ours = run_plume_jax(args.preset, m, z, s, args.runs, args.seed,
                                         args.warmup, args.steps, args.every, overrides)
            payload["plume_jax"][m][f"z_disp={z}"] = mean_se(per_run_ours)
            payload["seconds"][f"plume_jax {m} z_disp={z}"] = time.perf_counter() - t0
            print(f"plume_jax {m} z_disp={z} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    payload["load_average_at_end"] = list(os.getloadavg())
    text, failing = table(payload, args.models)
    payload["not_matching"] = failing
    header = (f"{args.preset}, {args.runs} independent runs x {args.steps} steps after "
              f"{args.warmup} warm-up steps, sampled every {args.every} steps; pompy's wind "
              f"{args.pompy_substeps} substeps per step. mean ± SE over runs; diff: relative "
              f"difference to pompy and in combined SEs; ✗: neither within 10 % nor 2 SE.\n\n")
    for path in (args.out, args.table):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(payload, f, indent=1)
    with open(args.table, "w") as f:
        f.write(header + text)
    print(header + text)
    print(f"saved {args.out} and {args.table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
