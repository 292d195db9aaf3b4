"""Starts in the plume, placed by quantiles of its puffs (Singh et al. 2023's
``loc_algo='quantile'``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.core.types import AgentState, Grid, PlumeProbe
from plume_jax.settings import MAX_LENGTH, angle, boolean, integer, real, setting
from plume_jax.starts.base import StartDistribution
from plume_jax.starts.candidates import any_heading_start, check_snap

#: The quantile step below ``q`` that sets the along-wind spread (theirs: 0.1).
QUANTILE_STEP = 0.1
#: The lower cross-wind quantile that sets the cross-wind spread (theirs: 0.05).
CROSS_QUANTILE = 0.05


@chex.dataclass(frozen=True)
class PuffQuantileParams(Pytree):
    """Attributes (f32[]):
        q_low, q_high: the quantile ``q ~ U(q_low, q_high)`` of the sampled
            puffs' downwind distance at which the start lies (their
            ``diff_min``, ``diff_max``).
        spread: the Gaussian spread around that point, as a multiple of the
            puffs' own spread there (their ``qvar``; 0 starts on the point).
        max_cross_spread: cells, the cap on the cross-wind spread (theirs 1 m).
        direction: radians, the downwind axis the quantiles are taken along
            (0: the grid's +x, their plumes' axis).
    """

    q_low: jax.Array = setting(0.4, real(low=QUANTILE_STEP, high=1.0), at_most="q_high",
                               doc=f"lowest quantile of the puffs' downwind distance, in "
                                   f"[{QUANTILE_STEP:g}, 1]")
    q_high: jax.Array = setting(0.8, real(low=QUANTILE_STEP, high=1.0),
                                doc=f"highest quantile of the puffs' downwind distance, in "
                                    f"[{QUANTILE_STEP:g}, 1]")
    spread: jax.Array = setting(0.5, real(low=0.0, high=MAX_LENGTH),
                                doc="Gaussian spread around the quantile point, in units of the "
                                    f"puffs' own spread there (their qvar), in [0, {MAX_LENGTH:g}]")
    max_cross_spread: jax.Array = setting(1.0, real(low=0.0, high=MAX_LENGTH),
                                          doc="cap on the cross-wind spread, cells, in "
                                              f"[0, {MAX_LENGTH:g}]")
    direction: jax.Array = setting(0.0, angle(),
                                   doc="downwind axis of the quantiles, radians (0: +x)")


def masked_quantile(values: jax.Array, mask: jax.Array, q: jax.Array) -> jax.Array:
    """f32[]: the ``q``-quantile of ``values[mask]`` (f32[N], bool[N]) with
    linear interpolation between order statistics (NumPy's and pandas'
    default); NaN when ``mask`` selects nothing."""
    n = jnp.sum(mask.astype(jnp.int32))
    ordered = jnp.sort(jnp.where(mask, values, jnp.inf))
    position = jnp.clip(q, 0.0, 1.0) * jnp.maximum(n - 1, 0).astype(jnp.float32)
    lo = jnp.floor(position).astype(jnp.int32)
    hi = jnp.minimum(lo + 1, jnp.maximum(n - 1, 0))
    low, high = ordered[lo], ordered[hi]
    value = low + (position - lo.astype(jnp.float32)) * (high - low)
    return jnp.where(n > 0, value, jnp.nan).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class PuffQuantileStart(StartDistribution[PuffQuantileParams]):
    """A start in the plume where its puffs are, heading uniform in ``[0, 2π)``.

    Singh et al. (2023)'s training starts (``loc_algo='quantile'``,
    ``plume_env.py``): of a random sample of at most ``max_puffs`` live puffs,
    with ``a`` a puff's downwind distance from the source along ``direction``
    and ``c`` its cross-wind offset,

    - ``q ~ U(q_low, q_high)``, ``A = quantile(a, q)``,
      ``σ_a = A - quantile(a, q - 0.1)``;
    - over the sampled puffs with ``|a - A| <= σ_a``: ``C = median(c)``,
      ``σ_c = min(max_cross_spread, C - quantile(c, 0.05))``;
    - the start is ``source + (A + spread σ_a n₁) d + (C + spread σ_c n₂) d⊥``
      with ``n₁, n₂ ~ N(0, 1)``.

    So the start follows the plume where it is now, also when the wind has
    turned since its puffs left the source (a switching wind), which a band
    along the wind at the source (``downwind_band``) does not. Without a live
    puff the point is ``goal_radius + 1`` cell down the axis; without a puff
    in the cross-wind band it is on the axis (``C = σ_c = 0``). Of
    ``candidates`` draws the first inside the grid and outside the goal
    region is used (see ``downwind_band``). Needs a plume made of puffs
    (``singh``, ``filament``); ``snap`` rounds to cells as ``downwind_band``.
    """

    max_puffs: int = setting(300, integer(low=1, high=65536),
                          doc="live puffs sampled for the quantiles (theirs 300), in [1, 65536]")
    snap: bool = setting(True, boolean(),
                         doc="round starts to the nearest cell (false: continuous positions, "
                             "for continuous action models)")
    candidates: int = setting(8, integer(low=1, high=1024),
                              doc="candidate points drawn per sample, in [1, 1024]")

    type_name = "puff_quantile"
    Params = PuffQuantileParams
    needs_puffs = True

    @classmethod
    def check_compatible(cls, grid: Grid, source: Any, goal_radius: float,
                         settings: dict[str, Any], on_grid: bool) -> None:
        """Snapped starts for on-cell action models."""
        check_snap(settings, on_grid)

    def sample_puffs(self, key: jax.Array, positions: jax.Array, live: jax.Array
                     ) -> tuple[jax.Array, jax.Array]:
        """``(positions f32[K, 2], live bool[K])``, ``K = min(max_puffs, P)``: a
        uniformly random subset of the live puffs (fewer live than ``K``:
        all of them, the rest of the rows marked not live)."""
        k = min(self.max_puffs, positions.shape[0])
        score = jnp.where(live, jax.random.uniform(key, live.shape, jnp.float32), 2.0)
        _, index = jax.lax.top_k(-score, k)
        return positions[index], live[index]

    def sample(self, key: jax.Array, grid: Grid, goal: jax.Array, goal_radius: jax.Array,
               params: PuffQuantileParams, probe: PlumeProbe | None = None) -> AgentState:
        if probe is None or probe.puffs is None:
            raise ValidationError.for_parameter(
                "start.type", self.type_name, "a start for a plume made of puffs (singh, "
                "filament): this one has none to place the agent by")
        k_sample, k_q, k_noise, k_heading = jax.random.split(key, 4)
        goal = jnp.asarray(goal, jnp.float32)
        positions, live = probe.puffs()
        positions, live = self.sample_puffs(k_sample, jnp.asarray(positions, jnp.float32),
                                            jnp.asarray(live, bool))
        theta = jnp.asarray(params.direction, jnp.float32)
        downwind = jnp.stack([jnp.cos(theta), jnp.sin(theta)])
        crosswind = jnp.stack([-jnp.sin(theta), jnp.cos(theta)])
        rel = positions - goal
        along, across = rel @ downwind, rel @ crosswind
        q = jax.random.uniform(k_q, (), jnp.float32, params.q_low, params.q_high)
        a_mean = masked_quantile(along, live, q)
        a_spread = a_mean - masked_quantile(along, live, q - QUANTILE_STEP)
        band = live & (jnp.abs(along - a_mean) <= a_spread)
        c_mean = masked_quantile(across, band, jnp.float32(0.5))
        c_spread = jnp.minimum(params.max_cross_spread,
                               c_mean - masked_quantile(across, band, jnp.float32(CROSS_QUANTILE)))
        no_puff = jnp.isnan(a_mean)
        a_mean = jnp.where(no_puff, goal_radius + 1.0, a_mean)
        a_spread = jnp.where(no_puff, 0.0, a_spread)
        no_band = jnp.isnan(c_mean)
        c_mean = jnp.where(no_band, 0.0, c_mean)
        c_spread = jnp.where(no_band, 0.0, c_spread)
        noise = jax.random.normal(k_noise, (self.candidates, 2), jnp.float32)
        a = a_mean + params.spread * a_spread * noise[:, 0]
        c = c_mean + params.spread * c_spread * noise[:, 1]
        points = goal + a[:, None] * downwind + c[:, None] * crosswind
        return any_heading_start(k_heading, points, self.snap, grid, goal, goal_radius)
