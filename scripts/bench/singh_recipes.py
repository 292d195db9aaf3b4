#!/usr/bin/env python
"""Singh et al. (2023)'s regimes as training recipes over seeds, on their own
evaluation: homings out of their 240 fixed starts.

Each regime's config (``configs/train_singh2023_<regime>_<net>.yaml``, their PPO
recipe) trained with ``run.seed`` 0..4 as one sweep
(``configs/sweep_seeds_singh2023-<regime>-<net>.yaml``); every member's greedy
policy then runs the regime's 240-start scenario
(``configs/scenarios/singh2023_paper_<regime>.yaml``, the protocol its stored
rows were measured with, now ``singh240_paper``: halved diffusion, no odour
gain, the scenario's seed), and so does the scenario's own agent, the
hand-coded ``cast_and_surge`` flier, on the same starts and plumes.

``--add LABEL=SWEEP_FOLDER`` (``LABEL`` is ``<regime>-<net>``, e.g.
``constant-gru`` or ``switch_many-gru-wide``: the regime comes first) evaluates
a finished sweep and keeps, in ``benchmarks/singh_recipes/<LABEL>/``, the
sweep's own ``results.json``, ``summary.md`` and ``train_success.png`` and
``evaluations.json`` (each member's homings, per start group, its success rate
and mean steps over homings; the baseline's). Without ``--add`` the files are
only read again: ``singh_recipes.json``, the figure docs/singh2023_recipes.png
(each seed's homings, the recipe's IQM and the paper's best) and the table
between the ``<!-- singh-recipes -->`` markers of docs/singh2023.md are
rebuilt from them.

Usage::

    python scripts/bench/singh_recipes.py --add constant-gru=runs/seeds_singh2023-constant-gru
    python scripts/bench/singh_recipes.py            # rebuild from the stored files

The recipe's IQM and mean over seeds come with their 95 % percentile
bootstrap intervals (:mod:`plume_jax.scoreboard.recipe_stats`); the paper's
figure is the best over their agents (a column maximum of their table), the
cast-and-surge figure one run of a fixed policy.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "singh_recipes"
DOC = ROOT / "docs" / "singh2023.md"
FIGURE = ROOT / "docs" / "singh2023_recipes.png"
KEPT = ("results.json", "summary.md", "train_success.png")
#: A curriculum's first-stage sweep results, kept beside its last stage's.
STAGE1 = "stage1_results.json"
BEGIN, END = "<!-- singh-recipes -->", "<!-- /singh-recipes -->"
#: The regimes, by the label's first part: (preset, scenario file).
REGIMES = {
    "constant": ("PlumeNav-Singh2023-Constant-v0", "singh2023_paper_constant.yaml"),
    "switch_once": ("PlumeNav-Singh2023-SwitchOnce-v0", "singh2023_paper_switch_once.yaml"),
    "switch_many": ("PlumeNav-Singh2023-SwitchMany-v0", "singh2023_paper_switch_many.yaml"),
    "sparse40": ("PlumeNav-Singh2023-Sparse40-v0", "singh2023_paper_sparse40.yaml"),
}


def regime_of(label: str) -> str:
    """The regime a label starts with (``ValidationError`` naming the
    allowed ones otherwise)."""
    from plume_jax.core.errors import ValidationError

    regime = label.split("-", 1)[0]
    if regime not in REGIMES or "/" in label or not label.replace("-", "").replace(
            "_", "").isalnum():
        raise ValidationError.for_parameter(
            "--add", label, f"a label '<regime>-<net>[-<variant>]' of letters, digits, '_' and "
                            f"'-', its regime one of {sorted(REGIMES)}")
    return regime


def check(label: str, sweep_dir: pathlib.Path) -> dict[str, Any]:
    """The finished sweep ``sweep_dir``'s ``results.json``, after checking
    that it swept only ``run.seed`` on the label's regime."""
    from plume_jax.core.errors import ValidationError

    preset, _ = REGIMES[regime_of(label)]
    what = f"a finished seed sweep of {preset} (results.json, members/<name>/policy)"
    if not (sweep_dir / "results.json").is_file():
        raise ValidationError.for_parameter("--add", str(sweep_dir), f"{what}; no results.json")
    results = json.loads((sweep_dir / "results.json").read_text())
    if list(results["grid"]) != ["run.seed"]:
        raise ValidationError.for_parameter(
            "--add", str(sweep_dir), f"{what}, only run.seed swept; it swept {list(results['grid'])}")
    env_id = results["base_config"]["env"]["id"]
    presets = [p for p, _ in REGIMES.values()]
    if env_id != preset and (env_id not in presets or len(label.split("-")) < 3):
        raise ValidationError.for_parameter(
            "--add", str(sweep_dir), f"{what}, or of another of {presets} under a label naming "
            f"how it trained ('<regime>-<net>-<variant>', e.g. 'constant-gru-curriculum'); it "
            f"trained {env_id}")
    for member in results["results"]:
        if not (sweep_dir / "members" / member["name"] / "policy" / "policy.json").is_file():
            raise ValidationError.for_parameter(
                "--add", str(sweep_dir), f"{what}; member {member['name']} has no policy")
    return results


def _outcome(report: dict[str, Any]) -> dict[str, Any]:
    metrics = report["metrics"]
    protocol = metrics["protocol"]
    return {"homings": int(protocol["homings"]), "episodes": int(protocol["episodes"]),
            "homings_by_start": protocol["homings_by_start"],
            "success_rate": float(metrics["success_rate"]),
            "mean_steps_to_goal": metrics.get("mean_steps_to_goal")}


def evaluate(label: str, sweep_dir: pathlib.Path, results: dict[str, Any]) -> dict[str, Any]:
    """Every member's greedy policy, and the scenario's own agent, on the
    regime's 240-start scenario."""
    from plume_jax.evaluate.scenario import load_scenario, run_scenario

    preset, scenario_file = REGIMES[regime_of(label)]
    scenario = load_scenario(ROOT / "configs" / "scenarios" / scenario_file)
    members = {}
    for member in results["results"]:
        policy = sweep_dir / "members" / member["name"] / "policy"
        report = run_scenario(scenario, agent="trained", agent_params={"path": str(policy)})
        members[str(int(member["run.seed"]))] = _outcome(report)
        print(f"{label} seed {member['run.seed']}: {members[str(int(member['run.seed']))]['homings']}"
              f"/240", flush=True)
    baseline = run_scenario(scenario)
    return {"label": label, "preset": preset, "trained_on": results["base_config"]["env"]["id"],
            "scenario": f"configs/scenarios/{scenario_file}",
            "scenario_seed": int(scenario["seed"]), "members": members,
            "baseline": {"agent": baseline["agent"]["name"], **_outcome(baseline)}}


def add(label: str, sweep_dir: pathlib.Path, results: dict[str, Any],
        out: pathlib.Path = OUT) -> pathlib.Path:
    """Evaluate the sweep, whose ``results.json`` :func:`check` returned as
    ``results``, and keep its files in ``out/<label>/`` (written once all
    evaluations have run)."""
    evaluations = evaluate(label, sweep_dir, results)
    dest = out / label
    dest.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        if (sweep_dir / name).is_file():
            shutil.copyfile(sweep_dir / name, dest / name)
    earlier = earlier_stage(results)
    if earlier is not None:  # a curriculum's stage 2: keep the stage it continued
        shutil.copyfile(earlier / "results.json", dest / STAGE1)
    (dest / "evaluations.json").write_text(json.dumps(evaluations, indent=1) + "\n")
    return dest


def earlier_stage(results: dict[str, Any]) -> pathlib.Path | None:
    """The sweep folder a curriculum stage continued (its ``run.init_from``,
    when that is a sweep with a ``results.json``), else None."""
    source = (results["base_config"].get("run") or {}).get("init_from")
    if source and (pathlib.Path(source) / "results.json").is_file():
        return pathlib.Path(source)
    return None


def _stages(folder: pathlib.Path) -> list[dict[str, Any]]:
    """The stored sweeps of a recipe, first stage first (one, or a
    curriculum's two)."""
    stages = [json.loads((folder / "results.json").read_text())]
    if (folder / STAGE1).is_file():
        stages.insert(0, json.loads((folder / STAGE1).read_text()))
    return stages


def _short(preset: str) -> str:
    return preset.removeprefix("PlumeNav-Singh2023-").removesuffix("-v0")


def recipe_row(folder: pathlib.Path) -> dict[str, Any]:
    """One recipe's row from its stored files."""
    from plume_jax.evaluate.singh_protocol import paper_best
    from plume_jax.scoreboard.recipe_stats import improvement_estimate, recipe_estimates

    ev = json.loads((folder / "evaluations.json").read_text())
    stages = _stages(folder)
    results = stages[-1]
    seeds = sorted(ev["members"], key=int)
    homings = [ev["members"][s]["homings"] for s in seeds]
    train = {int(m["run.seed"]): m for m in results["results"]}
    return {
        "label": ev["label"], "preset": ev["preset"], "scenario": ev["scenario"],
        "seeds": len(seeds), "homings_by_seed": {int(s): h for s, h in zip(seeds, homings)},
        "recipe": recipe_estimates(homings),
        "min": min(homings), "max": max(homings),
        "paper_best": paper_best(ev["preset"]),
        "baseline": ev["baseline"]["agent"], "baseline_homings": ev["baseline"]["homings"],
        "improvement_over_baseline": improvement_estimate(homings,
                                                          [ev["baseline"]["homings"]]),
        "train_success_by_seed": {s: train[s]["eval_success_rate"] for s in sorted(train)},
        "trained_on": " then ".join(
            f"{_short(r['base_config']['env']['id'])} {r['env_steps_per_member'] / 1e6:.1f}M"
            for r in stages),
        "env_steps_per_member": sum(r["env_steps_per_member"] for r in stages),
        "train_seconds": sum(r["train_seconds"] for r in stages),
        "compile_seconds": sum(r["compile_seconds"] for r in stages),
        "members_steps_per_second": results["steps_per_second_excl_compile"],
        "device": ", ".join(results["machine"]["devices"]), "jax": results["machine"]["jax"],
        "network": results["base_config"]["network"]["type"],
    }


def build(out: pathlib.Path = OUT) -> list[dict[str, Any]]:
    """Every stored recipe's row, in the regimes' order, then by label."""
    folders = [p for p in out.iterdir() if (p / "evaluations.json").is_file()] \
        if out.is_dir() else []
    order = list(REGIMES)
    folders.sort(key=lambda p: (order.index(regime_of(p.name)), p.name))
    return [recipe_row(p) for p in folders]


def _ci(estimate: dict[str, Any]) -> str:
    ci = estimate["ci95"]
    return f"{estimate['value']:.1f}" + ("" if ci is None else f" [{ci[0]:.1f}, {ci[1]:.1f}]")


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of ``rows``."""
    lines = ["| recipe | preset | trained on (steps per seed) | seeds | homings / 240 by seed | IQM [95 % CI] | mean [95 % CI] "
             "| paper's best | cast and surge | P(seed > cast and surge) | greedy success on "
             "training starts, % by seed | train s (members, device) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        by_seed = ", ".join(str(h) for _, h in sorted(r["homings_by_seed"].items()))
        train = ", ".join(f"{100 * v:.1f}" for _, v in sorted(r["train_success_by_seed"].items()))
        improvement = r["improvement_over_baseline"]
        p_ci = improvement["ci95"]
        p_text = f"{improvement['value']:.2f}" + (
            "" if p_ci is None else f" [{p_ci[0]:.2f}, {p_ci[1]:.2f}]")
        lines.append(
            f"| {r['label']} | {r['preset']} | {r['trained_on']} | {r['seeds']} | {by_seed} | "
            f"{_ci(r['recipe']['iqm'])} | {_ci(r['recipe']['mean'])} | "
            f"{'—' if r['paper_best'] is None else r['paper_best']} | {r['baseline_homings']} | "
            f"{p_text} | {train} | {r['train_seconds']:.0f} ({r['seeds']}, {r['device']}) |")
    return "\n".join(lines) + "\n"


def figure(rows: list[dict[str, Any]], path: pathlib.Path) -> None:
    """Each seed's homings as dots, the recipe's IQM with its interval as a
    bar, the paper's best as a star and cast-and-surge as a cross, one row
    per recipe."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.6))
    for i, r in enumerate(rows):
        first = i == 0
        values = list(r["homings_by_seed"].values())
        ax.scatter(values, [i] * len(values), s=28, color="tab:blue", alpha=0.7, zorder=3,
                   label="seeds (sweep members)" if first else None)
        iqm = r["recipe"]["iqm"]
        if iqm["ci95"] is not None:
            ax.plot(iqm["ci95"], [i + 0.25] * 2, color="tab:blue", lw=2,
                    label="IQM, 95 % bootstrap interval" if first else None)
        ax.scatter([iqm["value"]], [i + 0.25], marker="|", s=200, color="tab:blue")
        if r["paper_best"] is not None:
            ax.scatter([r["paper_best"]], [i], marker="*", s=170, color="tab:red", alpha=0.6,
                       zorder=2, label="Singh et al.'s best agent" if first else None)
        ax.scatter([r["baseline_homings"]], [i], marker="x", s=60, color="0.3",
                   label="cast and surge" if first else None)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first recipe on top
    ax.set_xlabel("homings out of Singh et al.'s 240 fixed starts (halved diffusion)")
    ax.set_xlim(-4, 244)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    fig.tight_layout()
    # the legend sits above the axes: a tight box keeps its right end in the picture
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def write(out: pathlib.Path = OUT, doc: pathlib.Path = DOC,
          figure_path: pathlib.Path = FIGURE) -> list[dict[str, Any]]:
    """Rebuild ``singh_recipes.json``, the docs table and the figure from the
    stored files."""
    rows = build(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "singh_recipes.json").write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    text = doc.read_text()
    head, found, rest = text.partition(BEGIN)
    if found:
        _, _, tail = rest.partition(END)
        doc.write_text(f"{head}{BEGIN}\n{table(rows)}{END}{tail}")
    if rows:
        figure(rows, figure_path)  # after the results: a figure never loses them
    return rows


def main(argv: list[str] | None = None) -> int:
    from plume_jax.core.errors import ValidationError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--add", action="append", default=[], metavar="LABEL=SWEEP_FOLDER",
                        help="evaluate a finished seed sweep and keep it (repeatable)")
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    parser.add_argument("--doc", type=pathlib.Path, default=DOC)
    parser.add_argument("--figure", type=pathlib.Path, default=FIGURE)
    args = parser.parse_args(argv)
    try:
        pairs = []
        for item in args.add:
            label, eq, folder = item.partition("=")
            if not eq or not folder:
                raise ValidationError.for_parameter("--add", item, "LABEL=SWEEP_FOLDER")
            pairs.append((label, pathlib.Path(folder)))
        checked = [(label, folder, check(label, folder)) for label, folder in pairs]
        for label, folder, results in checked:  # every sweep checked before any is evaluated
            print(f"added {add(label, folder, results, args.out)}")
        rows = write(args.out, args.doc, args.figure)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(rows), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
