"""Batch rollouts: ``num_envs`` seeded episodes of a functional policy in one
jitted ``lax.scan`` over vmapped ``env.step``.

Success and episode lengths come from the env's own step outputs
(``terminated``, ``truncated``, ``info["step_count"]``), never from a
re-implementation of the goal test. Each env runs ``num_steps`` steps; the
*first* episode of each env is the one reported (later auto-reset episodes
still count towards throughput). Policy memory is re-initialised whenever an
episode ends.
"""

from __future__ import annotations

import functools
from typing import Any

import chex
import jax
import jax.numpy as jnp

from plume_jax.types import AgentState


@chex.dataclass(frozen=True)
class RolloutResult:
    """Per-env outcome of the first episode, and env 0's path.

    Attributes:
        success: bool[N], the first episode ended by reaching the goal.
        finished: bool[N], the first episode ended within ``num_steps``.
        episode_length: i32[N], steps of the first episode (``num_steps`` if
            it did not finish).
        episode_return: f32[N], return of the first episode (so far, if it
            did not finish).
        trajectory: f32[num_steps + 1, 2], env 0's positions from the start
            of its first episode (row 0) onwards.
        trajectory_valid: bool[num_steps + 1], rows that belong to env 0's
            first episode.
        final_agent: env 0's agent at the end of its first episode.
        final_plume: env 0's plume state at the end of its first episode.
    """

    success: jax.Array
    finished: jax.Array
    episode_length: jax.Array
    episode_return: jax.Array
    trajectory: jax.Array
    trajectory_valid: jax.Array
    final_agent: Any
    final_plume: Any


def _select(mask: jax.Array, new: Any, old: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(mask, a, b), new, old)


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_envs", "num_steps"))
def rollout(env: Any, params: Any, policy: Any, key: jax.Array, num_envs: int,
            num_steps: int) -> RolloutResult:
    """Run ``num_envs`` envs for ``num_steps`` steps under ``policy``.

    Args:
        env: a ``PlumeEnv`` (static).
        params: ``EnvParams`` shared by all envs.
        policy: a hashable functional policy (``init(key)``,
            ``act(carry, obs, key) -> (action, carry)``).
        key: PRNG key; the same key gives bit-identical results.
        num_envs, num_steps: static sizes.
    """
    k_reset, k_policy, k_run = jax.random.split(key, 3)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, num_envs), params)
    carry = jax.vmap(policy.init)(jax.random.split(k_policy, num_envs))
    zeros_b = jnp.zeros(num_envs, bool)
    init = {
        "obs": obs, "state": state, "carry": carry,
        "done": zeros_b, "success": zeros_b,
        "length": jnp.full(num_envs, num_steps, jnp.int32),
        "ret": jnp.zeros(num_envs, jnp.float32),
        "final_agent": jax.tree.map(lambda x: x[0], state.agent),
        "final_plume": jax.tree.map(lambda x: x[0], state.plume),
    }

    def body(c, step_key):
        k_act, k_step, k_init = jax.random.split(step_key, 3)
        action, carry = jax.vmap(policy.act)(c["carry"], c["obs"], jax.random.split(k_act, num_envs))
        obs, state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(jax.random.split(k_step, num_envs), c["state"],
                                               action, params)
        ended = terminated | truncated
        first_end = ended & ~c["done"]
        fresh = jax.vmap(policy.init)(jax.random.split(k_init, num_envs))
        in_first = ~c["done"][0]  # env 0 was still in its first episode at this step
        env0_agent = AgentState(position=info["agent_xy"][0], heading=info["agent_heading"][0])
        out = {
            "obs": obs, "state": state,
            "carry": _select(ended, fresh, carry),
            "done": c["done"] | ended,
            "success": c["success"] | (first_end & terminated),
            "length": jnp.where(first_end, info["step_count"], c["length"]),
            "ret": jnp.where(c["done"], c["ret"], c["ret"] + reward),
            "final_agent": _select(in_first, env0_agent, c["final_agent"]),
            "final_plume": _select(in_first, jax.tree.map(lambda x: x[0], state.plume),
                                   c["final_plume"]),
        }
        return out, (info["agent_xy"][0], ~c["done"][0])

    final, (path, valid) = jax.lax.scan(body, init, jax.random.split(k_run, num_steps))
    start = state.agent.position[0]
    return RolloutResult(
        success=final["success"],
        finished=final["done"],
        episode_length=final["length"],
        episode_return=final["ret"],
        trajectory=jnp.concatenate([start[None], path], axis=0),
        trajectory_valid=jnp.concatenate([jnp.ones(1, bool), valid], axis=0),
        final_agent=final["final_agent"],
        final_plume=final["final_plume"],
    )
