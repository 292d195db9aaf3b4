"""Baseline agents for plume_jax (layer 4).

Agents come in two forms (see :mod:`agents.base`): a functional policy
(``init(key) -> carry``, ``act(carry, obs, key) -> (action, carry)``) that
``jit``, ``vmap`` and ``lax.scan`` accept, and the stateful ``Agent``
protocol (``act(obs)``, ``reset()``) for Gymnasium / SB3 use.
"""

from agents.base import Agent, FunctionalPolicy, StatefulAgent
from agents.klinotaxis import KlinotaxisPolicy

__all__ = ["Agent", "FunctionalPolicy", "KlinotaxisPolicy", "StatefulAgent"]
