"""Continuous flight: forward air speed and turn rate, carried by the wind."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp

from plume_jax.actions.base import unit, wrap_angle
from plume_jax.actions.continuous import ContinuousActions
from plume_jax.core.spaces import Box
from plume_jax.core.types import AgentState, Grid, NoParams, PlumeProbe


@dataclasses.dataclass(frozen=True)
class FlightActions(ContinuousActions):
    """A flier's normalised ``Box`` action ``(thrust, turn)`` in ``[-1, 1]^2``
    (Singh et al. 2023), on the settings of ``continuous``; the agent flies
    through the air, so the wind carries it.

    ``forward_speed = min_speed + (thrust + 1) / 2 (max_speed - min_speed)``
    and ``turn_rate = turn max_turn_rate``. One step turns first, then moves by
    its air velocity plus the wind at its position (read through
    ``probe.wind``, cells per step): ``heading' = wrap(heading + turn_rate)``,
    ``position' = clamp(position + forward_speed (cos heading', sin heading') + wind)``.
    An invalid action leaves the agent unchanged (as ``continuous``);
    ``rest_action`` ``(-1, 0)`` flies at ``min_speed`` without turning.

    Their setting, 1 cell = 1 m and 0.04 s steps: ``max_speed`` 0.08
    (2.0 m/s, their code; the paper says 2.5 m/s), ``max_turn_rate`` 0.3927
    (their turn ``6.25 pi (a - 1/2)`` rad/s for ``a`` in [0, 1]); their
    action ``(move, turn)`` in [0, 1]^2 is ``((thrust + 1) / 2, (turn + 1) / 2)``
    (their ``rescale`` mapping, ``plume_env.py:511-515``).
    """

    type_name = "flight"
    #: The wind moves the agent whatever it does.
    carried_by_wind = True
    #: The action that adds no motion of the agent's own (at ``min_speed`` 0).
    rest_action = (-1.0, 0.0)
    action_components = ("thrust", "turn")

    @functools.cached_property
    def action_space(self) -> Box:
        """``Box(-1, 1, (2,))``."""
        return Box(low=(-1.0, -1.0), high=(1.0, 1.0), shape=(2,))

    def process_action(self, key: jax.Array, action: Any, agent: AgentState, grid: Grid,
                       params: NoParams, probe: PlumeProbe | None = None) -> AgentState:
        """The agent after ``action``; pure, deterministic, in-bounds. No
        probe: no wind."""
        thrust, turn = self._vector(action)
        valid = self.validate_action(action)
        speed = jnp.where(valid, self.min_speed + (thrust + 1.0) / 2.0
                          * (self.max_speed - self.min_speed), 0.0)
        turn = turn * self.max_turn_rate
        heading = jnp.where(valid, wrap_angle(agent.heading + turn), agent.heading)
        wind = (jnp.zeros(2, jnp.float32) if probe is None else
                jnp.reshape(jnp.asarray(probe.wind(agent.position), jnp.float32), (2,)))
        moved = agent.position + speed * unit(heading) + jnp.where(valid, wind, 0.0)
        position = grid.clamp(moved)
        return agent.replace(position=position.astype(jnp.float32),
                             heading=jnp.asarray(heading, jnp.float32))
