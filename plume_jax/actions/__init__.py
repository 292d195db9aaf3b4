"""Action models (layer 1), each obeying the action-processor contract.

An action model is a frozen dataclass with:

- ``action_space`` (a :mod:`plume_jax.spaces` space, the same object on
  every access), ``action_names`` (list, in id order), ``action_ids`` (dict);
- ``validate_action(action) -> bool[]`` — agrees with
  ``action_space.contains``; never raises;
- ``process_action(key, action, agent, grid, params) -> AgentState`` —
  pure; an invalid action is executed as ``noop`` (no movement); the result
  is always inside the grid;
- ``executed_action(action) -> i32[]`` — the id actually executed
  (the noop id, or -1 when the model has no noop, for invalid actions);
- ``get_metadata() -> dict`` — JSON: ``type``, ``modality``, ``parameters``,
  ``orientation_dependent``.
"""

from plume_jax.actions.discrete_grid import DiscreteGridActions

ACTIONS = {DiscreteGridActions.type_name: DiscreteGridActions}

__all__ = ["DiscreteGridActions", "ACTIONS"]
