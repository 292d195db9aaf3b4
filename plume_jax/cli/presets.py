"""``plume-jax list``: the registered presets; ``plume-jax list --zoo``: the
trained agents of the zoo (:mod:`agents.zoo`), one line per version;
``plume-jax list --scenarios``: the shipped evaluation scenarios by name."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list the presets (--zoo: the zoo's trained agents)",
                       description="List the presets, or with --zoo the trained agents of "
                       "the zoo (configs/zoo, or $PLUME_JAX_ZOO): name and version, the "
                       "preset each was trained on, its own evaluation's success, its "
                       "training and evaluation seeds, and how many per-seed policies of its "
                       "recipe it keeps (zoo:NAME@VERSION#SEED).")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--zoo", action="store_true",
                       help="list the zoo's trained agents (usable as zoo:NAME, "
                       "zoo:NAME@VERSION or zoo:NAME@VERSION#SEED wherever an agent is named) "
                       "instead of the presets")
    which.add_argument("--scenarios", action="store_true",
                       help="list the shipped evaluation scenarios by name (plume-jax evaluate "
                       "--scenario NAME) instead of the presets")


def _cell(value: Any, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def zoo_table(entries: list[Any]) -> list[str]:
    """One line per zoo entry version: reference, preset (``+ own sensor``
    when it reads the preset through its own sensor), the greedy evaluation
    of its own run (success rate, episodes, seed), its training seed and how
    many seeds of its recipe it keeps (``zoo:<name>@<version>#<seed>``)."""
    header = ("agent", "preset", "success", "episodes", "eval seed", "train seed", "seeds")
    rows = []
    for entry in entries:
        evaluation = entry.info.get("evaluation")
        evaluation = evaluation if isinstance(evaluation, dict) else {}
        success = evaluation.get("success_rate")
        rows.append((entry.reference,
                     entry.preset + (" + own sensor" if entry.env_overrides else ""),
                     _cell(success if isinstance(success, (int, float)) else None, ".3f"),
                     _cell(evaluation.get("episodes")), _cell(evaluation.get("seed")),
                     _cell(entry.info.get("seed")), len(entry.seeds)))
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip()
            for row in [header, *rows]]


def scenario_table() -> list[str]:
    """One line per shipped scenario: its name (what ``evaluate --scenario``
    takes) and its description."""
    from plume_jax.evaluate.scenario import load_scenario
    from plume_jax.files.shipped import scenario_names

    found = scenario_names()
    width = max((len(name) for name in found), default=0)
    lines = []
    for name, path in found.items():
        description = load_scenario(path).get("description") or ""
        lines.append(f"{name.ljust(width)}  {' '.join(str(description).split())}".rstrip())
    return lines


def run(args: argparse.Namespace) -> int:
    if getattr(args, "scenarios", False):
        from plume_jax.files.shipped import describe_root

        print(f"scenarios shipped in {describe_root()}/scenarios "
              "(plume-jax evaluate --scenario NAME):")
        for line in scenario_table():
            print(line)
        return 0
    if getattr(args, "zoo", False):
        from agents.zoo import entries, zoo_root

        root = zoo_root()
        if not root.is_dir():
            from agents.zoo import missing_zoo
            from plume_jax.core.errors import ValidationError

            raise ValidationError.for_parameter("--zoo", str(root), f"a zoo folder, but "
                                                f"{missing_zoo(root)}")
        found = entries()
        print(f"zoo {root} ({len(found)} trained versions; success: each run's own greedy "
              "evaluation; seeds: the recipe's per-seed policies kept, "
              "zoo:NAME@VERSION#SEED)")
        for line in zoo_table(found):
            print(line)
        return 0
    from plume_jax.envs.presets import list_presets

    for pid, description in list_presets().items():
        print(f"{pid}\n    {description}")
    print(GYMNASIUM_IDS)
    return 0


#: The last lines of ``plume-jax list``: how Gymnasium reaches a preset by id.
GYMNASIUM_IDS = (
    "\nGymnasium ids (single-agent presets): plume_jax/<preset> once plume_jax is imported;\n"
    "plume_jax:plume_jax/<preset> (module, colon, id) from a tool that never imports it,\n"
    "e.g. CleanRL's --env-id plume_jax:plume_jax/PlumeNav-Gaussian-v0.")
