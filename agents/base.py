"""The agent protocols and the functional -> stateful adapter."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax
import numpy as np


@runtime_checkable
class Agent(Protocol):
    """Stateful Python agent: ``act(obs) -> action``; ``reset()`` between episodes."""

    def act(self, obs: np.ndarray) -> Any: ...

    def reset(self) -> None: ...


@runtime_checkable
class FunctionalPolicy(Protocol):
    """Pure policy that ``jit``, ``vmap`` and ``lax.scan`` accept.

    ``init(key) -> carry`` gives the memory at an episode start;
    ``act(carry, obs, key) -> (action, carry)`` picks an action.
    """

    def init(self, key: jax.Array) -> Any: ...

    def act(self, carry: Any, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, Any]: ...


class StatefulAgent:
    """Run a :class:`FunctionalPolicy` as a stateful :class:`Agent`.

    The policy's randomness comes from a key stream seeded by ``seed``;
    ``reset()`` starts a new episode's memory from the next key.
    """

    def __init__(self, policy: FunctionalPolicy, seed: int = 0):
        self.policy = policy
        self._key = jax.random.key(seed)
        self._act = jax.jit(policy.act)
        self.reset()

    def _next_key(self) -> jax.Array:
        self._key, key = jax.random.split(self._key)
        return key

    def reset(self) -> None:
        self._carry = self.policy.init(self._next_key())

    def act(self, obs: np.ndarray) -> int:
        action, self._carry = self._act(self._carry, np.asarray(obs, np.float32), self._next_key())
        return int(action)
