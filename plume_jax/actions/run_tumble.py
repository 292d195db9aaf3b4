"""Run-and-tumble: run straight ahead, or tumble to a random heading."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.actions.base import TWO_PI, NamedDiscreteActions, include_noop_setting, unit
from plume_jax.core.pytree import Pytree
from plume_jax.settings import MAX_LENGTH, real, setting
from plume_jax.core.types import AgentState, Grid, PlumeProbe


@chex.dataclass(frozen=True)
class RunTumbleParams(Pytree):
    """Attributes:
        run_length: f32[] > 0, cells travelled by one ``run``.
    """

    run_length: jax.Array = setting(1.0, real(low=0.0, high=MAX_LENGTH, low_inclusive=False),
                                    doc=f"cells travelled by one run, in (0, {MAX_LENGTH:g}]")


@dataclasses.dataclass(frozen=True)
class RunTumbleActions(NamedDiscreteActions[RunTumbleParams]):
    """Bacterial-style run and tumble (cf. Berg & Brown 1972).

    Action ids (fixed):

    ============  ===================================
    include_noop  action_names (id order)
    ============  ===================================
    True          noop, run, tumble
    False         run, tumble
    ============  ===================================

    - ``run``: move ``run_length`` cells along ``heading``; positions are
      continuous (not snapped to cells) and clamped into the grid. The
      heading is unchanged.
    - ``tumble``: a new heading drawn uniformly from ``[0, 2π)`` with the
      ``key`` passed to ``process_action`` (the only source of randomness,
      so equal keys give equal results); no movement.
    - ``noop`` and invalid actions leave the agent unchanged.
    """

    include_noop: bool = include_noop_setting()

    type_name = "run_tumble"
    modality = "orientation_relative"
    orientation_dependent = True
    Params = RunTumbleParams
    #: Positions are continuous.
    on_grid = False

    def moves(self) -> list[str]:
        return ["run", "tumble"]

    def process_action(self, key: jax.Array, action: Any, agent: AgentState, grid: Grid,
                       params: RunTumbleParams, probe: PlumeProbe | None = None) -> AgentState:
        """The agent after ``action``; pure, in-bounds, deterministic given
        ``key``. ``probe`` is unused."""
        _, one_hot = self._action_mask(action)
        new_heading = jax.random.uniform(key, (), jnp.float32, 0.0, TWO_PI)
        # uniform's upper bound is exclusive in exact arithmetic but float
        # rounding can reach it; fold it back into [0, 2π)
        new_heading = jnp.where(new_heading >= TWO_PI, 0.0, new_heading)
        heading = jnp.where(self._is("tumble", one_hot), new_heading, agent.heading)
        ran = grid.clamp(agent.position + params.run_length * unit(agent.heading))
        position = jnp.where(self._is("run", one_hot), ran, agent.position)
        return agent.replace(position=position.astype(jnp.float32),
                             heading=jnp.asarray(heading, jnp.float32))

    def metadata_extras(self) -> dict[str, Any]:
        return {"stochastic": True}
