"""Several sensors read at once: one concatenated ``Box`` or a ``Dict``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.sensors.base import Sensor, nested_sensors
from plume_jax.settings import choice, derived, nested_params, setting, static_config
from plume_jax.core.spaces import Box, Dict
from plume_jax.core.types import AgentState, Grid, PlumeProbe


@chex.dataclass(frozen=True)
class CompositeParams(Pytree):
    """Attributes: sensors: tuple of the component sensors' params, in order."""

    sensors: tuple = nested_params(empty=())


@dataclasses.dataclass(frozen=True)
class CompositeSensor(Sensor[CompositeParams, tuple]):
    """Component sensors read together.

    ``sensors`` is a list of sensor configs (``{"type": ..., ...settings}``),
    each with an optional ``"name"`` (default: its type, ``_2``, ``_3`` ...
    for repeats). Component ``i`` gets the key ``fold_in(key, i)``.

    - ``form="box"`` (default): observation f32[sum of sizes], the flattened
      component observations end to end in list order; ``layout()`` gives
      each name's ``(start, stop)`` index range and ``observation_labels()``
      names every index ``"<name>.<label>"``.
    - ``form="dict"``: observation ``{name: component observation}``, space
      :class:`plume_jax.core.spaces.Dict`.

    State: a tuple of the components' states.
    """

    sensors: tuple = nested_sensors([{"type": "concentration"}], many=True,
                                    doc="component sensor configs, each with an optional 'name'")
    names: tuple = derived(())
    form: str = setting("box", choice(("box", "dict")),
                        doc="'box': one concatenated vector; 'dict': a dict keyed by name")

    type_name = "composite"
    Params = CompositeParams

    @classmethod
    def derive(cls, resolved: Mapping[str, Any], grid: Grid) -> dict[str, Any]:
        """``names``: the (resolved) name of each component sensor."""
        return {"names": tuple(entry["name"] for entry in resolved["sensors"])}

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

    def static_settings(self) -> dict[str, Any]:
        """``form`` and the component sensors' static configs, each with its name."""
        return {"form": self.form,
                "sensors": [{"name": n, **static_config(s)}
                            for n, s in zip(self.names, self.sensors)]}

    def metadata_extras(self) -> dict[str, Any]:
        """The index range of each name (``layout``) and each component's metadata."""
        return {"layout": {k: list(v) for k, v in self.layout().items()},
                "components": [s.get_metadata() for s in self.sensors]}
