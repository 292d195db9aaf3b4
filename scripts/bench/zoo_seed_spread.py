#!/usr/bin/env python
"""How much of a zoo entry's score is its recipe and how much its seed.

Each entry's config trained with ``run.seed`` 0..7 as one sweep
(``configs/sweep_seeds_<name>.yaml``), every member greedily evaluated as the
entry was (1000 episodes, evaluation seed 1000003). This script keeps each
sweep's own ``results.json`` and ``summary.md`` in
``benchmarks/zoo_seed_spread/<name>/`` (with its training-success curve,
``train_success.png``: seed mean and range) and builds, from those files and
the entries' ``entry.yaml``, the table ``benchmarks/zoo_seed_spread/README.md``
(between its ``<!-- table -->`` markers), ``seed_spread.json`` and the figure
``seed_spread.png`` (each seed's greedy success, the entry's own marked).

Usage::

    python scripts/bench/zoo_seed_spread.py --add zoo:gaussian-gru@1=runs/seeds_gaussian-gru
    python scripts/bench/zoo_seed_spread.py            # rebuild the table from the stored files

``--add REFERENCE=SWEEP_FOLDER`` copies a finished sweep's files in; the sweep
must be the entry's config with only ``run.seed`` swept (checked). Each seed's
figures are the sweep's own evaluation of that member (success: a share of
1000 episodes); mean ± sd (sample sd) and min–max are taken over the seeds,
and the recipe's interquartile mean and mean with their 95 % bootstrap
intervals over the seeds (:mod:`plume_jax.scoreboard.recipe_stats`).
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
OUT = ROOT / "benchmarks" / "zoo_seed_spread"
KEPT = ("results.json", "summary.md", "train_success.png")
BEGIN, END = "<!-- table -->", "<!-- /table -->"


def _entry(reference: str) -> Any:
    from agents.zoo import resolve

    if "@" not in reference:
        from plume_jax.core.errors import ValidationError

        raise ValidationError.for_parameter("--add", reference,
                                            "zoo:<name>@<version> (the version spelled out)")
    return resolve(reference)


def check(reference: str, sweep_dir: pathlib.Path) -> Any:
    """The zoo entry ``reference`` names, after checking that ``sweep_dir``
    is a finished sweep of its config with only ``run.seed`` swept.
    ``ValidationError`` naming what differs otherwise."""
    from plume_jax.core.errors import ValidationError
    from plume_jax.train.config import current_form, load_train_config

    entry = _entry(reference)
    absent = [name for name in KEPT if not (sweep_dir / name).is_file()]
    if absent:
        raise ValidationError.for_parameter("--add", str(sweep_dir),
                                            f"a finished sweep folder (it has no {absent})")
    results = json.loads((sweep_dir / "results.json").read_text())
    if list(results["grid"]) != ["run.seed"]:
        raise ValidationError.for_parameter("--add", str(sweep_dir),
                                            f"a sweep of run.seed only (its grid: "
                                            f"{list(results['grid'])})")
    own = load_train_config(entry.config_path).to_dict()
    swept = current_form(results["base_config"])  # a sweep of 0.1.x: in this form
    differs = sorted(f"{section}.{key}" for section in own if section != "run"
                     for key in set(own[section]) | set(swept.get(section) or {})
                     if own[section].get(key) != (swept.get(section) or {}).get(key))
    if differs:
        raise ValidationError.for_parameter(
            "--add", str(sweep_dir),
            f"a sweep of {entry.reference}'s own config (it differs in {differs})")
    return entry


def add(entry: Any, sweep_dir: pathlib.Path, out: pathlib.Path = OUT) -> pathlib.Path:
    """Copy the checked sweep ``sweep_dir`` of ``entry`` (:func:`check`) into
    ``out/<name>/``."""
    dest = out / entry.name
    dest.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        shutil.copyfile(sweep_dir / name, dest / name)
    (dest / "entry.txt").write_text(entry.reference + "\n")
    return dest


def spread_row(folder: pathlib.Path) -> dict[str, Any]:
    """One entry's row from its stored sweep files (the sweep's own statistics
    over seeds: its one setting in ``results.json``) and its ``entry.yaml``."""
    entry = _entry((folder / "entry.txt").read_text().strip())
    results = json.loads((folder / "results.json").read_text())
    members = results["results"]
    (setting,) = results["settings"]  # only run.seed was swept: one setting
    success, steps = setting["eval_success_rate"], setting["eval_mean_steps_to_goal"]
    seed = int(entry.info["seed"])
    same = next((m for m in members if int(m["run.seed"]) == seed), None)
    own = entry.info.get("evaluation") or {}
    row: dict[str, Any] = {
        "entry": entry.reference, "preset": entry.preset, "seeds": len(members),
        "episodes": results["eval"]["episodes"], "eval_seed": results["eval"]["seed"],
        "success_mean": success["mean"], "success_sd": success["sd"],
        "success_min": success["min"], "success_max": success["max"],
        "success_by_seed": {int(m["run.seed"]): m["eval_success_rate"] for m in members},
        "steps_mean": steps["mean"], "steps_sd": steps["sd"],
        "entry_seed": seed, "entry_success": own.get("success_rate"),
        "entry_steps": own.get("mean_steps_to_goal"),
        "member_of_entry_seed_success": None if same is None else same["eval_success_rate"],
        "member_of_entry_seed_steps": None if same is None else same["eval_mean_steps_to_goal"],
        "train_seconds": results["train_seconds"], "compile_seconds": results["compile_seconds"],
        "device": ", ".join(results["machine"]["devices"]),
        "jax": results["machine"]["jax"],
    }
    from plume_jax.scoreboard.recipe_stats import recipe_estimates

    row["success_recipe"] = recipe_estimates(
        [v for _, v in sorted(row["success_by_seed"].items())])
    if row["entry_success"] is not None:
        row["seeds_above_entry"] = sum(v > row["entry_success"]
                                       for v in row["success_by_seed"].values())
    return row


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _ci(estimate: dict[str, Any]) -> str:
    ci = estimate["ci95"]
    return _pct(estimate["value"]) + ("" if ci is None else f" [{_pct(ci[0])}, {_pct(ci[1])}]")


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of ``rows``."""
    lines = ["| entry | preset | seeds | greedy success % (mean ± sd, min–max) | recipe: IQM "
             "[95 % CI] | recipe: mean [95 % CI] | mean steps to goal | entry: seed, success "
             "%, steps | sweep member of that seed | seeds that beat the entry | train s (8 "
             "members, device) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        steps = "—" if r["steps_mean"] is None else f"{r['steps_mean']:.1f} ± {r['steps_sd']:.1f}"
        entry_steps = "—" if r["entry_steps"] is None else f"{r['entry_steps']:.1f}"
        member_steps = ("—" if r["member_of_entry_seed_steps"] is None
                        else f"{r['member_of_entry_seed_steps']:.1f}")
        beat = f"{r['seeds_above_entry']} of {r['seeds']}" if "seeds_above_entry" in r else "—"
        lines.append(
            f"| `{r['entry']}` | {r['preset']} | {r['seeds']} | {_pct(r['success_mean'])} ± "
            f"{_pct(r['success_sd'])} ({_pct(r['success_min'])}–{_pct(r['success_max'])}) | "
            f"{_ci(r['success_recipe']['iqm'])} | {_ci(r['success_recipe']['mean'])} | "
            f"{steps} | {r['entry_seed']}, {_pct(r['entry_success'])}, {entry_steps} | "
            f"{_pct(r['member_of_entry_seed_success'])}, {member_steps} | {beat} | "
            f"{r['train_seconds']:.0f} ({r['device']}) |")
    return "\n".join(lines) + "\n"


def build(out: pathlib.Path = OUT) -> list[dict[str, Any]]:
    """Every stored entry's row, in entry order."""
    folders = sorted(p for p in out.iterdir() if (p / "entry.txt").is_file()) \
        if out.is_dir() else []
    return [spread_row(p) for p in folders]


def write(out: pathlib.Path = OUT) -> list[dict[str, Any]]:
    """Rebuild ``seed_spread.json`` and the README's table from the stored files."""
    rows = build(out)
    (out / "seed_spread.json").write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    readme = out / "README.md"
    text = readme.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    readme.write_text(f"{head}{BEGIN}\n{table(rows)}{END}{tail}")
    figure(rows, out / "seed_spread.png")  # after the results: a figure never loses them
    return rows


def figure(rows: list[dict[str, Any]], path: pathlib.Path) -> None:
    """Each entry's seeds' greedy success as dots, the entry's own evaluation
    as a star, one row per entry."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.4))
    for i, row in enumerate(rows):
        values = [100 * v for v in row["success_by_seed"].values()]
        ax.scatter(values, [i] * len(values), s=28, color="tab:blue", alpha=0.7,
                   label="seeds 0-7 (sweep members)" if i == 0 else None)
        if row["entry_success"] is not None:
            ax.scatter([100 * row["entry_success"]], [i], marker="*", s=160, color="tab:red",
                       label="published entry" if i == 0 else None)
    ax.set_yticks(range(len(rows)), [r["entry"] for r in rows])
    ax.set_xlabel("greedy success (%), 1000 episodes, evaluation seed 1000003")
    ax.set_xlim(-2, 102)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from plume_jax.core.errors import ValidationError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--add", action="append", default=[], metavar="REFERENCE=SWEEP_FOLDER",
                        help="copy a finished seed sweep of a zoo entry in (repeatable)")
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    args = parser.parse_args(argv)
    try:
        pairs = []
        for item in args.add:
            reference, eq, folder = item.partition("=")
            if not eq or not folder:
                raise ValidationError.for_parameter("--add", item, "REFERENCE=SWEEP_FOLDER")
            pairs.append((reference, pathlib.Path(folder)))
        checked = [(check(reference, folder), folder) for reference, folder in pairs]
        for entry, folder in checked:  # every sweep checked before any is copied
            print(f"added {add(entry, folder, args.out)}")
        rows = write(args.out)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(rows), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
