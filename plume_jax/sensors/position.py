"""The agent's own position on the grid (self-localisation, odometry)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from plume_jax.sensors.base import MemorylessSensor
from plume_jax.settings import domain_grid, grid_domain
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, NoParams, PlumeProbe


@dataclasses.dataclass(frozen=True)
class PositionSensor(MemorylessSensor[NoParams]):
    """Where the agent is: its ``(x, y)`` position in grid cells.

    Bayesian searchers (``agents/infotaxis.py``) need to know where each
    odour reading was taken; combine this sensor with an odour sensor in a
    composite, e.g. ``{"type": "composite", "sensors": [{"type": "hits"},
    {"type": "position"}]}`` (observation labels ``hits.hits``,
    ``position.position_x``, ``position.position_y``).

    Observation: f32[2], index 0 = ``x`` (east), index 1 = ``y`` (north),
    in ``[0, width - 1] x [0, height - 1]`` (the position is clamped into
    the grid, which the env already guarantees). Exact, deterministic and
    memoryless; it reads no plume.
    """

    #: ``(width, height)`` of the grid, set by ``build`` (the bounds of the space).
    domain: tuple = grid_domain()

    type_name = "position"

    def _upper(self) -> tuple[float, float]:
        grid = domain_grid(self, "sensor")
        return float(grid.width - 1), float(grid.height - 1)

    def observation_space(self, params: NoParams) -> Box:
        return Box.from_arrays([0.0, 0.0], list(self._upper()))

    def observation_labels(self) -> list[str]:
        return ["position_x", "position_y"]

    def read(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: NoParams
             ) -> jax.Array:
        upper = jnp.asarray(self._upper(), jnp.float32)
        return jnp.clip(jnp.asarray(agent.position, jnp.float32).reshape(2), 0.0, upper)
