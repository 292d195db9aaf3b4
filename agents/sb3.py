"""Run a Stable-Baselines3 model as an agent (SB3 imported lazily).

``SB3Agent`` follows the stateful ``Agent`` protocol (``act(obs)``,
``reset()``) and also offers ``act_batch(obs[N, ...]) -> actions[N]`` so the
scenario runner can drive a whole batch of envs with one ``predict`` call.
Recurrent SB3 policies (sb3-contrib's RecurrentPPO) keep their LSTM state
between calls and reset it in ``reset()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class SB3Agent:
    """An SB3 model (anything with ``predict(obs, state, episode_start, deterministic)``)."""

    name = "sb3"

    def __init__(self, model: Any, deterministic: bool = True):
        self.model = model
        self.deterministic = deterministic
        self._state = None
        self._episode_start = None

    @classmethod
    def load(cls, path: str, algorithm: str = "PPO", deterministic: bool = True) -> "SB3Agent":
        """Load a saved SB3 model (``.zip``) with the named algorithm class."""
        import stable_baselines3

        algo = getattr(stable_baselines3, algorithm, None)
        if algo is None:
            from plume_jax.errors import ValidationError

            raise ValidationError.for_parameter("algorithm", algorithm,
                                                "an algorithm class of stable_baselines3, e.g. 'PPO'")
        return cls(algo.load(path, device="cpu"), deterministic)

    def reset(self) -> None:
        self._state = None
        self._episode_start = None

    def act_batch(self, obs: np.ndarray, episode_start: np.ndarray | None = None) -> np.ndarray:
        """Actions for a batch of observations ``obs[N, ...]``."""
        obs = np.asarray(obs, np.float32)
        if episode_start is None:
            episode_start = np.ones(len(obs), bool) if self._episode_start is None \
                else np.zeros(len(obs), bool)
        actions, self._state = self.model.predict(obs, state=self._state,
                                                  episode_start=episode_start,
                                                  deterministic=self.deterministic)
        self._episode_start = episode_start
        return np.asarray(actions)

    def act(self, obs: np.ndarray) -> Any:
        action = self.act_batch(np.asarray(obs)[None])[0]
        return int(action) if np.ndim(action) == 0 else action
