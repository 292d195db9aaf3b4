"""Step-then-reset, written once (layer 0: it takes the env as an argument,
so the envs of layer 2 and the adapters of layer 3 import it, not the reverse).

Every path that steps an env and starts a new episode where the old one
ended goes through this module: ``PlumeEnv.step`` (one env; under ``vmap``
a batch), ``PlumeEnv.step_batch``, ``SharedPlumeBatch.step`` and the Gymnasium /
SB3 batch adapters.
Each caller brings its own key stream: ``key_step`` drives the transition,
``key_reset`` the reset (``PlumeEnv.step`` passes one key as both; its
transition and reset draw from disjoint ``fold_in`` indices).

Two ways to reset, with the same results (keys, states, counts and flags
exactly; floats up to rounding):

- speculative (:func:`step_then_reset`, :func:`reset_if`): one env's
  reset is computed on every step and selected where the episode ended.
  Under a plain ``vmap`` that computes a fresh start for every env on
  every step, which is half or more of a cheap plume's step.
- only what ended (:func:`step_then_reset_batch`, :func:`reset_where`): a
  batch's reset is computed for the envs that ended (gathered, reset,
  scattered back).

:func:`vmappable_step` joins them: one env's step that is speculative
when called alone and becomes :func:`step_then_reset_batch` under
``jax.vmap`` (a ``jax.custom_batching.custom_vmap`` rule), also under a
further ``vmap`` (a sweep over params), whose two batch axes it flattens
into one batch (each env then carries its member's params). This is what
``PlumeEnv.step`` is, so ``vmap(env.step)`` — the gymnax idiom — resets
only what ended.

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
from jax import custom_batching

from plume_jax.core.errors import ValidationError


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
                max_resets: int, params_batched: bool = False) -> tuple[Any, Any]:
    """A batch: ``vmap(reset_if)``, but the reset computed only for the envs
    that are ``done`` (bool[N]).

    At most ``max_resets`` (static, ``1..N``) ended envs are gathered, reset
    with their keys and scattered back; each gets what ``reset_if`` would
    give it. If more envs are done, a ``lax.cond`` falls back to resetting
    the whole batch. Under an outer ``vmap`` the ``cond`` becomes a select
    that computes both branches: use ``vmap(reset_if)`` there, or
    :func:`vmappable_step`, which flattens the outer axis into the batch.

    ``params_batched`` (static): ``params`` has a leading axis N (one
    params per env) instead of being shared by the batch.
    """
    num_envs = done.shape[0]
    params_axis = 0 if params_batched else None

    def reset_all(_):
        return jax.vmap(functools.partial(reset_if, env), in_axes=(0, 0, 0, 0, params_axis))(
            done, keys, obs, state, params)

    # a pool of one lets XLA compile the reset unbatched, whose float
    # rounding can differ from the batched program's: keep it batched
    pool = min(max(2, max_resets), num_envs)

    def reset_ended(_):
        # the ended envs' indices, padded with num_envs (dropped on scatter)
        idx = jnp.nonzero(done, size=pool, fill_value=num_envs)[0]
        take = jnp.minimum(idx, num_envs - 1)
        gathered = jax.tree.map(lambda x: x[take], state)
        taken_params = jax.tree.map(lambda x: x[take], params) if params_batched else params
        obs_re, state_re = jax.vmap(env.auto_reset, in_axes=(0, 0, params_axis))(
            keys[take], gathered, taken_params)

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
                          action: Any, params: Any, max_resets: int | None = None,
                          params_batched: bool = False) -> Transition:
    """A batch's step with auto-reset: what ``vmap(step_then_reset)`` returns
    (keys, states, counts and flags exactly; floats up to rounding, as XLA
    may compile the reset of a smaller batch with another reduction order),
    the reset computed only for the envs that ended (:func:`reset_where`).

    Args:
        keys_step: key[N], one per env, for the step.
        keys_reset: key[N], one per env, for the reset.
        state: a batch of states (leading axis N).
        action: a batch of actions (leading axis N).
        params: shared by the batch, or (``params_batched``) one per env.
        max_resets: static; the reset pool, ``1..N``; default ``max(1, N // 16)``.
        params_batched: static; whether ``params`` has the leading axis N.
    """
    max_resets = check_max_resets(max_resets, keys_step.shape[0])
    params_axis = 0 if params_batched else None
    obs, stepped, reward, terminated, truncated, info = jax.vmap(
        env.step_env, in_axes=(0, 0, 0, params_axis))(keys_step, state, action, params)
    done = jax.vmap(env.episode_done)(terminated, truncated, info)
    obs_next, state_next = reset_where(env, done, keys_reset, obs, stepped, params, max_resets,
                                       params_batched)
    return Transition(obs_next, state_next, reward, terminated, truncated,
                      ended_step_info(info, terminated, truncated, obs))


# -- vmap(env.step) resets only what ended -----------------------------------------


def _broadcast_unbatched(tree: Any, batched: Any, size: int) -> Any:
    """Every leaf of ``tree`` with a leading axis ``size``: the leaves whose
    ``batched`` flag is False are broadcast to it."""
    return jax.tree.map(
        lambda x, b: x if b else jnp.broadcast_to(x, (size,) + jnp.shape(x)), tree, batched)


def _all_batched(tree: Any) -> Any:
    return jax.tree.map(lambda _: True, tree)


def vmappable_step(env: Any) -> Any:
    """``step(key, state, action, params) -> Transition``: one env's step
    with auto-reset (:func:`step_then_reset`, one key for both) that resets
    only what ended when ``vmap``ped.

    Called on one env it is :func:`step_then_reset`. Under ``jax.vmap``
    (any ``in_axes``; unbatched keys, states or actions are broadcast) it
    is :func:`step_then_reset_batch` with the default reset pool, with
    ``params`` shared or (when the vmap batches them) one per env. Under a
    further ``vmap`` (e.g. a vmapped sweep) the outer axis is flattened into
    the batch, so the sweep's resets, too, are computed only for the envs
    that ended. The results are ``vmap(step_then_reset)``'s: keys, states,
    counts and flags exactly, floats up to rounding.

    Differentiable: the ``custom_vmap`` function (which JAX cannot
    linearise, so ``jax.grad`` of it alone fails) is wrapped in a
    ``jax.custom_jvp`` whose derivative rule is the JVP of
    :func:`step_then_reset`, the function it computes. ``jax.grad`` /
    ``jax.jvp`` (also under ``vmap``) therefore differentiate the
    speculative step, while a plain call or ``vmap`` without differentiation
    runs the ``custom_vmap`` path unchanged. What the derivative holds is
    the env's business (gymnax's convention: ``PlumeEnv`` detaches the
    transition's observation and state unless built with
    ``with_transition_gradients()``).
    """

    @custom_batching.custom_vmap
    def fast(key, state, action, params):
        return step_then_reset(env, key, key, state, action, params)

    @jax.custom_jvp
    def step(key, state, action, params):
        return fast(key, state, action, params)

    @step.defjvp
    def step_jvp(primals, tangents):
        def speculative(key, state, action, params):
            return step_then_reset(env, key, key, state, action, params)

        return jax.jvp(speculative, primals, tangents)

    @fast.def_vmap
    def batched_rule(axis_size, in_batched, key, state, action, params):
        key_b, state_b, action_b, params_b = in_batched
        key, state, action = (_broadcast_unbatched(x, b, axis_size) for x, b in
                              ((key, key_b), (state, state_b), (action, action_b)))
        params_batched = any(jax.tree.leaves(params_b))
        if params_batched:
            params = _broadcast_unbatched(params, params_b, axis_size)
        out = _batch_step(env, params_batched)(key, state, action, params)
        return out, _all_batched(out)

    return step


def _batch_step(env: Any, params_batched: bool) -> Any:
    """:func:`step_then_reset_batch` (one key per env for both streams, the
    default pool) as a ``custom_vmap`` function whose own ``vmap`` rule
    flattens the new outer axis into the batch, so nested ``vmap``s of
    :func:`vmappable_step` stay one batch that resets only what ended."""

    @custom_batching.custom_vmap
    def run(keys, state, action, params):
        return step_then_reset_batch(env, keys, keys, state, action, params,
                                     params_batched=params_batched)

    @run.def_vmap
    def flattened_rule(axis_size, in_batched, keys, state, action, params):
        key_b, state_b, action_b, params_b = in_batched
        keys, state, action = (_broadcast_unbatched(x, b, axis_size) for x, b in
                               ((keys, key_b), (state, state_b), (action, action_b)))
        num_envs = jax.tree.leaves(keys)[0].shape[1]

        def flat(x):
            return jnp.reshape(x, (axis_size * num_envs,) + jnp.shape(x)[2:])

        outer_params = any(jax.tree.leaves(params_b))
        if params_batched:        # [N, ...] or [outer, N, ...]: one per env
            params = jax.tree.map(flat, _broadcast_unbatched(params, params_b, axis_size))
        elif outer_params:        # [outer, ...]: each member's params for its N envs
            params = jax.tree.map(lambda x: jnp.repeat(x, num_envs, axis=0),
                                  _broadcast_unbatched(params, params_b, axis_size))
        out = _batch_step(env, params_batched or outer_params)(
            *(jax.tree.map(flat, x) for x in (keys, state, action)), params)
        out = jax.tree.map(
            lambda x: jnp.reshape(x, (axis_size, num_envs) + jnp.shape(x)[1:]), out)
        return out, _all_batched(out)

    return run
