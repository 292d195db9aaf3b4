"""Gymnasium registration of every preset (imported by ``import plume_jax``).

Each single-agent preset ``P`` of :data:`plume_jax.envs.presets.PRESETS` and
:data:`~plume_jax.envs.presets.DATA_PRESETS` (presets on registered datasets; making
one needs the dataset in the cache) is registered as ``plume_jax/P``::

    import gymnasium, plume_jax
    env = gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", render_mode="rgb_array", sigma=10.0)
    venv = gymnasium.make_vec("plume_jax/PlumeNav-Gaussian-v0", num_envs=64)  # PlumeVectorEnv

- ``entry_point`` builds a :class:`~plume_jax.gym.PlumeGymEnv`;
  ``vector_entry_point`` a :class:`~plume_jax.gym.PlumeVectorEnv` (one
  compiled call for all envs). Both are strings, resolved on first use.
- No ``OrderEnforcing`` wrapper (``order_enforce=False``): the env enforces
  its own lifecycle, so ``step`` or ``render`` before ``reset`` raise the
  contract's :class:`~plume_jax.core.errors.StateError` whichever door the user
  came in by, not Gymnasium's ``ResetNeeded``.
- One episode limit. ``max_episode_steps`` is registered as the preset's
  ``max_steps``, and the env's own ``max_steps`` always equals the limit of
  the ``TimeLimit`` that ``gymnasium.make`` wraps around it, so both end an
  episode at the same step and the env's lifecycle is ``TRUNCATED`` there:
  ``max_episode_steps=n`` alone sets ``max_steps`` to ``n`` (shorter or
  longer); ``max_steps=n`` alone is accepted up to the registered limit
  (beyond it the ``TimeLimit`` would cut episodes short silently, so it is
  refused: pass ``max_episode_steps=n``); both together must agree
  (``max_episode_steps=-1``, no ``TimeLimit``, leaves ``max_steps`` alone).
  ``make_vec`` has no wrapper and follows the same rule (a
  ``max_episode_steps`` equal to the registered one counts as not given).
  To read the ``TimeLimit`` that ``gymnasium.make`` is about to apply, the
  entry point looks at ``gymnasium.make``'s arguments on the call stack: as
  of Gymnasium 1.3, ``make`` hands ``max_episode_steps`` to nothing but the
  ``TimeLimit`` it builds after the entry point has returned (the env's
  ``spec`` is set with ``max_episode_steps=None``, and a registered
  ``additional_wrappers`` entry, which could read the ``TimeLimit``, is
  refused by ``make_vec``'s native mode), so no documented hook gives the
  limit while the env can still be refused with this error; a test pins
  this.
- ``autoreset_mode=`` (``make_vec``): ``"NextStep"`` (the default, as in
  Gymnasium's own vector envs, which code written for ``make_vec``, CleanRL's
  loop among it, expects) or ``"SameStep"``; see :mod:`plume_jax.gym.vector`.
- ``make_vec(..., vectorization_mode="async")`` with the default ``fork``
  start method would hang: JAX cannot run in a process forked after it
  started. The entry point refuses it with a
  :class:`~plume_jax.core.errors.StateError` naming the two ways that work, the
  native vector env (``make_vec`` without ``vectorization_mode``: one
  process, one compiled call) and ``vector_kwargs={"context": "spawn"}``:
  in the parent, when it sees an ``AsyncVectorEnv`` with the ``fork``
  context among its callers (before any process starts: its first env is
  built in the parent; nothing documented tells an env it is being built
  for an ``AsyncVectorEnv``, and a refusal in the forked worker reaches the
  parent only as a broken pipe), and in any process forked after JAX started
  (marked by an ``os.register_at_fork`` hook).
- stable-baselines3's ``SubprocVecEnv(..., start_method="fork")`` builds every
  env in its forked workers only, and a worker that fails dies without a
  word to its parent, which then saw only ``ConnectionResetError``. A
  refusal in such a worker (found on the call stack, as above) answers the
  parent's first request with an object whose unpickling raises the
  ``StateError`` there, then ends the worker: the parent's
  ``SubprocVecEnv(...)`` raises the one-line error. SB3's default start
  method (``forkserver``, else ``spawn``) starts fresh interpreters and works.
- ``spec.reward_threshold`` (what RL Zoo's ``StopTrainingOnRewardThreshold``
  and ``gymnasium.make``'s users read as "solved"): set where a preset's
  return says whether an episode succeeded, the sparse goal reward
  (``goal_reward`` on reaching the goal, 0 otherwise, so the mean return is
  ``goal_reward`` times the success rate): :data:`SOLVED_SUCCESS_RATE` of
  ``goal_reward``: the three Gaussian presets (on two of them the klinotaxis
  and chemotaxis baselines reach 100 %, docs/baselines.md). None elsewhere: a shaped or
  step-penalty return mixes success with path length. It describes the preset
  as registered (an override of ``goal_reward`` rescales returns, not it).
- Every other keyword goes to :func:`plume_jax.make` as an override and is
  validated there (a bad name or value raises ``ValidationError``);
  ``render_mode``, ``render_scale`` and ``trail_length`` go to the adapter.

Presets added to ``PRESETS`` after import are registered by calling
:func:`register_presets` again (ids already registered are left alone).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Mapping
from types import FrameType
from typing import Any

import gymnasium
from gymnasium.envs.registration import register, registry

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.envs.presets import DATA_PRESETS, PRESETS, is_multi_agent, preset_spec
from plume_jax.rewards import REWARDS
from plume_jax.settings import integer

#: Namespace of the Gymnasium ids.
NAMESPACE = "plume_jax"
#: The success rate at which a sparse-reward preset counts as solved
#: (``spec.reward_threshold``, as a mean return: this times ``goal_reward``).
SOLVED_SUCCESS_RATE = 0.95

# True in a process forked (``os.fork``, multiprocessing's ``fork`` start
# method) from one that had imported plume_jax and so started JAX: it
# inherits JAX's state without its threads, and JAX hangs there.
_FORKED_AFTER_JAX = False


def _mark_forked() -> None:
    global _FORKED_AFTER_JAX
    _FORKED_AFTER_JAX = True


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
    os.register_at_fork(after_in_child=_mark_forked)

_EPISODE_LIMIT = integer(low=1, high=2**31 - 1)


def gym_id(preset_id: str) -> str:
    """The Gymnasium id of a preset: ``"plume_jax/<preset_id>"``."""
    return f"{NAMESPACE}/{preset_id}"


_FORK_REFUSAL = (
    "JAX cannot run in a process forked after it started, so it would hang there. Use the "
    "native vector env, gymnasium.make_vec(id, num_envs=N) without vectorization_mode (all "
    "envs in one compiled call), or pass vector_kwargs={'context': 'spawn'}.")


def _caller_frame(code: Any) -> Any:
    """The innermost frame on the call stack running ``code``, or None."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    return frame


def _refuse_forking() -> None:
    """``StateError`` where the env would end up in a process forked after JAX
    started: when an ``AsyncVectorEnv`` with the ``fork`` start method is
    being built (its first env is made in this process, before it forks:
    refused here, before any process starts), and in such a forked process."""
    frame = _caller_frame(gymnasium.vector.AsyncVectorEnv.__init__.__code__)
    if frame is not None:
        context = frame.f_locals.get("context")
        if multiprocessing.get_context(context).get_start_method() == "fork":
            raise StateError("gymnasium's AsyncVectorEnv with the 'fork' start method "
                             "(make_vec(..., vectorization_mode='async')) cannot run plume_jax "
                             "envs: " + _FORK_REFUSAL)
    if _FORKED_AFTER_JAX:
        remote = _sb3_worker_pipe()
        if remote is not None:
            _refuse_in_sb3_parent(remote)
        raise StateError("plume_jax cannot build an environment in a process forked after JAX "
                         "started: " + _FORK_REFUSAL)


_SB3_FORK_REFUSAL = (
    "stable-baselines3's SubprocVecEnv with the 'fork' start method cannot run plume_jax envs: "
    "JAX cannot run in a process forked after it started, so they would hang there. Use "
    "start_method='forkserver' (SB3's default) or 'spawn', or plume_jax.gym.sb3.PlumeSB3VecEnv "
    "(all envs in one compiled call).")
# How long a refusing SB3 worker keeps its pipe open for the parent's first
# request (the parent sends it at once; a worker it never asks exits after this).
_SB3_WORKER_WAIT_S = 30.0


def _sb3_worker_pipe() -> Any:
    """The pipe to its parent of the stable-baselines3 ``SubprocVecEnv`` worker
    this call runs in (its ``_worker``'s ``remote``), or None. Looked up in
    ``sys.modules``, so SB3 is never imported here."""
    module = sys.modules.get("stable_baselines3.common.vec_env.subproc_vec_env")
    code = getattr(getattr(module, "_worker", None), "__code__", None)
    frame = None if code is None else _caller_frame(code)
    return None if frame is None else frame.f_locals.get("remote")


def _raise_state_error(message: str) -> None:
    raise StateError(message)


class _RaisesWhenUnpickled:
    """Sent to an SB3 parent in place of its answer: unpickling it raises
    ``StateError(message)`` in the parent's ``recv``."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return _raise_state_error, (self.message,)


def _refuse_in_sb3_parent(remote: Any) -> None:
    """In a forked SB3 worker: answer the parent's first request with the
    refusal (see the module docstring) and end this process. The answer is
    sent first and the pipe held open until the request arrives, so the
    parent's send never meets a closed pipe."""
    try:
        remote.send(_RaisesWhenUnpickled(_SB3_FORK_REFUSAL))
        remote.poll(_SB3_WORKER_WAIT_S)
    finally:
        os._exit(1)  # a forked copy of the parent: run none of its exit handlers


def _gymnasium_make_time_limit() -> tuple[int | None, bool] | None:
    """``(limit, given)`` of the ``TimeLimit`` that the running
    ``gymnasium.make`` call is about to wrap around the env being built
    (``limit`` None: no ``TimeLimit``; ``given``: passed to ``make`` as
    ``max_episode_steps`` rather than registered), or None when not called
    from ``gymnasium.make``. Mirrors ``make``'s own rule: an explicit
    ``max_episode_steps`` (``-1``: none), else the spec's."""
    frame = _caller_frame(gymnasium.envs.registration.make.__code__)
    if frame is None:
        return None
    given = frame.f_locals.get("max_episode_steps")
    if given is not None:
        return (None if given == -1 else given), True
    spec = frame.f_locals.get("env_spec")
    return getattr(spec, "max_episode_steps", None), False


def _one_episode_limit(overrides: dict[str, Any], limit: int | None, given: bool,
                       registered: int | None) -> dict[str, Any]:
    """``overrides`` with ``max_steps`` equal to the episode limit ``limit``
    that a wrapper (``gymnasium.make``'s ``TimeLimit``) or ``make_vec``
    imposes, or ``ValidationError`` for a contradiction (see the module
    docstring). ``given``: the user passed ``limit`` as ``max_episode_steps``."""
    if limit is None:
        return overrides
    limit = _EPISODE_LIMIT("max_episode_steps", limit, None)
    if "max_steps" not in overrides:
        return {**overrides, "max_steps": limit}
    max_steps = overrides["max_steps"]
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps == limit:
        return overrides  # equal, or a bad value for plume_jax.make to name
    if given:
        raise ValidationError.for_parameter(
            "max_episode_steps", limit,
            f"the same limit as max_steps={max_steps} (they are one episode limit: give one "
            "of them, or equal values)")
    if max_steps > limit:
        raise ValidationError.for_parameter(
            "max_steps", max_steps,
            f"at most the registered max_episode_steps={registered}, at which gymnasium's "
            f"TimeLimit ends episodes; for longer episodes pass max_episode_steps={max_steps} "
            "(it sets max_steps too)")
    return overrides  # shorter: the env truncates first, the TimeLimit never does


def make_gym_env(preset: str, *, render_mode: str | None = None, render_scale: int = 4,
                 trail_length: int = 50, **overrides: Any) -> Any:
    """Entry point: ``PlumeGymEnv`` over ``plume_jax.make(preset, **overrides)``,
    with ``max_steps`` made equal to ``gymnasium.make``'s ``TimeLimit``."""
    _refuse_forking()
    from plume_jax.envs.presets import make
    from plume_jax.gym.env import PlumeGymEnv

    time_limit = _gymnasium_make_time_limit()
    if time_limit is not None:
        limit, given = time_limit
        overrides = _one_episode_limit(overrides, limit, given,
                                       (preset_spec(preset) or {}).get("max_steps"))
    env, params = make(preset, **overrides)
    return PlumeGymEnv(env, params, render_mode=render_mode, render_scale=render_scale,
                       trail_length=trail_length)


def make_vector_env(preset: str, num_envs: int = 1, *, max_episode_steps: int | None = None,
                    autoreset_mode: Any = "NextStep", render_mode: str | None = None,
                    render_scale: int = 2, trail_length: int = 50, **overrides: Any) -> Any:
    """Vector entry point: ``PlumeVectorEnv`` over ``plume_jax.make(preset, **overrides)``.

    ``max_episode_steps`` (``gymnasium.make_vec`` passes the registered one
    unless given) and ``max_steps`` are one limit, as for ``gymnasium.make``
    (see the module docstring); ``autoreset_mode``: ``"NextStep"`` (default,
    Gymnasium's) or ``"SameStep"`` (or an ``AutoresetMode``).
    """
    _refuse_forking()
    from plume_jax.envs.presets import make
    from plume_jax.gym.vector import PlumeVectorEnv

    registered = (preset_spec(preset) or {}).get("max_steps")
    if max_episode_steps is not None and max_episode_steps != -1:
        given = max_episode_steps != registered
        if given or "max_steps" not in overrides:
            overrides = _one_episode_limit(overrides, max_episode_steps, given, registered)
    env, params = make(preset, **overrides)
    return PlumeVectorEnv(env, params, num_envs, autoreset_mode=autoreset_mode,
                          render_mode=render_mode, render_scale=render_scale,
                          trail_length=trail_length)


def reward_threshold(preset: Mapping[str, Any]) -> float | None:
    """``spec.reward_threshold`` of a preset's settings: the mean return of a
    :data:`SOLVED_SUCCESS_RATE` success rate where the return is ``goal_reward``
    on success and 0 otherwise (the ``sparse`` reward, ``goal_reward > 0``);
    None for any other reward."""
    reward = preset.get("reward", {})
    reward = {"type": reward} if isinstance(reward, str) else reward
    if reward.get("type") != "sparse":
        return None
    goal_reward = float(reward.get("goal_reward",
                                   REWARDS["sparse"].SETTINGS["goal_reward"].default))
    return SOLVED_SUCCESS_RATE * goal_reward if goal_reward > 0 else None


def register_presets() -> list[str]:
    """Register every single-agent preset not yet registered; returns the new
    ids. Multi-agent presets (``num_agents > 1``) are not Gymnasium envs: use
    :class:`plume_jax.gym.pettingzoo_env.PlumeParallelEnv` for them."""
    added = []
    for preset_id, spec in {**PRESETS, **DATA_PRESETS}.items():
        env_id = gym_id(preset_id)
        if env_id in registry or is_multi_agent(preset_id):
            continue
        register(
            id=env_id,
            entry_point="plume_jax.gym.registration:make_gym_env",
            vector_entry_point="plume_jax.gym.registration:make_vector_env",
            max_episode_steps=int(spec["max_steps"]),
            reward_threshold=reward_threshold(spec),
            order_enforce=False,
            kwargs={"preset": preset_id},
        )
        added.append(env_id)
    return added


register_presets()
