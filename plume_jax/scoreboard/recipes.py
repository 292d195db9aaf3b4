"""What a zoo *recipe* does over training seeds, on the board.

A zoo entry's headline policy is one training run: one seed. Its recipe
(its config) trained with several seeds (``configs/sweep_seeds_<name>.yaml``)
keeps every member's policy under the entry (``seeds/<seed>/``, loadable as
``zoo:<name>@<version>#<seed>``, :mod:`agents.zoo`). For each zoo recipe on
its own preset the board reports, over its seeds, with the estimators of
Agarwal et al. 2021 (:mod:`plume_jax.scoreboard.recipe_stats`, SciPy's
bootstrap; rliable itself is not used: its pinned ``arch`` < 8 does not
import beside pandas 3):

- success and mean steps to the source as the interquartile mean (IQM) and
  the mean over seeds, each with its 95 % percentile bootstrap interval;
- the probability of improvement over the best hand-coded baseline that ran
  on that preset (P(a seed's success rate > the baseline's), ties counted
  half), with its interval;
- a verdict taken on the recipe's intervals (:func:`verdict`), and none for
  a recipe with a single seed.

The unit is a *run*: one trained policy scored on the protocol's episodes
(its success rate, and its mean steps to the source over the episodes that
reached it). A hand-coded baseline has no training seed, so it is one run,
held fixed: its score is its own row's success rate on the same episodes
(every seed is evaluated under the section's protocol: same episodes, same
seed), and only the recipe's seeds are resampled.

Where the seeds' policies are not kept, the seed sweep's own stored
evaluation stands in (``benchmarks/zoo_seed_spread/<name>/results.json``:
1000 greedy episodes at evaluation seed 1000003, other episodes than the
baselines'); a row says which it used (``seed_results``).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from plume_jax.scoreboard.record_schema import RECIPE_VERDICTS as VERDICTS
from plume_jax.scoreboard.record_schema import SEED_RESULTS
from plume_jax.scoreboard.recipe_stats import improvement_estimate, iqm, recipe_estimates

#: Where the seed sweeps' stored results live (``<name>/results.json`` and
#: ``<name>/entry.txt``), the fallback for entries that keep no seed policies.
SPREAD_DIR = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "zoo_seed_spread"
#: What ``seed_results`` says of each source.
FROM_BOARD, FROM_SWEEP, FROM_HEADLINE = SEED_RESULTS
#: Thresholds of the performance profile (success rate).
PROFILE_TAUS = tuple(float(t) for t in np.linspace(0.0, 1.0, 101))


def best_baseline(rows: Sequence[Mapping[str, Any]], preset: str) -> Mapping[str, Any] | None:
    """The best hand-coded baseline that ran on ``preset``: the highest
    success rate, then the fewest mean steps; ``None`` when none ran."""
    ran = [r for r in rows if r["preset"] == preset and r["kind"] == "baseline"
           and r["status"] == "ok"]
    if not ran:
        return None
    return min(ran, key=lambda r: (-r["metrics"]["success_rate"],
                                   r["metrics"]["mean_steps"] if r["metrics"]["mean_steps"]
                                   is not None else float("inf")))


def verdict(success: Mapping[str, Any], steps: Mapping[str, Any] | None,
            baseline: Mapping[str, Any] | None, seeds: int) -> str:
    """The recipe against the best baseline's metrics, on the recipe's
    intervals (its success IQM's and, on a tie, its steps IQM's):

    - ``"beats"``: the success interval lies wholly above the baseline's rate;
    - ``"faster"``: the success interval reaches the baseline's rate and the
      steps interval lies wholly below the baseline's mean steps;
    - ``"worse"``: the success interval lies wholly below the baseline's
      rate (or it reaches it and the steps interval lies wholly above);
    - ``"no clear difference"``: the intervals straddle the baseline's;
    - ``"one seed: no verdict"``: one seed has no interval;
    - ``"no baseline ran"``.
    """
    if seeds < 2:
        return "one seed: no verdict"
    if baseline is None:
        return "no baseline ran"
    rate, base_steps = baseline["success_rate"], baseline["mean_steps"]
    low, high = success["ci95"]
    if low > rate:
        return "beats"
    if high < rate:
        return "worse"
    ci = (steps or {}).get("ci95")
    if ci is not None and base_steps is not None:
        if ci[1] < base_steps:
            return "faster"
        if ci[0] > base_steps:
            return "worse"
    return "no clear difference"


def recipe_row(family: str, preset: str, label: str, per_seed: Sequence[Mapping[str, Any]],
               baseline: Mapping[str, Any] | None, seed_results: str, seed: int = 0,
               paper_best: Mapping[str, int] | None = None,
               trained_on: str | None = None) -> dict[str, Any]:
    """One recipe's row: ``per_seed`` holds one ``{"seed", "success_rate",
    "mean_steps", "episodes"}`` per training seed (``mean_steps`` ``None``
    for a seed that never reached the source); ``baseline`` is the best
    baseline's row (:func:`best_baseline`) or ``None``; ``paper_best``
    (``{"homings", "episodes"}``, a fixed-start family's published best on
    this preset) adds ``paper``: it and :func:`paper_verdict`; ``trained_on``
    (the entry's own preset, in a section whose recipes run on every regime)
    is kept as given."""
    runs = sorted(per_seed, key=lambda r: r["seed"])
    success = recipe_estimates([r["success_rate"] for r in runs], seed=seed)
    reached = [r["mean_steps"] for r in runs if r["mean_steps"] is not None]
    steps = recipe_estimates(reached, seed=seed) if reached else None
    row: dict[str, Any] = {
        "family": family, "preset": preset, "label": label, "seeds": len(runs),
        "seed_results": seed_results,
        "per_seed": [{"seed": int(r["seed"]), "success_rate": float(r["success_rate"]),
                      "mean_steps": None if r["mean_steps"] is None else float(r["mean_steps"]),
                      "episodes": int(r["episodes"]),
                      **({"per_eval": [float(v) for v in r["per_eval"]]}
                         if r.get("per_eval") else {})} for r in runs],
        "success": {"iqm": success["iqm"], "mean": success["mean"]},
        "steps": None if steps is None else {"iqm": steps["iqm"], "mean": steps["mean"],
                                             "seeds": steps["runs"]},
        "baseline": None, "improvement": None,
    }
    if baseline is not None:
        m = baseline["metrics"]
        row["baseline"] = {"label": baseline["label"], "success_rate": m["success_rate"],
                           "mean_steps": m["mean_steps"]}
        row["improvement"] = improvement_estimate(
            [r["success_rate"] for r in runs], [m["success_rate"]], seed=seed)
    row["verdict"] = verdict(row["success"]["iqm"], None if steps is None else row["steps"]["iqm"],
                             row["baseline"], len(runs))
    if paper_best is not None:
        row["paper"] = {**paper_best, "verdict": paper_verdict(
            row["success"]["iqm"], paper_best["homings"] / paper_best["episodes"], len(runs))}
    if trained_on is not None:
        row["trained_on"] = trained_on
    spread = over_eval_seeds(runs)
    if spread is not None:
        row["eval_seeds"] = spread
    return row


def paper_verdict(success_iqm: Mapping[str, Any], rate: float, seeds: int) -> str:
    """The recipe's success IQM interval against a published success rate
    (Singh et al.'s best homings / 240): ``"above"`` (the interval lies
    wholly above it), ``"below"`` (wholly below), ``"includes"``, or
    ``"one seed: no verdict"``."""
    if seeds < 2 or success_iqm["ci95"] is None:
        return "one seed: no verdict"
    low, high = success_iqm["ci95"]
    return "above" if low > rate else "below" if high < rate else "includes"


#: Stored sweeps that trained an entry among other settings (its members of
#: the entry's own settings are its seeds): the GPU-trained Farrell entry was
#: picked from a seed x learning-rate sweep (benchmarks/farrell_sweep/README.md).
OTHER_SWEEPS = {"zoo:filament-farrell-gru@3": SPREAD_DIR.parent / "farrell_sweep"
                / "results.json"}


def _setting(config: Mapping[str, Any], dotted: str) -> Any:
    section, _, key = dotted.partition(".")
    return (config.get(section) or {}).get(key)


def stored_sweep_results(entry: Any, spread_dir: pathlib.Path = SPREAD_DIR
                         ) -> list[dict[str, Any]] | None:
    """The seed sweep's own per-seed evaluation of ``entry``:
    ``spread_dir/<name>/results.json`` when its ``entry.txt`` names this very
    version, else the sweep :data:`OTHER_SWEEPS` names for it, keeping the
    members whose other swept settings are the entry config's; ``None`` when
    none is stored."""
    folder = spread_dir / entry.name
    path, named = folder / "results.json", None
    try:
        named = (folder / "entry.txt").read_text().strip()
    except OSError:
        pass
    if named != entry.reference:
        if entry.reference not in OTHER_SWEEPS:
            return None
        path = OTHER_SWEEPS[entry.reference]
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    from plume_jax.train.config import load_train_config

    own = load_train_config(entry.config_path).to_dict()
    others = [k for k in results["grid"] if k != "run.seed"]
    episodes = results["eval"]["episodes"]
    return [{"seed": int(m["run.seed"]), "success_rate": m["eval_success_rate"],
             "mean_steps": m["eval_mean_steps_to_goal"], "episodes": episodes}
            for m in results["results"] if all(m[k] == _setting(own, k) for k in others)] or None


def _seed_contender(entry: Any, reference: str) -> Any:
    from plume_jax.scoreboard.contenders import Contender

    return Contender(label=reference, kind="zoo", agent=reference, source=str(entry.folder),
                     env_overrides=entry.env_overrides)


def runs_on(entry: Any, preset: str, protocol: Mapping[str, Any]) -> str | None:
    """Why ``entry``'s policies cannot run on ``preset`` under ``protocol``
    (the board's reason, :func:`plume_jax.scoreboard.board.plan`), or
    ``None`` when they can (checked on its headline policy: its seeds share
    its config, so its observations and actions)."""
    from plume_jax.scoreboard.board import plan

    planned, reason = plan(preset, _seed_contender(entry, entry.reference), protocol["episodes"],
                           protocol["seed"], fixed_starts=protocol.get("fixed_starts"))
    return None if planned is not None else str(reason)


def evaluate_seeds(entry: Any, protocol: Mapping[str, Any],
                   progress: Callable[[str], None] = lambda text: None,
                   preset: str | None = None) -> list[dict[str, Any]]:
    """Every kept seed of ``entry`` run on ``preset`` (default its own)
    under ``protocol`` (a section's: its episodes and seed, so the
    baselines' episodes; its fixed starts, for a fixed-start family), one
    board row each (:func:`plume_jax.scoreboard.board.plan`)."""
    import jax

    from plume_jax.evaluate import scenario as sc
    from plume_jax.scoreboard.board import plan

    preset = entry.preset if preset is None else preset
    out = []
    for k in entry.seeds:
        reference = f"{entry.reference}#{k}"
        progress(f"{preset} / {reference}")
        planned, reason = plan(preset, _seed_contender(entry, reference), protocol["episodes"],
                               protocol["seed"], fixed_starts=protocol.get("fixed_starts"))
        if planned is None:
            from plume_jax.core.errors import ValidationError

            raise ValidationError.for_parameter("agent", reference,
                                                f"a policy that runs on {preset} ({reason})")
        seeds = eval_seeds(protocol)
        ms = [sc.execute_run(dataclasses.replace(planned, seed=s))["metrics"] for s in seeds]
        rates = [m["success_rate"] for m in ms]
        steps = [m["mean_steps"] for m in ms if m["mean_steps"] is not None]
        out.append({"seed": k, "success_rate": float(np.mean(rates)),
                    "mean_steps": float(np.mean(steps)) if steps else None,
                    "episodes": ms[0]["episodes"]})
        if len(seeds) > 1:
            out[-1]["per_eval"] = [float(r) for r in rates]
        # Each seed's policy compiles a rollout of its own that nothing reuses, and
        # XLA's CPU backend keeps every compiled program mapped (some 500 to 1,000
        # memory maps each): 69 Singh seed rollouts reached Linux's limit of 65,530
        # maps and the next compile failed ("Cannot allocate memory"), then crashed.
        jax.clear_caches()
    return out


#: Evaluation seeds a fixed-start section's recipes run each policy under:
#: the section's seed and the next ones (the starts' puff samples and the
#: plume's draws differ by seed; the policies do not).
EVAL_SEEDS = 3


def eval_seeds(protocol: Mapping[str, Any]) -> list[int]:
    """The evaluation seeds of a section's recipe rows: :data:`EVAL_SEEDS`
    from the section's seed for a fixed-start (Singh et al.'s) section, else
    the section's seed alone."""
    seed = int(protocol["seed"])
    return [seed + i for i in range(EVAL_SEEDS)] if protocol.get("fixed_starts") else [seed]


def over_eval_seeds(per_seed: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``{"seeds", "iqm_range", "best_seed"}`` for per-seed results run under
    several evaluation seeds (``per_eval``, in order): the range over
    evaluation seeds of the recipe's IQM, and the training seed of the
    highest evaluation-seed mean with that mean and its range; else None.
    (The row's ``success`` IQM is the IQM of the evaluation-seed means.)"""
    if not per_seed or not all(r.get("per_eval") for r in per_seed):
        return None
    table = np.asarray([r["per_eval"] for r in per_seed], float)  # [training seed, eval seed]
    iqms = [float(iqm(table[:, e])) for e in range(table.shape[1])]
    best = int(np.argmax(table.mean(axis=1)))
    return {"seeds": int(table.shape[1]), "iqm_range": [float(min(iqms)), float(max(iqms))],
            "best_seed": {"seed": int(per_seed[best]["seed"]),
                          "mean": float(table[best].mean()),
                          "range": [float(table[best].min()), float(table[best].max())]}}


def family_recipes(family: Any, section: Mapping[str, Any], zoo_entries: Sequence[Any],
                   spread_dir: pathlib.Path = SPREAD_DIR,
                   progress: Callable[[str], None] = lambda text: None
                   ) -> list[dict[str, Any]]:
    """A recipe row for every zoo entry (``zoo_entries``: the board's, the
    newest version of each) whose own preset is in ``family``: its kept seeds
    run under the section's protocol; else the stored sweep evaluation; else
    its headline row in the section, as a recipe of one seed. In a section
    of Singh et al.'s protocol each row also holds their best on the preset
    (:func:`published_best`) and the recipe's verdict against it, and every
    recipe with kept seeds also runs on the family's other presets where
    its policies can (:func:`every_regime`; ``trained_on`` names its own
    preset on every row of such a section). Rows go by preset, each
    preset's own recipes first."""
    rows = []
    order = {preset: i for i, preset in enumerate(family.presets)}
    cross = every_regime(section)
    for entry in sorted((e for e in zoo_entries if e.preset in order),
                        key=lambda e: (order[e.preset], e.name, e.version)):
        per_seed: list[dict[str, Any]] | None = None
        if entry.seeds:
            per_seed, source = evaluate_seeds(entry, section["protocol"], progress), FROM_BOARD
        else:
            per_seed, source = stored_sweep_results(entry, spread_dir), FROM_SWEEP
        if not per_seed:
            own = [r for r in section["rows"] if r["label"] == entry.reference
                   and r["preset"] == entry.preset and r["status"] == "ok"]
            if not own:
                continue
            m = own[0]["metrics"]
            per_seed, source = [{"seed": int(entry.info.get("seed", 0)),
                                 "success_rate": m["success_rate"],
                                 "mean_steps": m["mean_steps"], "episodes": m["episodes"]}
                                ], FROM_HEADLINE
        rows.append(recipe_row(family.name, entry.preset, entry.reference, per_seed,
                               best_baseline(section["rows"], entry.preset), source,
                               paper_best=published_best(section, entry.preset),
                               trained_on=entry.preset if cross else None))
    if cross:
        for entry in sorted((e for e in zoo_entries if e.preset in order and e.seeds),
                            key=lambda e: (order[e.preset], e.name, e.version)):
            for preset in family.presets:
                if preset == entry.preset or runs_on(entry, preset, section["protocol"]):
                    continue
                per_seed = evaluate_seeds(entry, section["protocol"], progress, preset=preset)
                rows.append(recipe_row(family.name, preset, entry.reference, per_seed,
                                       best_baseline(section["rows"], preset), FROM_BOARD,
                                       paper_best=published_best(section, preset),
                                       trained_on=entry.preset))
        # stable: within a preset, the entries keep their order
        rows.sort(key=lambda r: (order[r["preset"]], r["trained_on"] != r["preset"]))
    return rows


def every_regime(section: Mapping[str, Any]) -> bool:
    """Whether the section's recipes also run on their family's other
    presets: in a section of Singh et al.'s protocol, as they evaluated
    every agent on every regime (their best on a regime, the column maximum
    of their table, may be an agent trained on another)."""
    from plume_jax.evaluate import singh_protocol

    return section["protocol"].get("fixed_starts") == singh_protocol.PROTOCOL


def published_best(section: Mapping[str, Any], preset: str) -> dict[str, int] | None:
    """``{"homings", "episodes"}``: the paper's best on ``preset`` for a
    section of a fixed-start protocol that has one (Singh et al.'s best of
    240, :data:`plume_jax.evaluate.singh_protocol.PAPER_BEST`), else None."""
    from plume_jax.evaluate import singh_protocol

    if section["protocol"].get("fixed_starts") != singh_protocol.PROTOCOL:
        return None
    best = singh_protocol.paper_best(preset)
    return None if best is None else {"homings": best, "episodes": singh_protocol.EPISODES}


def _homings_scale(recipes: Sequence[Mapping[str, Any]]) -> int | None:
    """The starts each seed ran, for recipes of a fixed-start protocol with
    a published best (their x axis and table read homings); None else."""
    if not recipes or not all(r.get("paper") for r in recipes):
        return None
    return int(recipes[0]["per_seed"][0]["episodes"])


def profile_figure(name: str, recipes: Sequence[Mapping[str, Any]]) -> Any:
    """The family's performance profiles: per recipe, the fraction of its
    seeds whose success rate exceeds each threshold tau, with its pointwise
    95 % bootstrap band; each recipe's best baseline's rate as a dashed
    line of the same colour. For a fixed-start family with a published best
    (Singh et al.'s) the x axis reads homings out of the starts run, and
    each recipe's published best is a dotted line. Where recipes also ran
    on presets they were not trained on (``trained_on``), one panel per
    preset, a recipe keeping its colour across panels."""
    from matplotlib.figure import Figure

    starts = _homings_scale(recipes)
    presets = list(dict.fromkeys(r["preset"] for r in recipes))
    if not any(r.get("trained_on", r["preset"]) != r["preset"] for r in recipes):
        fig = Figure(figsize=(7.5, 4.4 + 0.2 * ((len(recipes) + 1) // 2)), layout="constrained")
        ax = fig.subplots()
        _profile_panel(ax, recipes, [f"C{i % 10}" for i in range(len(recipes))], starts)
        ax.set_title(f"{name}: performance profiles of the zoo recipes (95 % bootstrap bands)",
                     fontsize=9)
        fig.legend(fontsize=7, loc="outside lower center", ncol=2)
        return fig

    def key(r: Mapping[str, Any]) -> str:
        return f"{r['label']} (trained on {regime_name(r.get('trained_on', r['preset']))})"

    labels = list(dict.fromkeys(key(r) for r in recipes))
    colour = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    cols = 2 if len(presets) > 1 else 1
    rows_n = (len(presets) + cols - 1) // cols
    fig = Figure(figsize=(10.0, 3.4 * rows_n + 0.25 * ((len(labels) + 1) // 2)),
                 layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows_n, cols, squeeze=False)).ravel()
    for ax, preset in zip(axes, presets):
        here = [r for r in recipes if r["preset"] == preset]
        keys = [key(r) for r in here]
        _profile_panel(ax, here, [colour[k] for k in keys], starts, labels=keys)
        ax.set_title(regime_name(preset), fontsize=8)
    for ax in axes[len(presets):]:
        ax.set_visible(False)
    fig.suptitle(f"{name}: performance profiles of the zoo recipes on each preset "
                 "(95 % bootstrap bands)", fontsize=9)
    handles: dict[str, Any] = {}
    for ax in axes[:len(presets)]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), fontsize=7, loc="outside lower center",
               ncol=2)
    return fig


def regime_name(preset: str) -> str:
    """``PlumeNav-Singh2023-Constant-v0`` -> ``Singh2023-Constant``."""
    return preset.removeprefix("PlumeNav-").removesuffix("-v0")


def _profile_panel(ax: Any, recipes: Sequence[Mapping[str, Any]], colours: Sequence[str],
                   starts: int | None, labels: Sequence[str] | None = None) -> None:
    """One axes of :func:`profile_figure`: ``recipes``' profiles in
    ``colours`` (legend: ``labels``, else each recipe's label and preset),
    their best baselines dashed and published bests dotted."""
    from plume_jax.scoreboard.recipe_stats import performance_profile

    scale = 1.0 if starts is None else float(starts)
    for i, (r, colour) in enumerate(zip(recipes, colours)):
        profile = performance_profile([s["success_rate"] for s in r["per_seed"]], PROFILE_TAUS)
        tau = scale * np.asarray(profile["tau"])
        seeds = f"{r['seeds']} seed{'s' if r['seeds'] != 1 else ''}"
        label = (f"{r['label']} ({r['preset'].removeprefix('PlumeNav-')}, {seeds})"
                 if labels is None else f"{labels[i]}, {seeds}")
        ax.step(tau, np.asarray(profile["fraction"], float), where="post", color=colour,
                label=label)
        if r["seeds"] > 1:
            low = np.array([np.nan if v is None else v for v in profile["low"]], float)
            high = np.array([np.nan if v is None else v for v in profile["high"]], float)
            ax.fill_between(tau, low, high, step="post", color=colour, alpha=0.15)
        if r["baseline"] is not None:
            ax.axvline(scale * r["baseline"]["success_rate"], color=colour, linestyle="--",
                       linewidth=1)
        if starts is not None:
            paper = r["paper"]
            ax.axvline(scale * paper["homings"] / paper["episodes"], color=colour,
                       linestyle=":", linewidth=1.5)
    ax.set_xlim(0, scale)
    ax.set_ylim(-0.02, 1.02)
    if starts is None:
        ax.set_xlabel("success rate threshold τ (dashed: the best baseline's rate on that preset)")
        ax.set_ylabel("fraction of seeds with success > τ")
    else:
        ax.set_xlabel(f"homings threshold τ, of {starts} starts\n(dashed: the best baseline's "
                      "homings on that preset; dotted: Singh et al.'s best)", fontsize=8)
        ax.set_ylabel("fraction of seeds with homings > τ", fontsize=8)
    ax.grid(alpha=0.3)


def estimate_text(estimate: Mapping[str, Any] | None, scale: float = 1.0, spec: str = ".1f"
                  ) -> str:
    """``value [low, high]`` (each times ``scale``, formatted by ``spec``),
    ``value`` alone without an interval, ``—`` for none."""
    if estimate is None:
        return "—"
    ci = estimate["ci95"]
    text = format(scale * estimate["value"], spec)
    return text + ("" if ci is None else
                   f" [{format(scale * ci[0], spec)}, {format(scale * ci[1], spec)}]")


#: What each ``seed_results`` source means, for the page.
SOURCES = {FROM_BOARD: "each seed's policy under this section's protocol",
           FROM_SWEEP: "the seed sweep's own evaluation (1000 episodes, seed 1000003; the "
                       "seeds' policies are not kept)",
           FROM_HEADLINE: "the headline policy's row: one seed"}


def recipe_lines(recipes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The family's recipe table: a row per (preset, zoo recipe); for a
    fixed-start family with a published best, in homings
    (:func:`homings_recipe_lines`)."""
    if _homings_scale(recipes) is not None:
        return homings_recipe_lines(recipes)
    lines = ["| preset | recipe | seeds | success % IQM [95 % CI] | success % mean [95 % CI] "
             "| steps IQM [95 % CI] | steps mean [95 % CI] | best baseline: success %, steps "
             "| P(seed > baseline) [95 % CI] | verdict | seed results |",
             "|---|---|---:|---|---|---|---|---|---|---|---|"]
    for r in recipes:
        b = r["baseline"]
        base = "—" if b is None else (f"{b['label']}: {100 * b['success_rate']:.1f}, "
                                      f"{'—' if b['mean_steps'] is None else format(b['mean_steps'], '.1f')}")
        steps = r["steps"] or {}
        lines.append(
            f"| {r['preset']} | {r['label']} | {r['seeds']} | "
            f"{estimate_text(r['success']['iqm'], 100)} | "
            f"{estimate_text(r['success']['mean'], 100)} | {estimate_text(steps.get('iqm'))} | "
            f"{estimate_text(steps.get('mean'))} | {base} | "
            f"{estimate_text(r['improvement'], spec='.2f')} | {r['verdict']} | "
            f"{r['seed_results']} |")
    return lines


def trained_on_text(row: Mapping[str, Any]) -> str:
    """``own preset``, or ``<regime> (cross-regime)`` for a row run on another
    preset than the one it was trained on (a board row's or a recipe row's;
    a recipe row without ``trained_on`` ran on its own preset)."""
    trained = row.get("trained_on", row["preset"])
    return "own preset" if trained == row["preset"] else f"{regime_name(trained)} (cross-regime)"


#: How :func:`paper_verdict` reads on the page.
PAPER_SAID = {"above": "IQM interval lies above it", "below": "IQM interval lies below it",
              "includes": "IQM interval includes it",
              "one seed: no verdict": "one seed: no verdict"}


def homings_recipe_lines(recipes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The recipe table of a fixed-start family with a published best:
    homings (success rate x the starts run) as IQM and mean over the seeds,
    steps, the best baseline's homings, the probability of improvement, the
    verdict against the baseline, and the paper's best with the verdict
    against it."""
    n = _homings_scale(recipes) or 0
    trained = any("trained_on" in r for r in recipes)
    lines = [f"| preset | recipe | {'trained on | ' if trained else ''}seeds | homings of {n}: "
             "IQM [95 % CI] | homings mean "
             "[95 % CI] | steps IQM [95 % CI] | steps mean [95 % CI] | best baseline: "
             "homings, steps | P(seed > baseline) [95 % CI] | verdict | Singh et al.'s best "
             "| against their best | seed results |",
             "|---|---|" + ("---|" if trained else "") + "---:|---|---|---|---|---|---|---|---|"
             "---|---|"]
    for r in recipes:
        b, paper = r["baseline"], r["paper"]
        base = "—" if b is None else (
            f"{b['label']}: {n * b['success_rate']:.0f}, "
            f"{'—' if b['mean_steps'] is None else format(b['mean_steps'], '.1f')}")
        steps = r["steps"] or {}
        lines.append(
            f"| {r['preset']} | {r['label']} | "
            + (f"{trained_on_text(r)} | " if trained else "") + f"{r['seeds']} | "
            f"{estimate_text(r['success']['iqm'], n)} | "
            f"{estimate_text(r['success']['mean'], n)} | {estimate_text(steps.get('iqm'))} | "
            f"{estimate_text(steps.get('mean'))} | {base} | "
            f"{estimate_text(r['improvement'], spec='.2f')} | {r['verdict']} | "
            f"{paper['homings']}/{paper['episodes']} | {PAPER_SAID[paper['verdict']]} | "
            f"{r['seed_results']} |")
    return lines + eval_seed_lines(recipes, n)


def eval_seed_lines(recipes: Sequence[Mapping[str, Any]], n: int) -> list[str]:
    """Per regime, each recipe's IQM and best seed against the paper's best
    agent, over the evaluation seeds (rows that ran under several,
    :func:`over_eval_seeds`): the IQM of the evaluation-seed means with the
    range of the IQM over evaluation seeds, and the best training seed's
    mean with its range."""
    rows = [r for r in recipes if r.get("eval_seeds")]
    if not rows:
        return []
    k = rows[0]["eval_seeds"]["seeds"]
    lines = ["", f"Over {k} evaluation seeds (homings of {n}): the recipe's IQM of its seeds' "
             "evaluation-seed means [range of the IQM over evaluation seeds], and its best "
             "seed's mean [range], beside Singh et al.'s best agent on the regime (a column "
             "maximum of their table: each regime's best may be another of their agents).",
             "",
             "| regime | recipe | trained on | IQM [range] | best seed: mean [range] | "
             "Singh et al.'s best | IQM reaches it | best seed reaches it |",
             "|---|---|---|---|---|---:|---|---|"]
    for r in rows:
        e, paper = r["eval_seeds"], r["paper"]
        lo, hi = (n * v for v in e["iqm_range"])
        b = e["best_seed"]
        mean, (blo, bhi) = n * b["mean"], (n * v for v in b["range"])
        iqm_value = n * r["success"]["iqm"]["value"]
        lines.append(
            f"| {regime_name(r['preset'])} | {r['label']} | {trained_on_text(r)} | "
            f"{iqm_value:.1f} [{lo:.1f}, {hi:.1f}] | #{b['seed']}: {mean:.1f} [{blo:.0f}, "
            f"{bhi:.0f}] | {paper['homings']} | "
            f"{'yes' if iqm_value >= paper['homings'] else 'no'} | "
            f"{'yes' if mean >= paper['homings'] else 'no'} |")
    return lines


__all__ = ["FROM_BOARD", "FROM_HEADLINE", "FROM_SWEEP", "OTHER_SWEEPS", "PAPER_SAID",
           "PROFILE_TAUS", "SOURCES", "SPREAD_DIR", "VERDICTS", "best_baseline", "estimate_text",
           "eval_seed_lines", "eval_seeds", "evaluate_seeds", "every_regime", "family_recipes", "homings_recipe_lines",
           "over_eval_seeds", "paper_verdict", "profile_figure", "published_best", "recipe_lines", "recipe_row",
           "regime_name", "runs_on", "stored_sweep_results", "trained_on_text", "verdict"]
