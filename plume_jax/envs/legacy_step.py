"""``LegacyStepWrapper``: the env's ``step`` with gymnax 0.x's five return values,
for training code written against them (layer 2).

gymnax 1.x (and plume_jax) return ``obs, state, reward, terminated, truncated,
info`` from ``step``; code written for gymnax 0.x, PureJaxRL's ``ppo.py`` and
its wrappers among it, unpacks five: ``obs, state, reward, done, info``. The
wrapper gives that form, with ``done = terminated | truncated`` (bool, the
episode ended and the env auto-reset). ``info`` keeps ``terminated``,
``truncated`` and ``final_observation``, so code that tells a goal from a time
limit (to bootstrap the value of a truncated episode) still can. Everything
else (``reset``, the spaces, ``default_params``, ``action_ids``, ...) is the
wrapped env's::

    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    env = LegacyStepWrapper(env)
    obs, state, reward, done, info = env.step(key, state, action, params)

The wrapper is a gymnax ``GymnaxWrapper`` (attribute access falls through to
the env), so PureJaxRL-style wrappers (``LogWrapper``,
``FlattenObservationWrapper``) stack on top of it, and ``jax.jit``, ``vmap``
and ``lax.scan`` take its methods as they take the env's. Unlike gymnax's
own wrappers it can be deep-copied (``copy.deepcopy``), as rejax does.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from gymnax.wrappers.purerl import GymnaxWrapper


class LegacyStepWrapper(GymnaxWrapper):
    """A gymnax 1.x env whose ``step`` returns ``(obs, state, reward, done, info)``."""

    def __getattr__(self, name: str) -> Any:
        """The wrapped env's attribute ``name`` (gymnax's proxy), except for
        dunder names and while ``_env`` is not set yet.

        ``copy.deepcopy`` (rejax deep-copies its env; so does gymnax's
        ``GymnaxToGymWrapper``) builds the copy without ``__init__`` and asks
        it for ``__setstate__``: gymnax's plain proxy then looks up ``_env``
        through itself and recurses without end. Here that lookup is an
        ordinary ``AttributeError``, so the copy proceeds.
        """
        if name.startswith("__") or "_env" not in vars(self):
            raise AttributeError(name)
        return getattr(self._env, name)

    def reset(self, key: jax.Array, params: Any = None) -> tuple[Any, Any]:
        """The wrapped env's ``reset``: ``(obs, state)``."""
        return self._env.reset(key, params)

    def step(self, key: jax.Array, state: Any, action: Any,
             params: Any = None) -> tuple[Any, Any, jax.Array, jax.Array, dict[str, Any]]:
        """One auto-resetting step: ``(obs, state, reward f32[], done bool[], info)``,
        ``done = info["terminated"] | info["truncated"]``."""
        obs, state, reward, terminated, truncated, info = self._env.step(
            key, state, action, params)
        info = {**info, "terminated": terminated, "truncated": truncated}
        return obs, state, reward, jnp.logical_or(terminated, truncated), info
