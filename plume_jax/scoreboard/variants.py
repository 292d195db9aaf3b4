"""Protocol variants: a fixed-start family's agents under its own protocol
and under each named variant of it, over several evaluation seeds.

A family measured by a fixed-start protocol (``Family.fixed_starts``) may
name variants of it (``Family.protocol_variants``): for singh2023, Singh
et al.'s evaluation as their code ran it (``singh240``, the section's own
figures) and the paper's reading (``singh240_paper``: halved diffusion,
each episode its own plume future;
:mod:`plume_jax.evaluate.singh_protocol`). Each (preset, agent, protocol)
runs the preset's scenario file of that protocol
(:func:`plume_jax.scoreboard.fixed_starts.scenario_for`) on the section's
starts under :data:`~plume_jax.scoreboard.recipes.EVAL_SEEDS` evaluation
seeds (the section's seed and the next ones, as the recipe rows), so a row
holds one homings count per evaluation seed. The variants' rows of an agent
are its robustness to the reading of the protocol, not a second board: the
section's verdicts stay those of its own protocol.

A row (JSON-ready, :data:`plume_jax.scoreboard.record_schema` checks it):
``{"family", "preset", "label", "kind", "protocol", "status": "ok",
"seeds": [int], "homings": [int], "episodes", "seconds"}`` (``trained_on``
for a zoo entry), or ``status`` ``"not applicable"`` with the ``reason``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from plume_jax.scoreboard.contenders import Contender
from plume_jax.scoreboard.protocol import Protocol


def protocols(family: Any) -> tuple[str, ...]:
    """The protocols of ``family``'s variant table: its own fixed-start
    protocol first, then its variants (``()`` for a family without either)."""
    if family.fixed_starts is None or not family.protocol_variants:
        return ()
    return (family.fixed_starts, *family.protocol_variants)


def runs_per_contender(family: Any) -> int:
    """The (preset, protocol) pairs :func:`run_variants` runs per agent."""
    return len(family.presets) * len(protocols(family))


def run_variants(family: Any, contenders: Sequence[Contender], protocol: Protocol,
                 progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """A row per (preset, contender, protocol of :func:`protocols`), in that
    order: each contender's homings on ``protocol.episodes`` of the starts
    (all under the full board) under each evaluation seed of
    :func:`plume_jax.scoreboard.recipes.eval_seeds`, or why it does not
    apply (:func:`plume_jax.scoreboard.board.plan`). ``progress`` is called
    as each (preset, contender, protocol) starts."""
    import jax

    from plume_jax.evaluate import scenario as sc
    from plume_jax.scoreboard.board import plan
    from plume_jax.scoreboard.recipes import eval_seeds

    seeds = eval_seeds(protocol.as_dict())
    rows = []
    for preset in family.presets:
        for contender in contenders:
            for name in protocols(family):
                if progress is not None:
                    progress(f"{preset} / {contender.label} / protocol {name}")
                base: dict[str, Any] = {"family": family.name, "preset": preset,
                                        "label": contender.label, "kind": contender.kind,
                                        "protocol": name}
                if contender.trained_on is not None:
                    base["trained_on"] = contender.trained_on
                built: dict = {}  # one policy object: its rollout compiles once for the seeds
                t0 = time.perf_counter()
                homings, episodes = [], 0
                for seed in seeds:
                    planned, reason = plan(preset, contender, protocol.episodes, seed,
                                           built=built, fixed_starts=name)
                    if planned is None:
                        break
                    p = sc.execute_run(planned)["metrics"]["protocol"]
                    homings.append(int(p["homings"]))
                    episodes = int(p["episodes"])
                if planned is None:
                    rows.append({**base, "status": "not applicable", "reason": reason})
                else:
                    rows.append({**base, "status": "ok", "seeds": list(seeds),
                                 "homings": homings, "episodes": episodes,
                                 "seconds": round(time.perf_counter() - t0, 2)})
                # as board.run_family: no compiled program is reused past here, and
                # XLA's CPU backend keeps every one mapped
                jax.clear_caches()
    return rows


def summary(row: Mapping[str, Any]) -> dict[str, float]:
    """``{"mean", "low", "high"}``: a row's homings over its evaluation
    seeds, their mean and range."""
    values = [float(h) for h in row["homings"]]
    return {"mean": sum(values) / len(values), "low": min(values), "high": max(values)}


def variant_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The variant table: a line per (regime, agent) that ran under at least
    one protocol, a column per protocol with the mean homings over the
    evaluation seeds and their range, and the change of the mean from the
    first protocol (the section's own) to each other; ``n/a`` where the
    agent did not run under a protocol (an agent that ran under none is
    left out: the section lists why it does not apply)."""
    from plume_jax.scoreboard.recipes import regime_name, trained_on_text

    names = list(dict.fromkeys(r["protocol"] for r in rows))
    ran = [r for r in rows if r["status"] == "ok"]
    if not ran:
        return []
    k = len(ran[0]["seeds"])
    n = ran[0]["episodes"]
    head = [f"`{name}`: mean [range]" for name in names] + [
        f"change, `{name}`" for name in names[1:]]
    lines = ["| regime | agent | kind | trained on | " + " | ".join(head) + " |",
             "|---|---|---|---|" + "---:|" * len(head)]
    for preset in dict.fromkeys(r["preset"] for r in rows):
        for label in dict.fromkeys(r["label"] for r in ran if r["preset"] == preset):
            own = {r["protocol"]: r for r in rows if r["preset"] == preset
                   and r["label"] == label}
            first = next(iter(own.values()))
            cells: list[str] = []
            means: list[float | None] = []
            for name in names:
                r = own.get(name)
                if r is None or r["status"] != "ok":
                    cells.append("n/a")
                    means.append(None)
                    continue
                s = summary(r)
                cells.append(f"{s['mean']:.1f} [{s['low']:.0f}, {s['high']:.0f}]")
                means.append(s["mean"])
            deltas = ["—" if means[0] is None or m is None else f"{m - means[0]:+.1f}"
                      for m in means[1:]]
            where = "—" if first.get("trained_on") is None else trained_on_text(first)
            lines.append(f"| {regime_name(preset)} | {label} | {first['kind']} | {where} | "
                         + " | ".join(cells + deltas) + " |")
    return lines + ["", f"Homings of {n} starts; mean over {k} evaluation seeds "
                    f"({', '.join(str(s) for s in ran[0]['seeds'])}) [least, most]."]


__all__ = ["protocols", "run_variants", "runs_per_contender", "summary", "variant_lines"]
