"""The value of ``run.lanes``, checked (:func:`lanes_check`) and read as a
:class:`LaneSchedule`: the width of the vmapped program a single run trains
in, update by update (:mod:`plume_jax.train.loop` runs it). ``null``: the
plain single-run program; ``N``: lane 0 of ``N`` identical copies; a *width
schedule* ``[{from_update: U, lanes: N}, ...]``: updates ``[U_i, U_{i+1})`` in
programs of ``N_i`` copies, as a tune trial trained through pruning rebuilds.
An evaluation of the runner at update ``u`` runs at the width of the program
that made that runner (:meth:`LaneSchedule.evaluation_width`; docs/training.md,
"Tuning", says why). This module does not import JAX: the config reads it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from plume_jax.core.errors import ValidationError, bounded_repr

#: The most lanes (copies) of one program, each width of a schedule included.
MAX_LANES = 4096

#: What a width schedule is, for error messages.
SCHEDULE = ("a width schedule: a non-empty list of {from_update: U, lanes: N} mappings, "
            "from_update 0 first and strictly increasing integers, each lanes an integer in "
            f"[1, {MAX_LANES}]")


def _integer(value: Any) -> int | None:
    """``value`` as an int when it is an integer (not a bool) or a float
    with no fractional part (YAML's ``1e3``), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (float, np.floating)) and math.isfinite(value) \
            and float(value).is_integer():
        return int(value)
    return int(value) if isinstance(value, (int, np.integer)) else None


def lanes_check(name: str, value: Any, grid: Any = None) -> int | list[dict[str, int]] | None:
    """The checker of ``run.lanes``: ``None``, a width (Python int) or a
    width schedule as a new list of ``{"from_update", "lanes"}`` dicts of
    Python ints. A refusal is a ``ValidationError`` naming ``name`` and, for
    a schedule, the entry and key that is wrong."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        n = _integer(value)
        if n is None or not 1 <= n <= MAX_LANES:
            raise ValidationError.for_parameter(
                name, value, f"null, an integer in [1, {MAX_LANES}] or {SCHEDULE}")
        return n

    def refused(why: str) -> ValidationError:
        return ValidationError.for_parameter(name, value, f"{SCHEDULE} ({why})")

    if not value:
        raise refused("the list is empty")
    entries: list[dict[str, int]] = []
    for i, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            raise refused(f"entry {i} is {bounded_repr(entry)}, not a mapping with exactly the "
                          "keys from_update and lanes")
        if sorted(map(str, entry)) != ["from_update", "lanes"]:
            raise refused(f"entry {i} is a mapping with keys {bounded_repr(sorted(map(str, entry)))}"
                          ", not a mapping with exactly the keys from_update and lanes")
        start, lanes = _integer(entry["from_update"]), _integer(entry["lanes"])
        if start is None or start < 0:
            raise refused(f"entry {i}'s from_update is {bounded_repr(entry['from_update'])}, "
                          "not an integer >= 0")
        if i == 0 and start != 0:
            raise refused(f"the first entry's from_update is {start}, not 0")
        if i > 0 and start <= entries[-1]["from_update"]:
            raise refused(f"entry {i}'s from_update {start} does not come after entry {i - 1}'s "
                          f"{entries[-1]['from_update']}")
        if lanes is None or not 1 <= lanes <= MAX_LANES:
            raise refused(f"entry {i}'s lanes is {bounded_repr(entry['lanes'])}, not an integer "
                          f"in [1, {MAX_LANES}]")
        entries.append({"from_update": start, "lanes": lanes})
    return entries


@dataclasses.dataclass(frozen=True)
class LaneSchedule:
    """A checked ``run.lanes`` (not null): ``segments``, ``(from_update,
    width)`` pairs; segment ``i`` trains updates ``[from_update_i,
    from_update_{i+1})``, the last one to the end of the run."""

    segments: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, setting: Any) -> "LaneSchedule | None":
        """The schedule of a value :func:`lanes_check` returned (None for
        None; an integer ``N``: ``N`` from update 0)."""
        if setting is None:
            return None
        if isinstance(setting, int):
            return cls(((0, setting),))
        return cls(tuple((int(e["from_update"]), int(e["lanes"])) for e in setting))

    def training_width(self, update: int) -> int:
        """The width of the program that trains from ``update`` (updates
        done) on: the last segment with ``from_update <= update``."""
        return next((w for start, w in reversed(self.segments) if start <= update),
                    self.segments[0][1])

    def evaluation_width(self, update: int) -> int:
        """The width of an evaluation of the runner at ``update``: that of the
        program that trained update ``update - 1`` (the first at update 0)."""
        return self.training_width(max(update - 1, 0))

    def ends(self, num_updates: int) -> list[tuple[int, int, int]]:
        """``(from_update, to_update, width)`` of each segment of a run of
        ``num_updates`` updates that trains any (``to_update`` exclusive)."""
        starts = [s for s, _ in self.segments] + [num_updates]
        return [(a, min(b, num_updates), w) for (a, w), b in zip(self.segments, starts[1:])
                if a < num_updates]

    def cost(self, num_updates: int) -> int:
        """Lane-updates of a run of ``num_updates`` updates: each segment's
        width times its updates (a single run costs ``num_updates``)."""
        return sum((b - a) * w for a, b, w in self.ends(num_updates))

    def cost_text(self, num_updates: int) -> str:
        """``4 copies for updates 0..4, then 2 copies for updates 5..9 (4 x 5
        + 2 x 5 = 30 lane-updates, 3 times the compute of one run's 10
        updates)``."""
        parts = [(w, a, b) for a, b, w in self.ends(num_updates)]
        segments = ", then ".join(f"{w} copies for updates {a}..{b - 1}" for w, a, b in parts)
        cost = self.cost(num_updates)
        terms = " + ".join(f"{w} x {b - a}" for w, a, b in parts)
        return (f"{segments} ({terms} = {cost} lane-updates, {cost / num_updates:.3g} times "
                f"the compute of one run's {num_updates} updates)")


def lanes_line(setting: Any, num_updates: int) -> str | None:
    """The closing line of a run trained in lanes (``setting``: its checked
    ``run.lanes``): as lane 0 of how many copies, at what cost, and that its
    env steps and steps/s are one lane's. None for ``run.lanes: null``."""
    schedule = LaneSchedule.of(setting)
    if schedule is None:
        return None
    one_lane = "; the env steps and steps/s above are one lane's"
    if len(schedule.segments) > 1:
        return ("trained as lane 0 of identical copies in a run.lanes width schedule: "
                + schedule.cost_text(num_updates) + one_lane)
    n = schedule.segments[0][1]
    if n == 1:  # one lane: its steps/s are the run's
        return ("trained as the one member of a vmapped program (run.lanes: 1; the compute of "
                "one run)")
    return (f"trained as lane 0 of {n} identical copies (run.lanes: {n}; {n} x the compute "
            "and memory of one run)" + one_lane)


__all__ = ["LaneSchedule", "MAX_LANES", "SCHEDULE", "lanes_check", "lanes_line"]
