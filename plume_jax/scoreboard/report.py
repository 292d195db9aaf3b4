"""The scoreboard's outputs: a JSON record, ``docs/scoreboard.md`` and one
figure per family.

The JSON record (``benchmarks/scoreboard.json`` by default) holds one
section per family: the protocol it ran under, when and where, how long it
took, its rows, robustness rows and start-cell maps. A run of some families
replaces their sections and keeps the others, and the markdown is always
rendered from the whole record, so ``plume-jax bench --family gaussian``
refreshes one family without losing the rest. Each family's section of the
markdown says which mode and how many episodes made it, and which agents'
rows were rerun later (``reruns``, :mod:`plume_jax.scoreboard.rerun`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from plume_jax.core.errors import ValidationError

RECORD_FORMAT = "plume_jax.scoreboard/1"
#: The largest record read back (a full board is a few hundred KB).
MAX_RECORD_BYTES = 64 << 20


def load_record(path: str | os.PathLike) -> dict[str, Any]:
    """The record at ``path``; an empty one when the file does not exist.
    Every section is checked here, before anything runs
    (:func:`plume_jax.scoreboard.record_schema.check_record`).

    Raises:
        ValidationError: (parameter ``--json``) a file that is not a
            scoreboard record, or one with a malformed section (naming the
            path inside the record).
    """
    from plume_jax.files.safe_io import load_json_file
    from plume_jax.scoreboard.record_schema import check_record

    if not os.path.exists(path):
        return {"format": RECORD_FORMAT, "families": {}}
    record = load_json_file(path, "--json", max_bytes=MAX_RECORD_BYTES)
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT \
            or not isinstance(record.get("families"), dict):
        raise ValidationError.for_parameter(
            "--json", str(path), f"a scoreboard record ({RECORD_FORMAT}) or a new file")
    check_record(record, str(path))
    return record


def md_text(text: Any) -> str:
    """``text`` as it may go into the page's markdown (a table cell or a
    line): whitespace runs (newlines included) as one space, ``|`` escaped
    (it would end a table cell) and ``<``, ``>`` as ``&lt;``, ``&gt;`` (no
    HTML passes). Text without those reads the same."""
    text = " ".join(str(text).split())
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def escaped(value: Any) -> Any:
    """``value`` (a record, a section, a row) with every string in it, keys
    included, passed through :func:`md_text`: what :func:`render` writes
    from. Numbers, booleans and ``None`` are kept."""
    if isinstance(value, str):
        return md_text(value)
    if isinstance(value, Mapping):
        return {md_text(k) if isinstance(k, str) else k: escaped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escaped(v) for v in value]
    return value


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _success(m: Mapping[str, Any]) -> str:
    lo, hi = m["success_ci95"]
    return f"{m['success_rate']:.3f} ({lo:.3f}–{hi:.3f})"


def _steps(m: Mapping[str, Any]) -> str:
    if m["mean_steps"] is None:
        return "—"
    return f"{m['mean_steps']:.1f}" + (f" ± {m['sem_steps']:.1f}" if m.get("sem_steps") else "")


def main_table(section: Mapping[str, Any]) -> list[str]:
    """The family's table: a row per (preset, agent) that ran."""
    lines = ["| preset | agent | kind | success (95 % CI) | mean steps ± SE | median | p90 "
             "| path efficiency |", "|---|---|---|---|---:|---:|---:|---:|"]
    for r in section["rows"]:
        if r["status"] != "ok":
            continue
        m = r["metrics"]
        own = f" (own {', '.join(r['own_settings'])})" if r.get("own_settings") else ""
        lines.append(f"| {r['preset']} | {r['label']}{own} | {r['kind']} | {_success(m)} | "
                     f"{_steps(m)} | {_fmt(m['median_steps'], '.0f')} | "
                     f"{_fmt(m['p90_steps'], '.0f')} | {_fmt(m['path_efficiency'], '.2f')} |")
    return lines


def trained_on_text(r: Mapping[str, Any]) -> str:
    """Where a row's agent was trained, against the row's preset: ``—`` for
    an agent without a training preset, ``own preset``, or ``<regime>
    (cross-regime)``."""
    from plume_jax.scoreboard.recipes import trained_on_text as where

    return "—" if r.get("trained_on") is None else where(r)


def homings_table(section: Mapping[str, Any]) -> list[str]:
    """A fixed-start family's table: per preset, the paper's best as a
    reference row (kind ``paper``), then a row per agent that ran with its
    homings out of the starts run, where it was trained, and the board's
    metrics."""
    from plume_jax.evaluate.singh_protocol import EPISODES, paper_best

    lines = ["| preset | agent | kind | trained on | homings | success (95 % CI) | mean steps "
             "± SE | median | p90 | path efficiency |",
             "|---|---|---|---|---:|---|---:|---:|---:|---:|"]
    for preset in dict.fromkeys(r["preset"] for r in section["rows"]):
        ran = [r for r in section["rows"] if r["preset"] == preset and r["status"] == "ok"]
        best = paper_best(preset)
        if best is not None:
            lines.append(f"| {preset} | Singh et al. 2023, their best agent | paper | — | "
                         f"{best}/{EPISODES} | {best / EPISODES:.3f} | — | — | — | — |")
        for r in ran:
            m, h = r["metrics"], r.get("homings") or {}
            counted = f"{h['homings']}/{h['episodes']}" if h else "—"
            lines.append(f"| {preset} | {r['label']} | {r['kind']} | {trained_on_text(r)} | "
                         f"{counted} | {_success(m)} | {_steps(m)} | "
                         f"{_fmt(m['median_steps'], '.0f')} | {_fmt(m['p90_steps'], '.0f')} | "
                         f"{_fmt(m['path_efficiency'], '.2f')} |")
    return lines


def not_applicable(rows: list[Mapping[str, Any]]) -> list[str]:
    """One line per agent, ``- agent: reason — on presets; other reason —
    on presets``: the presets that share a reason merged, and ``every
    preset`` where one reason holds on all the rows' presets (several)."""
    every = list(dict.fromkeys(r["preset"] for r in rows))
    merged: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        if r["status"] == "not applicable":
            merged.setdefault(r["label"], {}).setdefault(r["reason"], []).append(r["preset"])
    lines = []
    for label, reasons in merged.items():
        parts = [f"{reason} — on "
                 f"{'every preset' if len(every) > 1 and presets == every else ', '.join(presets)}"
                 for reason, presets in reasons.items()]
        lines.append(f"- {label}: {'; '.join(parts)}")
    return lines


def verdict_lines(section: Mapping[str, Any]) -> list[str]:
    lines = []
    for preset, v in section["verdicts"].items():
        if v["best_zoo"] is None:
            lines.append(f"- {preset}: no zoo agent applies")
        elif v["beats_all"]:
            lines.append(f"- {preset}: **{v['best_zoo']}** beats every baseline that ran")
        else:
            lines.append(f"- {preset}: {v['best_zoo']} does **not** beat "
                         f"{', '.join(v['not_beaten'])}")
    return lines


def recipe_verdict_lines(recipes: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per recipe: its verdict against the best baseline, with its
    number of seeds and probability of improvement."""
    from plume_jax.scoreboard.recipes import estimate_text, regime_name

    lines = []
    for r in recipes:
        seeds = f"{r['seeds']} seed{'s' if r['seeds'] != 1 else ''}"
        b, imp = r["baseline"], r["improvement"]
        if b is None:
            lines.append(f"- {r['preset']}: {r['label']} ({seeds}): no baseline ran")
            continue
        p = "" if imp is None else f"; P(seed > baseline) {estimate_text(imp, spec='.2f')}"
        paper = r.get("paper")
        if paper is not None:
            from plume_jax.scoreboard.recipes import PAPER_SAID

            p += (f"; against Singh et al.'s best {paper['homings']}/{paper['episodes']}: "
                  f"{PAPER_SAID[paper['verdict']]}")
        said = {"beats": f"**beats** {b['label']}",
                "faster": f"**as successful as {b['label']} and faster**",
                "worse": f"does **worse** than {b['label']}",
                "no clear difference": f"shows **no clear difference** from {b['label']}",
                "one seed: no verdict": f"one seed: **no verdict** against {b['label']}",
                }[r["verdict"]]
        where = "" if r.get("trained_on", r["preset"]) == r["preset"] else \
            f", trained on {regime_name(r['trained_on'])}"
        lines.append(f"- {r['preset']}: {r['label']} ({seeds}{where}) {said}{p}")
    return lines


def recipe_section(name: str, section: Mapping[str, Any], figure_dir: str) -> list[str]:
    """The family's zoo recipes over seeds
    (:mod:`plume_jax.scoreboard.recipes`): when and where they ran, the
    table, and the performance-profile figure."""
    from plume_jax.scoreboard.recipes import SOURCES, recipe_lines

    at = section.get("recipes_at")
    when = (f" Run {at['finished_at']} on {at['machine_text']} in "
            f"{at['wall_seconds'] / 60:.1f} min (`plume-jax bench --recipes --family {name}`)."
            if at else "")
    used = dict.fromkeys(r["seed_results"] for r in section["recipes"])
    every = any("trained_on" in r for r in section["recipes"])
    where = ("on every regime it runs on (its own preset, then the others, *cross-regime*, "
             "as Singh et al. evaluated every agent on every regime)" if every else
             "on its own preset")
    lines = ["### Zoo recipes over seeds", "",
             f"Each zoo recipe {where} over its training seeds: IQM and mean with "
             "95 % bootstrap intervals over the seeds, the probability that a seed's success "
             "rate exceeds the best baseline's (ties count half), and the verdict taken on the "
             f"recipe's intervals.{when} Seed results: "
             + "; ".join(f"*{k}*: {SOURCES[k]}" for k in used) + ".", ""]
    lines += recipe_lines(section["recipes"]) + [""]
    if section.get("recipe_figure"):
        lines += [f"![{name} recipes]({figure_dir}/{section['recipe_figure']})", ""]
    return lines


def robustness_table(rows: list[Mapping[str, Any]]) -> list[str]:
    """A row per agent (those that ran nominal), a column per variation:
    success rate and mean steps."""
    columns = list(dict.fromkeys((r["axis"], r["level"]) for r in rows))
    agents = [label for label in dict.fromkeys(r["label"] for r in rows)
              if any(r["label"] == label and r["status"] == "ok" for r in rows)]
    shown = [c for c in columns if any(r["status"] == "ok" and (r["axis"], r["level"]) == c
                                       for r in rows)]
    lines = ["| agent | " + " | ".join(f"{a}: {lv}" for a, lv in shown) + " |",
             "|---|" + "---:|" * len(shown)]
    for label in agents:
        cells = []
        for column in shown:
            found = [r for r in rows if r["label"] == label and (r["axis"], r["level"]) == column]
            r = found[0] if found else None
            if r is None or r["status"] != "ok":
                cells.append("n/a")
            else:
                m = r["metrics"]
                cells.append(f"{m['success_rate']:.2f} ({_fmt(m['mean_steps'], '.0f')})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    axes_na = {(r["axis"], r["reason"]) for r in rows
               if r["status"] != "ok" and (r["axis"], r["level"]) not in shown}
    lines += [""] + [f"- {axis}: not applicable ({reason})" for axis, reason in sorted(axes_na)]
    return lines


def map_lines(maps: list[Mapping[str, Any]]) -> list[str]:
    lines = ["| agent | start cells | success ≥ 0.5 | mean success over cells |",
             "|---|---:|---:|---:|"]
    for m in maps:
        if m["status"] != "ok":
            continue
        values = [v for row in m["success"] for v in row if v is not None]
        good = sum(v >= 0.5 for v in values)
        lines.append(f"| {m['label']} | {len(values)} | {good} ({good / len(values):.0%}) | "
                     f"{sum(values) / len(values):.2f} |")
    return lines


def mode_options(protocol: Mapping[str, Any]) -> str:
    """The ``plume-jax bench`` options that ran a section's recorded
    ``protocol``: ``""`` (full), `` --mode quick``, `` --episodes N`` (a
    mode's episodes replaced: its mode reads ``<mode>, N episodes``), both;
    a fixed-start family's subset (``quick, N of the 240 starts``) is
    `` --episodes N``, which runs exactly those N starts in either mode."""
    mode = str(protocol["mode"])
    if protocol.get("fixed_starts"):
        return "" if mode == "full" else f" --episodes {protocol['episodes']}"
    base, _, replaced = mode.partition(", ")
    return (("" if base == "full" else f" --mode {base}")
            + (f" --episodes {protocol['episodes']}" if replaced else ""))


def rerun_lines(name: str, section: Mapping[str, Any]) -> list[str]:
    """One line per partial rerun of the section (``plume-jax bench
    --agent``): whose rows, when, where, how long, with or without the
    robustness table."""
    from plume_jax.scoreboard.rerun import entry_key

    p = section["protocol"]
    lines = []
    for r in section.get("reruns", []):
        keys = " ".join(dict.fromkeys(entry_key(a) for a in r["agents"]))
        table = {None: "", True: ", with the robustness table",
                 False: ", without the robustness table"}[r["robustness"]]
        lines.append(
            f"The rows of {', '.join(r['agents'])} were rerun {r['finished_at']} on "
            f"{r['machine_text']} in {r['wall_seconds'] / 60:.1f} min{table} (`plume-jax bench "
            f"--family {name}{mode_options(p)} --agent {keys}"
            f"{' --no-robustness' if r['robustness'] is False else ''}`).")
    return lines + [""] if lines else []


def family_markdown(name: str, section: Mapping[str, Any], figure_dir: str) -> list[str]:
    from plume_jax.scoreboard.families import FAMILIES

    family = FAMILIES.get(name)
    p = section["protocol"]
    fixed = p.get("fixed_starts")
    what = (f"protocol **{fixed}**, {p['episodes']} of its fixed starts per (preset, agent)"
            if fixed else f"{p['episodes']} episodes per (preset, agent)")
    lines = [f"## {family.title if family else name}", "",
             f"Mode **{p['mode']}**: {what}, seed "
             f"{p['seed']}; run {section['finished_at']} on {section['machine_text']} in "
             f"{section['wall_seconds'] / 60:.1f} min (`plume-jax bench --family {name}"
             f"{mode_options(p)}`).", ""]
    if fixed:
        lines += fixed_starts_text(section) + [""]
    lines += rerun_lines(name, section)
    lines += (homings_table(section) if fixed else main_table(section)) + [""]
    if section.get("recipes"):
        lines += ["Zoo recipes against the best hand-coded baseline, verdicts taken on each "
                  "recipe's intervals over its seeds (the zoo rows above are one seed each and "
                  "carry none; \"Zoo recipes over seeds\" below):", ""]
        lines += recipe_verdict_lines(section["recipes"]) + [""]
    elif any(v["best_zoo"] for v in section["verdicts"].values()):
        lines += ["Trained (zoo) agent against the hand-coded baselines:", ""]
        lines += verdict_lines(section) + [""]
    if section.get("recipes"):
        lines += recipe_section(name, section, figure_dir)
    na = not_applicable(section["rows"])
    if na:
        lines += ["Not applicable (the env lacks what the agent needs):", ""] + na + [""]
    if section.get("figure"):
        lines += [f"![{name}]({figure_dir}/{section['figure']})", ""]
    if section.get("robustness"):
        preset = section["robustness"][0]["preset"]
        lines += [f"### Robustness on {preset}", "",
                  f"{p['robustness_episodes']} episodes per cell, the same episodes in every "
                  "column; success rate (mean steps to the source).", ""]
        lines += robustness_table(section["robustness"]) + [""]
    if section.get("maps"):
        lines += [f"Per-start-cell success ({p['map_episodes']} episodes from each cell of a "
                  f"lattice every {p['map_stride']} cells, start heading west):", ""]
        lines += map_lines(section["maps"]) + [""]
        if section.get("map_figure"):
            lines += [f"![{name} start cells]({figure_dir}/{section['map_figure']})", ""]
    if section.get("variants"):
        lines += variant_section(name, section)
    return lines


#: What each protocol of a variant table is, for the page.
VARIANT_SAID = {
    "singh240": "as their evaluation code ran it: the section's own protocol",
    "singh240_paper": "the paper's reading (`configs/scenarios/singh2023_paper_*.yaml`): "
                      "diffusion halved to 0.5, and each of the 240 episodes draws its own plume "
                      "future (births, cross-wind jumps and, on switch-many, the winds after the "
                      "next switch) from its start time's shared state, where `singh240` replays "
                      "one plume evolution per start time for all its episodes",
}


def variant_section(name: str, section: Mapping[str, Any]) -> list[str]:
    """A fixed-start family's protocol-variant table
    (:mod:`plume_jax.scoreboard.variants`): what each protocol is, what the
    table lets a reader conclude, the table and how long its runs took."""
    from plume_jax.scoreboard.variants import variant_lines

    rows = section["variants"]
    names = list(dict.fromkeys(r["protocol"] for r in rows))
    seconds = sum(r.get("seconds", 0.0) for r in rows)
    said = "; ".join(f"`{n}`, {VARIANT_SAID.get(n, 'a variant of the protocol')}" for n in names)
    return [f"### Robustness: the protocol's readings ({', '.join(names)})", "",
            f"Each agent with a row above, on each regime, under {len(names)} protocols: "
            f"{said}. Each runs the same starts under the same evaluation seeds. **What you may "
            "conclude:** how far an agent's homings depend on which reading of their protocol "
            "is run: where an agent's two ranges do not overlap, the change is the protocol's "
            "rather than the evaluation seeds'. **What you may not:** set a figure under one protocol "
            "beside one under another (Singh et al.'s figures came from their code, the "
            "section's own protocol), or put a change down to the diffusion or the plume "
            "futures alone (the variant changes both at once). Run with the section's rows "
            f"(`plume-jax bench --family {name}`, with `--agent` for a rerun listed above); "
            f"its runs took {seconds / 60:.1f} min.", ""] \
        + variant_lines(rows) + [""]


def fixed_starts_text(section: Mapping[str, Any]) -> list[str]:
    """What a fixed-start section measured and how to read it (Singh et
    al.'s protocol: docs/singh2023.md)."""
    return [
        "Each (preset, agent) pair runs Singh et al.'s evaluation (`protocol: singh240`, "
        "docs/singh2023.md) on the env of that preset's scenario file "
        "(`configs/scenarios/singh2023_*.yaml`), as their evaluation code ran it: one plume "
        "evolution replayed for every episode, diffusion 1.0, on switch-many their one wind "
        "history, no random odour gain, no wall within the stray limit, the policy's saved "
        "observation statistics (`normalisation: saved`; their agents were scored with "
        "statistics re-estimated online, `normalisation: online`): 3 downwind distances × 2 "
        "start times × 5 cross-wind positions × 8 headings = 240 fixed starts, on a plume "
        "drawn with the board's seed; a homing is reaching the source within 0.2 m. The "
        "paper's reading (halved diffusion, per-episode plume futures) is the robustness "
        "variant `protocol: singh240_paper` (`singh2023_paper_*.yaml`; \"Robustness: the "
        "protocol's readings\" below). The cast-and-surge "
        "baseline flies with its scenario's parameters. Reference rows (kind *paper*) are "
        "Singh et al.'s best homings on that regime (their `code/tabulate.ipynb`: the "
        "column maximum over their agents, each evaluated once; not rerun here). Every "
        "Singh zoo entry reads the same observations and flies the same actions, so each "
        "runs on every regime, as the paper evaluated every agent on every regime: "
        "*own preset* marks an entry on the regime it was trained on, *cross-regime* one "
        "trained on another. **What you may conclude:** a policy's homings and success "
        "interval on these 240 starts, against the baseline's and the paper's figure; a "
        "recipe's verdict against their best below (on every regime, as their best is a "
        "maximum over agents that each flew every regime: 176 and 160 come from an agent "
        "that scores 3 on switch-many) is taken on its IQM interval over seeds, each seed "
        "the mean over 3 evaluation seeds. **What you may not:** that a difference inside the intervals is real, or "
        "that plume_jax's re-implementation of their task is their simulator (the plume "
        "is validated against theirs, docs/plumes.md, but episodes are not theirs)."]


def zoo_lines(zoo_entries: list[Any]) -> list[str]:
    """The zoo's table: every entry and version, what it was trained on and
    what it cost (``entry.yaml``), and how its reproducibility was checked
    (its optional ``reproducibility`` note)."""
    lines = ["## The zoo", "",
             "Every trained entry of `configs/zoo/` (`zoo:<name>@<version>`; the board runs "
             "the newest version of each). Training cost and the greedy evaluation after "
             "training are from the run's own `summary.json` (`entry.yaml`); an entry "
             "published from an exported policy whose run folder is gone records the facts "
             "measured where it was trained, and says where (its `entry.yaml`). An entry marked "
             "\"own sensor\" reads its preset through the sensor its `entry.yaml` names "
             "(`env_overrides`), with the preset's plume, actions and goal.",
             "", "| entry | trained on | network | seed | device | wall time | env steps "
             "| policy | own evaluation: success, mean steps (episodes, seed) |",
             "|---|---|---|---:|---|---:|---:|---:|---|"]
    notes = []
    for e in zoo_entries:
        info, train = e.info, e.info.get("training", {})
        ev = info.get("evaluation", {})
        own = (f"{ev['success_rate']:.3f}, {_fmt(ev.get('mean_steps_to_goal'), '.1f')} "
               f"({md_text(ev.get('episodes', '?'))}, {md_text(ev.get('seed', '?'))})"
               if "success_rate" in ev else "—")
        sensor = " (own sensor)" if e.env_overrides else ""
        lines.append(f"| {md_text(e.reference)} | {md_text(e.preset)}{sensor} | "
                     f"{md_text(info.get('network', '?'))} | "
                     f"{md_text(info.get('seed', '?'))} | {md_text(train.get('device', '?'))} | "
                     f"{_fmt(train.get('wall_seconds'), '.0f')} s | "
                     f"{train.get('env_steps', 0):,} | "
                     f"{info.get('policy_bytes', 0) / 1024:.0f} KiB | {own} |")
        if info.get("reproducibility"):
            notes.append(f"- {md_text(e.reference)}: {md_text(info['reproducibility'])}")
    if notes:
        lines += ["", "Reproducibility checks:", ""] + notes
    return lines + [""]


def render(record: Mapping[str, Any], intro: str, figure_dir: str,
           zoo_entries: Sequence[Any] = ()) -> str:
    """``docs/scoreboard.md``: ``intro``, a section per family in the
    board's order, then the zoo's table."""
    from plume_jax.scoreboard.families import FAMILIES

    record = escaped(record)  # labels, reasons, machine texts: no table cell or HTML breaks out
    lines = [intro.rstrip(), ""]
    names = [n for n in FAMILIES if n in record["families"]] + \
        [n for n in record["families"] if n not in FAMILIES]
    for name in names:
        lines += family_markdown(name, record["families"][name], figure_dir)
    missing = [n for n in FAMILIES if n not in record["families"]]
    if missing:
        lines += [f"Not run yet: {', '.join(missing)} (`plume-jax bench --family NAME`).", ""]
    if zoo_entries:
        lines += zoo_lines(list(zoo_entries))
    return "\n".join(lines).rstrip() + "\n"


def family_figure(name: str, section: Mapping[str, Any]) -> Any:
    """Success (95 % interval) and mean steps ± SE of every agent that ran,
    a row of two panels per preset."""
    import numpy as np
    from matplotlib.figure import Figure

    presets = list(dict.fromkeys(r["preset"] for r in section["rows"] if r["status"] == "ok"))
    fig = Figure(figsize=(11, 2.2 + 2.0 * max(1, len(presets))), layout="constrained")
    axes = fig.subplots(max(1, len(presets)), 2, squeeze=False)
    for (ax_s, ax_t), preset in zip(axes, presets):
        ran = [r for r in section["rows"] if r["preset"] == preset and r["status"] == "ok"]
        y = np.arange(len(ran))
        rate = np.array([r["metrics"]["success_rate"] for r in ran])
        ci = np.array([r["metrics"]["success_ci95"] for r in ran])
        colours = ["tab:orange" if r["kind"] == "zoo" else
                   "tab:green" if r["kind"] == "yours" else "tab:blue" for r in ran]
        ax_s.barh(y, rate, xerr=[rate - ci[:, 0], ci[:, 1] - rate], color=colours, capsize=3)
        ax_s.set_yticks(y, [r["label"] + ("" if trained_on_text(r) in ("—", "own preset")
                                          else " (cross-regime)") for r in ran], fontsize=8)
        ax_s.set_xlim(0, 1)
        ax_s.set_title(f"{preset}: success (95 % CI)", fontsize=9)
        best = next((r["homings"]["paper_best"] for r in ran if r.get("homings")), None)
        if best is not None:  # Singh et al.'s best on this regime, as a success rate
            from plume_jax.evaluate.singh_protocol import EPISODES

            ax_s.axvline(best / EPISODES, color="black", linestyle=":", linewidth=1.5,
                         label=f"Singh et al.'s best ({best}/{EPISODES})")
            ax_s.legend(fontsize=7, loc="lower right")
        steps = np.array([r["metrics"]["mean_steps"] or np.nan for r in ran], float)
        sem = np.array([r["metrics"]["sem_steps"] or 0.0 for r in ran], float)
        ax_t.barh(y, steps, xerr=sem, color=colours, capsize=3)
        ax_t.set_yticks(y, [""] * len(ran))
        ax_t.set_title("mean steps to the source ± SE (successful episodes)", fontsize=9)
        for ax in (ax_s, ax_t):
            ax.invert_yaxis()
    fig.suptitle(f"{name}: mode {section['protocol']['mode']}, "
                 f"{section['protocol']['episodes']} episodes per agent (blue: baselines, "
                 "orange: zoo, green: yours)", fontsize=10)
    return fig


def map_figure(name: str, maps: list[Mapping[str, Any]], source: Any) -> Any:
    """One success map per agent (start cell -> success rate)."""
    import numpy as np
    from matplotlib.figure import Figure

    shown = [m for m in maps if m["status"] == "ok"]
    cols = min(4, max(1, len(shown)))
    rows = -(-max(1, len(shown)) // cols)
    fig = Figure(figsize=(3.2 * cols + 1, 3.0 * rows + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    image = None
    for ax, m in zip(axes, shown):
        grid = np.array([[np.nan if v is None else v for v in row] for row in m["success"]])
        xs, ys = np.asarray(m["xs"]), np.asarray(m["ys"])
        step = (xs[1] - xs[0]) if len(xs) > 1 else 1.0
        extent = (xs[0] - step / 2, xs[-1] + step / 2, ys[0] - step / 2, ys[-1] + step / 2)
        image = ax.imshow(grid, origin="lower", extent=extent, vmin=0, vmax=1, cmap="viridis")
        ax.plot(*source, marker="*", color="red", markersize=10)
        ax.set_title(m["label"], fontsize=9)
    for ax in axes[len(shown):]:
        ax.axis("off")
    if image is not None:
        fig.colorbar(image, ax=list(axes[:len(shown)]), label="success rate", shrink=0.8)
    fig.suptitle(f"{name}: success by start cell (red star: source)", fontsize=10)
    return fig


def dump_record(record: Mapping[str, Any]) -> str:
    return json.dumps(record, indent=1, allow_nan=False) + "\n"
