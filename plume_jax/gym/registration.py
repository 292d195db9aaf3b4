"""Gymnasium registration of every preset (imported by ``import plume_jax``).

Each single-agent preset ``P`` of :data:`plume_jax.registry.PRESETS` is registered as
``plume_jax/P``::

    import gymnasium, plume_jax
    env = gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", render_mode="rgb_array", sigma=10.0)
    venv = gymnasium.make_vec("plume_jax/PlumeNav-Gaussian-v0", num_envs=64)  # PlumeVectorEnv

- ``entry_point`` builds a :class:`~plume_jax.gym.PlumeGymEnv`;
  ``vector_entry_point`` a :class:`~plume_jax.gym.PlumeVectorEnv` (one
  compiled call for all envs). Both are strings, resolved on first use.
- ``max_episode_steps`` is the preset's ``max_steps``, so ``gymnasium.make``
  adds its ``TimeLimit`` at the same step where the env itself truncates.
  The effective limit is the smaller of the two: to *lengthen* episodes
  pass both ``max_steps=`` (the env's) and ``max_episode_steps=``
  (the wrapper's). ``make_vec`` applies the same rule (it has no wrapper:
  ``max_steps`` becomes the smaller of the two).
- Every other keyword goes to :func:`plume_jax.make` as an override and is
  validated there (a bad name or value raises ``ValidationError``);
  ``render_mode``, ``render_scale`` and ``trail_length`` go to the adapter.

Presets added to ``PRESETS`` after import are registered by calling
:func:`register_presets` again (ids already registered are left alone).
"""

from __future__ import annotations

from typing import Any

from gymnasium.envs.registration import register, registry

from plume_jax.registry import PRESETS, is_multi_agent

#: Namespace of the Gymnasium ids.
NAMESPACE = "plume_jax"


def gym_id(preset_id: str) -> str:
    """The Gymnasium id of a preset: ``"plume_jax/<preset_id>"``."""
    return f"{NAMESPACE}/{preset_id}"


def make_gym_env(preset: str, *, render_mode: str | None = None, render_scale: int = 4,
                 trail_length: int = 50, **overrides: Any) -> Any:
    """Entry point: ``PlumeGymEnv`` over ``plume_jax.make(preset, **overrides)``."""
    import plume_jax
    from plume_jax.gym.env import PlumeGymEnv

    env, params = plume_jax.make(preset, **overrides)
    return PlumeGymEnv(env, params, render_mode=render_mode, render_scale=render_scale,
                       trail_length=trail_length)


def make_vector_env(preset: str, num_envs: int = 1, *, max_episode_steps: int | None = None,
                    render_mode: str | None = None, render_scale: int = 2,
                    trail_length: int = 50, **overrides: Any) -> Any:
    """Vector entry point: ``PlumeVectorEnv`` over ``plume_jax.make(preset, **overrides)``.

    ``max_episode_steps`` (passed by ``gymnasium.make_vec``) caps ``max_steps``
    as ``TimeLimit`` does for ``gymnasium.make``: episodes are truncated at
    the smaller of the two.
    """
    import plume_jax
    from plume_jax.gym.vector import PlumeVectorEnv

    if max_episode_steps is not None:
        limit = overrides.get("max_steps", PRESETS.get(preset, {}).get("max_steps"))
        both_ints = all(isinstance(v, int) and not isinstance(v, bool)
                        for v in (limit, max_episode_steps))
        # A non-integer is left for plume_jax.make to reject, naming max_steps.
        overrides["max_steps"] = min(limit, max_episode_steps) if both_ints else \
            overrides.get("max_steps", max_episode_steps)
    env, params = plume_jax.make(preset, **overrides)
    return PlumeVectorEnv(env, params, num_envs, render_mode=render_mode,
                          render_scale=render_scale, trail_length=trail_length)


def register_presets() -> list[str]:
    """Register every single-agent preset not yet registered; returns the new
    ids. Multi-agent presets (``num_agents > 1``) are not Gymnasium envs: use
    :class:`plume_jax.gym.pettingzoo_env.PlumeParallelEnv` for them."""
    added = []
    for preset_id, spec in PRESETS.items():
        env_id = gym_id(preset_id)
        if env_id in registry or is_multi_agent(preset_id):
            continue
        register(
            id=env_id,
            entry_point="plume_jax.gym.registration:make_gym_env",
            vector_entry_point="plume_jax.gym.registration:make_vector_env",
            max_episode_steps=int(spec["max_steps"]),
            kwargs={"preset": preset_id},
        )
        added.append(env_id)
    return added


register_presets()
