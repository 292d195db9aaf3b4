"""Bilateral chemotaxis (tropotaxis): steer toward the stronger of two antennae.

Decision rule (simultaneous left/right comparison; Fraenkel & Gunn 1940;
the bilateral "osmotropotaxis" of insects, Martin 1965; Duistermars et al.
2009 for flies): with ``cL``, ``cR`` the left and right antenna readings,

- if ``max(cL, cR) <= floor`` (no odour): keep going forward, turning to a
  random side with probability ``p_turn`` (a correlated random walk);
- else if ``|cL - cR| <= tol * (cL + cR)``: go forward (on the ridge);
- else turn toward the stronger side.

With oriented actions a turn does not move the agent, so after a turn the
next action is always ``forward`` (otherwise a 90° turn that swaps which
antenna is stronger would be undone by the next one, forever in place).

Two embodiments are supported, chosen from the env's action names:

- oriented actions (``forward``, ``turn_left``, ``turn_right``): used as is;
- absolute cardinal moves (``move_north`` ...): the policy keeps its own
  heading (the env points the agent along its last move) and "turn left"
  means a move 90° counter-clockwise of it. The first move is random, since
  the start heading is not observed.

Needs two observation entries ``antenna_0`` (left) and ``antenna_1``
(right), as the ``antennae`` sensor provides with ``count=2``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from agents.base import action_id, has_action, observation_index

from plume_jax.core.pytree import Pytree

# Cardinal moves in counter-clockwise order: index + 1 is a left turn.
CCW_MOVES = ("move_east", "move_north", "move_west", "move_south")


@chex.dataclass(frozen=True)
class ChemotaxisCarry(Pytree):
    """Attributes:
        heading: i32[], index into CCW_MOVES (cardinal mode).
        known: bool[], whether ``heading`` is known yet (cardinal mode).
        turned: bool[], the last action was an in-place turn (oriented mode).
    """

    heading: jax.Array
    known: jax.Array
    turned: jax.Array


@dataclasses.dataclass(frozen=True)
class BilateralChemotaxisPolicy:
    """Functional bilateral gradient climber.

    Attributes:
        left_index, right_index: observation indices of the two antennae.
        oriented: True for forward/turn actions, False for cardinal moves.
        action_table: oriented: ids of (forward, turn_left, turn_right);
            cardinal: ids of CCW_MOVES.
        floor: readings at or below this mean "no odour".
        tol: relative difference below which both sides count as equal.
        p_turn: turning probability while searching without odour.
    """

    left_index: int
    right_index: int
    oriented: bool
    action_table: tuple[int, ...]
    floor: float = 1e-6
    tol: float = 0.01
    p_turn: float = 0.2

    name = "chemotaxis"

    @classmethod
    def for_env(cls, env: Any, floor: float = 1e-6, tol: float = 0.01,
                p_turn: float = 0.2) -> "BilateralChemotaxisPolicy":
        left = observation_index(env, "antenna_0", agent=cls.name)
        right = observation_index(env, "antenna_1", agent=cls.name)
        oriented = has_action(env, "forward")
        names = ("forward", "turn_left", "turn_right") if oriented else CCW_MOVES
        table = tuple(action_id(env, n, agent=cls.name) for n in names)
        return cls(left, right, oriented, table, float(floor), float(tol), float(p_turn))

    def init(self, key: jax.Array) -> ChemotaxisCarry:
        return ChemotaxisCarry(heading=jax.random.randint(key, (), 0, 4),
                               known=jnp.asarray(False), turned=jnp.asarray(False))

    def steer(self, obs: jax.Array, key: jax.Array) -> jax.Array:
        """i32[]: -1 turn right, 0 forward, +1 turn left."""
        obs = jnp.asarray(obs, jnp.float32).reshape(-1)
        c_left, c_right = obs[self.left_index], obs[self.right_index]
        k_turn, k_side = jax.random.split(key)
        random_turn = jnp.where(jax.random.uniform(k_turn) < self.p_turn,
                                jnp.where(jax.random.bernoulli(k_side), 1, -1), 0)
        toward = jnp.where(c_left > c_right, 1, -1)
        ridge = jnp.abs(c_left - c_right) <= self.tol * (c_left + c_right)
        smelling = jnp.maximum(c_left, c_right) > self.floor
        return jnp.where(smelling, jnp.where(ridge, 0, toward), random_turn).astype(jnp.int32)

    def act(self, carry: ChemotaxisCarry, obs: jax.Array, key: jax.Array):
        turn = self.steer(obs, key)
        table = jnp.asarray(self.action_table, jnp.int32)
        if self.oriented:
            turn = jnp.where(carry.turned, 0, turn)
            action = table[jnp.asarray([0, 1, 2])[turn % 3]]  # 0 fwd, 1 left, -1 -> 2 right
            return action, carry.replace(turned=turn != 0)
        heading = jnp.where(carry.known, (carry.heading + turn) % 4, carry.heading)
        return table[heading], carry.replace(heading=heading, known=jnp.asarray(True))
