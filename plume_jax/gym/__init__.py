"""Gymnasium, Stable-Baselines3 and PettingZoo adapters (layer 3).

- :class:`PlumeGymEnv`: a ``gymnasium.Env`` with the contracts' lifecycle
  (:class:`EnvironmentState`), validation, seeding and rendering.
- :class:`PlumeVectorEnv`: a ``gymnasium.vector.VectorEnv`` stepping N envs
  in one compiled call (same-step or next-step autoreset).
- :class:`PlumeSB3VecEnv`: an SB3 ``VecEnv`` doing the same; it lives in
  :mod:`plume_jax.gym.sb3` and is imported (with SB3) only on first access.
- :class:`~plume_jax.gym.pettingzoo_env.PlumeParallelEnv` (in
  :mod:`plume_jax.gym.pettingzoo_env`, which imports PettingZoo): a
  PettingZoo ``ParallelEnv`` over the multi-agent env.
- :class:`~plume_jax.gym.capture.CaptureTrajectories` (in :mod:`plume_jax.gym.capture`):
  a wrapper writing the capture folder of ``plume-jax evaluate --capture``.

Every preset is registered with Gymnasium as ``plume_jax/<PresetId>``
(:mod:`plume_jax.gym.registration`).
"""

from __future__ import annotations

from typing import Any

from plume_jax.gym.env import EnvironmentState, PlumeGymEnv
from plume_jax.gym.registration import gym_id, register_presets
from plume_jax.gym.vector import PlumeVectorEnv

__all__ = ["EnvironmentState", "PlumeGymEnv", "PlumeSB3VecEnv", "PlumeVectorEnv", "gym_id",
           "register_presets"]


def __getattr__(name: str) -> Any:
    if name == "PlumeSB3VecEnv":  # lazy: importing it imports stable_baselines3 and torch
        from plume_jax.gym.sb3 import PlumeSB3VecEnv

        return PlumeSB3VecEnv
    raise AttributeError(f"module 'plume_jax.gym' has no attribute {name!r}")
