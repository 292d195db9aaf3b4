"""The exact posterior over the source cell of a Poisson plume (layer 1).

A searcher that reads Poisson hit classes (the ``hits`` sensor) from a
Poisson plume (``plume type "poisson"``) can keep the exact Bayesian
posterior ``p(s)`` over the source cell ``s``. This module holds what that
needs, shared by the ``belief`` sensor (``plume_jax/sensors/belief.py``)
and the infotaxis agents (``agents/infotaxis.py``), so that both keep the
same posterior, operation for operation:

- :func:`capped_poisson_table`: ``P(min(H, h_max - 1) = h)`` for
  ``H ~ Poisson(μ)``, in float64 (the hits sensor's classes);
- :func:`likelihood_tables`: the likelihood ``L_h(s - a)`` of every hit
  class for every offset of the source from the agent, from the plume's own
  ``hit_rate`` law (evaluated once, tabulated in float64, used in float32);
- :func:`likelihood_at`: the window of that table seen from one agent cell,
  ``f32[h_max, H, W]`` (entry ``[h, y, x]`` belongs to a source at ``(x, y)``);
- :func:`bayes_update`: ``p(s) <- p(s) L_h(s - a) / Σ p L_h``.

The likelihood is 0 for every class where ``|s - a| <= goal_radius``: the env
ends the episode there, so a step that continues is also the observation
"the source is not within the goal radius of ``a``" (otto's visited-cell
rule with the benchmarks' radius 0).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def plain_params(params: Any) -> tuple:
    """A chex params dataclass as a hashable ``((name, values), ...)`` of
    Python floats (a static description of a plume law)."""
    out = []
    for field in dataclasses.fields(params):
        value = np.asarray(getattr(params, field.name), np.float64).reshape(-1)
        out.append((field.name, tuple(float(v) for v in value)))
    return tuple(out)


def capped_poisson_table(mu: np.ndarray, h_max: int) -> np.ndarray:
    """f64[h_max, ...]: ``P(min(H, h_max - 1) = h)`` for ``H ~ Poisson(mu)``, in
    float64 (the hits sensor's classes). The capped class ``P(H >= h_max - 1)``
    is summed as a series where it is below 1/2 (no cancellation for small
    ``mu``) and taken as the complement of the head elsewhere."""
    mu = np.asarray(mu, np.float64)
    log_mu = np.log(np.maximum(mu, 1e-300))

    def term(k):
        if k == 0:
            return np.exp(-mu)
        return np.where(mu > 0, np.exp(-mu + k * log_mu - math.lgamma(k + 1)), 0.0)

    head = [term(k) for k in range(h_max - 1)]
    head_sum = np.sum(head, axis=0)
    series = np.zeros_like(mu)
    for k in range(h_max - 1, h_max + 199):  # used only where P(H >= h_max - 1) < 1/2
        series += term(k)
    tail = np.where(head_sum > 0.5, series, 1.0 - head_sum)
    return np.stack(head + [np.clip(tail, 0.0, 1.0)])


@functools.lru_cache(maxsize=32)
def likelihood_tables(plume: Any, plume_params: tuple, gain: float, h_max: int, width: int,
                      height: int, goal_radius: float) -> dict[str, np.ndarray]:
    """Tables over the source's offset from the agent, ``[dy + H-1, dx + W-1]``
    for ``s - a = (dx, dy)``, float32:

    - ``lik`` [h_max, 2H-1, 2W-1]: ``L_h = P(class h | s - a)``, zero inside
      the goal radius;
    - ``lik_log_lik``: ``L_h ln L_h`` (0 where ``L_h = 0``);
    - ``lik_dist``: ``L_h · |s - a|_1`` (Manhattan distance, cells);
    - ``inside`` [2H-1, 2W-1]: 1 where ``|s - a| <= goal_radius``.

    Args:
        plume: a Poisson plume component (its ``hit_rate`` is the law).
        plume_params: its params as :func:`plain_params` gives them.
        gain: the hits sensor's gain (mean hits per unit of ``hit_rate``).
        h_max: number of hit classes.
        width, height: grid size, cells.
        goal_radius: cells.

    ``μ`` comes from ``plume.hit_rate`` (float32); the class probabilities
    are computed from it in float64.
    """
    params_cls = type(plume).Params
    values = {name: np.asarray(v, np.float32) if len(v) > 1 else np.float32(v[0])
              for name, v in plume_params}
    dy, dx = np.meshgrid(np.arange(-(height - 1), height), np.arange(-(width - 1), width),
                         indexing="ij")
    offset = np.stack([dx, dy], axis=-1).astype(np.float32)  # source - agent
    with jax.ensure_compile_time_eval():
        params = params_cls(**{k: jnp.asarray(v) for k, v in values.items()})
        mu = np.asarray(jax.jit(plume.hit_rate)(jnp.asarray(-offset), params), np.float64)
    mu = gain * np.maximum(mu, 0.0)
    lik = capped_poisson_table(mu, h_max)
    inside = np.hypot(dx, dy) <= goal_radius
    lik[:, inside] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        lik_log_lik = np.where(lik > 0, lik * np.log(lik), 0.0)
    return {"lik": lik.astype(np.float32),
            "lik_log_lik": lik_log_lik.astype(np.float32),
            "lik_dist": (lik * (np.abs(dx) + np.abs(dy))).astype(np.float32),
            "inside": inside.astype(np.float32)}


def likelihood_at(lik: jax.Array, position: jax.Array) -> jax.Array:
    """f32[h_max, H, W]: the likelihood table ``lik`` f32[h_max, 2H-1, 2W-1]
    seen from the agent cell ``position`` i32[2] ``(x, y)``; entry ``[h, y, x]``
    is ``L_h`` for a source at cell ``(x, y)``."""
    h_max, height, width = lik.shape[0], (lik.shape[1] + 1) // 2, (lik.shape[2] + 1) // 2
    x, y = position[0], position[1]
    return jax.lax.dynamic_slice(lik, (0, height - 1 - y, width - 1 - x), (h_max, height, width))


def bayes_update(posterior: jax.Array, lik: jax.Array, hit_class: jax.Array) -> jax.Array:
    """f32[H, W]: ``posterior · lik[hit_class]``, normalised.

    Args:
        posterior: f32[H, W], probabilities ``[y, x]`` summing to 1.
        lik: f32[h_max, H, W], the likelihood seen from the agent's cell
            (:func:`likelihood_at`).
        hit_class: i32[], the class read there.

    If the reading is impossible under the model (its likelihood mass
    underflows), only "the source is not within the goal radius here" is
    applied (the cells where every class has likelihood 0 are removed); if
    nothing is left, the posterior becomes uniform over the other cells.
    """
    new = posterior * lik[hit_class]
    total = jnp.sum(new)

    def impossible(_):
        outside = (jnp.sum(lik, axis=0) > 0).astype(jnp.float32)
        fallback = posterior * outside
        fallback_total = jnp.sum(fallback)
        uniform = outside / jnp.maximum(jnp.sum(outside), 1.0)
        return jnp.where(fallback_total > 0, fallback / jnp.maximum(fallback_total, 1e-38),
                         uniform)

    return jax.lax.cond(total > 0, lambda _: new / total, impossible, None).astype(jnp.float32)


# -- the posterior centred on the agent (the belief sensor's view) ----------------------

def shift_centred(image: jax.Array, delta: Any) -> jax.Array:
    """f32[..., R, K]: an image centred on the agent (entry ``[j, i]`` at the
    offset ``(i - (K-1)/2, j - (R-1)/2)``) as seen after a move by ``delta``
    ``(dx, dy)`` (integers, may be traced): ``out[..., j, i] = image[..., j +
    dy, i + dx]``, 0 where that falls outside the window."""
    rows, cols = image.shape[-2:]
    dx, dy = delta[0], delta[1]
    j = jnp.arange(rows)[:, None] + dy
    i = jnp.arange(cols)[None, :] + dx
    inside = (j >= 0) & (j < rows) & (i >= 0) & (i < cols)
    return jnp.where(inside, jnp.roll(image, (-dy, -dx), axis=(-2, -1)), 0.0)


def predict_readings(belief: jax.Array, lik: jax.Array, delta: Any
                     ) -> tuple[jax.Array, jax.Array]:
    """What a move by ``delta`` ``(dx, dy)`` can lead to, from a posterior
    centred on the agent (the full window, aligned with ``lik``).

    Args:
        belief: f32[R, K], the posterior centred on the agent, ``R = 2H - 1``,
            ``K = 2W - 1`` (the belief sensor's full-window image).
        lik: f32[h_max, R, K], the likelihood over the source's offset
            (:func:`likelihood_tables`'s ``lik``).
        delta: the move, cells (integers, may be traced).

    Returns:
        ``(mass f32[h_max], posteriors f32[h_max, R, K])``: ``mass[h]`` is the
        probability that the source is not where the move leads and class
        ``h`` is read there (``1 - Σ mass`` is the probability of finding the
        source), ``posteriors[h]`` the posterior after that reading, centred
        on the new cell (0 where ``mass[h]`` is 0).
    """
    joint = shift_centred(belief, delta)[None] * lik
    mass = jnp.sum(joint, axis=(1, 2))
    return mass, joint / jnp.maximum(mass, 1e-30)[:, None, None]


def belief_summaries(belief: jax.Array) -> jax.Array:
    """f32[3] of a posterior centred on the agent (f32[R, K], the full
    window of an ``H x W`` grid: ``R = 2H - 1``, ``K = 2W - 1``): its entropy
    (bits, in ``[0, log2(H W)]``), its mean Manhattan distance from the agent
    (cells, in ``[0, H + W - 2]``), and the probability that the source is one
    move away (on one of the four neighbouring cells, in ``[0, 1]``); clipped
    into these bounds (:func:`summary_bounds`) against float rounding."""
    rows, cols = belief.shape
    j = jnp.abs(jnp.arange(rows) - (rows - 1) // 2)[:, None]
    i = jnp.abs(jnp.arange(cols) - (cols - 1) // 2)[None, :]
    distance = (i + j).astype(jnp.float32)
    positive = belief > 0
    p_log_p = jnp.where(positive, belief * jnp.log2(jnp.where(positive, belief, 1.0)), 0.0)
    out = jnp.stack([-jnp.sum(p_log_p), jnp.sum(belief * distance),
                     jnp.sum(jnp.where(distance == 1.0, belief, 0.0))])
    high = jnp.asarray(summary_bounds((rows + 1) // 2, (cols + 1) // 2), jnp.float32)
    return jnp.clip(out, 0.0, high).astype(jnp.float32)


def summary_bounds(height: int, width: int) -> tuple[float, float, float]:
    """Upper bounds of :func:`belief_summaries` on an ``height x width`` grid
    (the lower bounds are 0)."""
    return (float(np.float32(math.log2(height * width))), float(height + width - 2), 1.0)


def search_time_estimate(summaries: jax.Array) -> jax.Array:
    """f32[...]: ``D + 2^(H - 1) - 1/2`` from :func:`belief_summaries`
    f32[..., 3] (``H`` the entropy in bits, ``D`` the mean Manhattan
    distance): the estimate of the number of steps still needed that
    space-aware infotaxis is built on (Loisy & Eloy 2022, whose rule
    minimises the expected ``log2`` of it after the move)."""
    return summaries[..., 1] + jnp.exp2(summaries[..., 0] - 1.0) - 0.5


def compressed_estimate(estimate: jax.Array, scale: Any) -> jax.Array:
    """f32[...]: ``K ln(1 + E / K)`` of a search-time estimate ``E`` (steps,
    :func:`search_time_estimate`) for a scale ``K > 0`` (steps), ``E`` itself
    for ``K = 0``.

    ``E`` is exact once the source is known (entropy 0: ``E = D``) but grows as
    ``2^(H-1)`` with the entropy: about 190 steps for the uniform prior of the
    19x19 benchmark, whose searches take about 13. The compressed form keeps
    ``E`` where it is small (``K ln(1 + E/K) = E - E^2 / 2K + ...``) and grows
    only logarithmically where it is large, like the ``log2`` of space-aware
    infotaxis's rule; with ``K`` about 3 it is near the mean search time from
    the prior, so a value network only has to correct it by a few steps.
    ``scale`` may be a traced f32[] (``K = 0`` gives ``E``)."""
    scale = jnp.asarray(scale, jnp.float32)
    safe = jnp.where(scale > 0, scale, 1.0)
    return jnp.where(scale > 0, safe * jnp.log1p(jnp.maximum(estimate, 0.0) / safe), estimate)
