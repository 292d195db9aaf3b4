"""Action models (layer 1), each obeying the action-processor contract.

The interface every action model implements is
:class:`plume_jax.actions.base.ActionModel` (``action_space``,
``action_names``, ``action_ids``, ``noop_id``, ``validate_action``,
``process_action``, ``executed_action``, ``on_grid``, ``get_metadata``;
contracts, units and dtypes in its docstrings); models with named discrete
actions derive from :class:`~plume_jax.actions.base.NamedDiscreteActions`.
``ACTIONS`` maps config type names to the classes.

=================  ====================================  ==================
type name          actions                               positions
=================  ====================================  ==================
``discrete_grid``  noop, move_north/south/east/west       integer cells
                   (+ diagonals)
``oriented_grid``  noop, forward, turn_left, turn_right   integer cells
``run_tumble``     noop, run, tumble                     continuous
``continuous``     Box (forward_speed, turn_rate)        continuous
``flight``         Box (thrust, turn) in [-1, 1]^2, the  continuous
                   wind carries the agent
``surge_cast``     noop, surge, cast_left, cast_right    integer cells
=================  ====================================  ==================
"""

from plume_jax.actions.base import ActionModel, NamedDiscreteActions
from plume_jax.actions.continuous import ContinuousActions
from plume_jax.actions.discrete_grid import DiscreteGridActions
from plume_jax.actions.flight import FlightActions
from plume_jax.actions.oriented_grid import OrientedGridActions
from plume_jax.actions.run_tumble import RunTumbleActions
from plume_jax.actions.surge_cast import SurgeCastActions
from plume_jax.settings import type_table

ACTIONS: dict[str, type[ActionModel]] = type_table(
    DiscreteGridActions, OrientedGridActions, RunTumbleActions, ContinuousActions, SurgeCastActions,
    FlightActions)

__all__ = [
    "ACTIONS",
    "ActionModel",
    "ContinuousActions",
    "DiscreteGridActions",
    "FlightActions",
    "NamedDiscreteActions",
    "OrientedGridActions",
    "RunTumbleActions",
    "SurgeCastActions",
]
