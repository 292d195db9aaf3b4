"""Estimators over a rollout's discounted returns, for any algorithm that
learns a value from its own rollouts (layer 5): generalised advantage
estimation that keeps termination and truncation apart (:func:`gae`), and
rewards scaled by the running spread of the discounted return
(:func:`scale_rewards`, as VecNormalize does). Each takes the discount as an
argument (PPO passes ``algo.gamma``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from plume_jax.train.algorithms.normalize import EPS


def gae(rewards: jax.Array, values: jax.Array, terminated: jax.Array, truncated: jax.Array,
        final_values: jax.Array, last_value: jax.Array, discount: Any, lam: Any
        ) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation over a time-major rollout.

    A *terminated* step (a true terminal state) bootstraps nothing; a
    *truncated* one (a time limit, not part of the state) bootstraps from the
    value of the observation the episode was cut at, never from the
    auto-reset observation of the next episode. Either way the recursion
    stops there.

    Args:
        rewards, values, terminated, truncated, final_values: [T, ...];
            ``values[t]`` is ``V(obs_t)``; ``final_values[t]`` is the value of
            the observation an episode was cut at (read where ``truncated``).
        last_value: [...], ``V`` of the observation after the last step.
        discount, lam: γ and GAE λ (scalars, f32[] leaves allowed).

    Returns:
        ``(advantages, value_targets)``, both [T, ...], with
        ``δ_t = r_t + γ·B_t − V_t`` where the bootstrap ``B_t`` is 0 on
        termination, ``final_values[t]`` on truncation and ``V_{t+1}``
        otherwise, and ``A_t = δ_t + γλ·(1 − done_t)·A_{t+1}``.
    """
    done = jnp.logical_or(terminated, truncated)
    next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
    bootstrap = jnp.where(truncated, final_values, jnp.where(terminated, 0.0, next_values))
    deltas = rewards + discount * bootstrap - values
    decay = discount * lam * (1.0 - done.astype(jnp.float32))

    def body(next_adv, inp):
        delta, d = inp
        adv = delta + d * next_adv
        return adv, adv

    _, adv = jax.lax.scan(body, jnp.zeros_like(last_value), (deltas, decay), reverse=True)
    return adv, adv + values


#: Scaled rewards are clipped to ``[-REWARD_CLIP, REWARD_CLIP]`` (VecNormalize's ``clip_reward``).
REWARD_CLIP = 10.0


def scale_rewards(reward: jax.Array, done: jax.Array, scaling: Any, discount: Any
                  ) -> tuple[jax.Array, Any]:
    """One step of reward scaling by the spread of the discounted return (as
    baselines' and Stable-Baselines3's ``VecNormalize``): each row's return
    ``G <- discount G + r`` joins the running statistics, the reward is
    divided by their ``sqrt(var + EPS)`` and clipped to ``+-REWARD_CLIP``,
    and ``G`` restarts where the episode ended (``done`` bool[R]). The mean
    is not subtracted, so the sign of every reward is kept.

    ``scaling``: ``(return_stats, discounted_return f32[R])`` (an
    :class:`~plume_jax.train.algorithms.normalize.ObsStats` of one
    dimension), or None (no scaling: ``reward`` comes back as it is).
    Returns ``(scaled reward f32[R], new scaling)``.
    """
    if scaling is None:
        return reward, None
    stats, ret = scaling
    ret = ret * discount + reward
    stats = stats.update(ret[:, None])
    scaled = jnp.clip(reward / jnp.sqrt(stats.var[0] + EPS), -REWARD_CLIP, REWARD_CLIP)
    return scaled.astype(jnp.float32), (stats, jnp.where(done, 0.0, ret))


__all__ = ["REWARD_CLIP", "gae", "scale_rewards"]
