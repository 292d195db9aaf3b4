"""Sensor models (layer 1).

A sensor is a frozen dataclass with pure methods:

- ``observation_space(params) -> plume_jax.spaces.Box``;
- ``init(key, agent, probe, params) -> (obs, sensor_state)`` at episode start;
- ``observe(key, agent, probe, sensor_state, params) -> (obs, sensor_state)``
  after every step.

``probe`` is a :class:`plume_jax.types.PlumeProbe`. Observations are float32
arrays inside ``observation_space``; each sensor documents what each index
means.
"""

from plume_jax.sensors.concentration import ConcentrationSensor

SENSORS = {ConcentrationSensor.type_name: ConcentrationSensor}

__all__ = ["ConcentrationSensor", "SENSORS"]
