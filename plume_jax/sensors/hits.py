"""Poisson odour hits capped into ``h_max`` classes (infotaxis observations)."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.plumes.sampling import capped_poisson
from plume_jax.core.pytree import Pytree
from plume_jax.sensors.base import MemorylessSensor
from plume_jax.settings import MAX_SCALE, boolean, integer, real, setting
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, PlumeProbe


@chex.dataclass(frozen=True)
class HitsParams(Pytree):
    """Attributes: gain: f32[] > 0, mean hits per step per unit of concentration."""

    gain: jax.Array = setting(1.0, real(low=0.0, high=MAX_SCALE, low_inclusive=False),
                              doc=f"mean hits per step per unit of concentration, in "
                                  f"(0, {MAX_SCALE:g}]")


@dataclasses.dataclass(frozen=True)
class HitsSensor(MemorylessSensor[HitsParams]):
    """Odour hits at the agent's position, capped into ``h_max`` classes, as
    in the infotaxis literature (Vergassola et al. 2007; ``otto``).

    The mean number of hits per step is ``μ = gain * c`` with ``c`` the
    plume concentration at ``agent.position`` read through the probe (not
    clipped; negative values count as 0). For the Poisson plume
    (``plume type "poisson"``) the concentration *is* the hit mean, so
    ``gain = 1`` reads its law exactly.

    Observation: f32[1], index 0 = ``min(h, h_max - 1)`` with
    ``h ~ Poisson(μ)``: the classes ``0, 1, ..., h_max - 2`` and
    ``h_max - 1`` for "that many or more". ``h_max = 2`` is a binary
    detector (hit with probability ``1 - exp(-μ)``).

    With ``nonzero_first``, the observation returned by ``init`` (the first
    of an episode) is drawn conditioned on ``h >= 1`` — the first-hit rule
    of otto's initialisation protocol (pair it with the Poisson plume's
    ``source_mode="otto"`` and a fixed start at its ``observer``). Draws are
    by inverse CDF over the ``h_max`` classes (fixed cost under ``vmap``)
    and use only the key passed in. Memoryless.
    """

    h_max: int = setting(2, integer(low=2, high=1024),
                         doc="number of hit classes: counts are capped at h_max - 1; in [2, 1024]")
    nonzero_first: bool = setting(False, boolean(),
                                  doc="draw the episode's first observation conditioned on a hit")

    type_name = "hits"
    Params = HitsParams

    def observation_space(self, params: HitsParams) -> Box:
        return Box.uniform(0.0, float(self.h_max - 1), (1,))

    def observation_labels(self) -> list[str]:
        return ["hits"]

    def hit_mean(self, agent: AgentState, probe: PlumeProbe, params: HitsParams) -> jax.Array:
        """f32[], ``μ = gain * max(c, 0)`` at the agent."""
        c = jnp.reshape(jnp.asarray(probe.concentration(agent.position), jnp.float32), ())
        return params.gain * jnp.maximum(c, 0.0)

    def read(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: HitsParams,
             nonzero: bool = False) -> jax.Array:
        """f32[1]: the hit class, drawn conditioned on ``h >= 1`` with ``nonzero``."""
        mean = self.hit_mean(agent, probe, params)
        hits = capped_poisson(key, mean, self.h_max - 1, nonzero=nonzero)
        return jnp.reshape(hits.astype(jnp.float32), (1,))

    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: HitsParams):
        """The first observation (conditioned on a hit with ``nonzero_first``)."""
        return self.read(key, agent, probe, params, self.nonzero_first), ()

    def metadata_extras(self) -> dict[str, Any]:
        return {"stochastic": True}
