"""Start-position distributions (layer 1).

The interface every start distribution implements is
:class:`plume_jax.starts.base.StartDistribution`: a pure
``sample(key, grid, goal, goal_radius, params, probe=None) -> AgentState``
(``probe``, a :class:`plume_jax.core.types.PlumeProbe` passed by the env, is read
by ``downwind``, ``downwind_band`` and ``puff_quantile``; the others ignore it) and a classmethod
``check_compatible(grid, source, goal_radius, settings, on_grid)`` that
``make`` calls to refuse configurations it cannot sample. Start positions
lie inside the grid and outside the goal region (distance to the goal
``> goal_radius``), so no episode starts solved; drawn ones lie on integer
cells (except ``downwind_band`` with ``snap: false``), and a ``fixed`` one
does when the action model keeps the agent on cells (``on_grid``).

============  ==============================================================
type name     start position
============  ==============================================================
``uniform``   (near-)uniform over the cells outside the goal region
``fixed``     always the same position and heading
``annulus``   uniform (by area) in ``r_min <= distance to source <= r_max``
``downwind``  a box downwind of the source (wind from the plume or a param)
``downwind_band``
              a band downwind of the source, Gaussian across it, any heading;
              continuous positions with ``snap: false``
``puff_quantile``
              in the plume, where quantiles of its live puffs lie (Singh et
              al. 2023's training starts); needs a plume of puffs
============  ==============================================================
"""

from plume_jax.settings import type_table
from plume_jax.starts.annulus import AnnulusStart, AnnulusStartParams
from plume_jax.starts.base import StartDistribution
from plume_jax.starts.candidates import (
    CandidateStart,
    cardinal_heading_from_bits,
    cells_from_bits,
    farthest_corner,
    pick_candidate,
)
from plume_jax.starts.downwind import DownwindStart, DownwindStartParams
from plume_jax.starts.downwind_band import DownwindBandParams, DownwindBandStart
from plume_jax.starts.fixed import FixedStart, FixedStartParams
from plume_jax.starts.puff_quantile import PuffQuantileParams, PuffQuantileStart
from plume_jax.starts.uniform import UniformStart

STARTS: dict[str, type[StartDistribution]] = type_table(
    UniformStart, FixedStart, AnnulusStart, DownwindStart, DownwindBandStart, PuffQuantileStart)

__all__ = [
    "AnnulusStart",
    "AnnulusStartParams",
    "CandidateStart",
    "DownwindBandParams",
    "DownwindBandStart",
    "DownwindStart",
    "DownwindStartParams",
    "FixedStart",
    "FixedStartParams",
    "PuffQuantileParams",
    "PuffQuantileStart",
    "STARTS",
    "StartDistribution",
    "UniformStart",
    "cardinal_heading_from_bits",
    "cells_from_bits",
    "farthest_corner",
    "pick_candidate",
]
