"""The start-distribution interface (layer 1)."""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Generic, TypeVar

import jax

from plume_jax.settings import Configurable
from plume_jax.core.types import AgentState, Grid, PlumeProbe

ParamsT = TypeVar("ParamsT")


class StartDistribution(Configurable, abc.ABC, Generic[ParamsT]):
    """Where episodes start: ``StartDistribution[Params]``.

    Required: :meth:`sample`. Optional, with a default: the classmethod
    :meth:`check_compatible` (accepts everything), which ``make`` calls to
    refuse configurations the distribution cannot sample.
    """

    #: Whether the start reads the plume's puffs (``probe.puffs``): ``make``
    #: then refuses it with a plume whose ``has_puffs`` is False.
    needs_puffs: ClassVar[bool] = False

    @abc.abstractmethod
    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: ParamsT, probe: PlumeProbe | None = None) -> AgentState:
        """The agent at an episode start: position f32[2] on an integer cell
        inside the grid and farther than ``goal_radius`` (f32[], cells) from
        ``goal`` (f32[2]), heading f32[] radians. ``key`` is the only
        randomness; ``probe`` (passed by the env) is read by starts that
        depend on the plume (``downwind``)."""

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict[str, Any], on_grid: bool) -> None:
        """Raise ``ValidationError`` when this start cannot be sampled with the
        given grid, source ``(x, y)`` (cells), ``goal_radius`` and resolved
        ``settings``, with an action model that keeps the agent on integer
        cells (``on_grid``) or not. Default: nothing to check beyond
        ``make``'s own check that the goal leaves a cell free."""
