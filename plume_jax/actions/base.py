"""The action-model interface (layer 1) and what action models share:
named discrete action sets, exact validation of concrete integers, and
cell-snapped moves."""

from __future__ import annotations

import abc
import functools
from typing import Any, ClassVar, Generic, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.settings import MAX_GRID_SIDE, Configurable, boolean, integer, setting
from plume_jax.core.spaces import Box, Discrete, is_integer_scalar
from plume_jax.core.types import AgentState, Grid, PlumeProbe

ParamsT = TypeVar("ParamsT")

TWO_PI = 2.0 * np.pi


def discrete_index(action: Any, n: int) -> tuple[jax.Array, jax.Array]:
    """``(valid bool[], index i32[])`` for a discrete action with ``n`` ids.

    ``valid`` is ``Discrete(n).contains(action)``; ``index`` is the action
    when valid and 0 otherwise, so it is always safe for a table lookup.
    Concrete Python / NumPy integers are compared exactly (no int32 wrap or
    overflow); anything that is not an integer scalar (floats, bools,
    arrays, strings) is invalid. Never raises.
    """
    valid = Discrete(n).contains(action)
    if not is_integer_scalar(action):
        return valid, jnp.asarray(0, jnp.int32)
    if isinstance(action, (int, np.integer, np.ndarray)):
        value = int(action)
        return valid, jnp.asarray(value if 0 <= value < n else 0, jnp.int32)
    index = jnp.where(valid, jnp.asarray(action).astype(jnp.int32), 0)
    return valid, index.astype(jnp.int32)


def wrap_angle(angle: jax.Array) -> jax.Array:
    """f32 angles wrapped into ``[0, 2π)``."""
    return jnp.mod(jnp.asarray(angle, jnp.float32), TWO_PI).astype(jnp.float32)


def unit(angle: jax.Array) -> jax.Array:
    """f32[..., 2], the unit vector ``(cos a, sin a)``."""
    angle = jnp.asarray(angle, jnp.float32)
    return jnp.stack([jnp.cos(angle), jnp.sin(angle)], axis=-1)


def cell_step(position: jax.Array, angle: jax.Array, step_size: Any, grid: Grid) -> jax.Array:
    """f32[2]: ``position`` moved ``step_size`` cells toward ``angle``, the
    displacement rounded to whole cells (so integer cells stay integer),
    then clamped into the grid."""
    delta = jnp.round(step_size * unit(angle))
    return grid.clamp(position + delta)


class ActionModel(Configurable, abc.ABC, Generic[ParamsT]):
    """An action model (the action-processor contract): ``ActionModel[Params]``.

    Required: ``action_space`` (the same object on every access),
    :meth:`process_action`, :meth:`executed_action`, and the class
    attributes ``modality`` (str) and ``orientation_dependent`` (bool) of
    the JSON metadata. Optional, with defaults: ``on_grid`` (False),
    ``action_names`` / ``action_ids`` (empty), ``noop_id`` (-1),
    :meth:`validate_action` (``action_space.contains``).
    """

    #: How actions are interpreted (metadata): ``"absolute_cardinal"``, ...
    modality: ClassVar[str]
    #: Whether the result depends on the agent's heading (metadata).
    orientation_dependent: ClassVar[bool]
    #: True when positions stay on integer cells (the Gymnasium layer then
    #: reports them as ints and start positions must be cells).
    on_grid: ClassVar[bool] = False

    @property
    @abc.abstractmethod
    def action_space(self) -> Discrete | Box:
        """The action space (a :mod:`plume_jax.core.spaces` space), the same object
        on every access."""

    @property
    def action_names(self) -> list[str]:
        """Action names in id order (fixed per configuration); empty without named ids."""
        return []

    @property
    def action_ids(self) -> dict[str, int]:
        """``name -> id`` (empty without named ids)."""
        return {}

    @property
    def noop_id(self) -> int:
        """The id of ``noop``, or -1 when there is none."""
        return -1

    def validate_action(self, action: Any) -> jax.Array:
        """bool[]: whether ``action`` lies in ``action_space``; never raises."""
        return self.action_space.contains(action)

    @abc.abstractmethod
    def executed_action(self, action: Any) -> jax.Array:
        """i32[]: the id actually executed (the noop id, or -1 without noop,
        for an invalid action)."""

    @abc.abstractmethod
    def process_action(self, key: jax.Array, action: Any, agent: AgentState, grid: Grid,
                       params: ParamsT, probe: PlumeProbe | None = None) -> AgentState:
        """The agent after ``action``: pure, inside the grid, an invalid
        action executed as noop (no movement); ``key`` is the only randomness;
        ``probe`` (passed by the env) is read by wind-relative models."""

    def metadata_parameters(self) -> dict[str, Any]:
        """Entries added to ``parameters`` in the metadata; none by default."""
        return {}

    def get_metadata(self) -> dict[str, Any]:
        """JSON: ``type``, ``modality``, ``parameters`` (static settings and
        :meth:`metadata_parameters`), ``dynamic_parameters``,
        ``orientation_dependent``, then any extras."""
        return {"type": self.type_name, "modality": self.modality,
                "parameters": {**self.static_settings(), **self.metadata_parameters()},
                "dynamic_parameters": self.dynamic_setting_names(),
                "orientation_dependent": self.orientation_dependent,
                **self.metadata_extras()}


def step_size_setting(move: str = "move") -> Any:
    """The static ``step_size`` setting: cells per ``move``."""
    return setting(1, integer(low=1, high=MAX_GRID_SIDE),
                   doc=f"cells per {move}, in [1, {MAX_GRID_SIDE}]")


def include_noop_setting() -> Any:
    """The static ``include_noop`` setting: whether action 0 is ``noop``."""
    return setting(True, boolean(), doc="action 0 is noop")


class NamedDiscreteActions(ActionModel[ParamsT]):
    """An action model with a ``Discrete`` space of named actions.

    A subclass declares the ``include_noop`` setting
    (:func:`include_noop_setting`) and defines ``moves() -> list[str]``, its
    other actions in id order (after ``noop`` when included). It gets
    ``action_names``, ``action_ids``, a cached ``action_space``,
    ``noop_id``, ``validate_action`` and ``executed_action`` that agree with
    each other and with the space, and the number and names of its actions
    in the metadata's ``parameters``.
    """

    include_noop: bool

    @abc.abstractmethod
    def moves(self) -> list[str]:
        """The action names after ``noop``, in id order."""

    def metadata_parameters(self) -> dict[str, Any]:
        return {"num_actions": len(self.action_names), "action_names": list(self.action_names)}

    @functools.cached_property
    def action_names(self) -> list[str]:
        """Action names in id order (fixed per configuration)."""
        return (["noop"] if self.include_noop else []) + list(self.moves())

    @functools.cached_property
    def action_ids(self) -> dict[str, int]:
        """``name -> id``."""
        return {name: i for i, name in enumerate(self.action_names)}

    @functools.cached_property
    def action_space(self) -> Discrete:
        """``Discrete(len(action_names))`` — the same object on every access."""
        return Discrete(len(self.action_names))

    @property
    def noop_id(self) -> int:
        """The id of ``noop``, or -1 when there is none."""
        return self.action_ids.get("noop", -1)

    def executed_action(self, action: Any) -> jax.Array:
        """i32[]: ``action`` when valid, else the noop id (-1 without noop)."""
        valid, index = discrete_index(action, self.action_space.n)
        return jnp.where(valid, index, self.noop_id).astype(jnp.int32)

    def _action_mask(self, action: Any) -> tuple[jax.Array, jax.Array]:
        """``(valid, one_hot f32[n])`` of the executed action (all zeros when
        invalid), for branch-free dispatch under jit and vmap."""
        valid, index = discrete_index(action, self.action_space.n)
        one_hot = jax.nn.one_hot(index, self.action_space.n, dtype=jnp.float32)
        return valid, one_hot * valid.astype(jnp.float32)

    def _is(self, name: str, one_hot: jax.Array) -> jax.Array:
        """bool[]: whether the executed action is ``name`` (False when the
        model has no such action)."""
        if name not in self.action_ids:
            return jnp.asarray(False)
        return one_hot[self.action_ids[name]] > 0.5
