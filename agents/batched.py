"""Batched policies for multi-agent envs: ``(num_agents, ...)`` observations
to ``int32[num_agents]`` actions in one call.

``PerAgentPolicy`` runs any single-agent functional policy for every agent
at once (``vmap`` over the agent axis; each agent has its own memory and
its own key ``fold_in(key, i)``), and is itself a functional policy, so it
vmaps over environments on top and runs inside ``lax.scan``. Its stateful
form is the usual :class:`agents.base.StatefulAgent`, whose ``act`` then
returns an ``int32[num_agents]`` array.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class PerAgentPolicy:
    """``policy`` applied independently to each of ``num_agents`` agents."""

    policy: Any
    num_agents: int

    @property
    def name(self) -> str:
        return getattr(self.policy, "name", type(self.policy).__name__)

    def _keys(self, key: jax.Array) -> jax.Array:
        return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, jnp.arange(self.num_agents))

    def init(self, key: jax.Array) -> Any:
        """Per-agent carries, leaves with a leading agent axis."""
        return jax.vmap(self.policy.init)(self._keys(key))

    def act(self, carry: Any, obs: Any, key: jax.Array) -> tuple[jax.Array, Any]:
        """``obs[num_agents, ...] -> (actions[num_agents], carry)``."""
        return jax.vmap(self.policy.act)(carry, obs, self._keys(key))
