"""Sensor models (layer 1).

The interface every sensor implements is :class:`plume_jax.sensors.base.Sensor`
(``observation_space``, ``observation_labels``, ``init``, ``observe``,
``get_metadata``; units, shapes and dtypes in its docstrings); memoryless
sensors derive from :class:`~plume_jax.sensors.base.MemorylessSensor` and
write one ``read``. ``probe`` is a :class:`plume_jax.core.types.PlumeProbe`
(``concentration`` and ``wind`` at points). Observations are float32 arrays
inside ``observation_space``; randomness comes only from ``key``.
``SENSORS`` maps config type names to the classes.

================  ======================================================
type name         observation
================  ======================================================
``concentration`` f32[1], concentration at the agent, in [0, 1]
``binary``        f32[1], 1 if concentration >= threshold else 0
``poisson``       f32[1], Poisson hit count (rate * concentration), capped
``hits``          f32[1], Poisson hits (gain * concentration) in h_max classes
``antennae``      f32[count], concentration at antenna tips around the heading
``wind``          f32[2], wind velocity (body or world frame), noisy, clipped
``patch``         f32[k*k], k x k concentration patch centred on the agent
``position``      f32[2], the agent's own (x, y) cell (for Bayesian searchers)
``belief``        f32[h*w], the Bayesian posterior over the source cell (Poisson
                  hits), optionally centred on the agent
``noise``         a wrapped sensor's reading + Gaussian noise, clipped
``history``       f32[n*d], the last n readings of a wrapped sensor
``composite``     components concatenated (Box) or keyed by name (Dict)
``apparent_wind`` f32[2], the wind minus the agent's own air velocity, body frame
``gated_concentration``
                  f32[1], concentration x a per-episode gain, 0 below a
                  threshold, clipped to [0, 1]
================  ======================================================
"""

from plume_jax.sensors.antennae import AntennaeSensor
from plume_jax.sensors.base import MemorylessSensor, Sensor
from plume_jax.sensors.belief import BeliefSensor
from plume_jax.sensors.composite import CompositeSensor
from plume_jax.sensors.concentration import BinarySensor, ConcentrationSensor, PoissonSensor
from plume_jax.sensors.flight import ApparentWindSensor, GatedConcentrationSensor
from plume_jax.sensors.hits import HitsSensor
from plume_jax.sensors.patch import PatchSensor
from plume_jax.sensors.position import PositionSensor
from plume_jax.sensors.wind import WindSensor
from plume_jax.sensors.wrappers import HistorySensor, NoiseSensor
from plume_jax.settings import type_table

SENSORS: dict[str, type[Sensor]] = type_table(
    ConcentrationSensor, BinarySensor, PoissonSensor, AntennaeSensor, WindSensor, PatchSensor,
    NoiseSensor, HistorySensor, CompositeSensor, HitsSensor, PositionSensor, BeliefSensor,
    ApparentWindSensor, GatedConcentrationSensor)

__all__ = [
    "AntennaeSensor",
    "ApparentWindSensor",
    "BeliefSensor",
    "BinarySensor",
    "CompositeSensor",
    "ConcentrationSensor",
    "GatedConcentrationSensor",
    "HistorySensor",
    "HitsSensor",
    "MemorylessSensor",
    "NoiseSensor",
    "PatchSensor",
    "PoissonSensor",
    "PositionSensor",
    "SENSORS",
    "Sensor",
    "WindSensor",
]
