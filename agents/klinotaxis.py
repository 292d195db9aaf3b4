"""Klinotaxis: run-and-tumble chemotaxis from one concentration sensor.

Decision rule (temporal derivative, single sensor; after bacterial run and
tumble, Berg & Brown 1972, and the klinotaxis of Fraenkel & Gunn 1940): if
the concentration rose since the last step, keep going ("run"); otherwise
change direction at random ("tumble"). Two embodiments, chosen from the
env's action names:

- absolute cardinal moves: run = repeat the last move; tumble = one of the
  four moves uniformly at random;
- oriented actions (``forward``, ``turn_left``, ``turn_right``): run =
  ``forward``; tumble = a turn to a random side. A turn does not move the
  agent, so the action after a turn is always ``forward``.

The carry holds the last reading, the last action and whether it was a turn.
Needs an observation entry ``concentration`` (or another label via
``obs_label``, e.g. ``detection`` or ``hits``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from agents.base import action_id, has_action, observation_index

from plume_jax.core.pytree import Pytree

MOVES = ("move_north", "move_south", "move_east", "move_west")
ORIENTED = ("forward", "turn_left", "turn_right")


@chex.dataclass(frozen=True)
class KlinotaxisCarry(Pytree):
    """Attributes: last_concentration f32[]; last_action i32[]; turned bool[]."""

    last_concentration: jax.Array
    last_action: jax.Array
    turned: jax.Array


@dataclasses.dataclass(frozen=True)
class KlinotaxisPolicy:
    """Functional run-and-tumble policy.

    Args:
        move_ids: cardinal mode: ids of ``move_north, move_south, move_east,
            move_west``; oriented mode: ids of ``forward, turn_left,
            turn_right``. Use :meth:`for_env`.
        obs_index: index of the concentration in the observation vector.
        oriented: True for forward/turn actions.
    """

    move_ids: tuple[int, ...]
    obs_index: int = 0
    oriented: bool = False

    name = "klinotaxis"

    @classmethod
    def for_env(cls, env: Any, obs_label: str = "concentration") -> "KlinotaxisPolicy":
        """Look the actions up by name and the reading by observation label."""
        oriented = has_action(env, "forward") and not has_action(env, "move_north")
        names = ORIENTED if oriented else MOVES
        return cls(move_ids=tuple(action_id(env, m, agent=cls.name) for m in names),
                   obs_index=observation_index(env, obs_label, agent=cls.name),
                   oriented=oriented)

    def init(self, key: jax.Array) -> KlinotaxisCarry:
        ids = jnp.asarray(self.move_ids, jnp.int32)
        first = ids[0] if self.oriented else ids[jax.random.randint(key, (), 0, 4)]
        return KlinotaxisCarry(last_concentration=jnp.asarray(-1.0, jnp.float32),
                               last_action=first, turned=jnp.asarray(False))

    def act(self, carry: KlinotaxisCarry, obs: jax.Array, key: jax.Array):
        concentration = jnp.asarray(obs, jnp.float32).reshape(-1)[self.obs_index]
        rising = concentration > carry.last_concentration
        ids = jnp.asarray(self.move_ids, jnp.int32)
        if self.oriented:
            turn = ids[1 + jax.random.randint(key, (), 0, 2)]
            action = jnp.where(rising | carry.turned, ids[0], turn)
            turned = ~(rising | carry.turned)
        else:
            action = jnp.where(rising, carry.last_action, ids[jax.random.randint(key, (), 0, 4)])
            turned = jnp.asarray(False)
        return action, KlinotaxisCarry(last_concentration=concentration, last_action=action,
                                       turned=turned)
