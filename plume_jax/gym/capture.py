"""Captured trajectories from a Gymnasium env (layer 3): the wrapper
:class:`CaptureTrajectories` writes the capture folder of ``plume-jax
evaluate --capture`` (``run.json``, ``steps.parquet``, ``episodes.parquet``;
format and columns: :mod:`plume_jax.files.capture_files`) from the episodes a
Python loop plays::

    import gymnasium, plume_jax
    from plume_jax.gym.capture import CaptureTrajectories

    env = CaptureTrajectories(gymnasium.make("plume_jax/PlumeNav-Gaussian-v0"), "runs/cap")
    obs, info = env.reset(seed=0)
    ...                                   # step as usual
    env.close()                           # writes runs/cap/{run.json,steps,episodes}.parquet

One row per step in ``steps.parquet`` (``run`` 0, ``agent_index`` 0), one
per episode in ``episodes.parquet``: every episode started by ``reset``,
including one still running when the files are written (``finished``
false) or cut short by the next ``reset``. The pose and the concentration
*before* a step are read from the env's functional state (one small jitted
call per step); nothing else is added to the step. Rows are kept in memory
until written: at most ``max_transitions`` (a step beyond it is refused
before the env moves).
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.files import capture_files as cf
from plume_jax.core.errors import ValidationError
from plume_jax.gym.env import PlumeGymEnv

#: Default bound on the transitions one wrapper keeps (about 100 bytes each).
MAX_TRANSITIONS = 2_000_000
#: Largest flattened observation recorded (the rollouts' bound).
MAX_OBSERVATION = 64


@functools.partial(jax.jit, static_argnums=0)
def _pose(env: Any, state: Any, params: Any) -> jax.Array:
    """f32[4]: ``x``, ``y``, ``heading`` and the concentration at ``(x, y)``."""
    position = state.agent.position
    concentration = env.plume.concentration(state.plume, position, env.grid, params.plume)
    return jnp.stack([position[0], position[1], state.agent.heading,
                      concentration]).astype(jnp.float32)


class CaptureTrajectories(gymnasium.Wrapper):
    """Record every step and episode of a plume_jax Gymnasium env and write
    them as a capture folder (see the module docstring).

    Args:
        env: a ``gymnasium.make("plume_jax/...")`` env or a
            :class:`~plume_jax.gym.PlumeGymEnv` (wrapped or not).
        out_dir: the capture folder (created; on each :meth:`write` the
            whole folder is written beside it and renamed into place, so it
            always holds one whole capture; a non-empty folder that is not a
            capture is refused).
        label: the ``agent`` column of ``episodes.parquet``.
        max_transitions: the most steps kept in memory.

    Raises:
        ValidationError: an env that is not a plume_jax one, a bad
            ``out_dir``, ``label`` or ``max_transitions``; pyarrow missing.
    """

    def __init__(self, env: gymnasium.Env, out_dir: str | os.PathLike, *,
                 label: str = "gymnasium", max_transitions: int = MAX_TRANSITIONS):
        if not isinstance(getattr(env, "unwrapped", None), PlumeGymEnv):
            raise ValidationError.for_parameter(
                "env", env, "a plume_jax Gymnasium env (gymnasium.make('plume_jax/<preset>') "
                "or PlumeGymEnv)")
        if not isinstance(out_dir, (str, os.PathLike)) or not os.fspath(out_dir):
            raise ValidationError.for_parameter("out_dir", out_dir, "a folder path")
        if not isinstance(label, str) or not label:
            raise ValidationError.for_parameter("label", label, "a non-empty string")
        if isinstance(max_transitions, bool) or not isinstance(max_transitions, int) \
                or max_transitions < 1:
            raise ValidationError.for_parameter("max_transitions", max_transitions,
                                                "a positive integer")
        cf.require_pyarrow("CaptureTrajectories")
        super().__init__(env)
        self.out_dir = os.fspath(out_dir)
        self.label = label
        self.max_transitions = max_transitions
        self._steps: dict[str, list] = {name: [] for name in (
            "episode", "step", "x", "y", "heading", "concentration", "observation", "action",
            "reward", "terminated", "truncated", "next_x", "next_y")}
        self._episodes: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._obs: Any = None
        self._seeds: list[int | None] = []
        self._written_at: tuple[int, int, bool] | None = None

    @property
    def _base(self) -> PlumeGymEnv:
        base = self.env.unwrapped
        assert isinstance(base, PlumeGymEnv)  # checked at construction
        return base

    def _pose_now(self) -> np.ndarray:
        base = self._base
        return np.asarray(_pose(base.env, base.env_state, base.params))

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the env and open a new episode (the one running, if any, is
        kept as not finished)."""
        obs, info = self.env.reset(**kwargs)
        self._close_episode(success=False, finished=False)
        x, y = (float(v) for v in self._pose_now()[:2])
        goal = info["goal_location"]
        source = info.get("source_location", goal)
        self._open = {"episode": len(self._episodes), "length": 0, "return": 0.0,
                      "path_length": 0.0, "start_x": x, "start_y": y,
                      "start_distance": math.hypot(x - goal[0], y - goal[1]),
                      "source_x": float(source[0]), "source_y": float(source[1]),
                      "goal_x": float(goal[0]), "goal_y": float(goal[1])}
        self._seeds.append(info.get("seed"))
        self._obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the env and record the transition (nothing is recorded when
        the env refuses the step)."""
        if self._open is not None and len(self._steps["episode"]) >= self.max_transitions:
            raise ValidationError.for_parameter(
                "max_transitions", self.max_transitions,
                "more transitions kept than this wrapper allows: call write() and start a new "
                "CaptureTrajectories, or raise max_transitions (the step was not taken)")
        before = self._pose_now() if self._open is not None else None
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._open is not None and before is not None:
            after = self._pose_now()
            self._record(before, after, action, float(reward), bool(terminated),
                         bool(truncated))
            if terminated or truncated:
                self._close_episode(success=bool(info.get("goal_reached", terminated)),
                                    finished=True)
        self._obs = obs
        return obs, reward, terminated, truncated, info

    def _record(self, before: np.ndarray, after: np.ndarray, action: Any, reward: float,
                terminated: bool, truncated: bool) -> None:
        episode = self._open
        assert episode is not None  # a step runs inside an episode (reset opened it)
        flat = np.asarray(self._obs, np.float32).reshape(-1)
        row = {"episode": episode["episode"], "step": episode["length"],
               "x": before[0], "y": before[1], "heading": before[2],
               "concentration": before[3],
               "observation": flat if flat.size <= MAX_OBSERVATION else None,
               "action": np.asarray(action), "reward": reward, "terminated": terminated,
               "truncated": truncated, "next_x": after[0], "next_y": after[1]}
        for name, value in row.items():
            self._steps[name].append(value)
        episode["length"] += 1
        episode["return"] += reward
        episode["path_length"] += float(math.hypot(after[0] - before[0], after[1] - before[1]))

    def _close_episode(self, success: bool, finished: bool) -> None:
        if self._open is not None:
            self._episodes.append({**self._open, "success": success, "finished": finished})
            self._open = None

    def _tables(self) -> tuple[Any, Any]:
        steps = {"run": np.zeros(len(self._steps["episode"]), np.int32)}
        for name, values in self._steps.items():
            if name == "observation":
                if values and all(v is not None for v in values):
                    stacked = np.stack(values)
                    steps.update(cf.split_observation(stacked, self._observation_columns(
                        stacked.shape[1])))
                continue
            dtype = {"episode": np.int32, "step": np.int32, "terminated": bool,
                     "truncated": bool}.get(name, np.float32)
            if name == "action":
                action = np.stack(values) if values else np.zeros(0, np.int32)
                steps.update(cf.action_columns(
                    action.astype(np.int32 if action.dtype.kind in "iub" else np.float32),
                    self._action_names()))
                continue
            steps[name] = np.asarray(values, dtype)
            if name == "step":
                steps["agent_index"] = np.zeros(len(values), np.int32)
        episodes = self._episodes + ([{**self._open, "success": False, "finished": False}]
                                     if self._open is not None else [])
        n = len(episodes)

        def column(key: str, dtype: Any) -> np.ndarray:
            return np.asarray([e[key] for e in episodes], dtype)

        base = self._base
        env_id = base.spec.id if base.spec is not None else base.env.name
        success = column("success", bool)
        table = {
            "run": np.zeros(n, np.int32), "scenario": [env_id] * n, "agent": [self.label] * n,
            "episode": column("episode", np.int32), "agents": np.ones(n, np.int32),
            "length": column("length", np.int32), "success": success,
            "finished": column("finished", bool), "return": column("return", np.float32),
            "path_length": column("path_length", np.float32),
            "start_distance": column("start_distance", np.float32),
            "path_efficiency": cf.path_efficiency(
                column("start_distance", np.float64), column("path_length", np.float64),
                float(np.asarray(base.params.goal_radius)), success),
            "start_x": column("start_x", np.float32), "start_y": column("start_y", np.float32),
            **{k: column(k, np.float32) for k in ("source_x", "source_y", "goal_x", "goal_y")},
        }
        return (cf.table(steps, "CaptureTrajectories"),
                cf.table(table, "CaptureTrajectories"))

    def _action_names(self) -> list[str] | None:
        """The discrete action model's names (``None`` for continuous ones)."""
        base = self._base
        return list(base.env.action_names) if hasattr(base.action_space, "n") else None

    def _observation_columns(self, size: int) -> list[str]:
        return cf.observation_columns(self._base.env.observation_labels(), size)

    def write(self) -> dict[str, Any]:
        """Write the capture folder with everything recorded so far (the
        episode running, if any, as not finished); returns run.json's
        content."""
        steps, episodes = self._tables()
        base = self._base
        settings = dict(base.env.settings)
        run = {"run": 0, "source": "gymnasium", "scenario": episodes.column("scenario")[0]
               .as_py() if episodes.num_rows else None,
               "env_settings": settings, "env_settings_hash": cf.canonical_hash(settings),
               "agent": {"label": self.label}, "seeds": list(self._seeds),
               "episodes": episodes.num_rows, "agents": 1,
               "max_steps": int(np.asarray(base.params.max_steps)),
               "transitions": steps.num_rows, "action_names": self._action_names(),
               "observation_labels": list(base.env.observation_labels()),
               "observation_columns": [c for c in steps.column_names
                                       if c.startswith(cf.OBSERVATION_PREFIX)] or None}
        meta = cf.write_folder(self.out_dir, [steps], [episodes], [run],
                               parameter="CaptureTrajectories")
        self._written_at = self._mark()
        return meta

    def close(self) -> None:
        """Write the capture folder (when anything was recorded since the
        last write) and close the env; idempotent."""
        if (self._episodes or self._open is not None) and self._mark() != self._written_at:
            self.write()
        super().close()

    def _mark(self) -> tuple[int, int, bool]:
        return len(self._steps["episode"]), len(self._episodes), self._open is not None
