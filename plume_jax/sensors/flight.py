"""The senses of a flying agent (Singh et al. 2023): the apparent wind it
feels in its own frame, and odour gated by a detection threshold with a
per-episode gain."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, PlumeProbe
from plume_jax.sensors.base import Sensor
from plume_jax.sensors.wind import body_frame
from plume_jax.settings import MAX_LENGTH, MAX_SCALE, real, setting


@chex.dataclass(frozen=True)
class ApparentWindParams(Pytree):
    """Attributes: scale: f32[] > 0, observation units per cell/step (25
    turns cells per 0.04 s step into metres per second with 1 cell = 1 m)."""

    scale: jax.Array = setting(1.0, real(low=0.0, high=MAX_SCALE, low_inclusive=False),
                               doc=f"observation units per cell/step (e.g. 25: m/s at 0.04 s "
                                   f"steps and 1 m cells), in (0, {MAX_SCALE:g}]")


@dataclasses.dataclass(frozen=True)
class ApparentWindSensor(Sensor[ApparentWindParams, jax.Array]):
    """The wind a flier feels: the air's velocity minus its own air velocity,
    in its body frame (their ``wind_rel``).

    An agent carried by the wind (``flight`` actions) moves by its air
    velocity plus the wind each step, so its air velocity over the last step
    is its displacement minus the wind; the apparent wind is
    ``wind - air velocity`` (at an episode start, when the agent has not
    flown yet, just the wind). Observation f32[2], times ``scale`` and
    clipped to ``[-max_reading, max_reading]``: index 0 along the heading
    (positive: blowing the way the agent faces), index 1 toward its left.
    State: f32[2], the position of the last reading. A move clamped at the
    grid's edge is read as a shorter flight.
    """

    max_reading: float = setting(100.0, real(low=0.0, high=MAX_LENGTH, low_inclusive=False),
                                 doc=f"readings are clipped to [-max_reading, max_reading], in "
                                     f"(0, {MAX_LENGTH:g}]")

    type_name = "apparent_wind"
    Params = ApparentWindParams

    def observation_space(self, params: ApparentWindParams) -> Box:
        return Box.uniform(-self.max_reading, self.max_reading, (2,))

    def observation_labels(self) -> list[str]:
        return ["apparent_wind_forward", "apparent_wind_left"]

    def _reading(self, agent: AgentState, apparent: jax.Array, params: ApparentWindParams
                 ) -> jax.Array:
        body = body_frame(apparent, agent.heading)
        return jnp.clip(body * params.scale, -self.max_reading, self.max_reading
                        ).astype(jnp.float32)

    def _wind(self, agent: AgentState, probe: PlumeProbe) -> jax.Array:
        return jnp.reshape(jnp.asarray(probe.wind(agent.position), jnp.float32), (2,))

    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe,
             params: ApparentWindParams) -> tuple[jax.Array, jax.Array]:
        position = jnp.asarray(agent.position, jnp.float32)
        return self._reading(agent, self._wind(agent, probe), params), position

    def observe(self, key: jax.Array, agent: AgentState, probe: PlumeProbe,
                sensor_state: jax.Array, params: ApparentWindParams
                ) -> tuple[jax.Array, jax.Array]:
        position = jnp.asarray(agent.position, jnp.float32)
        wind = self._wind(agent, probe)
        air = (position - sensor_state) - wind
        return self._reading(agent, wind - air, params), position


@chex.dataclass(frozen=True)
class GatedConcentrationParams(Pytree):
    """Attributes:
        threshold: f32[] >= 0, readings below it are 0.
        gain_low, gain_high: f32[], each episode's gain is ``U(gain_low, gain_high)``.
    """

    threshold: jax.Array = setting(1e-4, real(low=0.0, high=1.0),
                                   doc="readings below this are 0, in [0, 1]")
    gain_low: jax.Array = setting(1.0, real(low=0.0, high=MAX_SCALE), at_most="gain_high",
                                  doc=f"lowest per-episode gain on the concentration, in "
                                      f"[0, {MAX_SCALE:g}]")
    gain_high: jax.Array = setting(1.0, real(low=0.0, high=MAX_SCALE),
                                   doc=f"highest per-episode gain on the concentration, in "
                                       f"[0, {MAX_SCALE:g}]")


@dataclasses.dataclass(frozen=True)
class GatedConcentrationSensor(Sensor[GatedConcentrationParams, jax.Array]):
    """The concentration at the agent times the episode's gain, 0 below
    ``threshold``, clipped to ``[0, 1]`` (their odour observation; their
    training draws the gain from ``U(0.5, 1.5)`` per episode).

    Observation: f32[1]. State: f32[], the episode's gain (drawn at ``init``).
    """

    type_name = "gated_concentration"
    Params = GatedConcentrationParams

    def observation_space(self, params: GatedConcentrationParams) -> Box:
        return Box.uniform(0.0, 1.0, (1,))

    def observation_labels(self) -> list[str]:
        return ["odour"]

    def _reading(self, agent: AgentState, probe: PlumeProbe, gain: jax.Array,
                 params: GatedConcentrationParams) -> jax.Array:
        c = jnp.reshape(probe.concentration(agent.position), ()) * gain
        c = jnp.where(c < params.threshold, 0.0, c)
        return jnp.reshape(jnp.clip(c, 0.0, 1.0), (1,)).astype(jnp.float32)

    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe,
             params: GatedConcentrationParams) -> tuple[jax.Array, jax.Array]:
        gain = jax.random.uniform(key, (), jnp.float32, params.gain_low, params.gain_high)
        return self._reading(agent, probe, gain, params), gain

    def observe(self, key: jax.Array, agent: AgentState, probe: PlumeProbe,
                sensor_state: jax.Array, params: GatedConcentrationParams
                ) -> tuple[jax.Array, jax.Array]:
        return self._reading(agent, probe, sensor_state, params), sensor_state
