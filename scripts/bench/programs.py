"""The stepping programs the throughput benchmarks time: one jitted
``lax.scan`` of a step form over a batch of envs (``scripts/bench/throughput.py``,
``scripts/bench/adapters.py``, ``scripts/bench/roofline.py``)."""

from __future__ import annotations

import math
import time
from typing import Any

import jax
import jax.numpy as jnp

#: ``SharedPlumeBatch.step`` (plume_jax.envs.shared_plume): ``--agents-per-plume`` agents per plume.
SHARED_PLUME_FORM = "step_batch_shared"
STEP_FORMS = ("step", "step_speculative", "step_batch", "step_env", SHARED_PLUME_FORM)


def shared_plume_form(env: Any, params: Any, num_envs: int, agents_per_plume: int):
    """``(reset, step)`` of the ``step_batch_shared`` form: ``num_envs``
    single-agent episodes over ``num_envs / agents_per_plume`` plume
    realisations (:class:`plume_jax.envs.shared_plume.SharedPlumeBatch`);
    ``reset(key)`` gives its state, ``step(keys, state, actions)`` a
    :class:`~plume_jax.core.autoreset.Transition` with leading axis ``num_envs``."""
    from plume_jax.envs.shared_plume import SharedPlumeBatch

    batch = SharedPlumeBatch(env, agents_per_plume)

    def reset(key):
        return batch.reset(jax.random.split(key, num_envs), params)[1]

    def step(keys, state, actions):
        return batch.step(keys, state, actions, params)

    return reset, step


def scan_program(env: Any, params: Any, num_envs: int, num_steps: int, form: str = "step",
                 agents_per_plume: int = 1):
    """``(reset, run)``, jitted: ``reset(key)`` gives a batch of states;
    ``run(state, key)`` scans ``num_steps`` batch steps with uniformly random
    actions. ``form``: ``"step"``, ``vmap(env.step)`` (auto-reset on);
    ``"step_batch"``, ``env.step_batch`` (the same results, the reset computed
    only for the envs that ended; plume envs only); ``"step_env"``,
    ``vmap(env.step_env)``, the transition without the reset that ``step``
    computes speculatively on every step (episodes then run on past their
    end; only for measuring what the reset costs); ``"step_batch_shared"``,
    :func:`shared_plume_form` with ``agents_per_plume``. Only ``run`` is timed, so
    an explicit reset's cost (a filament plume's warm-up) is not counted as
    stepping.

    Every step's observation (summed), reward and episode ends, and the whole
    final state, are outputs, so XLA can drop none of the work a user's
    program would need (an earlier version returned only rewards and one
    state leaf, which let XLA remove the sensor reads and, for dynamic
    plumes, the plume update)."""
    space = env.actions.action_space if hasattr(env, "actions") else None
    num_agents = env.num_agents if getattr(env, "is_multi_agent", False) else None
    shape = (num_envs,) if num_agents is None else (num_envs, num_agents)

    def random_actions(key):
        """The same draw for every discrete env, ours and gymnax's reference."""
        if space is None or hasattr(space, "n"):
            n = env.action_space(params).n
            return jax.random.randint(key, shape, 0, n)
        keys = jax.random.split(key, math.prod(shape))
        return jax.vmap(space.sample)(keys).reshape(shape + tuple(space.shape))

    def reset(key):
        return jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, num_envs), params)[1]

    if form not in STEP_FORMS:
        raise ValueError(f"form must be one of {STEP_FORMS}, got {form!r}")
    if form == SHARED_PLUME_FORM:
        reset, shared_step = shared_plume_form(env, params, num_envs, agents_per_plume)

    def step(keys, state, actions):
        if form == SHARED_PLUME_FORM:
            return shared_step(keys, state, actions)
        if form == "step_batch":
            return env.step_batch(keys, state, actions, params)
        fn = {"step": env.step, "step_env": env.step_env,
              "step_speculative": getattr(env, "step_speculative", None)}[form]
        return jax.vmap(fn, in_axes=(0, 0, 0, None))(keys, state, actions, params)

    def run(state, key):
        def body(state, k):
            k_act, k_step = jax.random.split(k)
            actions = random_actions(k_act)
            out = step(jax.random.split(k_step, num_envs), state, actions)
            # (obs, state, reward, terminated, truncated, info), or gymnax's own
            # step_env: (obs, state, reward, done, info)
            obs, state, reward, ends = out[0], out[1], out[2], out[3]
            if len(out) == 6:
                ends = ends | out[4]
            obs_sum = sum(jnp.sum(leaf) for leaf in jax.tree.leaves(obs))
            return state, (reward.sum(), ends.sum(), obs_sum)

        state, (rewards, ends, obs_sums) = jax.lax.scan(body, state,
                                                       jax.random.split(key, num_steps))
        return rewards.sum(), ends.sum(), obs_sums.sum(), state

    return jax.jit(reset), jax.jit(run)


def build(env: Any, params: Any, num_envs: int, num_steps: int, form: str = "step",
          agents_per_plume: int = 1):
    """``(run, state, figures)``: the compiled stepping program of
    :func:`scan_program`, a batch of states to start it from, and its
    compile time and memory per env (bytes): ``state_bytes_per_env`` (the
    env state the program carries) and ``temp_bytes_per_env`` (XLA's
    scratch buffers, from the compiled program's memory analysis, when the
    backend reports it)."""
    reset, run = scan_program(env, params, num_envs, num_steps, form, agents_per_plume)
    key = jax.random.key(0)
    state = jax.block_until_ready(reset(key))
    t0 = time.perf_counter()
    compiled = run.lower(state, key).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(state, key))  # warm-up run
    figures = {"num_envs": num_envs, "num_steps": num_steps, "compile_seconds": compile_s,
               "state_bytes_per_env": sum(leaf.nbytes for leaf in jax.tree.leaves(state))
               / num_envs}
    memory = compiled.memory_analysis()
    if memory is not None and getattr(memory, "temp_size_in_bytes", None) is not None:
        figures["temp_bytes_per_env"] = memory.temp_size_in_bytes / num_envs
    return compiled, state, figures
