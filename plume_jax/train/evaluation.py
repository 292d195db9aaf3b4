"""Evaluation of trained policies: the first episode of each of ``num_envs``
envs, run by the exported policy's own forward pass
(``agents.trained.policy_step``) in one jitted ``lax.scan`` over vmapped
``env.step``; the parameters are an argument, so a sweep evaluates all its
members in one ``vmap``. Success is the env's own goal test (``terminated``,
and ``info["goal_reached"]`` where reported). On a multi-agent env every
agent acts with its own carry (the network is shared) and the outcome is the
team's: the episode ended at the goal (the first arrival for
``done_mode="any"``, every agent for "all").
"""

from __future__ import annotations

import functools
import json
import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.agents_package import check_agents_package
from plume_jax.core.seeding import seed_key
from plume_jax.train.config import TrainConfig
from plume_jax.train.members import member_values, shared, vmap_members
from plume_jax.train.algorithms.base import num_agents_of

check_agents_package()
from agents.trained import initial_carry, policy_step  # noqa: E402  (after the check)

#: The most evaluation steps inherited from the env's ``max_steps`` when
#: ``eval.num_steps`` is null (an explicit ``eval.num_steps`` may go to 10**7).
MAX_INHERITED_EVAL_STEPS = 100_000

#: The spec keys the forward pass reads (the rest, e.g. env settings, is
#: informational and left out of the jit cache key).
_FORWARD_KEYS = ("format", "policy", "network", "discrete", "action_dim", "action_low",
                 "action_high", "obs_dim", "normalize_obs")


def episodes(env: Any, spec: dict, params: dict, env_params: Any, key: jax.Array,
             num_envs: int, num_steps: int, greedy: bool = True) -> dict[str, jax.Array]:
    """Pure (jit / vmap over ``params`` and ``env_params``): ``success``,
    ``finished``, ``length``, ``ret`` (summed over agents) of the first
    episode of each env; on a multi-agent env also ``first_arrival`` (its
    step, or ``num_steps`` if no agent arrived), ``arrivals`` (agents at the
    goal when it ended) and ``collisions`` (moves blocked by another agent)."""
    num_agents = num_agents_of(env)
    agents = () if num_agents is None else (num_agents,)
    k_reset, k_run = jax.random.split(key)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, num_envs),
                                                        env_params)
    carry0 = initial_carry(spec)
    carry = jax.tree.map(lambda x: jnp.broadcast_to(x, (num_envs,) + agents + x.shape), carry0)

    def act_one(carry, obs, key):
        if num_agents is None:
            return policy_step(spec, params, carry, obs, key, greedy)
        # every agent acts with its own carry and key fold_in(key, i), as PerAgentPolicy
        keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, jnp.arange(num_agents))
        return jax.vmap(lambda c, o, k: policy_step(spec, params, c, o, k, greedy))(
            carry, obs, keys)

    act = jax.vmap(act_one)
    zeros = jnp.zeros(num_envs, bool)
    never = jnp.full(num_envs, num_steps, jnp.int32)
    count = jnp.zeros(num_envs, jnp.int32)
    init = (obs, state, carry, zeros, zeros, never, jnp.zeros(num_envs, jnp.float32), never,
            count, count)

    def body(c, k):
        obs, state, carry, done, success, length, ret, first_arrival, arrivals, collisions = c
        k_act, k_step = jax.random.split(k)
        action, carry = act(carry, obs, jax.random.split(k_act, num_envs))
        obs, state, reward, term, trunc, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(k_step, num_envs), state, action, env_params)
        goal = term & jnp.asarray(info.get("goal_reached", term), bool)
        if num_agents is not None:
            ended = info["done"]
            goal = ended & ~jnp.any(trunc, axis=1) & jnp.any(goal, axis=1)
            reward = jnp.sum(reward, axis=1)
            step_arrivals = jnp.sum(term, axis=1, dtype=jnp.int32)
            blocked = jnp.sum(info["blocked"], axis=1, dtype=jnp.int32)
        else:
            ended = term | trunc
            step_arrivals = goal.astype(jnp.int32)
            blocked = jnp.zeros(num_envs, jnp.int32)
        running = ~done
        first = ended & running
        steps = info["step_count"] if "step_count" in info else 0
        ret = jnp.where(done, ret, ret + reward)
        arrived_now = running & (step_arrivals > 0) & (first_arrival == num_steps)
        return (obs, state, carry, done | ended, success | (first & goal),
                jnp.where(first, steps, length), ret,
                jnp.where(arrived_now, steps, first_arrival),
                jnp.where(running, step_arrivals, arrivals),
                jnp.where(running, collisions + blocked, collisions)), None

    (_, _, _, done, success, length, ret, first_arrival, arrivals, collisions), _ = \
        jax.lax.scan(body, init, jax.random.split(k_run, num_steps))
    out = {"success": success, "finished": done, "length": length, "ret": ret}
    if num_agents is not None:
        out.update(first_arrival=first_arrival, arrivals=arrivals, collisions=collisions)
    return out


@functools.partial(jax.jit, static_argnames=("env", "spec_key", "num_envs", "num_steps",
                                             "greedy", "batched"))
def _run(env, spec_key, params, env_params, key, num_envs, num_steps, greedy, batched):
    spec = json.loads(spec_key)
    fn = functools.partial(episodes, env, spec, num_envs=num_envs, num_steps=num_steps,
                           greedy=greedy)
    if batched:
        return vmap_members(lambda p, ep: fn(p, ep, key), params, env_params)
    return fn(params, env_params, key)


def _nanmean(x: np.ndarray) -> np.ndarray:
    """Mean over the last axis without NaNs; NaN (no warning) for a member
    whose every entry is NaN (no successful episode)."""
    count = np.sum(~np.isnan(x), axis=-1)
    total = np.nansum(x, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def evaluate(env: Any, spec: dict, params: dict, env_params: Any, seed: int, num_envs: int,
             num_steps: int, greedy: bool = True, batched: bool = False) -> dict[str, Any]:
    """Run :func:`episodes` (jitted; over a leading member axis of ``params``
    and ``env_params``, :mod:`plume_jax.train.members`, when ``batched``) and
    summarise: success rate, mean steps to goal of the successful episodes,
    mean return; on a multi-agent env the mean time to the first arrival, the
    agents at the goal when it ended and the blocked moves per episode."""
    t0 = time.perf_counter()
    spec_key = json.dumps({k: spec.get(k) for k in _FORWARD_KEYS}, sort_keys=True)
    out = jax.device_get(_run(env, spec_key, params, env_params, seed_key(seed), num_envs,
                              num_steps, greedy, batched))
    seconds = time.perf_counter() - t0
    success = np.asarray(out["success"])
    steps = np.where(success, np.asarray(out["length"]).astype(np.float64), np.nan)
    summary: dict[str, Any] = {
        "episodes": int(num_envs), "max_steps": int(num_steps), "seed": int(seed),
        "greedy": bool(greedy), "success_rate": success.mean(axis=-1),
        "successes": success.sum(axis=-1),
        "mean_steps_to_goal": _nanmean(steps) if success.any() else None,
        "mean_return": np.asarray(out["ret"]).mean(axis=-1), "seconds_incl_compile": seconds}
    if "first_arrival" in out:
        first = np.asarray(out["first_arrival"]).astype(np.float64)
        arrived = first < num_steps
        summary["mean_steps_to_first_arrival"] = (
            _nanmean(np.where(arrived, first, np.nan)) if arrived.any() else None)
        summary["first_arrival_rate"] = arrived.mean(axis=-1)
        summary["mean_arrivals"] = np.asarray(out["arrivals"]).mean(axis=-1)
        summary["mean_collisions"] = np.asarray(out["collisions"]).mean(axis=-1)
    return summary if batched else member_evaluation(summary, 0)


def eval_num_steps(cfg: TrainConfig, env_params: Any) -> int:
    """``eval.num_steps``, or the env's ``max_steps`` (the largest over a
    member axis) capped at :data:`MAX_INHERITED_EVAL_STEPS`."""
    return cfg.eval["num_steps"] or min(int(np.max(member_values(env_params.max_steps))),
                                        MAX_INHERITED_EVAL_STEPS)


def member_evaluation(evaluation: dict[str, Any], j: int) -> dict[str, Any]:
    """Member ``j``'s figures of a batched :func:`evaluate` (``j`` 0: of an
    unbatched one's arrays) as Python scalars; a mean no episode defines
    (``mean_steps_to_goal`` where none succeeded) is None."""
    def at(key: str) -> float:
        values = np.asarray(evaluation[key], np.float64).reshape(-1)
        return float(values[j] if values.size > 1 else values[0])

    def mean(key: str) -> float | None:
        value = None if evaluation[key] is None else at(key)
        return value if value is None or math.isfinite(value) else None

    out = {k: evaluation[k] for k in ("episodes", "max_steps", "seed", "greedy")}
    out.update(success_rate=at("success_rate"), successes=int(at("successes")),
               mean_steps_to_goal=mean("mean_steps_to_goal"), mean_return=at("mean_return"),
               seconds_incl_compile=evaluation["seconds_incl_compile"])
    for key in ("mean_steps_to_first_arrival", "first_arrival_rate", "mean_arrivals",
                "mean_collisions"):
        if key in evaluation:
            out[key] = mean(key)
    return out


def evaluate_in_lanes(env: Any, spec: dict, params: dict, env_params: Any, seed: int,
                      num_envs: int, num_steps: int, greedy: bool, lanes: int
                      ) -> dict[str, Any]:
    """:func:`evaluate` of one policy's ``params`` as ``lanes`` identical
    members (a run trained in ``run.lanes``, computed as its program's width
    computes it): lane 0's :func:`member_evaluation`."""
    stacked = {k: np.broadcast_to(np.asarray(v), (lanes, *np.shape(v))) for k, v in
               params.items()}
    return member_evaluation(evaluate(env, spec, stacked, shared(env_params), seed, num_envs,
                                      num_steps, greedy=greedy, batched=True), 0)
