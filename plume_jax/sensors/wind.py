"""A (noisy) anemometer at the agent."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.sensors.base import MemorylessSensor
from plume_jax.settings import MAX_LENGTH, choice, real, setting
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, PlumeProbe


def body_frame(vector: jax.Array, heading: jax.Array) -> jax.Array:
    """f32[2]: a world-frame vector as (along the heading, to the agent's left)."""
    c, s = jnp.cos(heading), jnp.sin(heading)
    return jnp.stack([c * vector[0] + s * vector[1], -s * vector[0] + c * vector[1]])


@chex.dataclass(frozen=True)
class WindSensorParams(Pytree):
    """Attributes: noise_std: f32[] >= 0, std of additive Gaussian noise on
    each component, cells/step."""

    noise_std: jax.Array = setting(0.0, real(low=0.0, high=MAX_LENGTH),
                                   doc=f"std of additive Gaussian noise, cells/step, in "
                                       f"[0, {MAX_LENGTH:g}]")


@dataclasses.dataclass(frozen=True)
class WindSensor(MemorylessSensor[WindSensorParams]):
    """The wind velocity at the agent's position (read through
    ``probe.wind``: where the air moves toward, cells per step).

    Observation: f32[2], each component plus ``N(0, noise_std²)`` noise and
    clipped to ``[-max_speed, max_speed]``:

    - ``frame="body"`` (default): index 0 = component along the heading
      (positive: the wind blows the way the agent faces, a tailwind;
      negative: a headwind), index 1 = component toward the agent's left.
    - ``frame="world"``: index 0 = east (``vx``), index 1 = north (``vy``).

    Random when ``noise_std > 0``: draws use only the key passed in.
    Memoryless.
    """

    frame: str = setting("body", choice(("body", "world")),
                         doc="'body': (along heading, to the left); 'world': (east, north)")
    max_speed: float = setting(5.0, real(low=0.0, high=MAX_LENGTH, low_inclusive=False),
                               doc=f"readings are clipped to [-max_speed, max_speed], cells/step; "
                                   f"in (0, {MAX_LENGTH:g}]")

    type_name = "wind"
    Params = WindSensorParams

    def observation_space(self, params: WindSensorParams) -> Box:
        return Box.uniform(-self.max_speed, self.max_speed, (2,))

    def observation_labels(self) -> list[str]:
        return ["wind_forward", "wind_left"] if self.frame == "body" else ["wind_east", "wind_north"]

    def read(self, key: jax.Array, agent: AgentState, probe: PlumeProbe,
             params: WindSensorParams) -> jax.Array:
        wind = jnp.reshape(jnp.asarray(probe.wind(agent.position), jnp.float32), (2,))
        if self.frame == "body":
            wind = body_frame(wind, agent.heading)
        noisy = wind + params.noise_std * jax.random.normal(key, (2,), jnp.float32)
        return jnp.clip(noisy, -self.max_speed, self.max_speed).astype(jnp.float32)
