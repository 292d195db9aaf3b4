"""Cast and surge: the moth's strategy for intermittent plumes.

Decision rule (Kennedy & Marsh 1974; Baker 1990; Vickers & Baker 1994;
with the growing cast amplitude of Balkovsky & Shraiman 2002):

- **detect**: the odour reading exceeds ``threshold`` → *surge* upwind;
- **persist**: for ``surge_steps`` steps after the last detection keep
  surging (filaments are intermittent; a short gap is not a loss);
- **cast**: otherwise sweep crosswind, alternating sides, each leg
  ``growth`` steps longer than the one before (first leg ``cast_steps``),
  so the search widens the longer the plume stays lost. A new detection
  resets the leg length.

Three embodiments, chosen from the env's action names:

- wind-relative actions (``surge``, ``cast_left``, ``cast_right``, the
  ``surge_cast`` action model): used as is;
- oriented actions (``forward``, ``turn_left``, ``turn_right``) with a
  body-frame wind sensor (``wind_forward``, ``wind_left``): the desired
  direction (upwind, or upwind ±90° while casting) is steered toward —
  ``forward`` when it lies within half a turn of the heading, else a turn
  toward it; the action after a turn is always ``forward``;
- absolute cardinal moves with a world-frame wind sensor (``wind_east``,
  ``wind_north``): the desired direction is mapped to the nearest
  cardinal move;
- flight (the ``flight`` action model: a normalised ``Box`` of thrust and
  turn) with an apparent-wind sensor (``apparent_wind_forward``,
  ``apparent_wind_left``): turn toward the desired direction as fast as
  the turn rate allows, at full speed (the apparent wind includes the
  agent's own flight, so "upwind" is read from what it feels).

Odour is read from the observation entry ``obs_label`` (``concentration``
by default; ``detection`` for a binary sensor, ``hits`` for a Poisson one).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from agents.base import action_id, describe, has_action, observation_index
from agents.chemotaxis import CCW_MOVES

from plume_jax.core.pytree import Pytree


@chex.dataclass(frozen=True)
class CastSurgeCarry(Pytree):
    """Attributes:
        since_detection: i32[], steps since the last detection (large at start).
        side: i32[], +1 casting left, -1 casting right.
        leg_length: i32[], steps of the current cast leg.
        leg_left: i32[], steps left on the current leg.
        turned: bool[], the last action was an in-place turn (oriented mode).
    """

    since_detection: jax.Array
    side: jax.Array
    leg_length: jax.Array
    leg_left: jax.Array
    turned: jax.Array


@dataclasses.dataclass(frozen=True)
class CastAndSurgePolicy:
    """Functional cast-and-surge navigator (see the module docstring)."""

    odour_index: int
    mode: str  # "wind_relative", "oriented" or "cardinal"
    action_table: tuple[int, ...]
    wind_indices: tuple[int, int] = (0, 0)
    half_turn: float = 0.0
    threshold: float = 0.05
    surge_steps: int = 3
    cast_steps: int = 2
    growth: int = 2
    #: flight: the thrust (normalised: 1 = full) and the largest turn rate (rad/step)
    max_speed: float = 0.0
    max_turn_rate: float = 0.0

    name = "cast_and_surge"

    @classmethod
    def for_env(cls, env: Any, obs_label: str = "concentration", threshold: float = 0.05,
                surge_steps: int = 3, cast_steps: int = 2, growth: int = 2) -> "CastAndSurgePolicy":
        odour = observation_index(env, obs_label, agent=cls.name)
        half_turn = 0.0
        names: tuple[str, ...]
        if describe(env)["action_space"]["type"] == "box":
            wind = (observation_index(env, "apparent_wind_forward", agent=cls.name),
                    observation_index(env, "apparent_wind_left", agent=cls.name))
            turn = float(getattr(env, "settings", {}).get("actions", {}).get("max_turn_rate", 1.0))
            return cls(odour, "flight", (), wind, 0.0, float(threshold), int(surge_steps),
                       int(cast_steps), int(growth), max_speed=1.0, max_turn_rate=turn)
        if has_action(env, "surge"):
            mode, names, wind = "wind_relative", ("surge", "cast_left", "cast_right"), (0, 0)
        elif has_action(env, "forward"):
            mode, names = "oriented", ("forward", "turn_left", "turn_right")
            wind = (observation_index(env, "wind_forward", agent=cls.name),
                    observation_index(env, "wind_left", agent=cls.name))
            settings = getattr(env, "settings", {}).get("actions", {})
            half_turn = float(jnp.deg2rad(settings.get("turn_angle_deg", 90.0))) / 2.0
        else:
            mode, names = "cardinal", CCW_MOVES
            wind = (observation_index(env, "wind_east", agent=cls.name),
                    observation_index(env, "wind_north", agent=cls.name))
        table = tuple(action_id(env, n, agent=cls.name) for n in names)
        return cls(odour, mode, table, wind, half_turn, float(threshold), int(surge_steps),
                   int(cast_steps), int(growth))

    def init(self, key: jax.Array) -> CastSurgeCarry:
        side = jnp.where(jax.random.bernoulli(key), 1, -1).astype(jnp.int32)
        return CastSurgeCarry(since_detection=jnp.asarray(10**6, jnp.int32), side=side,
                              leg_length=jnp.asarray(self.cast_steps, jnp.int32),
                              leg_left=jnp.asarray(self.cast_steps, jnp.int32),
                              turned=jnp.asarray(False))

    def decide(self, carry: CastSurgeCarry, obs: jax.Array):
        """``(mode, carry)``: mode 0 surge, +1 cast left, -1 cast right."""
        obs = jnp.asarray(obs, jnp.float32).reshape(-1)
        detected = obs[self.odour_index] > self.threshold
        since = jnp.where(detected, 0, carry.since_detection + 1)
        surging = since <= self.surge_steps
        # casting: continue the leg, or start the next (longer) one on the other side
        leg_done = carry.leg_left <= 0
        side = jnp.where(surging, carry.side, jnp.where(leg_done, -carry.side, carry.side))
        leg_length = jnp.where(surging, self.cast_steps,
                               jnp.where(leg_done, carry.leg_length + self.growth, carry.leg_length))
        leg_left = jnp.where(surging, self.cast_steps,
                             jnp.where(leg_done, leg_length, carry.leg_left) - 1)
        mode = jnp.where(surging, 0, side)
        new = carry.replace(since_detection=jnp.minimum(since, 10**6).astype(jnp.int32),
                            side=side.astype(jnp.int32), leg_length=leg_length.astype(jnp.int32),
                            leg_left=leg_left.astype(jnp.int32))
        return mode.astype(jnp.int32), new

    def act(self, carry: CastSurgeCarry, obs: jax.Array, key: jax.Array):
        mode, carry = self.decide(carry, obs)
        table = jnp.asarray(self.action_table, jnp.int32)
        if self.mode == "wind_relative":
            return table[jnp.asarray([0, 1, 2])[mode % 3]], carry  # 0 surge, 1 left, -1 -> 2 right
        obs = jnp.asarray(obs, jnp.float32).reshape(-1)
        if self.mode == "flight":
            upwind = jnp.arctan2(-obs[self.wind_indices[1]], -obs[self.wind_indices[0]])
            target = jnp.angle(jnp.exp(1j * (upwind + mode * (jnp.pi / 2))))
            # normalised flight action: full thrust, the turn as a fraction of the largest
            turn = jnp.clip(target / self.max_turn_rate, -1.0, 1.0)
            return jnp.stack([jnp.float32(self.max_speed), turn]).astype(jnp.float32), carry
        if self.mode == "oriented":
            # desired direction relative to the heading: upwind, turned by mode * 90°
            upwind = jnp.arctan2(-obs[self.wind_indices[1]], -obs[self.wind_indices[0]])
            target = jnp.angle(jnp.exp(1j * (upwind + mode * (jnp.pi / 2))))
            turn = jnp.where(jnp.abs(target) <= self.half_turn + 1e-6, 0,
                             jnp.where(target > 0, 1, 2))
            turn = jnp.where(carry.turned, 0, turn)
            return table[turn], carry.replace(turned=turn != 0)
        upwind_angle = jnp.arctan2(-obs[self.wind_indices[1]], -obs[self.wind_indices[0]])
        upwind = jnp.round(upwind_angle / (jnp.pi / 2)).astype(jnp.int32) % 4  # CCW index
        return table[(upwind + mode) % 4], carry
