"""The plume interface (layer 1): what every plume model provides.

A plume is a frozen dataclass (static settings as fields) with pure,
jittable methods over its own state pytree and its ``Params`` (dynamic
settings). Units: grid cells and env steps; points are float32 ``(x, y)``
pairs, x east, y north; fields are indexed ``field[y, x]``.
"""

from __future__ import annotations

import abc
from typing import ClassVar, Generic, TypeVar

import jax
import jax.numpy as jnp

from plume_jax.settings import Configurable
from plume_jax.core.types import Grid, no_wind

ParamsT = TypeVar("ParamsT")
StateT = TypeVar("StateT")


def cell_centres(grid: Grid) -> jax.Array:
    """f32[H, W, 2], the ``(x, y)`` of every cell, indexed ``[y, x]``."""
    ys, xs = jnp.meshgrid(
        jnp.arange(grid.height, dtype=jnp.float32),
        jnp.arange(grid.width, dtype=jnp.float32),
        indexing="ij",
    )
    return jnp.stack([xs, ys], axis=-1)


class Plume(Configurable, abc.ABC, Generic[ParamsT, StateT]):
    """A plume model: ``Plume[Params, State]``.

    Required: :meth:`init`, :meth:`advance`, :meth:`concentration`,
    :meth:`source_location`. Optional, with defaults: :meth:`reinit`
    (``init``), :meth:`wind` (calm), :meth:`field` (``concentration`` at
    every cell centre), :meth:`sharing_conflict` (a reason, with the default
    ``reinit``). Sensors, wind-relative action models and start
    distributions never call a plume: they read it through the env's
    :class:`~plume_jax.core.types.PlumeProbe`. Optional too: :meth:`strayed`
    (never), the env's second way to end an episode, and :meth:`puff_centres`
    with ``has_puffs = True`` (a plume made of puffs: the probe's ``puffs``,
    which the ``puff_quantile`` start reads).
    """

    @abc.abstractmethod
    def init(self, key: jax.Array, params: ParamsT) -> StateT:
        """The plume state of a fresh plume (``reset``); may be expensive (a
        turbulent plume warms up here). ``key`` is the only randomness."""

    def reinit(self, key: jax.Array, plume_state: StateT, params: ParamsT) -> StateT:
        """The plume state for the next episode under auto-reset, computed
        inside ``step`` (on every step of an unbatched step, whose reset is
        speculative; for the envs that ended under ``vmap``), so it must be
        cheap. Default: :meth:`init` (right for plumes whose ``init`` is
        cheap; a dynamic plume keeps its developed state running instead)."""
        return self.init(key, params)

    def sharing_conflict(self) -> str | None:
        """Why one realisation of this plume cannot serve several agents
        whose episodes start at different steps
        (:mod:`plume_jax.envs.shared_plume`), or None when it can: it can when
        :meth:`reinit` keeps what an agent reads continuous (the source
        stays, the field does not jump), e.g. it only restarts a clock.
        Default: a reason, since the default :meth:`reinit` is a fresh
        :meth:`init`."""
        return ("its reinit is a fresh init (a new plume) at each episode start, which would "
                "replace the plume in the middle of the other agents' episodes")

    @abc.abstractmethod
    def advance(self, key: jax.Array, plume_state: StateT, params: ParamsT) -> StateT:
        """The plume state one env step later (same structure, shapes and dtypes)."""

    @abc.abstractmethod
    def concentration(self, plume_state: StateT, points: jax.Array, grid: Grid,
                      params: ParamsT) -> jax.Array:
        """f32[...]: the concentration at float points f32[..., 2] (cells),
        ``>= 0`` and 0 outside the grid."""

    def wind(self, plume_state: StateT, points: jax.Array, params: ParamsT) -> jax.Array:
        """f32[..., 2]: the air velocity ``(vx, vy)`` at points f32[..., 2],
        cells per step, pointing where the air moves toward. Default: calm
        (zeros)."""
        return no_wind(points)

    def field(self, plume_state: StateT, grid: Grid, params: ParamsT) -> jax.Array:
        """f32[H, W]: the concentration at every cell centre, ``field[y, x]``
        (rendering only). Default: :meth:`concentration` at
        :func:`cell_centres`."""
        return self.concentration(plume_state, cell_centres(grid), grid, params)

    @abc.abstractmethod
    def source_location(self, plume_state: StateT, params: ParamsT) -> jax.Array:
        """f32[2]: the source ``(x, y)``, cells (the goal of the search)."""

    #: Whether the plume is made of puffs (:meth:`puff_centres` returns them).
    has_puffs: ClassVar[bool] = False

    def puff_centres(self, plume_state: StateT, params: ParamsT
                     ) -> tuple[jax.Array, jax.Array] | None:
        """``(positions f32[P, 2], live bool[P])``: the puff centres (cells)
        and which slots hold a live puff, for a plume with ``has_puffs``;
        ``None`` (the default) for a plume without puffs. Read by starts that
        place the agent in the plume (``puff_quantile``)."""
        return None

    def strayed(self, plume_state: StateT, points: jax.Array, params: ParamsT) -> jax.Array:
        """bool[...]: whether an agent at points f32[..., 2] has strayed from
        the plume, which ends its episode (terminated, not at the goal).
        Default: never (all False); the Singh puff plume ends episodes
        farther than its ``stray_limit`` from every puff."""
        return jnp.zeros(jnp.shape(points)[:-1], bool)

