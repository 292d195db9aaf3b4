"""Uniform starts over the cells outside the goal region."""

from __future__ import annotations

import dataclasses

import jax

from plume_jax.starts.candidates import CandidateStart, cells_from_bits
from plume_jax.core.types import Grid, NoParams, PlumeProbe


@dataclasses.dataclass(frozen=True)
class UniformStart(CandidateStart[NoParams]):
    """(Near-)uniform over the grid cells outside the goal region; cardinal heading.

    Sampling draws ``candidates`` cells at once and keeps the first one
    outside the goal region (a fixed-cost, vmap-friendly rejection sampler).
    If all are inside (probability ``p**candidates`` with ``p`` the goal's
    share of the grid) the cell farthest from the goal is used; ``make``
    refuses configurations where the goal covers the whole grid.
    """

    type_name = "uniform"

    def candidate_points(self, bits: jax.Array, grid: Grid, goal: jax.Array, params: NoParams,
                         probe: PlumeProbe | None) -> jax.Array:
        """Uniform cells (see :func:`cells_from_bits`)."""
        return cells_from_bits(bits, grid)
