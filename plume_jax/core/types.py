"""Core pytree types (layer 0).

All are frozen ``chex.dataclass``es: ``replace`` returns a new object, nothing
is mutated. Shapes and dtypes are fixed per environment so that ``jit``
compiles once and ``vmap`` adds a leading batch axis to every leaf.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree


@dataclasses.dataclass(frozen=True)
class Grid:
    """Static size of the search domain, in cells.

    Positions ``(x, y)`` lie in ``[0, width-1] x [0, height-1]``; fields are
    arrays of shape ``(height, width)`` indexed ``field[y, x]``.
    """

    width: int
    height: int

    @property
    def shape(self) -> tuple[int, int]:
        """``(height, width)``, the shape of a concentration field."""
        return (self.height, self.width)

    @property
    def upper(self) -> jax.Array:
        """f32[2] — the largest valid position ``(width-1, height-1)``."""
        return jnp.asarray([self.width - 1, self.height - 1], jnp.float32)

    def clamp(self, position: jax.Array) -> jax.Array:
        """Clamp f32[..., 2] positions into the grid."""
        return jnp.clip(position, 0.0, self.upper)

    def contains(self, position: jax.Array) -> jax.Array:
        """bool[...] — whether f32[..., 2] positions lie inside the grid."""
        return jnp.all((position >= 0.0) & (position <= self.upper), axis=-1)


@chex.dataclass(frozen=True)
class AgentState(Pytree):
    """The navigating agent.

    Attributes:
        position: f32[2], ``(x, y)`` in grid cells (x east, y north).
        heading: f32[], radians, 0 = east, counter-clockwise positive.
    """

    position: jax.Array
    heading: jax.Array

    @classmethod
    def at(cls, position: Any, heading: Any = 0.0) -> "AgentState":
        """Build an agent from Python or array values (cast to float32)."""
        return cls(
            position=jnp.asarray(position, jnp.float32),
            heading=jnp.asarray(heading, jnp.float32),
        )


@chex.dataclass(frozen=True)
class EnvState(Pytree):
    """The whole environment state of one episode.

    Attributes:
        agent: the agent's position and heading.
        plume: the plume's own state pytree (``()`` for static plumes).
        sensor: the sensor's memory pytree (``()`` for memoryless sensors).
        step_count: i32[], steps taken in this episode.
        episode_count: i32[], episodes started since the first reset
            (1 during the first episode).
        total_reward: f32[], return accumulated in this episode.
        goal_reached: bool[], whether the last step reached the goal.
    """

    agent: AgentState
    plume: Any
    sensor: Any
    step_count: jax.Array
    episode_count: jax.Array
    total_reward: jax.Array
    goal_reached: jax.Array


@chex.dataclass(frozen=True)
class EnvParams(Pytree):
    """Everything a user may sweep: every leaf may carry a batch axis under vmap.

    Attributes:
        plume, sensor, actions, reward, start: each component's own params
            pytree (see that component's ``Params`` class).
        goal_radius: f32[], cells; the goal is reached when the distance from
            the agent to the goal (the source) is ``<= goal_radius``.
        max_steps: i32[], the episode is truncated after this many steps
            (also readable as ``max_steps_in_episode``, gymnax's name).
    """

    plume: Any
    sensor: Any
    actions: Any
    reward: Any
    start: Any
    goal_radius: jax.Array
    max_steps: jax.Array

    @property
    def max_steps_in_episode(self) -> jax.Array:
        """``max_steps`` under gymnax's name (read-only; not a second field).

        gymnax's base ``EnvParams`` declares ``max_steps_in_episode``, and
        code written for gymnax reads it: ``RolloutWrapper(env=env)`` with no
        ``num_env_steps`` takes its rollout length from it, and so does rejax.
        It is the ``max_steps`` leaf itself, so it always agrees with it, it
        carries the same batch axis under ``vmap`` and in a sweep's stacked
        params, and the pytree (what checkpoints store) is unchanged.
        """
        return self.max_steps


#: gymnax's names for :class:`EnvParams` fields, taken by ``EnvParams.replace``
#: (gymnax's ``RolloutWrapper(env=env, env_params={"max_steps_in_episode": 50})``
#: replaces the env's default params by them).
GYMNAX_NAMES = {"max_steps_in_episode": "max_steps"}
_MAX_STEPS_HIGH = 2**31 - 1


def _max_steps_leaf(name: str, value: Any) -> Any:
    """A plain integer as ``make`` stores it (``i32[]``, in ``[1, 2**31)``);
    arrays and tracers (a batch of them, a traced value) are left as given."""
    if isinstance(value, (bool, np.bool_)) or (
            isinstance(value, (float, np.floating)) and not float(value).is_integer()):
        raise ValidationError.for_parameter(name, value, f"an integer in [1, {_MAX_STEPS_HIGH}]")
    if isinstance(value, (int, float, np.integer, np.floating)):
        if not 1 <= value <= _MAX_STEPS_HIGH:
            raise ValidationError.for_parameter(name, value,
                                                f"an integer in [1, {_MAX_STEPS_HIGH}]")
        return jnp.asarray(int(value), jnp.int32)
    return value


def _env_params_replace(self: EnvParams, **changes: Any) -> EnvParams:
    """A copy with ``changes`` applied (chex's ``replace``), that also takes
    gymnax's field names (:data:`GYMNAX_NAMES`: ``max_steps_in_episode`` is
    ``max_steps``), stores a plain ``max_steps`` as ``make`` does (``i32[]``),
    and refuses any other name in one line naming the fields it accepts
    (chex said ``__init__() got unexpected kwargs``). Nothing is applied when
    any change is refused.

    Raises:
        ValidationError: an unknown field, both ``max_steps`` and its gymnax
            name, or a ``max_steps`` that is not an integer in ``[1, 2**31)``.
    """
    fields = list(self.__dataclass_fields__)
    given = {}  # field -> the name the caller used
    for alias, name in GYMNAX_NAMES.items():
        if alias in changes:
            if name in changes:
                raise ValidationError.for_parameter(
                    alias, changes[alias], f"either {alias} (gymnax's name) or {name}, not both")
            changes = {name if key == alias else key: value for key, value in changes.items()}
            given[name] = alias
    unknown = [key for key in changes if key not in fields]
    if unknown:
        aliases = ", ".join(f"{alias} (gymnax's name for {name})"
                            for alias, name in GYMNAX_NAMES.items())
        raise ValidationError.for_parameter(
            unknown[0], changes[unknown[0]],
            f"a field of plume_jax's EnvParams: one of {fields}, or {aliases}; a component's "
            "setting (sigma, ...) is set with plume_jax.make(id, sigma=...) or "
            "params.replace(plume=params.plume.replace(...))")
    if "max_steps" in changes and not isinstance(changes["max_steps"], jax.Array):
        changes["max_steps"] = _max_steps_leaf(given.get("max_steps", "max_steps"),
                                               changes["max_steps"])
    return dataclasses.replace(self, **changes)


# chex.dataclass sets ``replace`` on the class it makes; this one replaces it.
EnvParams.replace = _env_params_replace  # type: ignore[method-assign, assignment]


@chex.dataclass(frozen=True)
class NoParams(Pytree):
    """Params of a component that has nothing to sweep."""


def no_wind(points: jax.Array) -> jax.Array:
    """f32[..., 2] zeros: the wind of a probe built without one."""
    points = jnp.asarray(points, jnp.float32)
    return jnp.zeros(points.shape, jnp.float32)


def never_strayed(points: jax.Array) -> jax.Array:
    """bool[...] all False: the stray rule of a probe built without one."""
    return jnp.zeros(jnp.shape(points)[:-1], bool)


class PlumeProbe:
    """What a sensor (or a wind-relative action model, or a start
    distribution) may read of the plume at one instant (built by the env).

    ``concentration(points f32[..., 2]) -> f32[...]`` samples the plume at
    float points (cells), zero outside the grid.
    ``wind(points f32[..., 2]) -> f32[..., 2]`` is the air velocity
    ``(vx, vy)`` at those points in cells per step, pointing where the air
    moves *toward* (zero when the probe is built without a wind).
    ``puffs() -> (positions f32[P, 2], live bool[P])`` is the plume's puff
    centres (cells) and which slots hold a live puff, for a plume made of
    puffs (``singh``, ``filament``); ``None`` for a plume without puffs.
    ``strayed(points f32[..., 2]) -> bool[...]`` is the plume's own rule for
    an agent that has strayed from it, the one that ends an episode (never,
    for a probe built without one).
    All close over the plume state and params, so consumers never depend on
    a particular plume model.
    """

    __slots__ = ("concentration", "wind", "puffs", "strayed")

    def __init__(self, concentration, wind=None, puffs=None, strayed=None):
        self.concentration = concentration
        self.wind = no_wind if wind is None else wind
        self.puffs = puffs
        self.strayed = never_strayed if strayed is None else strayed
