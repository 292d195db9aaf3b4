"""Spatially uniform, time-varying wind for dynamic plumes.

A :class:`WindModel` is a small frozen object (its ``kind`` is static) with
pure methods over a :class:`WindState` carried inside the plume state. Its
dynamic parameters are read from the owning plume's params, which carry the
fields listed in :data:`WIND_SETTINGS` (all prefixed ``wind_``), so a plume
that moves with the wind declares them with :func:`wind_setting` (``wind_kind``
on the plume, the others on its params), and every wind parameter can be
swept under ``vmap`` like any other.

Units: cells and steps. ``wind_speed`` is cells per step; directions are
radians, 0 = east, counter-clockwise positive, pointing where the air moves
*toward* (the convention of :class:`plume_jax.core.types.PlumeProbe`). The wind
is the same everywhere in the domain; consumers read it through
``plume.wind(plume_state, points, params)`` — the env wraps that into
``PlumeProbe.wind`` for sensors, wind-relative actions and starts.

=================  ============================================================
``wind_kind``      direction of the air over time
=================  ============================================================
``constant``       ``wind_direction``, always
``meander``        Ornstein-Uhlenbeck process around ``wind_direction``:
                   stationary standard deviation ``wind_direction_std``,
                   correlation time ``wind_correlation_time`` steps, updated
                   with the exact discretisation
                   ``θ' = μ + (θ - μ) a + σ √(1 - a²) ξ``, ``a = exp(-1/τ)``
``switch_once``    one change of direction per episode, ``wind_switch_time``
                   steps after the episode starts: from ``wind_direction`` to
                   ``wind_direction + wind_switch_angle``; the next episode
                   (auto-reset keeps the developed plume) starts from the
                   switched direction and switches back, so the wind only
                   ever takes these two directions
``switch_random``  frequent random switches: at every step, with probability
                   ``1 - exp(-wind_switch_rate)``, the direction jumps to
                   ``wind_direction + U(-wind_switch_angle, wind_switch_angle)``
=================  ============================================================

The three regimes ``constant``, ``switch_once`` and ``switch_random`` follow
the wind conditions of Singh et al. (Nature Machine Intelligence, 2023):
constant wind, a single change of direction during the episode, and
frequent random changes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree
from plume_jax.settings import (
    ANGLE_WRAP,
    MAX_INT32,
    MAX_LENGTH,
    MAX_SCALE,
    Checker,
    angle,
    choice,
    real,
    setting,
)

#: The wind kinds (static: each is its own code path).
WIND_KINDS = ("constant", "meander", "switch_once", "switch_random")


@chex.dataclass(frozen=True)
class WindState(Pytree):
    """Attributes:
        direction: f32[], radians: the current direction for ``meander`` and
            ``switch_random`` (unused by ``constant`` and ``switch_once``,
            which derive it from params, ``phase`` and ``clock``).
        phase: i32[], ``switch_once`` only: 0 when the episode started at
            ``wind_direction``, 1 when it started at the switched direction.
        clock: i32[], steps since the current episode started.
    """

    direction: jax.Array
    phase: jax.Array
    clock: jax.Array


#: ``name -> (checker, doc)`` of the wind settings: ``wind_kind`` is static
#: (a field of the plume), the others dynamic (fields of its params).
_WIND_DECLARATIONS: dict[str, tuple[Checker, str]] = {
    "wind_kind": (choice(WIND_KINDS),
                  "wind kind: constant, meander (OU direction), switch_once, switch_random"),
    "wind_speed": (real(low=0.0, high=MAX_LENGTH),
                   f"wind speed, cells per step, in [0, {MAX_LENGTH:g}]"),
    "wind_direction": (angle(), "(mean) direction the air moves toward, radians (0 = east, CCW)"),
    "wind_direction_std": (real(low=0.0, high=ANGLE_WRAP),
                           f"meander: stationary std of the direction, radians, in "
                           f"[0, {ANGLE_WRAP:g}]"),
    "wind_correlation_time": (real(low=0.0, high=MAX_INT32, low_inclusive=False),
                              "meander: correlation time of the direction, steps, in "
                              "(0, 2**31 - 1]"),
    "wind_switch_time": (real(low=0.0, high=MAX_INT32),
                         "switch_once: steps after the episode start of the switch, in "
                         "[0, 2**31 - 1]"),
    "wind_switch_angle": (real(low=-math.pi, high=math.pi),
                          "switch_once: change of direction; switch_random: largest deviation "
                          "from the mean, radians, in [-pi, pi]"),
    "wind_switch_rate": (real(low=0.0, high=MAX_SCALE),
                         f"switch_random: mean number of switches per step, in [0, {MAX_SCALE:g}]"),
}

#: Names of the wind settings (the fields a plume carries for its ``WindModel``).
WIND_SETTINGS = tuple(_WIND_DECLARATIONS)


def wind_setting(name: str, default: Any, doc: str | None = None) -> Any:
    """The field declaring wind setting ``name`` (one of :data:`WIND_SETTINGS`)
    with the given default: a plume declares ``wind_kind`` as one of its
    fields and the others as fields of its params."""
    check, standard_doc = _WIND_DECLARATIONS[name]
    return setting(default, check, doc=standard_doc if doc is None else doc)


@dataclasses.dataclass(frozen=True)
class WindModel:
    """Pure wind dynamics of one ``kind`` (see the module docstring).

    ``params`` is the owning plume's params pytree: it must have the fields
    of :data:`WIND_SETTINGS` except ``wind_kind`` (the static kind).
    """

    kind: str = "constant"

    def __post_init__(self) -> None:
        if self.kind not in WIND_KINDS:
            raise ValueError(f"wind kind {self.kind!r} is invalid: expected one of {WIND_KINDS}")

    def init(self, key: jax.Array, params: Any) -> WindState:
        """A fresh wind: ``meander`` and ``switch_random`` start from a draw
        of their stationary law, the others at ``wind_direction``."""
        mean = jnp.asarray(params.wind_direction, jnp.float32)
        if self.kind == "meander":
            direction = mean + params.wind_direction_std * jax.random.normal(key, (), jnp.float32)
        elif self.kind == "switch_random":
            direction = mean + params.wind_switch_angle * jax.random.uniform(
                key, (), jnp.float32, -1.0, 1.0)
        else:
            direction = mean
        return WindState(direction=jnp.asarray(direction, jnp.float32),
                         phase=jnp.asarray(0, jnp.int32), clock=jnp.asarray(0, jnp.int32))

    def reinit(self, state: WindState, params: Any) -> WindState:
        """The wind at the start of the next episode (cheap, no randomness):
        the clock restarts; ``switch_once`` starts from the direction it
        switched to. The other kinds keep running."""
        if self.kind == "switch_once":
            switched = self._switched(state, params)
            phase = jnp.where(switched, 1 - state.phase, state.phase)
            return state.replace(phase=phase.astype(jnp.int32), clock=jnp.zeros((), jnp.int32))
        return state.replace(clock=jnp.zeros((), jnp.int32))

    def _switched(self, state: WindState, params: Any) -> jax.Array:
        return state.clock.astype(jnp.float32) >= params.wind_switch_time

    def advance(self, key: jax.Array, state: WindState, params: Any) -> WindState:
        """The wind one step later."""
        clock = state.clock + 1
        direction = state.direction
        if self.kind == "meander":
            a = jnp.exp(-1.0 / params.wind_correlation_time)
            noise = jax.random.normal(key, (), jnp.float32)
            direction = params.wind_direction + (direction - params.wind_direction) * a \
                + params.wind_direction_std * jnp.sqrt(jnp.maximum(1.0 - a * a, 0.0)) * noise
        elif self.kind == "switch_random":
            k_event, k_angle = jax.random.split(key)
            jump = jax.random.uniform(k_event, (), jnp.float32) < \
                -jnp.expm1(-params.wind_switch_rate)
            target = params.wind_direction + params.wind_switch_angle * jax.random.uniform(
                k_angle, (), jnp.float32, -1.0, 1.0)
            direction = jnp.where(jump, target, direction)
        return state.replace(direction=jnp.asarray(direction, jnp.float32), clock=clock)

    def direction(self, state: WindState, params: Any) -> jax.Array:
        """f32[], radians: where the air moves toward now."""
        mean = jnp.asarray(params.wind_direction, jnp.float32)
        if self.kind == "constant":
            return mean
        if self.kind == "switch_once":
            phase = jnp.where(self._switched(state, params), 1 - state.phase, state.phase)
            return mean + params.wind_switch_angle * phase.astype(jnp.float32)
        return state.direction

    def velocity(self, state: WindState, params: Any) -> jax.Array:
        """f32[2], ``(vx, vy)`` in cells per step."""
        theta = self.direction(state, params)
        return (params.wind_speed * jnp.stack([jnp.cos(theta), jnp.sin(theta)])).astype(
            jnp.float32)


def broadcast_wind(velocity: jax.Array, points: jax.Array) -> jax.Array:
    """f32[..., 2]: a uniform wind ``velocity`` f32[2] at every point of f32[..., 2]."""
    points = jnp.asarray(points, jnp.float32)
    return jnp.broadcast_to(jnp.asarray(velocity, jnp.float32), points.shape)


def constant_wind(speed: jax.Array, direction: jax.Array, points: jax.Array) -> jax.Array:
    """f32[..., 2]: the constant, uniform wind of ``speed`` (cells/step)
    toward ``direction`` (radians) at every point of f32[..., 2]."""
    return broadcast_wind(speed * jnp.stack([jnp.cos(direction), jnp.sin(direction)]), points)
