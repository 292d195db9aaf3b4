"""Where a run's metrics go besides ``metrics.jsonl`` / ``metrics.csv``:
TensorBoard event files (``tensorboardX``) and, when asked for and installed,
Weights & Biases.

The scalars are the metrics columns under ``train/`` (and Stable-Baselines3's
``rollout/`` tags), the periodic evaluations under SB3's ``EvalCallback``
tags (``eval/``) and the final evaluation under ``final/``; the step is the
env step count (of one run or sweep member). A resumed run rewrites its
TensorBoard files from the metrics kept up to its checkpoint, so they hold
every update once (W&B keeps what it received first for a step).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import pathlib
import re
import shutil
import uuid
from typing import Any, Iterable

from plume_jax.files import atomic_write
from plume_jax.core.errors import ValidationError

#: Columns of a metrics row that are not logged as scalars.
_NOT_SCALARS = ("member",)


def check_wandb(project: str | None, parameter: str = "run.wandb_project") -> None:
    """``ValidationError`` if W&B logging is asked for (``project`` set) but
    the ``wandb`` package is not installed."""
    if project is not None and importlib.util.find_spec("wandb") is None:
        raise ValidationError.for_parameter(
            parameter, project, "null, or the wandb package installed (pip install wandb, or "
            "pip install 'plume-jax[wandb]') to log to Weights & Biases")


#: What a ``wandb_run_id`` file may hold: W&B's run-id characters, at most
#: 64 of them (read at most 1 KiB).
_WANDB_RUN_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def wandb_run_id(folder: str | pathlib.Path) -> str:
    """The W&B run id kept in ``folder/wandb_run_id`` (a resumed run logs to
    the same W&B run), or a new one, written there (atomically) first.
    ``ValidationError`` (parameter ``wandb_run_id``) when the file is a
    folder, unreadable, over 1 KiB or holds something else."""
    from plume_jax.files.safe_io import read_text_bounded

    id_file = pathlib.Path(folder) / "wandb_run_id"
    if os.path.lexists(id_file):
        text = read_text_bounded(id_file, 1024, "wandb_run_id", "a W&B run id file")
        run_id = text.strip()
        if not _WANDB_RUN_ID.fullmatch(run_id):
            raise ValidationError.for_parameter(
                "wandb_run_id", str(id_file), "a file holding one W&B run id (1 to 64 letters, "
                f"digits, '_', '.' or '-'), not {run_id[:40]!r}")
        return run_id
    run_id = uuid.uuid4().hex[:12]
    atomic_write(id_file, run_id)
    return run_id


def _scalars(row: dict[str, Any], prefix: str) -> dict[str, float]:
    out = {}
    for name, value in row.items():
        if name in _NOT_SCALARS or isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)) and math.isfinite(value):
            out[f"{prefix}/{name}"] = float(value)
    return out


#: Stable-Baselines3's TensorBoard tags, written beside ``train/<metric>``
#: (``rollout/ep_rew_mean`` is the mean return of the episodes that ended in
#: the update, as SB3's is of its recent episodes).
SB3_TAGS = {"return_mean": "rollout/ep_rew_mean", "length_mean": "rollout/ep_len_mean",
            "success_rate": "rollout/success_rate"}


#: Stable-Baselines3's ``EvalCallback`` tags of a periodic evaluation row
#: (``eval/mean_ep_length`` is of the successful episodes here).
PERIODIC_TAGS = {"mean_return": "eval/mean_reward", "mean_steps_to_goal": "eval/mean_ep_length",
                 "success_rate": "eval/success_rate"}


def final_scalars(evaluation: dict[str, Any]) -> dict[str, float]:
    """The final evaluation's scalars, ``final/<name>`` (a periodic evaluation
    may fall on the same step), named as the periodic tags name the numbers
    they share (``final/mean_reward`` as ``eval/mean_reward``)."""
    names = {name: tag.split("/", 1)[1] for name, tag in PERIODIC_TAGS.items()}
    return _scalars({names.get(name, name): value for name, value in evaluation.items()},
                    "final")


def hparams(config: dict[str, Any] | None) -> dict[str, Any]:
    """A resolved config's ``env.id``, ``algo.*``, ``network.*`` and
    ``run.seed`` for TensorBoard's HPARAMS table (lists and mappings as
    text, None as ``"null"``)."""
    if not config:
        return {}
    out: dict[str, Any] = {"env.id": str(config.get("env", {}).get("id"))}
    for section in ("algo", "network"):
        for key, value in (config.get(section) or {}).items():
            out[f"{section}.{key}"] = value if isinstance(value, (int, float, str)) \
                else json.dumps(value)
    out["run.seed"] = int((config.get("run") or {}).get("seed", 0))
    return out


class RunLoggers:
    """The TensorBoard writer and W&B run of one training run (or sweep
    member).

    Args:
        folder: the run folder; event files go to ``folder/tensorboard/``,
            W&B's files to ``folder/wandb/``.
        tensorboard: write TensorBoard event files.
        wandb_project: a W&B project, or None.
        name: the run's name (W&B).
        config: the resolved config (W&B's run config).
        history: a resumed run's metrics rows up to its checkpoint: the
            TensorBoard files are deleted and written anew from them.
        group: a W&B group (a sweep's members share one).
    """

    def __init__(self, folder: str | pathlib.Path, *, tensorboard: bool = True,
                 wandb_project: str | None = None, name: str = "", config: dict | None = None,
                 history: list[dict[str, Any]] | None = None, group: str | None = None):
        self.folder = pathlib.Path(folder)
        self.config = config
        self.writer: Any = None
        self.wandb_run: Any = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            logdir = self.folder / "tensorboard"
            if history is not None and logdir.exists():
                shutil.rmtree(logdir)
            self.writer = SummaryWriter(logdir=str(logdir), flush_secs=30)
            if history:
                self._tensorboard_rows(history)
                self.writer.flush()
        if wandb_project is not None:
            check_wandb(wandb_project)
            import wandb

            run_id = wandb_run_id(self.folder)
            self.wandb_run = wandb.init(project=wandb_project, name=name or None, group=group,
                                        dir=str(self.folder), config=config, id=run_id,
                                        resume="allow")

    def log_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        """One metrics row per update (``env_steps`` is the step)."""
        rows = list(rows)
        if self.writer is not None:
            self._tensorboard_rows(rows)
            self.writer.flush()
        if self.wandb_run is not None:
            for row in rows:
                self.wandb_run.log(_scalars(row, "train"), step=int(row["env_steps"]))

    def _tensorboard_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            step = int(row["env_steps"])
            for tag, value in _scalars(row, "train").items():
                self.writer.add_scalar(tag, value, global_step=step)
            for name, tag in SB3_TAGS.items():
                sb3_value = row.get(name)
                if isinstance(sb3_value, (int, float)) and math.isfinite(sb3_value):
                    self.writer.add_scalar(tag, float(sb3_value), global_step=step)

    def log_periodic_evaluation(self, row: dict[str, Any], *, tensorboard_only: bool = False
                                ) -> None:
        """One periodic evaluation row under :data:`PERIODIC_TAGS` at its
        ``env_steps`` (``tensorboard_only``: a resumed run's kept rows)."""
        values = {tag: float(row[name]) for name, tag in PERIODIC_TAGS.items()
                  if isinstance(row.get(name), (int, float)) and math.isfinite(row[name])}
        step = int(row["env_steps"])
        if self.writer is not None:
            for tag, value in values.items():
                self.writer.add_scalar(tag, value, global_step=step)
            self.writer.flush()
        if self.wandb_run is not None and values and not tensorboard_only:
            self.wandb_run.log(values, step=step)

    def log_evaluation(self, evaluation: dict[str, Any], step: int) -> None:
        """The final evaluation (:func:`final_scalars`), with the run's
        hyperparameters in TensorBoard's HPARAMS table."""
        values = final_scalars(evaluation)
        if self.writer is not None:
            for tag, value in values.items():
                self.writer.add_scalar(tag, value, global_step=int(step))
            if self.config:
                self.writer.add_hparams(hparams(self.config),
                                        {f"hparam/{k}": v for k, v in values.items()},
                                        name="hparams", global_step=int(step))
            self.writer.flush()
        if self.wandb_run is not None:
            self.wandb_run.log(values, step=int(step))
            for tag, value in values.items():
                self.wandb_run.summary[tag] = value

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None

    def __enter__(self) -> "RunLoggers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
