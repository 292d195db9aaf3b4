"""Observation preprocessing: an optional log transform and running mean /
variance normalisation (merged batch-wise with the parallel-variance formula
of Chan, Golub & LeVeque)."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from plume_jax.core.pytree import Pytree

#: Normalised observations are clipped to ``[-CLIP, CLIP]``.
CLIP = 10.0
#: Added to the variance before the square root.
EPS = 1e-8


@chex.dataclass(frozen=True)
class ObsStats(Pytree):
    """Running statistics of (transformed) observations.

    Attributes: mean f32[D]; var f32[D]; count f32[] (starts at a tiny
    positive pseudo-count so the first merge is well defined).
    """

    mean: jax.Array
    var: jax.Array
    count: jax.Array

    @classmethod
    def create(cls, dim: int) -> "ObsStats":
        return cls(mean=jnp.zeros(dim, jnp.float32), var=jnp.ones(dim, jnp.float32),
                   count=jnp.asarray(1e-4, jnp.float32))

    def update(self, batch: jax.Array) -> "ObsStats":
        """Merge a batch f32[..., D] into the statistics."""
        x = jnp.reshape(batch, (-1, batch.shape[-1])).astype(jnp.float32)
        b_mean = jnp.mean(x, axis=0)
        b_var = jnp.var(x, axis=0)
        b_count = jnp.asarray(x.shape[0], jnp.float32)
        total = self.count + b_count
        delta = b_mean - self.mean
        mean = self.mean + delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + jnp.square(delta) * self.count * b_count / total
        return ObsStats(mean=mean, var=m2 / total, count=total)


def transform(obs: jax.Array, kind: str, log_eps: float) -> jax.Array:
    """Apply the observation transform ``kind`` element-wise: ``none``, or
    ``log``: ``log(max(obs, 0) + log_eps)`` (for non-negative readings such
    as concentrations, whose informative differences span decades)."""
    obs = jnp.asarray(obs, jnp.float32)
    if kind == "log":
        return jnp.log(jnp.maximum(obs, 0.0) + log_eps)
    return obs


def normalize(obs: jax.Array, stats: ObsStats | None) -> jax.Array:
    """``clip((obs - mean) / sqrt(var + EPS), -CLIP, CLIP)``, or ``obs``
    unchanged when ``stats`` is None."""
    if stats is None:
        return obs
    return jnp.clip((obs - stats.mean) / jnp.sqrt(stats.var + EPS), -CLIP, CLIP)
