"""Random walk: every step a uniformly random action other than ``noop``.

The null model of search: any strategy worth the name must beat it.
Works with every discrete action model (it looks up no names but ``noop``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from agents.base import describe
from plume_jax.core.errors import ValidationError


@dataclasses.dataclass(frozen=True)
class RandomWalkPolicy:
    """Functional random walk over ``action_ids`` (a tuple of ids)."""

    action_ids: tuple[int, ...]

    name = "random_walk"

    @classmethod
    def for_env(cls, env: Any, include_noop: bool = False) -> "RandomWalkPolicy":
        info = describe(env)
        if info["action_space"]["type"] != "discrete":
            raise ValidationError.for_parameter(
                "actions", info.get("actions_type"), "a discrete action model (random_walk)")
        ids = tuple(i for name, i in info["action_ids"].items() if include_noop or name != "noop")
        return cls(action_ids=ids)

    def init(self, key: jax.Array) -> tuple:
        return ()

    def act(self, carry: tuple, obs: jax.Array, key: jax.Array):
        choice = jax.random.randint(key, (), 0, len(self.action_ids))
        return jnp.asarray(self.action_ids, jnp.int32)[choice], carry
