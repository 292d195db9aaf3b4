"""The Bayesian posterior over the source cell, as an observation (``belief``).

On the Poisson plume's grid search (the ``PlumeNav-Poisson-*`` presets) the
exact posterior over the source cell is a sufficient statistic of
everything the searcher has observed: a policy that acts on it needs no
memory. This sensor keeps that posterior in its state, updates it inside
the env's step from the hit classes that a wrapped ``hits`` sensor reads,
and observes it, optionally centred on the agent in a fixed window.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.plumes.poisson import PoissonPlume
from plume_jax.plumes.poisson_posterior import (bayes_update, belief_summaries, likelihood_at,
                                                likelihood_tables, plain_params, summary_bounds)
from plume_jax.core.pytree import Pytree
from plume_jax.sensors.base import Sensor, nested_sensors
from plume_jax.settings import (MAX_LENGTH, boolean, derived, domain_grid, grid_domain, nested_params, real,
                                resolve_component, setting)
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, Grid, PlumeProbe

_LAW_TABLE = {"poisson": PoissonPlume}


def _law_config(name: str, value: Any, grid: Grid) -> dict[str, Any]:
    """A Poisson plume config (``type`` may be left out; a list of
    ``[name, value]`` pairs, as the sensor's field holds it, is accepted
    too), resolved by the Poisson plume's own settings."""
    if isinstance(value, (list, tuple)) and all(
            isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in value):
        value = {k: v for k, v in value}
    if not isinstance(value, Mapping):
        raise ValidationError.for_parameter(
            name, value, "a Poisson plume config, e.g. {model: isotropic, lambda_over_dx: 1.0, "
            "r_dt: 1.0}")
    value = {"type": "poisson", **value}
    return resolve_component(name, value, _LAW_TABLE, "Poisson plume", grid)[2]


def _window(name: str, value: Any, grid: Grid) -> tuple[int, int] | None:
    """None (the full window), or ``[width, height]``: odd integers in
    ``[1, 4 * max(grid size)]``."""
    limit = 4 * max(grid.width, grid.height)
    allowed = (f"null (every cell of the grid stays in view: {2 * grid.width - 1}x"
               f"{2 * grid.height - 1}) or [width, height], odd integers in [1, {limit}]")
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise ValidationError.for_parameter(name, value, allowed)
    out = []
    for v in value:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) \
                or not 1 <= v <= limit or v % 2 == 0:
            raise ValidationError.for_parameter(name, value, allowed)
        out.append(int(v))
    return (out[0], out[1])


@chex.dataclass(frozen=True)
class BeliefParams(Pytree):
    """Attributes: sensor: the wrapped hits sensor's params."""

    sensor: Any = nested_params()


@chex.dataclass(frozen=True)
class BeliefState(Pytree):
    """Attributes:
        posterior: f32[H, W], ``P(source at cell (x, y))`` at ``[y, x]``,
            summing to 1, after the latest reading.
        sensor: the wrapped hits sensor's state.
    """

    posterior: jax.Array
    sensor: Any

@dataclasses.dataclass(frozen=True)
class BeliefSensor(Sensor[BeliefParams, BeliefState]):
    """The exact Bayesian posterior over the source cell, updated from Poisson
    hits, observed as an image (optionally centred on the agent).

    The wrapped ``hits`` sensor (``sensor``) reads a hit class ``h`` at the
    agent's cell ``a`` each step (with the key it is given, so the hits are
    those the same env with the bare hits sensor draws). The posterior
    starts uniform over the grid and, at ``init`` and at every ``observe``,
    becomes ``p(s) L_h(s - a) / Σ p L_h`` (:mod:`plume_jax.plumes.poisson_posterior`),
    where ``L_h`` is the probability of class ``h`` under the searcher's
    model: the Poisson plume law ``plume`` (a Poisson plume config; only its
    law matters: ``model``, ``lambda_over_dx``, ``r_dt``, ``wind_*``,
    ``tau``, ``r_bar``) times the hits sensor's ``gain``, and 0 within
    ``goal_radius`` of the agent (a step that continues says the source is
    not there). It is the posterior the infotaxis agents keep
    (``agents/infotaxis.py``), operation for operation.

    The model is the sensor's own: it should equal the env's plume law and
    ``goal_radius`` (e.g. the preset's ``plume`` section; a test checks the
    three ``PlumeNav-Poisson-*`` benchmark configurations), and it is
    tabulated once from these static values (float64 class probabilities,
    used in float32): sweeping the plume's params or the hits gain leaves it
    as configured, i.e. mis-specified, as in robustness studies. Agent
    positions are rounded to the nearest cell.

    Observation: f32[wy * wx] in ``[0, 1]``, the posterior as an image in
    row-major ``[row, column]`` order (index ``row * wx + column``; rows go
    north, as ``field[y, x]``):

    - ``centred=True`` (default): entry ``[j, i]`` is the posterior at cell
      ``(x + i - (wx - 1)/2, y + j - (wy - 1)/2)`` for the agent at
      ``(x, y)``, 0 off the grid. ``window=None`` gives ``wx = 2W - 1``,
      ``wy = 2H - 1``: the whole grid stays in view wherever the agent is
      (otto's network input); a smaller window crops, a larger one pads;
    - ``centred=False``: the grid itself, ``wx = W``, ``wy = H`` (``window``
      must be None).

    With ``grid_channel``, a second image follows the first (observation
    f32[2 * wy * wx], channel-major): 1 where the window's cell lies on the
    grid, 0 off it, so that a policy sees the walls (a cell ruled out and a
    cell off the grid both have probability 0). With ``summaries``, three
    numbers follow the images: the posterior's entropy (bits), its mean
    Manhattan distance from the agent (cells) and the probability that the
    source is on one of the four neighbouring cells
    (:func:`~plume_jax.plumes.poisson_posterior.belief_summaries`, over the
    whole grid whatever the window).

    Cost per step: ``O(H · W)`` (one multiply, sum and divide over the grid,
    one window copy). Deterministic given the key.
    """

    sensor: Any = nested_sensors({"type": "hits"},
                                 doc="the hits sensor whose readings update the posterior")
    plume: tuple = setting({"type": "poisson"}, _law_config,
                         doc="the searcher's model of the plume: a Poisson plume config whose "
                             "law gives the likelihood (match the env's plume)")
    goal_radius: float = setting(0.0, real(low=0.0, high=MAX_LENGTH),
                                 doc=f"cells, in [0, {MAX_LENGTH:g}]; the source is not within "
                                     "this radius of a cell the search continues from (match "
                                     "the env's goal_radius)")
    centred: bool = setting(True, boolean(),
                            doc="observe the posterior centred on the agent (else the grid as is)")
    window: Any = setting(None, _window,
                          doc="[width, height] of the centred window, odd, cells; null: "
                              "(2W-1)x(2H-1), the whole grid always in view")
    grid_channel: bool = setting(False, boolean(),
                                 doc="add a second image: 1 where the window's cell is on the grid")
    summaries: bool = setting(False, boolean(),
                              doc="append the entropy (bits), mean distance from the agent "
                                  "(cells) and neighbour mass of the posterior")
    #: ``(width, height)`` of the grid, set by ``build``.
    domain: tuple = grid_domain()
    #: The hits sensor's gain the likelihood uses (its configured value), set by ``build``.
    gain: float = derived(1.0)

    type_name = "belief"
    Params = BeliefParams

    @classmethod
    def validate(cls, resolved: dict[str, Any], grid: Grid, prefix: str) -> dict[str, Any]:
        """The wrapped sensor must be a ``hits`` sensor; ``goal_radius`` must be
        below the grid's diagonal (else the posterior is all zero); ``window``
        only applies with ``centred``."""
        if resolved["sensor"]["type"] != "hits":
            raise ValidationError.for_parameter(
                f"{prefix}.sensor.type", resolved["sensor"]["type"],
                "'hits' (the posterior is updated from Poisson hit classes)")
        diagonal = math.hypot(grid.width - 1, grid.height - 1)
        if resolved["goal_radius"] >= diagonal:
            raise ValidationError.for_parameter(
                f"{prefix}.goal_radius", resolved["goal_radius"],
                f"a radius below the grid's diagonal ({diagonal:g} cells on this "
                f"{grid.width}x{grid.height} grid): at or beyond it every cell is within "
                "goal_radius of the agent, so the posterior would be all zero")
        if not resolved["centred"] and resolved["window"] is not None:
            raise ValidationError.for_parameter(
                f"{prefix}.window", list(resolved["window"]),
                "null when centred is false (the observation is then the grid itself)")
        return resolved

    @classmethod
    def assemble(cls, resolved: Mapping[str, Any], grid: Grid, prefix: str,
                 **derived_params: Any) -> tuple[Any, Any]:
        """As ``Configurable.assemble``, with the ``plume`` config held as
        sorted ``(name, value)`` pairs (a hashable static field)."""
        pairs = tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                             for k, v in resolved["plume"].items()))
        component, params = super().assemble({**resolved, "plume": ()}, grid, prefix,
                                             **derived_params)
        return dataclasses.replace(component, plume=pairs), params

    def static_settings(self) -> dict[str, Any]:
        """As ``Configurable.static_settings``, ``plume`` as a config dict."""
        return {**super().static_settings(),
                "plume": {k: list(v) if isinstance(v, tuple) else v for k, v in self.plume}}

    @classmethod
    def derive(cls, resolved: Mapping[str, Any], grid: Grid) -> dict[str, Any]:
        """The grid's size and the wrapped hits sensor's configured gain."""
        return {**super().derive(resolved, grid), "gain": float(resolved["sensor"]["gain"])}

    def metadata_extras(self) -> dict[str, Any]:
        return {"stochastic": True}

    # -- geometry ----------------------------------------------------------------
    def _grid(self) -> Grid:
        return domain_grid(self, "sensor")

    @property
    def image_shape(self) -> tuple[int, int]:
        """``(rows, columns)`` of the observed image."""
        grid = self._grid()
        if not self.centred:
            return (grid.height, grid.width)
        if self.window is None:
            return (2 * grid.height - 1, 2 * grid.width - 1)
        return (self.window[1], self.window[0])

    @property
    def channels(self) -> int:
        """Images in the observation: 1, or 2 with ``grid_channel``."""
        return 2 if self.grid_channel else 1

    def observation_space(self, params: BeliefParams) -> Box:
        rows, cols = self.image_shape
        images = Box.uniform(0.0, 1.0, (self.channels * rows * cols,))
        if not self.summaries:
            return images
        grid = self._grid()
        high = summary_bounds(grid.height, grid.width)
        return Box.concatenate([images, Box.from_arrays([0.0] * len(high), list(high))])

    def observation_labels(self) -> list[str]:
        rows, cols = self.image_shape
        ry, rx = (rows - 1) // 2, (cols - 1) // 2
        where = [f"x{i}_y{j}" if not self.centred else f"dx{i - rx}_dy{j - ry}"
                 for j in range(rows) for i in range(cols)]
        names = ["belief", "grid"][:self.channels]
        labels = [f"{name}_{cell}" for name in names for cell in where]
        if self.summaries:
            labels += ["belief_entropy_bits", "belief_mean_distance", "belief_neighbour_mass"]
        return labels

    def cell(self, agent: AgentState) -> jax.Array:
        """i32[2]: the agent's cell ``(x, y)`` (rounded, inside the grid)."""
        grid = self._grid()
        upper = jnp.asarray([grid.width - 1, grid.height - 1], jnp.int32)
        xy = jnp.round(jnp.asarray(agent.position, jnp.float32).reshape(2)).astype(jnp.int32)
        return jnp.clip(xy, 0, upper)

    # -- the model -----------------------------------------------------------------
    def likelihood(self) -> np.ndarray:
        """f32[h_max, 2H-1, 2W-1]: ``L_h`` over the source's offset from the
        agent (:func:`~plume_jax.plumes.poisson_posterior.likelihood_tables`)."""
        grid = self._grid()
        with jax.ensure_compile_time_eval():  # concrete params, also while tracing
            law, law_params, _ = PoissonPlume.build(
                {k: list(v) if isinstance(v, tuple) else v for k, v in self.plume if k != "type"},
                grid, "sensor.plume")
            law_params = plain_params(law_params)
        return likelihood_tables(law, law_params, self.gain, self.sensor.h_max,
                                 grid.width, grid.height, self.goal_radius)["lik"]

    def update(self, posterior: jax.Array, cell: jax.Array, reading: jax.Array) -> jax.Array:
        """f32[H, W]: ``posterior`` after the hits ``reading`` (f32[1]) at ``cell``."""
        hit_class = jnp.clip(jnp.round(reading[0]), 0, self.sensor.h_max - 1).astype(jnp.int32)
        lik = likelihood_at(jnp.asarray(self.likelihood()), cell)
        return bayes_update(posterior, lik, hit_class)

    def view(self, posterior: jax.Array, cell: jax.Array) -> jax.Array:
        """f32[rows * columns]: the observed image of ``posterior`` (see the class)."""
        images = [posterior]
        if self.grid_channel:
            images.append(jnp.ones_like(posterior))
        if self.centred:
            images = [self._centre(image, cell, self.image_shape) for image in images]
        out = jnp.reshape(jnp.stack(images), (-1,))
        if not self.summaries:
            return out
        grid = self._grid()
        full = self._centre(posterior, cell, (2 * grid.height - 1, 2 * grid.width - 1))
        return jnp.concatenate([out, belief_summaries(full)])

    @staticmethod
    def _centre(image: jax.Array, cell: jax.Array, shape: tuple[int, int]) -> jax.Array:
        """f32[rows, columns]: the window of ``image`` centred on ``cell``, 0 off the grid."""
        rows, cols = shape
        ry, rx = (rows - 1) // 2, (cols - 1) // 2
        return jax.lax.dynamic_slice(jnp.pad(image, ((ry, ry), (rx, rx))), (cell[1], cell[0]),
                                     (rows, cols))

    # -- the sensor protocol ----------------------------------------------------------
    def init(self, key: jax.Array, agent: AgentState, probe: PlumeProbe, params: BeliefParams):
        reading, inner_state = self.sensor.init(key, agent, probe, params.sensor)
        grid = self._grid()
        uniform = jnp.full(grid.shape, 1.0 / (grid.width * grid.height), jnp.float32)
        cell = self.cell(agent)
        posterior = self.update(uniform, cell, reading)
        return self.view(posterior, cell), BeliefState(posterior=posterior, sensor=inner_state)

    def observe(self, key: jax.Array, agent: AgentState, probe: PlumeProbe,
                sensor_state: BeliefState, params: BeliefParams):
        reading, inner_state = self.sensor.observe(key, agent, probe, sensor_state.sensor,
                                                   params.sensor)
        cell = self.cell(agent)
        posterior = self.update(sensor_state.posterior, cell, reading)
        return self.view(posterior, cell), BeliefState(posterior=posterior, sensor=inner_state)
