"""Step-then-reset, written once (layer 2).

Every path that steps an env and starts a new episode where the old one
ended goes through this module: ``PlumeEnv.step`` (one env, the reset
computed speculatively so that the function stays ``vmap``-able),
``PlumeEnv.step_batch`` and the Gymnasium / SB3 batch adapters (a batch,
the reset computed only for the envs that ended). Each caller brings its
own key stream: ``key_step`` drives the transition, ``key_reset`` the
reset (``PlumeEnv.step`` passes one key as both; its transition and reset
draw from disjoint ``fold_in`` indices).

The functions take the env as an argument and use only its
``step_env``, ``episode_done`` and ``auto_reset`` methods, so a
multi-agent env (whose episode ends on ``info["done"]``) goes through the
same code.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.errors import ValidationError


class Transition(NamedTuple):
    """What a step returns, in gymnax's order.

    ``obs`` and ``state`` describe the env after the step (a fresh episode
    where one ended); ``reward``, ``terminated``, ``truncated`` and ``info``
    (with ``info["final_observation"]``) describe the step itself. With a
    leading batch axis on every leaf for the batch functions.
    """

    obs: Any
    state: Any
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    info: dict[str, Any]


def ended_step_info(info: dict[str, Any], terminated: jax.Array, truncated: jax.Array,
                    final_observation: Any) -> dict[str, Any]:
    """``info`` of an auto-resetting step: what describes the step that
    ended the old episode."""
    return {**info, "terminated": terminated, "truncated": truncated,
            "final_observation": final_observation}


def reset_if(env: Any, done: jax.Array, key: jax.Array, obs: Any, state: Any,
             params: Any) -> tuple[Any, Any]:
    """One env: ``(obs, state)`` of a fresh episode (``env.auto_reset``) where
    ``done`` (bool[]), else ``(obs, state)`` unchanged. The reset is computed
    either way (a select, not a branch), so this ``vmap``s."""
    obs_re, state_re = env.auto_reset(key, state, params)
    return (jax.tree.map(lambda r, s: jnp.where(done, r, s), obs_re, obs),
            jax.tree.map(lambda r, s: jnp.where(done, r, s), state_re, state))


def step_then_reset(env: Any, key_step: jax.Array, key_reset: jax.Array, state: Any,
                    action: Any, params: Any) -> Transition:
    """One env's step with gymnax-style auto-reset (speculative: ``vmap``-able)."""
    obs, stepped, reward, terminated, truncated, info = env.step_env(key_step, state, action,
                                                                     params)
    done = env.episode_done(terminated, truncated, info)
    obs_next, state_next = reset_if(env, done, key_reset, obs, stepped, params)
    return Transition(obs_next, state_next, reward, terminated, truncated,
                      ended_step_info(info, terminated, truncated, obs))


def default_max_resets(num_envs: int) -> int:
    """The default reset pool of a batch of ``num_envs``: ``max(1, num_envs // 16)``."""
    return max(1, num_envs // 16)


def check_max_resets(max_resets: Any, num_envs: int) -> int:
    """``max_resets`` (None: the default) as an int in ``1..num_envs``, or
    ``ValidationError``."""
    if max_resets is None:
        return default_max_resets(num_envs)
    if isinstance(max_resets, (bool, np.bool_)) or not isinstance(max_resets, (int, np.integer)) \
            or not 1 <= max_resets <= num_envs:
        raise ValidationError.for_parameter(
            "max_resets", max_resets, f"an integer in 1..{num_envs} (the batch size)")
    return int(max_resets)


def reset_where(env: Any, done: jax.Array, keys: jax.Array, obs: Any, state: Any, params: Any,
                max_resets: int) -> tuple[Any, Any]:
    """A batch: ``vmap(reset_if)``, but the reset computed only for the envs
    that are ``done`` (bool[N]).

    At most ``max_resets`` (static, ``1..N``) ended envs are gathered, reset
    with their keys and scattered back; each gets what ``reset_if`` would
    give it. If more envs are done, a ``lax.cond`` falls back to resetting
    the whole batch. Under an outer ``vmap`` the ``cond`` becomes a select
    that computes both branches: use ``vmap(reset_if)`` there.
    """
    num_envs = done.shape[0]

    def reset_all(_):
        return jax.vmap(functools.partial(reset_if, env), in_axes=(0, 0, 0, 0, None))(
            done, keys, obs, state, params)

    # a pool of one lets XLA compile the reset unbatched, whose float
    # rounding can differ from the batched program's: keep it batched
    pool = min(max(2, max_resets), num_envs)

    def reset_ended(_):
        # the ended envs' indices, padded with num_envs (dropped on scatter)
        idx = jnp.nonzero(done, size=pool, fill_value=num_envs)[0]
        take = jnp.minimum(idx, num_envs - 1)
        gathered = jax.tree.map(lambda x: x[take], state)
        obs_re, state_re = jax.vmap(env.auto_reset, in_axes=(0, 0, None))(keys[take], gathered,
                                                                          params)

        def put(full, part):
            return full.at[idx].set(part, mode="drop")

        def put_state(full, before, after):
            # a leaf the reset passes through unchanged (e.g. a Poisson
            # plume's posterior table) is neither gathered nor scattered
            return full if after is before else put(full, after)

        return (jax.tree.map(put, obs, obs_re),
                jax.tree.map(put_state, state, gathered, state_re))

    return jax.lax.cond(jnp.sum(done) > max_resets, reset_all, reset_ended, None)


def step_then_reset_batch(env: Any, keys_step: jax.Array, keys_reset: jax.Array, state: Any,
                          action: Any, params: Any, max_resets: int | None = None) -> Transition:
    """A batch's step with auto-reset: what ``vmap(step_then_reset)`` returns
    (keys, states, counts and flags exactly; floats up to rounding, as XLA
    may compile the reset of a smaller batch with another reduction order),
    the reset computed only for the envs that ended (:func:`reset_where`).

    Args:
        keys_step, keys_reset: key[N] each, one per env.
        state, action: batches (leading axis N).
        params: shared by the batch (not batched).
        max_resets: static; the reset pool, ``1..N``; default ``max(1, N // 16)``.
    """
    max_resets = check_max_resets(max_resets, keys_step.shape[0])
    obs, stepped, reward, terminated, truncated, info = jax.vmap(
        env.step_env, in_axes=(0, 0, 0, None))(keys_step, state, action, params)
    done = jax.vmap(env.episode_done)(terminated, truncated, info)
    obs_next, state_next = reset_where(env, done, keys_reset, obs, stepped, params, max_resets)
    return Transition(obs_next, state_next, reward, terminated, truncated,
                      ended_step_info(info, terminated, truncated, obs))
