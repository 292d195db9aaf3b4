"""Action models (layer 1), each obeying the action-processor contract.

An action model is a frozen dataclass with:

- ``action_space`` (a :mod:`plume_jax.spaces` space, the same object on
  every access), ``action_names`` (list, in id order), ``action_ids`` (dict);
- ``validate_action(action) -> bool[]`` — agrees with
  ``action_space.contains``; never raises;
- ``process_action(key, action, agent, grid, params, probe=None) -> AgentState``
  — pure; an invalid action is executed as ``noop`` (no movement); the
  result is always inside the grid; ``key`` is the only source of
  randomness; ``probe`` (a :class:`plume_jax.types.PlumeProbe`, passed by
  the env) is read by wind-relative models and ignored by the others;
- ``executed_action(action) -> i32[]`` — the id actually executed
  (the noop id, or -1 when the model has no noop, for invalid actions);
- ``get_metadata() -> dict`` — JSON: ``type``, ``modality``, ``parameters``,
  ``orientation_dependent``;
- ``on_grid`` — True when positions stay on integer cells.

=================  ====================================  ==================
type name          actions                               positions
=================  ====================================  ==================
``discrete_grid``  noop, move_north/south/east/west       integer cells
                   (+ diagonals)
``oriented_grid``  noop, forward, turn_left, turn_right   integer cells
``run_tumble``     noop, run, tumble                     continuous
``continuous``     Box (forward_speed, turn_rate)        continuous
``surge_cast``     noop, surge, cast_left, cast_right    integer cells
=================  ====================================  ==================
"""

from plume_jax.actions.continuous import ContinuousActions
from plume_jax.actions.discrete_grid import DiscreteGridActions
from plume_jax.actions.oriented_grid import OrientedGridActions
from plume_jax.actions.run_tumble import RunTumbleActions
from plume_jax.actions.surge_cast import SurgeCastActions

ACTIONS = {
    cls.type_name: cls
    for cls in (DiscreteGridActions, OrientedGridActions, RunTumbleActions, ContinuousActions,
                SurgeCastActions)
}

__all__ = [
    "ACTIONS",
    "ContinuousActions",
    "DiscreteGridActions",
    "OrientedGridActions",
    "RunTumbleActions",
    "SurgeCastActions",
]
