"""An egocentric k x k patch of concentration samples around the agent."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.sensors.base import MemorylessSensor
from plume_jax.settings import MAX_LENGTH, choice, real, setting
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, Grid, PlumeProbe


def _patch_size(name: str, value: Any, grid: Grid) -> int:
    """An odd integer >= 1 that fits the grid (``<= min(width, height)``)."""
    limit = min(grid.width, grid.height)
    allowed = (f"an odd integer in [1, {limit}] (the patch must fit the "
               f"{grid.width}x{grid.height} grid)")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < 1 or value % 2 == 0 \
            or value > limit:
        raise ValidationError.for_parameter(name, value, allowed)
    return int(value)


@chex.dataclass(frozen=True)
class PatchParams(Pytree):
    """Attributes: spacing: f32[] > 0, distance between neighbouring samples, cells."""

    spacing: jax.Array = setting(1.0, real(low=0.0, high=MAX_LENGTH, low_inclusive=False),
                                 doc=f"distance between neighbouring samples, cells, in "
                                     f"(0, {MAX_LENGTH:g}]")


@dataclasses.dataclass(frozen=True)
class PatchSensor(MemorylessSensor[PatchParams]):
    """Concentration sampled on a ``size x size`` lattice centred on the agent.

    With ``h = (size - 1) / 2``, sample ``(r, c)`` (row ``r``, column ``c``,
    both in ``[0, size)``) sits at the local offset
    ``right = (c - h) * spacing``, ``ahead = (h - r) * spacing`` from the
    agent. ``frame="world"`` (default) takes "ahead" as north and "right"
    as east (a north-up map); ``frame="body"`` takes them relative to the
    heading (the top row is in front of the agent).

    Observation: f32[size * size], index ``r * size + c`` = the
    concentration at sample ``(r, c)`` clipped to ``[0, 1]`` (0 outside the
    grid); the centre index ``h * size + h`` is the agent's own position.
    Reshape to ``(size, size)`` for an image with row 0 at the top.
    ``size`` must be odd and fit the grid. Memoryless.
    """

    size: int = setting(5, _patch_size, doc="odd side length k of the patch, samples (it must "
                                            "fit the grid)")
    frame: str = setting("world", choice(("world", "body")),
                         doc="'world': north-up; 'body': rotated with the heading")

    type_name = "patch"
    Params = PatchParams

    def observation_space(self, params: PatchParams) -> Box:
        return Box.uniform(0.0, 1.0, (self.size * self.size,))

    def observation_labels(self) -> list[str]:
        return [f"patch_r{r}_c{c}" for r in range(self.size) for c in range(self.size)]

    def points(self, agent: AgentState, params: PatchParams) -> jax.Array:
        """f32[size, size, 2], the sample positions (cells), ``[r, c]``."""
        h = (self.size - 1) / 2.0
        idx = jnp.arange(self.size, dtype=jnp.float32)
        ahead = (h - idx)[:, None] * params.spacing * jnp.ones((1, self.size), jnp.float32)
        right = (idx - h)[None, :] * params.spacing * jnp.ones((self.size, 1), jnp.float32)
        if self.frame == "world":
            forward = jnp.asarray([0.0, 1.0], jnp.float32)
            rightward = jnp.asarray([1.0, 0.0], jnp.float32)
        else:
            c, s = jnp.cos(agent.heading), jnp.sin(agent.heading)
            forward = jnp.stack([c, s])
            rightward = jnp.stack([s, -c])
        offsets = ahead[..., None] * forward + right[..., None] * rightward
        return (agent.position + offsets).astype(jnp.float32)

    def read(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: PatchParams
             ) -> jax.Array:
        c = probe.concentration(self.points(agent, params))
        return jnp.clip(jnp.reshape(c, (self.size * self.size,)), 0.0, 1.0).astype(jnp.float32)
