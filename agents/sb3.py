"""Run a Stable-Baselines3 model as an agent (SB3 imported lazily).

``SB3Agent`` follows the stateful ``Agent`` protocol (``act(obs)``,
``reset()``) and also offers ``act_batch(obs[N, ...]) -> actions[N]`` so the
scenario runner can drive a whole batch of envs with one ``predict`` call.
Recurrent SB3 policies (sb3-contrib's RecurrentPPO) keep their LSTM state
between calls and reset it in ``reset()``.

**Trust.** An SB3 model ``.zip`` holds pickled Python objects, and loading it
runs whatever code they name: load only model files (and scenario files that
name an ``sb3`` agent) that you made or trust. This is inherent to SB3's file
format; plume_jax cannot make it safe. The ``trained`` agent's policy folders
(``policy.json`` + ``policy.npz``, read without pickle) carry no such risk.
"""

from __future__ import annotations

import os
import zipfile
from typing import Any

import numpy as np

from plume_jax.core.errors import ValidationError


class SB3Agent:
    """An SB3 model (anything with ``predict(obs, state, episode_start, deterministic)``)."""

    name = "sb3"

    def __init__(self, model: Any, deterministic: bool = True):
        self.model = model
        self.deterministic = deterministic
        self._state: Any = None  # the model's recurrent state (None: feed-forward)
        self._episode_start: np.ndarray | None = None

    @classmethod
    def load(cls, path: str, algorithm: str = "PPO", deterministic: bool = True) -> "SB3Agent":
        """Load a saved SB3 model (``.zip``) with the named algorithm class.
        The file is unpickled: load only files you trust (module docstring).

        Raises:
            ValidationError: stable-baselines3 missing, an unknown
                ``algorithm``, or ``path`` missing or not a model of it.
        """
        try:
            import stable_baselines3
        except ImportError:
            raise ValidationError.for_parameter(
                "agent", "sb3", "an installed stable-baselines3 (pip install "
                "stable-baselines3) to run an SB3 model") from None
        algo = getattr(stable_baselines3, str(algorithm), None)
        if algo is None or not hasattr(algo, "load"):
            raise ValidationError.for_parameter("algorithm", algorithm,
                                                "an algorithm class of stable_baselines3, e.g. 'PPO'")
        path = os.fspath(path)
        if not (os.path.isfile(path) or os.path.isfile(path + ".zip")):
            raise ValidationError.for_parameter("path", path,
                                                "an existing SB3 model file (.zip)")
        try:
            model = algo.load(path, device="cpu")
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            raise ValidationError.for_parameter(
                "path", path, f"a model saved by stable_baselines3.{algorithm} "
                f"({type(error).__name__}: {error})") from None
        return cls(model, deterministic)

    @classmethod
    def for_env(cls, env: Any, path: str, algorithm: str = "PPO",
                deterministic: bool = True) -> "SB3Agent":
        """:meth:`load`, then check the model's observation and action spaces
        against ``env`` (an env or its description), as the scenario runner
        feeds it ``obs[N, *observation_shape]`` and steps the env with its
        actions.

        Raises:
            ValidationError: as :meth:`load`, or spaces that differ.
        """
        from agents.base import describe

        agent = cls.load(path, algorithm=algorithm, deterministic=deterministic)
        info = describe(env)
        model_obs = tuple(getattr(agent.model.observation_space, "shape", None) or ())
        if model_obs != tuple(info["observation_shape"]):
            raise ValidationError.for_parameter(
                "sensor", f"{info.get('sensor_type')} (observation shape "
                f"{info['observation_shape']})", f"an observation of shape {list(model_obs)}, "
                f"as the SB3 model {path} was trained on")
        space = info["action_space"]
        model_actions = agent.model.action_space
        n = getattr(model_actions, "n", None)
        if space["type"] == "discrete":
            ok = n is not None and int(n) == space["n"]
        else:
            ok = n is None and list(getattr(model_actions, "shape", ())) == list(space["shape"])
        if not ok:
            raise ValidationError.for_parameter(
                "actions", f"{info.get('actions_type')} ({space})",
                f"the action space the SB3 model {path} was trained with: {model_actions}")
        return agent

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
