"""Rerun some agents of a family and merge their rows into its recorded
section (``plume-jax bench --family F --agent A``).

A new zoo version, a retrained agent or one added later changes the rows of
that agent only; rerunning them alone keeps every other row as it was
measured. The rerun agents' rows replace their old rows — for a zoo agent
also the rows of its older versions (``zoo:x@1`` gives way to
``zoo:x@2``) — in the board's order (preset, then agent), and the verdicts
are recomputed over the merged rows. With robustness, the rerun agents'
robustness rows and start-cell maps are replaced the same way; without,
the old ones stay as they were measured (labelled with the version they
ran); so do a fixed-start family's protocol-variant rows
(:mod:`plume_jax.scoreboard.variants`). The section keeps its own protocol, time and machine, and lists each
partial rerun under ``reruns`` (agents, when, where, how long).

A rerun must use the section's protocol (mode and episodes): rows made
under two protocols would not be comparable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from plume_jax.core.errors import ValidationError
from plume_jax.scoreboard.contenders import Contender
from plume_jax.scoreboard.families import Family
from plume_jax.scoreboard.protocol import Protocol


def entry_key(label: str) -> str:
    """What a row's agent is, across versions: ``zoo:<name>`` for a zoo
    reference (``zoo:x@2`` -> ``zoo:x``), else the label itself."""
    if label.startswith("zoo:"):
        return label.partition("@")[0]
    return label


def pick_contenders(contenders: list[Contender], names: Iterable[str]) -> list[Contender]:
    """The contenders ``names`` asks for, in board order: each name is a
    label (``klinotaxis``, ``zoo:x@2``, an ``--add`` label) or a zoo entry
    ``zoo:<name>`` (its version on the board).

    Raises:
        ValidationError: (parameter ``--agent``) a name that is no agent of
            this board, with the labels it has.
    """
    names = list(dict.fromkeys(names))
    picked = []
    for name in names:
        found = [c for c in contenders if c.label == name or entry_key(c.label) == name]
        if not found:
            from plume_jax.settings.schema import did_you_mean

            labels = [c.label for c in contenders]
            raise ValidationError.for_parameter(
                "--agent", name, f"an agent of this board{did_you_mean(name, labels)}: a label "
                f"of {labels} or zoo:<name> (its newest version)")
        picked += found
    wanted = {c.label for c in picked}
    return [c for c in contenders if c.label in wanted]


def check_rerun(record: Mapping[str, Any], families: list[Family], protocol: Protocol) -> None:
    """A partial rerun needs each family's section on the record, made
    under ``protocol`` (the family's form of it,
    :func:`~plume_jax.scoreboard.fixed_starts.family_protocol`).

    Raises:
        ValidationError: (parameter ``--agent``) a family not on the record
            or recorded under another protocol.
    """
    from plume_jax.scoreboard.fixed_starts import family_protocol

    for family in families:
        own = family_protocol(family, protocol)
        section = record["families"].get(family.name)
        if section is None:
            raise ValidationError.for_parameter(
                "--agent", family.name, f"a family already on the record to merge into; run "
                f"`plume-jax bench --family {family.name}` whole first")
        if dict(section["protocol"]) != own.as_dict():
            raise ValidationError.for_parameter(
                "--agent", family.name, f"the protocol its recorded section was made with "
                f"(mode {section['protocol']['mode']!r}, {section['protocol']['episodes']} "
                f"episodes; this run: mode {own.mode!r}, {own.episodes}), so that "
                "its rows stay comparable: pass the same --mode/--episodes, or rerun the "
                "family whole")


def _merge(old: list[dict[str, Any]], new: list[dict[str, Any]], rerun: set[str],
           group: Any, order: list[str]) -> list[dict[str, Any]]:
    """``old`` without the rows of the rerun agents (by :func:`entry_key`),
    plus ``new``, sorted by ``group(row)`` then the agent's place in
    ``order`` (labels; unknown ones last, in their old order)."""
    kept = [r for r in old if entry_key(r["label"]) not in rerun]
    place = {label: i for i, label in enumerate(order)}
    rows = kept + list(new)
    return sorted(rows, key=lambda r: (group(r), place.get(r["label"], len(place))))


def merge_section(section: Mapping[str, Any], partial: Mapping[str, Any], family: Family,
                  rerun: list[Contender], order: list[str], with_robustness: bool
                  ) -> dict[str, Any]:
    """The family's recorded ``section`` with the rows of ``partial`` (the
    section :func:`plume_jax.scoreboard.bench.run_family_section` made for
    the ``rerun`` contenders alone) merged in; ``order`` is the whole
    board's labels, in board order. Figures are left to redraw."""
    from plume_jax.scoreboard import board

    keys = {entry_key(c.label) for c in rerun}
    presets = {p: i for i, p in enumerate(family.presets)}
    merged = {k: v for k, v in section.items() if k not in ("figure", "map_figure")}
    merged["rows"] = _merge(section["rows"], partial["rows"], keys,
                            lambda r: presets.get(r["preset"], len(presets)), order)
    merged["verdicts"] = board.verdicts(merged["rows"])
    if with_robustness and partial.get("robustness"):
        columns: dict[tuple[str, str], int] = {}
        for r in list(section.get("robustness", [])) + list(partial["robustness"]):
            columns.setdefault((r["axis"], str(r["level"])), len(columns))
        merged["robustness"] = _merge(section.get("robustness", []), partial["robustness"],
                                      keys, lambda r: columns[(r["axis"], str(r["level"]))],
                                      order)
        merged["maps"] = _merge(section.get("maps", []), partial["maps"], keys,
                                lambda r: 0, order)
    if with_robustness and "variants" in partial:
        merged["variants"] = _merge(section.get("variants", []), partial["variants"], keys,
                                    lambda r: presets.get(r["preset"], len(presets)), order)
    has_table = bool(family.robustness_preset or family.protocol_variants)
    merged["reruns"] = list(section.get("reruns", [])) + [{
        "agents": [c.label for c in rerun],  # robustness: None where the family has none
        "robustness": bool(with_robustness and (partial.get("robustness")
                                                or "variants" in partial))
        if has_table else None,
        **{k: partial[k] for k in ("wall_seconds", "finished_at", "machine_text",
                                   "git_revision")}}]
    return merged
