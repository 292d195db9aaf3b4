"""Baseline agents for plume_jax (layer 4).

Agents come in two forms (see :mod:`agents.base`): a functional policy
(``init(key) -> carry``, ``act(carry, obs, key) -> (action, carry)``) that
``jit``, ``vmap`` and ``lax.scan`` accept, and the stateful ``Agent``
protocol (``act(obs)``, ``reset()``) for Gymnasium / SB3 use;
``StatefulAgent`` adapts the first to the second. Agents look actions up by
name (``env.action_ids``) and observation entries by label, never by
hard-coded integers. ``make_agent(name, env, **params)`` resolves them.
"""

from agents.base import Agent, FunctionalPolicy, StatefulAgent
from agents.batched import PerAgentPolicy
from agents.cast_and_surge import CastAndSurgePolicy
from agents.chemotaxis import BilateralChemotaxisPolicy
from agents.klinotaxis import KlinotaxisPolicy
from agents.random_walk import RandomWalkPolicy
from agents.registry import agent_names, is_host_agent, make_agent

__all__ = [
    "Agent",
    "BilateralChemotaxisPolicy",
    "CastAndSurgePolicy",
    "FunctionalPolicy",
    "KlinotaxisPolicy",
    "PerAgentPolicy",
    "RandomWalkPolicy",
    "StatefulAgent",
    "agent_names",
    "is_host_agent",
    "make_agent",
]
