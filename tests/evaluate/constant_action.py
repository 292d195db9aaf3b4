"""Agents that take the same action on every step, in both forms the
rollouts drive: a functional policy (``rollout``) and a host-side batched
agent (``host_rollout``). Frozen dataclasses, so equal agents hash alike and
share ``rollout``'s compilation."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class ConstantPolicy:
    """Functional: ``act`` returns ``action`` (an action id), no memory."""

    action: int

    def init(self, key):
        return ()

    def act(self, carry, obs, key):
        return jnp.asarray(self.action, jnp.int32), carry


@dataclasses.dataclass(frozen=True)
class ConstantHostAgent:
    """Host-side, batched: ``act_batch`` returns ``action`` for every env."""

    action: int

    def reset(self):
        pass

    def act_batch(self, obs, episode_start=None):
        return np.full(len(obs), self.action, np.int32)
