"""An array of point concentration sensors around the agent, placed
relative to its heading."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.sensors.base import MemorylessSensor
from plume_jax.settings import MAX_LENGTH, integer, real, setting
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, PlumeProbe


@chex.dataclass(frozen=True)
class AntennaeParams(Pytree):
    """Attributes:
        length: f32[] >= 0, distance of each antenna tip from the agent, cells.
        spacing_deg: f32[], angle between neighbouring antennae, degrees.
        offset_deg: f32[], angle of the array's midline relative to the
            heading, degrees (0 = straight ahead, counter-clockwise positive).
    """

    length: jax.Array = setting(2.0, real(low=0.0, high=MAX_LENGTH),
                                doc=f"distance of each tip from the agent, cells, in "
                                    f"[0, {MAX_LENGTH:g}]")
    spacing_deg: jax.Array = setting(90.0, real(low=0.0, high=360.0),
                                     doc="angle between neighbouring antennae, degrees, in "
                                         "[0, 360]")
    offset_deg: jax.Array = setting(0.0, real(low=-180.0, high=180.0),
                                    doc="midline angle relative to the heading, degrees, in "
                                        "[-180, 180]")


@dataclasses.dataclass(frozen=True)
class AntennaeSensor(MemorylessSensor[AntennaeParams]):
    """``count`` point sensors on a fan in front of (or around) the agent.

    Antenna ``i`` (``0 <= i < count``) sits at angle
    ``a_i = heading + offset + ((count - 1) / 2 - i) * spacing`` and reads
    the concentration at ``position + length * (cos a_i, sin a_i)``.

    Observation: f32[count], index ``i`` = the concentration at antenna
    ``i``, clipped to ``[0, 1]`` (0 where the tip is outside the grid).
    Index 0 is the leftmost antenna (most counter-clockwise), the last the
    rightmost: with the defaults (2 antennae, 90° apart, 2 cells long) index
    0 is 45° left of the heading and index 1 45° right. Memoryless.
    """

    count: int = setting(2, integer(low=1, high=64), doc="number of antennae, in [1, 64]")

    type_name = "antennae"
    Params = AntennaeParams

    def observation_space(self, params: AntennaeParams) -> Box:
        return Box.uniform(0.0, 1.0, (self.count,))

    def observation_labels(self) -> list[str]:
        return [f"antenna_{i}" for i in range(self.count)]

    def angles(self, agent: AgentState, params: AntennaeParams) -> jax.Array:
        """f32[count], the absolute angle of each antenna, radians."""
        rank = (self.count - 1) / 2.0 - jnp.arange(self.count, dtype=jnp.float32)
        relative = jnp.deg2rad(params.offset_deg + rank * params.spacing_deg)
        return (agent.heading + relative).astype(jnp.float32)

    def tips(self, agent: AgentState, params: AntennaeParams) -> jax.Array:
        """f32[count, 2], the antenna tip positions (cells)."""
        angles = self.angles(agent, params)
        offsets = jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=-1)
        return (agent.position + params.length * offsets).astype(jnp.float32)

    def read(self, key: jax.Array, agent: AgentState, probe: PlumeProbe,
             params: AntennaeParams) -> jax.Array:
        c = probe.concentration(self.tips(agent, params))
        return jnp.clip(jnp.reshape(c, (self.count,)), 0.0, 1.0).astype(jnp.float32)
