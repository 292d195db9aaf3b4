#!/usr/bin/env python
"""plume_jax's Singh plume against Singh et al. (2023)'s own simulator, side by
side at the same settings.

Their simulator is not part of this repository. Its statistics were measured
once, outside it, by running their code (github BruntonUWBio/plumetracknets,
commit 804fdcc: ``code/sim_utils.py``'s wind and ``manual_integrator``,
called unchanged; ``code/sim_analysis.py``'s concentration reading, checked
against a vectorised copy) and stored with how they were made in
``benchmarks/singh_reference.json`` (``--reference``). This script runs the
``singh`` plume of the ``PlumeNav-Singh2023-*`` presets the same way and
compares.

Their runs: 121 s of plume from empty, read at the env frames (every 0.04 s)
from 60 s to 120 s; five seeds per regime (switch-many: five wind
realisations, the first their dataset's). Here: the preset's plume from
empty, the wind's clock placed so that the reading window starts at 60 s
(switch-once switches at their 60.5 s), ``--runs`` independent seeds,
1500 frames each.

Statistics, at probes on the centre line (0.5 to 8 m downwind) and across
it at 2, 4 and 6 m (-0.5 to 0.5 m; switch-once: along and across its 45
degree axis), each probe the mean of 8 points 1 mm apart along the axis
(in a constant wind the puffs sit on a 5 mm lattice along x, so one point's
reading jumps with its place on it): the mean concentration, the
intermittency (the fraction of frames at or above their detection threshold
1e-4) and the mean live puff count; for the constant plume with each kept
fraction of puffs (sparse 0.8 ... 0.2) and both diffusion multipliers (1:
training, 0.5: their evaluation). A statistic *matches* when plume_jax's mean
is within 10 % of theirs or within 2 combined standard errors (SE over
seeds). The table goes to ``--table`` and, between its markers, into
docs/plumes.md.

How many statistics two runs of one simulator leave outside that rule by
chance (``--null PAIRS``): the script also runs ``2 x PAIRS`` further groups
of ``--runs`` seeds of the ``singh`` plume (seeds disjoint from the compared
ones) and applies the same rule between the groups of each pair, one group
standing where Singh et al.'s simulator stands. Its counts calibrate the
comparison's: with five seeds a side, some hundreds of statistics and the
off-axis probes' rare, heavy-tailed readings, a few outside are expected
of identical simulators.

Usage::

    python scripts/validation/singh_validation.py              # 5 runs, as stored
    python scripts/validation/singh_validation.py --runs 2 --frames 100 --no-docs  # a quick look
    python scripts/validation/singh_validation.py --null 4     # and 4 plume_jax-vs-itself pairs
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
from scripts.bench.harness import machine_info

ROOT = pathlib.Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "benchmarks" / "singh_reference.json"
DOCS = ROOT / "docs" / "plumes.md"
START, END = "<!-- singh-validation:start -->", "<!-- singh-validation:end -->"
THRESHOLD = 1e-4
#: their regimes -> (preset, kept fractions of puffs)
REGIMES = {
    "constant": ("PlumeNav-Singh2023-Constant-v0", (1.0, 0.8, 0.6, 0.4, 0.2)),
    "switch-once": ("PlumeNav-Singh2023-SwitchOnce-v0", (1.0,)),
    "switch-many": ("PlumeNav-Singh2023-SwitchMany-v0", (1.0,)),
}
DIFFUSIONS = (1.0, 0.5)
#: their reading window starts 60 s into the plume; switch-once turns at 60.5 s
WARMUP_SECONDS, SWITCH_AFTER = 60.0, 0.5


def probe_points(entries: list[dict[str, Any]], sub: int, spacing: float, angle: float,
                 source: np.ndarray) -> np.ndarray:
    """f32[probes * sub, 2], grid coordinates: each probe ``(x, y)`` (along and
    across the plume axis at ``angle``) read at ``sub`` points ``spacing``
    apart along the axis."""
    c, s = math.cos(angle), math.sin(angle)
    offsets = (np.arange(sub) - (sub - 1) / 2) * spacing
    pts = [(source[0] + (e["x"] + o) * c - e["y"] * s, source[1] + (e["x"] + o) * s + e["y"] * c)
           for e in entries for o in offsets]
    return np.asarray(pts, np.float32)


def run_plume_jax(regime: str, fraction: float, runs: int, frames: int, seed: int,
                  reference: dict[str, Any]) -> dict[str, Any]:
    """Per-run means ``{variant: {statistic: f64[runs, probes]}}`` and puff counts."""
    preset, _ = REGIMES[regime]
    step_s = 0.04
    warmup = int(round(WARMUP_SECONDS / step_s))
    plume_cfg: dict[str, Any] = {"warmup_steps": warmup, "birth_rate": fraction}
    if regime == "switch-once":
        plume_cfg["switch_time"] = SWITCH_AFTER
    env, params = plume_jax.make(preset, plume=plume_cfg)
    plume, pp = env.plume, params.plume
    settings = reference["settings"]
    entries = reference["regimes"][regime]["summary"]["b1_d1"]["mean_concentration"]
    angle = math.pi / 4 if regime == "switch-once" else 0.0
    points = jnp.asarray(probe_points(entries, settings["probe_points"],
                                      settings["probe_spacing_m"], angle,
                                      np.asarray(pp.source, np.float64)))
    sub = settings["probe_points"]

    def one(key: jax.Array) -> Any:
        k_init, k_run = jax.random.split(key)
        state = plume.init(k_init, pp)

        def frame(s: Any, k: jax.Array) -> tuple[Any, Any]:
            s = plume.advance(k, s, pp)
            out = {}
            for d in DIFFUSIONS:
                c = plume.concentration(s, points, env.grid, pp.replace(diffusion=jnp.float32(d)))
                out[f"d{d:g}"] = (c.reshape(-1, sub).mean(1),
                                  (c >= THRESHOLD).reshape(-1, sub).mean(1))
            return s, (out, jnp.sum(s.active))

        _, (outs, counts) = jax.lax.scan(frame, state, jax.random.split(k_run, frames))
        return jax.tree.map(lambda a: a.mean(0), outs), counts.mean()

    keys = jax.random.split(jax.random.key(seed), runs)
    outs, counts = jax.block_until_ready(jax.jit(jax.vmap(one))(keys))
    return {"variants": {d: {"mean_concentration": _rounded(v[0]),
                             "intermittency": _rounded(v[1])}
                         for d, v in outs.items()},
            "puff_count": _rounded(counts)}


def _rounded(values: Any) -> list:
    """``values`` as nested lists of floats to 6 significant digits (what
    the JSON stores, and what the comparison then reads)."""
    return np.vectorize(lambda v: float(f"{v:.6g}"))(np.asarray(values, np.float64)).tolist()


def mean_se(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(rows, np.float64)
    return x.mean(0), x.std(0, ddof=1) / math.sqrt(len(x))


def verdict(ref: tuple[float, float], ours: tuple[float, float]) -> tuple[float, float, bool]:
    """``(relative difference, difference in combined SEs, matches)``: a match
    is within 10 % of the reference or within 2 combined SEs."""
    (a, sa), (b, sb) = ref, ours
    rel = (b - a) / a if a else (0.0 if b == a else math.inf)
    se = math.hypot(sa, sb)
    z = (b - a) / se if se > 0 else (0.0 if a == b else math.inf)
    return rel, z, abs(rel) <= 0.10 or abs(z) <= 2.0


def compare(reference: dict[str, Any], ours: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (variant, statistic, probe): theirs, ours, the verdict."""
    rows = []
    for regime, per_fraction in ours.items():
        summary = reference["regimes"][regime]["summary"]
        for fraction, result in per_fraction.items():
            for d in DIFFUSIONS:
                key = f"b{float(fraction):g}_d{d:g}"
                theirs = summary[key]
                variant = f"{regime}, puffs x{float(fraction):g}, diffusion x{d:g}"
                ref = (theirs["puff_count"]["mean"], theirs["puff_count"]["se"])
                count, count_se = mean_se(result["puff_count"])  # one per run
                rows.append(_row(variant, "live puffs", ref, (float(count), float(count_se))))
                for stat in ("mean_concentration", "intermittency"):
                    mine, mine_se = mean_se(result["variants"][f"d{d:g}"][stat])
                    for i, e in enumerate(theirs[stat]):
                        if e["mean"] == 0.0 and mine[i] == 0.0:
                            continue  # nothing reaches this probe in either
                        where = (f"x {e['x']:g} m" if e["kind"] == "centreline"
                                 else f"x {e['x']:g} m, y {e['y']:+g} m")
                        label = ("mean concentration" if stat == "mean_concentration"
                                 else "intermittency") + f" ({e['kind']}, {where})"
                        rows.append(_row(variant, label, (e["mean"], e["se"]),
                                         (float(mine[i]), float(mine_se[i]))))
    return rows


def as_reference(reference: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """plume_jax's own runs ``ours`` (as :func:`run_plume_jax` returns them,
    per regime and kept fraction) summarised in the layout of Singh et al.'s
    stored statistics ``reference`` (its probes, means and SEs over runs), so
    that :func:`compare` can put them where theirs stand."""
    regimes: dict[str, Any] = {}
    for regime, per_fraction in ours.items():
        template = reference["regimes"][regime]["summary"]
        summaries: dict[str, Any] = {}
        for fraction, result in per_fraction.items():
            count, count_se = mean_se(result["puff_count"])
            for d in DIFFUSIONS:
                key = f"b{float(fraction):g}_d{d:g}"
                entry: dict[str, Any] = {"puff_count": {"mean": float(count),
                                                        "se": float(count_se)}}
                for stat in ("mean_concentration", "intermittency"):
                    mean, se = mean_se(result["variants"][f"d{d:g}"][stat])
                    entry[stat] = [{**probe, "mean": float(mean[i]), "se": float(se[i])}
                                   for i, probe in enumerate(template[key][stat])]
                summaries[key] = entry
        regimes[regime] = {"summary": summaries}
    return {"settings": reference["settings"], "regimes": regimes}


def run_group(ours: dict[str, Any], group: int, runs: int) -> dict[str, Any]:
    """Runs ``group * runs`` to ``(group + 1) * runs - 1`` of every plume of
    ``ours`` (the layout :func:`run_plume_jax` returns, per regime and
    fraction)."""
    part = slice(group * runs, (group + 1) * runs)
    return {regime: {fraction: {
        "variants": {d: {stat: values[part] for stat, values in stats.items()}
                     for d, stats in result["variants"].items()},
        "puff_count": result["puff_count"][part]}
        for fraction, result in per_fraction.items()} for regime, per_fraction in ours.items()}


def null_comparisons(reference: dict[str, Any], ours: dict[str, Any], runs: int,
                     pairs: int) -> list[dict[str, Any]]:
    """The match rule between plume_jax and itself: for each of ``pairs``
    pairs of disjoint groups of ``runs`` runs in ``ours`` (``2 * pairs *
    runs`` runs per plume), the first group's statistics stand where Singh et
    al.'s do. Per pair: the statistics compared, how many lie outside the
    rule, and the largest ``|z|`` among those more than 10 % apart."""
    out = []
    for pair in range(pairs):
        rows = compare(as_reference(reference, run_group(ours, 2 * pair, runs)),
                       run_group(ours, 2 * pair + 1, runs))
        apart = [abs(r["z"]) for r in rows if abs(r["relative"]) > 0.10]
        out.append({"statistics": len(rows), "outside": sum(not r["matches"] for r in rows),
                    "more_than_10_percent_apart": len(apart),
                    "largest_z_beyond_10_percent": max(apart, default=0.0)})
    return out


def null_sentence(null: list[dict[str, Any]], runs: int) -> str:
    """One sentence with the counts of :func:`null_comparisons`."""
    # each pair counts the statistics defined in both of its groups (a far
    # cross-section point that no puff reached in either has no ratio)
    counts = ", ".join(f"{n['outside']} of {n['statistics']}" for n in null)
    largest = max(n["largest_z_beyond_10_percent"] for n in null)
    return (f"The same rule between two independent groups of {runs} seeds of the `singh` "
            f"plume itself ({len(null)} pair{'s' if len(null) > 1 else ''} of groups, seeds "
            f"disjoint from the above): {counts} statistics outside, the largest at "
            f"{largest:.1f} SE.")


def _row(variant: str, label: str, ref: tuple[float, float], ours: tuple[float, float]
         ) -> dict[str, Any]:
    rel, z, ok = verdict(ref, ours)
    return {"variant": variant, "statistic": label, "theirs": list(ref), "plume_jax": list(ours),
            "relative": rel, "z": z, "matches": ok}


def fmt(value: list[float]) -> str:
    m, se = value
    digits = 0 if abs(m) >= 100 else (5 if abs(m) < 0.01 else 4 if abs(m) < 1 else 3)
    return f"{m:.{digits}f} ± {se:.{digits}f}"


def table(rows: list[dict[str, Any]]) -> str:
    """The full markdown table, one section per variant."""
    lines: list[str] = []
    variant = None
    for r in rows:
        if r["variant"] != variant:
            variant = r["variant"]
            lines += ["", f"**{variant}**", "", "| statistic | theirs | plume_jax | diff |",
                      "|---|---:|---:|---:|"]
        rel = "—" if not math.isfinite(r["relative"]) else f"{r['relative']:+.0%}"
        lines.append(f"| {r['statistic']} | {fmt(r['theirs'])} | {fmt(r['plume_jax'])} | "
                     f"{rel} ({r['z']:+.1f} SE){'' if r['matches'] else ' ✗'} |")
    return "\n".join(lines).strip() + "\n"


def summary(rows: list[dict[str, Any]], header: str) -> str:
    """The docs table: per variant, statistics within 10 % or 2 SE, the live
    puffs, and every statistic that is not."""
    variants: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        variants.setdefault(r["variant"], []).append(r)
    lines = [header, "", "| plume (their dataset) | within 10 % or 2 SE | live puffs: theirs / "
             "plume_jax | outside (diff) |", "|---|---:|---:|---|"]
    for variant, rs in variants.items():
        puffs = rs[0]
        bad = [f"{r['statistic']} ({r['relative']:+.0%}, {r['z']:+.1f} SE)" for r in rs
               if not r["matches"]]
        lines.append(f"| {variant} | {sum(r['matches'] for r in rs)}/{len(rs)} | "
                     f"{fmt(puffs['theirs'])} / {fmt(puffs['plume_jax'])} | "
                     f"{'; '.join(bad) if bad else '—'} |")
    return "\n".join(lines) + "\n"


def write_docs(text: str, path: pathlib.Path = DOCS) -> None:
    """Replace what lies between the markers of ``path`` with ``text``."""
    page = path.read_text(encoding="utf-8")
    if START not in page or END not in page:
        raise SystemExit(f"{path}: the markers {START} and {END} are missing")
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{text}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=str(REFERENCE))
    parser.add_argument("--runs", type=int, default=5, help="independent seeds per plume")
    parser.add_argument("--frames", type=int, default=1500,
                        help="frames (0.04 s) read per run (theirs: 1500, 60 s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--regimes", nargs="*", default=list(REGIMES), choices=list(REGIMES))
    parser.add_argument("--null", type=int, default=0, metavar="PAIRS",
                        help="also compare plume_jax with itself: PAIRS pairs of disjoint "
                             "groups of --runs seeds each (0: none)")
    parser.add_argument("--out", default=os.path.join("benchmarks", "singh_validation.json"))
    parser.add_argument("--table", default=os.path.join("benchmarks", "singh_validation.md"))
    parser.add_argument("--no-docs", action="store_true",
                        help="do not write the summary into docs/plumes.md")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs must be at least 2 (the standard errors are over runs)")
    if args.frames < 1:
        parser.error("--frames must be at least 1")
    if args.null < 0:
        parser.error(f"--null must be 0 (no self-comparison) or a number of pairs, not {args.null}")
    try:
        with open(args.reference) as f:
            reference = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        parser.error(f"--reference {args.reference}: {err}")
    t0 = time.perf_counter()
    ours: dict[str, dict[str, Any]] = {}
    for i, regime in enumerate(args.regimes):
        ours[regime] = {}
        for j, fraction in enumerate(REGIMES[regime][1]):
            ours[regime][f"{fraction:g}"] = run_plume_jax(
                regime, fraction, args.runs, args.frames, args.seed + 100 * i + j, reference)
            print(f"{regime} x{fraction:g} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    null: list[dict[str, Any]] = []
    if args.null:
        own: dict[str, dict[str, Any]] = {}
        for i, regime in enumerate(args.regimes):  # seeds + 50: none of the above's
            own[regime] = {f"{fraction:g}": run_plume_jax(
                regime, fraction, 2 * args.null * args.runs, args.frames,
                args.seed + 100 * i + j + 50, reference)
                for j, fraction in enumerate(REGIMES[regime][1])}
            print(f"{regime}: plume_jax's own groups done ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
        null = null_comparisons(reference, own, args.runs, args.null)
    rows = compare(reference, ours)
    matching = sum(r["matches"] for r in rows)
    header = (f"Singh et al.'s simulator (their code, {len(reference['settings']['seeds'])} "
              f"seeds, benchmarks/singh_reference.json) against the `singh` plume "
              f"({args.runs} seeds x {args.frames} frames after 60 s): {matching} of "
              f"{len(rows)} statistics within 10 % or 2 SE.")
    if null:
        header += " " + null_sentence(null, args.runs)
    payload = {"settings": {"runs": args.runs, "frames": args.frames, "seed": args.seed,
                            "regimes": args.regimes, "reference": args.reference,
                            "statistics": "mean over seeds; se = std over seeds / sqrt(seeds)"},
               "machine": machine_info("jax", ("device", "device_kind"), "cpu_count",
                                       "plume_jax"),
               "seconds": time.perf_counter() - t0, "rows": rows, "plume_jax": ours,
               "matching": matching, "statistics": len(rows), "null": null}
    for path in (args.out, args.table):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(payload, f, separators=(",", ":"))
    with open(args.table, "w") as f:
        f.write(header + "\n\n" + table(rows))
    docs = summary(rows, header)
    if not args.no_docs:
        write_docs(docs)
    print(docs)
    print(f"saved {args.out} and {args.table}" + ("" if args.no_docs else " and docs/plumes.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
