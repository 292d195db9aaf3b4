"""Shared machinery of the action models: named discrete action sets, exact
validation of concrete integers, and cell-snapped moves."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.spaces import Discrete, is_integer_scalar
from plume_jax.types import Grid

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


class NamedDiscreteActions:
    """Mixin for action models with a ``Discrete`` space of named actions.

    A subclass defines ``_names() -> list[str]`` (in id order; ``noop``
    first when present). It gets ``action_names``, ``action_ids``, a cached
    ``action_space``, ``noop_id``, ``validate_action`` and
    ``executed_action`` that agree with each other and with the space.
    """

    def _names(self) -> list[str]:
        raise NotImplementedError

    def named_metadata(self, modality: str, orientation_dependent: bool,
                       **extra: Any) -> dict[str, Any]:
        """The contract's JSON metadata: type, modality, static parameters
        with the number and names of the actions, dynamic parameter names,
        ``orientation_dependent``, then any ``extra`` keys."""
        return {
            "type": self.type_name,
            "modality": modality,
            "parameters": {**static_parameters(self),
                           "num_actions": len(self.action_names),
                           "action_names": list(self.action_names)},
            "dynamic_parameters": dynamic_parameter_names(self),
            "orientation_dependent": orientation_dependent,
            **extra,
        }

    @functools.cached_property
    def action_names(self) -> list[str]:
        """Action names in id order (fixed per configuration)."""
        return list(self._names())

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

    def validate_action(self, action: Any) -> jax.Array:
        """bool[]: whether ``action`` is an integer scalar in ``[0, n)``.
        Agrees with ``action_space.contains``; never raises."""
        return self.action_space.contains(action)

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


def static_parameters(component: Any) -> dict[str, Any]:
    """``name -> value`` of a component's static settings (its dataclass
    fields), as plain Python values."""
    return {name: getattr(component, name)
            for name, setting in component.SETTINGS.items() if setting.static}


def dynamic_parameter_names(component: Any) -> list[str]:
    """Names of a component's dynamic settings (leaves of its params)."""
    return [name for name, setting in component.SETTINGS.items() if not setting.static]
