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

    The policy's randomness comes from a key stream started at
    :func:`~plume_jax.core.seeding.seed_key` of ``seed`` (an integer in
    ``[0, 2**63)``, every bit used, as at the env's doors); ``reset()``
    starts a new episode's memory from the next key.
    """

    def __init__(self, policy: FunctionalPolicy, seed: int = 0):
        from plume_jax.core.seeding import check_seed, seed_key

        self.policy = policy
        self._key = seed_key(check_seed(seed, "seed", none_ok=False))
        self._act = jax.jit(policy.act)
        self.reset()

    def _next_key(self) -> jax.Array:
        self._key, key = jax.random.split(self._key)
        return key

    def reset(self) -> None:
        self._carry = self.policy.init(self._next_key())

    def act(self, obs: np.ndarray) -> Any:
        """An ``int`` for a discrete action, else a NumPy array (a ``Box``
        action, or ``int32[num_agents]`` for a batched multi-agent policy)."""
        action, self._carry = self._act(self._carry, np.asarray(obs, np.float32), self._next_key())
        action = np.asarray(action)
        return int(action) if action.ndim == 0 and np.issubdtype(action.dtype, np.integer) \
            else action


def describe(env: Any) -> dict[str, Any]:
    """The env's JSON description (``env.describe()``), or ``env`` itself when
    it already is one (a dict, e.g. loaded from a file)."""
    return dict(env) if isinstance(env, dict) else env.describe()


def observation_labels(env: Any) -> list[str]:
    """What each index of one agent's (flat) observation means."""
    return list(describe(env)["observation_labels"])


def observation_index(env: Any, label: str, *, agent: str = "agent") -> int:
    """Index of the observation entry called ``label`` (or ``<sensor>.label``
    in a composite sensor); the first match wins. ``env``: an env or its
    description.

    Raises:
        ValidationError: the env's sensor provides no such entry.
    """
    from plume_jax.core.errors import ValidationError

    info = describe(env)
    for i, name in enumerate(info["observation_labels"]):
        if name == label or name.endswith("." + label):
            return i
    raise ValidationError.for_parameter(
        "sensor", info.get("sensor_type"),
        f"a sensor whose observation includes {label!r} ({agent} needs it); this env's "
        f"observation is {info['observation_labels']}")


def action_id(env: Any, name: str, *, agent: str = "agent") -> int:
    """The id of the named action (``env``: an env or its description).

    Raises:
        ValidationError: the env's action model has no such action.
    """
    from plume_jax.core.errors import ValidationError

    info = describe(env)
    if name not in info["action_ids"]:
        raise ValidationError.for_parameter(
            "actions", info.get("actions_type"),
            f"an action model with a {name!r} action ({agent} needs it); this env has "
            f"{info['action_names']}")
    return info["action_ids"][name]


def has_action(env: Any, name: str) -> bool:
    """Whether the env (or description) has an action called ``name``."""
    return name in describe(env)["action_ids"]
