"""Point concentration sensor."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from plume_jax.settings import Configurable
from plume_jax.spaces import Box
from plume_jax.types import AgentState, NoParams, PlumeProbe


@dataclasses.dataclass(frozen=True)
class ConcentrationSensor(Configurable):
    """The concentration at the agent's position.

    Observation: f32[1], index 0 = concentration at ``agent.position``,
    clipped to ``[0, 1]``. Memoryless (``sensor_state == ()``).
    """

    type_name = "concentration"
    SETTINGS = {}
    Params = NoParams

    def observation_space(self, params: NoParams) -> Box:
        return Box.uniform(0.0, 1.0, (1,))

    def _read(self, agent: AgentState, probe: PlumeProbe) -> jax.Array:
        c = probe.concentration(agent.position)
        return jnp.clip(jnp.reshape(c, (1,)), 0.0, 1.0).astype(jnp.float32)

    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: NoParams):
        return self._read(agent, probe), ()

    def observe(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, sensor_state, params: NoParams):
        return self._read(agent, probe), sensor_state
