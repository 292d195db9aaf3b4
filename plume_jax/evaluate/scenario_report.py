"""An evaluation's outputs: the markdown table, the JSON reports and the
figures of a set of runs (:func:`write_outputs`), each file written whole.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from plume_jax.evaluate.scenario_file import safe_name
from plume_jax.evaluate.scenario_stats import status


def public(report: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-serialisable part of a report."""
    return {k: v for k, v in report.items() if not k.startswith("_")}


def _groups(reports: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Reports grouped by scenario (``"_group"`` when set, else the name), in
    first-seen order."""
    groups: dict[Any, list] = {}
    for r in reports:
        groups.setdefault(r.get("_group", r["scenario"]), []).append(r)
    return list(groups.values())


def protocol_line(p: Mapping[str, Any]) -> str:
    """The homings line of a fixed-start protocol's report (``metrics.protocol``),
    e.g. ``97/240 homings (singh240; Singh et al.'s best 176/240)``; a subset
    of the starts (``--episodes N``) says so and keeps their best out of all
    the starts, never out of ``N``."""
    from plume_jax.evaluate import singh_protocol

    total = singh_protocol.EPISODES
    best = ("not in their table" if p["paper_best"] is None
            else f"Singh et al.'s best {p['paper_best']}/{total}")
    run = p["protocol"] if p["episodes"] == total else (
        f"{p['protocol']}, {p['episodes']} of the {total} starts, evenly spread: a quick look, "
        "not the protocol's figure")
    return f"{p['homings']}/{p['episodes']} homings ({run}; {best})"


def markdown_table(reports: Sequence[Mapping[str, Any]]) -> str:
    """One comparison table per scenario: a row per agent with success (95%
    interval), mean steps ± SE, median steps, the tail of the steps (90th /
    99th percentile, successful episodes), the tail of the episode length
    (all episodes), path efficiency and status."""

    def fmt(value: Any, spec: str) -> str:
        return "—" if value is None else format(value, spec)

    def tail(m: Mapping[str, Any], what: str) -> str:  # reports saved before the tail: —
        return f"{fmt(m.get(f'p90_{what}'), '.0f')} / {fmt(m.get(f'p99_{what}'), '.0f')}"

    sections = []
    for group in _groups(reports):
        first = group[0]
        lines = [f"### {first['scenario']} ({first['preset']}, "
                 f"{first['metrics']['episodes']} episodes, seed {first['seed']})", "",
                 "| agent | episodes | success (95% CI) | mean steps ± SE | median steps "
                 "| p90 / p99 steps | episode length p90 / p99 | path efficiency | status |",
                 "|---|---:|---|---:|---:|---:|---:|---:|---|"]
        for r in group:
            m = r["metrics"]
            lo, hi = m["success_ci95"]
            steps = fmt(m["mean_steps"], ".1f") + (f" ± {m['sem_steps']:.1f}"
                                                   if m["sem_steps"] is not None else "")
            agent = r["agent"]
            name = agent.get("label") or agent["name"]
            if name != agent["name"]:
                name += f" ({agent['name']})"
            lines.append(f"| {name} | {m['episodes']} | {m['success_rate']:.3f} "
                         f"({lo:.3f}–{hi:.3f}) | {steps} | {fmt(m['median_steps'], '.0f')} | "
                         f"{tail(m, 'steps')} | {tail(m, 'episode_length')} | "
                         f"{fmt(m['path_efficiency'], '.2f')} | {status(r)} |")
        for r in group:
            p = r["metrics"].get("protocol")
            if p:
                agent = r["agent"].get("label") or r["agent"]["name"]
                lines.append(f"\n{agent}: {protocol_line(p)}")
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def output_stems(reports: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """Safe, distinct file stems: one per report (``<scenario>__<agent>``) and
    one per scenario group (``<scenario>``), in :func:`_groups` order."""
    used: set[str] = set()

    def unique(stem: str) -> str:
        candidate, i = stem, 2
        while candidate.lower() in used:
            candidate, i = f"{stem}-{i}", i + 1
        used.add(candidate.lower())
        return candidate

    groups = _groups(reports)
    group_stems = [unique(safe_name(g[0]["scenario"])) for g in groups]
    index = {id(r): (gi, g.index(r)) for gi, g in enumerate(groups) for r in g}
    run_stems = []
    for r in reports:
        gi, _ = index[id(r)]
        agent = r["agent"].get("label") or r["agent"]["name"]
        run_stems.append(unique(f"{group_stems[gi]}__{safe_name(agent)}"))
    return run_stems, group_stems


def write_results(reports: list[dict[str, Any]], out_dir: str) -> list[str]:
    """The results of the runs, before any figure: a JSON report per run and
    ``summary.md`` (a table per scenario). File names are :func:`safe_name`
    forms of scenario and agent names, always inside ``out_dir``. Each file
    is written whole under a temporary name and then renamed into place."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    run_stems, _ = output_stems(reports)
    for r, stem in zip(reports, run_stems):
        path = os.path.join(out_dir, stem + ".json")
        _write_text_whole(path, functools.partial(json.dump, public(r), indent=2))
        written.append(path)
    path = os.path.join(out_dir, "summary.md")
    _write_text_whole(path, lambda f: f.write(markdown_table(reports) + "\n"))
    written.append(path)
    return written


def write_figures(reports: list[dict[str, Any]], out_dir: str) -> tuple[list[str], list[str]]:
    """A comparison figure per scenario (``<scenario>.png``: success with 95%
    intervals, mean steps ± SE, and a trajectory panel per agent).

    A figure that cannot be drawn or saved loses nothing else: it is left
    out (no partial file), a ``RuntimeWarning`` names it and the error, and
    the others are still drawn.

    Returns:
        ``(written, problems)``: the figures written, and one line per
        figure that failed.
    """
    import warnings

    from plume_jax.evaluate.figures import scenario_figure
    from plume_jax.files import atomic_write

    written, problems = [], []
    _, group_stems = output_stems(reports)
    for group, stem in zip(_groups(reports), group_stems):
        path = os.path.join(out_dir, stem + ".png")
        try:
            figure = scenario_figure(group)
            atomic_write(path, lambda tmp: figure.savefig(tmp, dpi=100, format="png"))
        except Exception as error:  # a figure must never lose the results
            problem = (f"figure {path} was not written ({type(error).__name__}: "
                       f"{' '.join(str(error).split())[:300]}); the JSON reports and "
                       "summary.md are written")
            warnings.warn(problem, RuntimeWarning, stacklevel=2)
            problems.append(problem)
            continue
        written.append(path)
    return written, problems


def write_outputs(reports: list[dict[str, Any]], out_dir: str) -> list[str]:
    """:func:`write_results`, then :func:`write_figures` (a figure that fails
    is a warning, after the results are on disk). Returns the files
    written."""
    written = write_results(reports, out_dir)
    figures, _ = write_figures(reports, out_dir)
    return written + figures


def _write_text_whole(path: str, write: Callable[[Any], Any]) -> None:
    """``write(f)`` (an open UTF-8 text file) into ``path`` whole or not at
    all (:func:`plume_jax.files.atomic_write`)."""
    from plume_jax.files import atomic_write

    def into(tmp: Any) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            write(f)

    atomic_write(path, into)
