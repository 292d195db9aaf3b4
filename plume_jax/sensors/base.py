"""The sensor interface (layer 1) and what sensors share: a memoryless base,
nested sensor configs, clipping into a box."""

from __future__ import annotations

import abc
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.settings import Configurable, nested, resolve_component
from plume_jax.core.spaces import Box, Dict
from plume_jax.core.types import AgentState, Grid, PlumeProbe

ParamsT = TypeVar("ParamsT")
StateT = TypeVar("StateT")


class Sensor(Configurable, abc.ABC, Generic[ParamsT, StateT]):
    """A sensor: what the agent observes, ``Sensor[Params, State]``.

    Required: :meth:`observation_space`, :meth:`observation_labels`,
    :meth:`init`, :meth:`observe`. Observations are float32 arrays (or, for
    the dict-form composite, a dict of them) inside ``observation_space``;
    ``key`` is the only source of randomness; ``probe`` is the env's
    read-only view of the plume (``concentration`` and ``wind`` at points).
    ``get_metadata()`` adds the dynamic setting names and the observation
    labels to the common metadata.
    """

    @abc.abstractmethod
    def observation_space(self, params: ParamsT) -> Box | Dict:
        """The space of one observation; its bounds come from static settings
        only (so it is the same for every params in a sweep)."""

    @abc.abstractmethod
    def observation_labels(self) -> list[str]:
        """What each index of the flattened observation means (one label per index)."""

    @abc.abstractmethod
    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: ParamsT
             ) -> tuple[Any, StateT]:
        """``(observation, sensor_state)`` at an episode start."""

    @abc.abstractmethod
    def observe(self, key: jax.Array, agent: AgentState, probe: PlumeProbe,
                sensor_state: StateT, params: ParamsT) -> tuple[Any, StateT]:
        """``(observation, sensor_state)`` after a step; the state keeps its
        structure, shapes and dtypes (``lax.scan`` and auto-reset need it)."""

    def get_metadata(self) -> dict[str, Any]:
        """JSON: type, static settings (nested sensors as static configs),
        dynamic setting names, ``observation_labels``, then any extras."""
        return {"type": self.type_name, "parameters": self.static_settings(),
                "dynamic_parameters": self.dynamic_setting_names(),
                "observation_labels": list(self.observation_labels()),
                **self.metadata_extras()}


class MemorylessSensor(Sensor[ParamsT, tuple]):
    """A sensor without memory (``sensor_state == ()``): one :meth:`read`
    serves ``init`` and ``observe`` alike."""

    @abc.abstractmethod
    def read(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: ParamsT) -> Any:
        """The observation of ``agent`` now."""

    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: ParamsT
             ) -> tuple[Any, tuple]:
        """``(read(...), ())``."""
        return self.read(key, agent, probe, params), ()

    def observe(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, sensor_state: tuple,
                params: ParamsT) -> tuple[Any, tuple]:
        """``(read(...), sensor_state)``."""
        return self.read(key, agent, probe, params), sensor_state


def sensor_table() -> dict[str, type]:
    """The registered sensors, ``type name -> class`` (imported lazily: the
    table is built after the sensor modules)."""
    from plume_jax.sensors import SENSORS

    return SENSORS


def build_box_sensor(name: str, config: Any, grid: Grid) -> tuple[Any, Any]:
    """``(sensor, params)`` of a nested sensor config, checked to have a
    ``Box`` observation (wrappers and the composite stack flat vectors)."""
    sensor, params, resolved = resolve_component(name, config, sensor_table(), "sensor", grid)
    if not isinstance(sensor.observation_space(params), Box):
        raise ValidationError.for_parameter(
            name, resolved, "a sensor with a Box observation (not a dict-form composite)")
    return sensor, params


def nested_sensors(default: Any, *, doc: str, many: bool = False) -> Any:
    """A static setting holding one sensor config (or, with ``many``, a
    named list of them) with a ``Box`` observation; see
    :func:`plume_jax.settings.nested`."""
    return nested(default, sensor_table, "sensor", doc=doc, many=many, named=many,
                  build_one=build_box_sensor)


def clip_to_box(obs: jax.Array, box: Box) -> jax.Array:
    """f32 ``obs`` clipped element-wise into ``box``."""
    return jnp.clip(jnp.asarray(obs, jnp.float32), jnp.asarray(box.low_array),
                    jnp.asarray(box.high_array)).astype(jnp.float32)
