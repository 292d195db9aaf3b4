"""Absolute moves on the grid: noop, the four cardinal moves, optional diagonals."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp

from plume_jax.actions.base import (
    NamedDiscreteActions,
    discrete_index,
    include_noop_setting,
    step_size_setting,
)
from plume_jax.settings import boolean, setting
from plume_jax.core.types import AgentState, Grid, NoParams, PlumeProbe

#: Unit displacement ``(dx, dy)`` of every named move (x east, y north).
MOVES: dict[str, tuple[int, int]] = {
    "noop": (0, 0),
    "move_north": (0, 1),
    "move_south": (0, -1),
    "move_east": (1, 0),
    "move_west": (-1, 0),
    "move_northeast": (1, 1),
    "move_northwest": (-1, 1),
    "move_southeast": (1, -1),
    "move_southwest": (-1, -1),
}


def grid_moves(action_names: Sequence[str], action_ids: Mapping[str, int], step_size: int = 1
               ) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """The moves among an env's named actions (``noop`` and non-move
    actions left out, in ``action_names`` order): ``(ids, deltas)``, each
    move's action id and displacement ``(dx, dy)`` in cells, ``step_size``
    included. Both empty when the actions have no moves (callers that need
    moves raise their own error)."""
    names = [n for n in action_names if n in MOVES and n != "noop"]
    return (tuple(int(action_ids[n]) for n in names),
            tuple((MOVES[n][0] * step_size, MOVES[n][1] * step_size) for n in names))


@dataclasses.dataclass(frozen=True)
class DiscreteGridActions(NamedDiscreteActions[NoParams]):
    """Absolute cardinal (and optionally diagonal) moves of ``step_size`` cells.

    Action ids, fixed and pinned by a test:

    ==========================  ===========================================
    include_noop, diagonals     action_names (id order)
    ==========================  ===========================================
    True, False (default)       noop, move_north, move_south, move_east, move_west
    True, True                  ... then move_northeast, move_northwest,
                                move_southeast, move_southwest
    False, ...                  the same without ``noop`` (ids shift down by 1)
    ==========================  ===========================================

    Positions stay on integer cells and are clamped to the grid. A move sets
    ``heading`` to the direction moved (``atan2(dy, dx)``); ``noop`` and
    invalid actions leave the agent unchanged.
    """

    step_size: int = step_size_setting("move")
    include_noop: bool = include_noop_setting()
    diagonals: bool = setting(False, boolean(), doc="add the 4 diagonal moves")

    type_name = "discrete_grid"
    modality = "absolute_cardinal"
    orientation_dependent = False
    #: Positions stay on integer cells.
    on_grid = True

    def moves(self) -> list[str]:
        names = ["move_north", "move_south", "move_east", "move_west"]
        if self.diagonals:
            names += ["move_northeast", "move_northwest", "move_southeast", "move_southwest"]
        return names

    def process_action(
        self, key: jax.Array, action: Any, agent: AgentState, grid: Grid, params: NoParams,
        probe: PlumeProbe | None = None,
    ) -> AgentState:
        """The agent after ``action``; pure, deterministic, in-bounds.

        ``key`` and ``probe`` are accepted for interface uniformity and unused.
        """
        table = jnp.asarray([MOVES[n] for n in self.action_names], jnp.float32)
        valid, index = discrete_index(action, len(self.action_names))
        delta = table[index] * valid.astype(jnp.float32)
        moved = jnp.any(delta != 0.0)
        position = grid.clamp(agent.position + self.step_size * delta)
        heading = jnp.where(moved, jnp.arctan2(delta[1], delta[0]), agent.heading)
        return agent.replace(position=position, heading=heading.astype(jnp.float32))
