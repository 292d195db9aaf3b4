"""Point sensors at the agent's position: concentration, binary detector,
Poisson hit counts."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.sensors.base import MemorylessSensor
from plume_jax.settings import MAX_SCALE, integer, real, setting
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, NoParams, PlumeProbe


def point_concentration(agent: AgentState, probe: PlumeProbe) -> jax.Array:
    """f32[], the concentration at ``agent.position`` clipped to ``[0, 1]``."""
    c = jnp.reshape(probe.concentration(agent.position), ())
    return jnp.clip(c, 0.0, 1.0).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class ConcentrationSensor(MemorylessSensor[NoParams]):
    """The concentration at the agent's position.

    Observation: f32[1], index 0 = concentration at ``agent.position``,
    clipped to ``[0, 1]``. Memoryless (``sensor_state == ()``).
    """

    type_name = "concentration"

    def observation_space(self, params: NoParams) -> Box:
        return Box.uniform(0.0, 1.0, (1,))

    def observation_labels(self) -> list[str]:
        return ["concentration"]

    def read(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: NoParams
             ) -> jax.Array:
        return jnp.reshape(point_concentration(agent, probe), (1,))


@chex.dataclass(frozen=True)
class BinaryParams(Pytree):
    """Attributes: threshold: f32[] in ``(0, 1]``, detection threshold."""

    threshold: jax.Array = setting(0.1, real(low=0.0, high=1.0, low_inclusive=False),
                                   doc="detection threshold on the concentration, in (0, 1]")


@dataclasses.dataclass(frozen=True)
class BinarySensor(MemorylessSensor[BinaryParams]):
    """An odour / no-odour detector at the agent's position.

    Observation: f32[1], index 0 = 1.0 when the concentration at
    ``agent.position`` is ``>= threshold``, else 0.0. Memoryless.
    """

    type_name = "binary"
    Params = BinaryParams

    def observation_space(self, params: BinaryParams) -> Box:
        return Box.uniform(0.0, 1.0, (1,))

    def observation_labels(self) -> list[str]:
        return ["detection"]

    def read(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: BinaryParams
             ) -> jax.Array:
        hit = point_concentration(agent, probe) >= params.threshold
        return jnp.reshape(hit.astype(jnp.float32), (1,))


@chex.dataclass(frozen=True)
class PoissonParams(Pytree):
    """Attributes: rate: f32[] > 0, mean hits per step at concentration 1."""

    rate: jax.Array = setting(1.0, real(low=0.0, high=MAX_SCALE, low_inclusive=False),
                              doc=f"mean hits per step at concentration 1, in (0, {MAX_SCALE:g}]")


@dataclasses.dataclass(frozen=True)
class PoissonSensor(MemorylessSensor[PoissonParams]):
    """Poisson-distributed odour hits at the agent's position, for
    infotaxis-style models (cf. Vergassola et al. 2007).

    Observation: f32[1], index 0 = ``min(h, max_hits)`` with
    ``h ~ Poisson(rate * c)`` and ``c`` the concentration at
    ``agent.position`` clipped to ``[0, 1]``. Random: draws use only the key
    passed to ``init`` / ``observe``. ``max_hits = 1`` gives a binary
    detector with detection probability ``1 - exp(-rate * c)``.
    """

    max_hits: int = setting(10, integer(low=1, high=1_000_000),
                            doc="hit counts are capped at this value, in [1, 1000000]")

    type_name = "poisson"
    Params = PoissonParams

    def observation_space(self, params: PoissonParams) -> Box:
        return Box.uniform(0.0, float(self.max_hits), (1,))

    def observation_labels(self) -> list[str]:
        return ["hits"]

    def read(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: PoissonParams
             ) -> jax.Array:
        mean = params.rate * point_concentration(agent, probe)
        hits = jax.random.poisson(key, mean, (), dtype=jnp.int32)
        return jnp.reshape(jnp.minimum(hits, self.max_hits).astype(jnp.float32), (1,))

    def metadata_extras(self) -> dict[str, Any]:
        return {"stochastic": True}
