"""Sensors that wrap another sensor: additive Gaussian noise, n-step history."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.sensors.base import Sensor, clip_to_box, nested_sensors
from plume_jax.settings import MAX_LENGTH, integer, nested_params, real, setting
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, PlumeProbe


@chex.dataclass(frozen=True)
class NoiseParams(Pytree):
    """Attributes:
        sensor: the wrapped sensor's params.
        std: f32[] >= 0, standard deviation of the additive noise.
    """

    sensor: Any = nested_params()
    std: jax.Array = setting(0.05, real(low=0.0, high=MAX_LENGTH),
                             doc=f"standard deviation of the noise, in [0, {MAX_LENGTH:g}]")


@dataclasses.dataclass(frozen=True)
class NoiseSensor(Sensor[NoiseParams, Any]):
    """Another sensor's reading plus i.i.d. Gaussian noise.

    Observation: the wrapped sensor's (same shape and indices), each element
    plus ``N(0, std²)``, then clipped into the wrapped sensor's observation
    bounds (so it stays inside ``observation_space``; a binary detector's
    reading stops being exactly 0/1). Random: draws use only the key passed
    in. State: the wrapped sensor's.
    """

    sensor: Any = nested_sensors({"type": "concentration"},
                                 doc="the sensor whose reading gets noise")

    type_name = "noise"
    Params = NoiseParams

    def observation_space(self, params: NoiseParams) -> Box:
        return self.sensor.observation_space(params.sensor)

    def observation_labels(self) -> list[str]:
        return list(self.sensor.observation_labels())

    def _noisy(self, key: jax.Array, obs: jax.Array, params: NoiseParams) -> jax.Array:
        noise = jax.random.normal(key, jnp.shape(obs), jnp.float32)
        return clip_to_box(obs + params.std * noise, self.observation_space(params))

    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: NoiseParams):
        obs, state = self.sensor.init(jax.random.fold_in(key, 0), agent, probe, params.sensor)
        return self._noisy(jax.random.fold_in(key, 1), obs, params), state

    def observe(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, sensor_state,
                params: NoiseParams):
        obs, state = self.sensor.observe(jax.random.fold_in(key, 0), agent, probe, sensor_state,
                                         params.sensor)
        return self._noisy(jax.random.fold_in(key, 1), obs, params), state


@chex.dataclass(frozen=True)
class HistoryParams(Pytree):
    """Attributes: sensor: the wrapped sensor's params."""

    sensor: Any = nested_params()


@chex.dataclass(frozen=True)
class HistoryState(Pytree):
    """Attributes:
        buffer: f32[length, d], the last ``length`` readings, oldest first.
        sensor: the wrapped sensor's state.
    """

    buffer: jax.Array
    sensor: Any


@dataclasses.dataclass(frozen=True)
class HistorySensor(Sensor[HistoryParams, HistoryState]):
    """The last ``length`` readings of another sensor, in a fixed-size buffer
    carried in the sensor state.

    With ``d`` the wrapped sensor's (flattened) observation size, the
    observation is f32[length * d]: index ``t * d + j`` is element ``j`` of
    the reading taken ``length - 1 - t`` steps ago (the last ``d`` elements
    are the current reading). At episode start the buffer is filled with the
    first reading repeated.
    """

    sensor: Any = nested_sensors({"type": "concentration"},
                                 doc="the sensor whose readings are stacked")
    length: int = setting(4, integer(low=1, high=1024),
                          doc="number of readings kept (including the current one), in [1, 1024]")

    type_name = "history"
    Params = HistoryParams

    def _inner_box(self, params: HistoryParams) -> Box:
        return self.sensor.observation_space(params.sensor)

    def observation_space(self, params: HistoryParams) -> Box:
        return Box.concatenate([self._inner_box(params)] * self.length)

    def observation_labels(self) -> list[str]:
        inner = list(self.sensor.observation_labels())
        return [f"t-{self.length - 1 - t}.{label}" for t in range(self.length) for label in inner]

    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: HistoryParams):
        obs, state = self.sensor.init(key, agent, probe, params.sensor)
        flat = jnp.reshape(obs, (-1,)).astype(jnp.float32)
        buffer = jnp.tile(flat[None, :], (self.length, 1))
        return jnp.reshape(buffer, (-1,)), HistoryState(buffer=buffer, sensor=state)

    def observe(self, key: jax.Array, agent: AgentState, probe: PlumeProbe,
                sensor_state: HistoryState, params: HistoryParams):
        obs, state = self.sensor.observe(key, agent, probe, sensor_state.sensor, params.sensor)
        flat = jnp.reshape(obs, (1, -1)).astype(jnp.float32)
        buffer = jnp.concatenate([sensor_state.buffer[1:], flat], axis=0)
        return jnp.reshape(buffer, (-1,)), HistoryState(buffer=buffer, sensor=state)
