"""Several sensors read at once: one concatenated ``Box`` or a ``Dict``."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.sensors.base import component_list, static_config
from plume_jax.sensors.wrappers import _sensor_table, build_box_sensor
from plume_jax.settings import Configurable, Setting, choice, resolve_settings
from plume_jax.spaces import Box, Dict
from plume_jax.types import AgentState, PlumeProbe


@chex.dataclass(frozen=True)
class CompositeParams:
    """Attributes: sensors: tuple of the component sensors' params, in order."""

    sensors: tuple


@dataclasses.dataclass(frozen=True)
class CompositeSensor(Configurable):
    """Component sensors read together.

    ``sensors`` is a list of sensor configs (``{"type": ..., ...settings}``),
    each with an optional ``"name"`` (default: its type, ``_2``, ``_3`` ...
    for repeats). Component ``i`` gets the key ``fold_in(key, i)``.

    - ``form="box"`` (default): observation f32[sum of sizes], the flattened
      component observations end to end in list order; ``layout()`` gives
      each name's ``(start, stop)`` index range and ``observation_labels()``
      names every index ``"<name>.<label>"``.
    - ``form="dict"``: observation ``{name: component observation}``, space
      :class:`plume_jax.spaces.Dict`.

    State: a tuple of the components' states.
    """

    sensors: tuple = ()
    names: tuple = ()
    form: str = "box"

    type_name = "composite"
    SETTINGS = {
        "sensors": Setting([{"type": "concentration"}],
                           component_list(_sensor_table, "sensor", named=True), static=True,
                           doc="component sensor configs, each with an optional 'name'"),
        "form": Setting("box", choice(("box", "dict")), static=True,
                        doc="'box': one concatenated vector; 'dict': a dict keyed by name"),
    }
    Params = CompositeParams

    @classmethod
    def build(cls, values, grid, prefix):
        resolved = resolve_settings(prefix, cls.SETTINGS, values, grid)
        sensors, params, names = [], [], []
        for i, entry in enumerate(resolved["sensors"]):
            config = {k: v for k, v in entry.items() if k != "name"}
            sensor, sensor_params, _ = build_box_sensor(f"{prefix}.sensors[{i}]", config, grid)
            sensors.append(sensor)
            params.append(sensor_params)
            names.append(entry["name"])
        component = cls(sensors=tuple(sensors), names=tuple(names), form=resolved["form"])
        return component, CompositeParams(sensors=tuple(params)), resolved

    def _boxes(self, params: CompositeParams) -> list[Box]:
        return [s.observation_space(p) for s, p in zip(self.sensors, params.sensors)]

    def observation_space(self, params: CompositeParams) -> Box | Dict:
        boxes = self._boxes(params)
        if self.form == "dict":
            return Dict.of(dict(zip(self.names, boxes)))
        return Box.concatenate(boxes)

    def layout(self) -> dict[str, tuple[int, int]]:
        """``name -> (start, stop)``: each component's index range in the box form."""
        out, start = {}, 0
        for name, sensor in zip(self.names, self.sensors):
            size = len(sensor.observation_labels())
            out[name] = (start, start + size)
            start += size
        return out

    def observation_labels(self) -> list[str]:
        return [f"{name}.{label}" for name, sensor in zip(self.names, self.sensors)
                for label in sensor.observation_labels()]

    def _combine(self, observations: list[jax.Array]) -> Any:
        if self.form == "dict":
            return {name: obs for name, obs in zip(self.names, observations)}
        return jnp.concatenate([jnp.reshape(o, (-1,)) for o in observations]).astype(jnp.float32)

    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: CompositeParams):
        outs = [s.init(jax.random.fold_in(key, i), agent, probe, p)
                for i, (s, p) in enumerate(zip(self.sensors, params.sensors))]
        return self._combine([o for o, _ in outs]), tuple(st for _, st in outs)

    def observe(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, sensor_state,
                params: CompositeParams):
        outs = [s.observe(jax.random.fold_in(key, i), agent, probe, st, p)
                for i, (s, st, p) in enumerate(zip(self.sensors, sensor_state, params.sensors))]
        return self._combine([o for o, _ in outs]), tuple(st for _, st in outs)

    def get_metadata(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "parameters": {
                "form": self.form,
                "sensors": [{"name": n, **static_config(s)}
                            for n, s in zip(self.names, self.sensors)],
            },
            "dynamic_parameters": [],
            "observation_labels": self.observation_labels(),
            "layout": {k: list(v) for k, v in self.layout().items()},
            "components": [s.get_metadata() for s in self.sensors],
        }
