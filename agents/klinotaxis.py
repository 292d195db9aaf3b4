"""Klinotaxis: run-and-tumble chemotaxis from one concentration sensor.

Decision rule (temporal derivative, single sensor; after bacterial run and
tumble, Berg & Brown 1972, and the klinotaxis of Fraenkel & Gunn 1940): if
the concentration rose since the last step, repeat the last move ("run");
otherwise pick one of the four cardinal moves uniformly at random
("tumble"). The carry holds the last reading and move.

Needs: an observation entry ``concentration`` (or ``detection``/``hits``
via ``obs_label``) and the actions ``move_north/south/east/west``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from agents.base import action_id, observation_index

MOVES = ("move_north", "move_south", "move_east", "move_west")


@chex.dataclass(frozen=True)
class KlinotaxisCarry:
    """Attributes: last_concentration f32[]; last_action i32[]."""

    last_concentration: jax.Array
    last_action: jax.Array


@dataclasses.dataclass(frozen=True)
class KlinotaxisPolicy:
    """Functional run-and-tumble policy.

    Args:
        move_ids: the ids of ``move_north, move_south, move_east, move_west``
            in the env's action space; use :meth:`for_env`.
        obs_index: index of the concentration in the observation vector.
    """

    move_ids: tuple[int, int, int, int]
    obs_index: int = 0

    name = "klinotaxis"

    @classmethod
    def for_env(cls, env: Any, obs_label: str = "concentration") -> "KlinotaxisPolicy":
        """Look the moves up by name and the reading by observation label."""
        return cls(move_ids=tuple(action_id(env, m, agent=cls.name) for m in MOVES),
                   obs_index=observation_index(env, obs_label, agent=cls.name))

    def init(self, key: jax.Array) -> KlinotaxisCarry:
        first = jnp.asarray(self.move_ids, jnp.int32)[jax.random.randint(key, (), 0, 4)]
        return KlinotaxisCarry(last_concentration=jnp.asarray(-1.0, jnp.float32),
                               last_action=first)

    def act(self, carry: KlinotaxisCarry, obs: jax.Array, key: jax.Array):
        concentration = jnp.asarray(obs, jnp.float32).reshape(-1)[self.obs_index]
        tumble = jnp.asarray(self.move_ids, jnp.int32)[jax.random.randint(key, (), 0, 4)]
        action = jnp.where(concentration > carry.last_concentration, carry.last_action, tumble)
        return action, KlinotaxisCarry(last_concentration=concentration, last_action=action)
