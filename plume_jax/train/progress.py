"""Where a run's metrics go: the progress line, from inside the compiled
program (:class:`Progress`); the metrics files (``metrics.jsonl``,
``metrics.csv``); TensorBoard event files (``tensorboardX``) and, when asked
for and installed, Weights & Biases (:class:`RunLoggers`).

:class:`RunLoggers` logs the metrics columns under ``train/`` (and
Stable-Baselines3's ``rollout/`` tags), the periodic evaluations under SB3's
``EvalCallback`` tags (``eval/``) and the final evaluation under ``final/``;
the step is the env step count (of one run or sweep member). A resumed run
rewrites its TensorBoard files from the metrics kept up to its checkpoint, so
they hold every update once (W&B keeps what it received first for a step).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import pathlib
import re
import shutil
import time
import uuid
from typing import Any, Iterable

import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.files import atomic_write
from plume_jax.files.safe_io import read_bytes_bounded, read_text_bounded
from plume_jax.progress import ProgressBar


def _fmt(x: float, spec: str) -> str:
    return "n/a" if x is None or not math.isfinite(x) else format(x, spec)


def _percent(rate: float, spec: str = ".1f") -> str:
    """``rate`` (a fraction) as ``"42.0%"``, or ``"n/a"`` (never ``"n/a%"``)."""
    return "n/a" if rate is None or not math.isfinite(rate) else f"{format(100 * rate, spec)}%"


def _ended(episodes: np.ndarray, batched: bool) -> str:
    """How many episodes ended: of a run, or of a program's members (their
    total and how many members had one: the rates that follow are theirs)."""
    if not batched:
        return f"{_fmt(float(episodes.reshape(-1)[0]), '.0f')} episodes ended: "
    counts = np.nan_to_num(episodes.reshape(-1))
    total, some = float(counts.sum()), int((counts > 0).sum())
    return (f"{total:.0f} episode{'' if total == 1 else 's'} ended in {some} of "
            f"{counts.size} members: ")


class Progress:
    """The ``jax.debug.callback`` of a training program: called with the
    metrics of every ``log_every``-th update (it returns nothing to the
    program, so it cannot change results), it moves ``bar`` (shared by a
    sweep's programs) to ``offset`` (its count before this program) plus the
    env steps of its ``members``, with a line: ``prefix``, update
    ``u/num_updates``, env steps per second, return, success, length, KL (a
    program's members' mean and range).
    """

    def __init__(self, bar: ProgressBar, num_updates: int, offset: float = 0.0,
                 members: int = 1, prefix: str = ""):
        self.bar = bar
        self.num_updates = num_updates
        self.offset = offset
        self.members = members
        self.prefix = prefix
        self.restart()

    def restart(self, env_steps: float = 0.0) -> None:
        """Reset the SPS clock before a compiled chunk; ``env_steps``: one
        member's steps so far."""
        self._t = time.perf_counter()
        self._steps = env_steps

    def __call__(self, metrics: dict[str, Any]) -> None:
        m = {k: np.asarray(v, np.float64) for k, v in metrics.items()}
        batched = m["update"].ndim > 0
        update = int(m["update"].reshape(-1)[0])
        steps = float(m["env_steps"].reshape(-1)[0])
        now = time.perf_counter()
        sps = self.members * (steps - self._steps) / max(now - self._t, 1e-9)
        self._t, self._steps = now, steps

        def agg(name: str) -> tuple[float, float, float]:
            v = m[name].reshape(-1) if name in m else np.zeros(0)  # an algorithm without it
            v = v[np.isfinite(v)]
            return (float(v.mean()), float(v.min()), float(v.max())) if v.size else \
                (math.nan, math.nan, math.nan)

        ret, succ, length, kl = agg("return_mean"), agg("success_rate"), agg("length_mean"), \
            agg("approx_kl")
        message = f"update {update}/{self.num_updates} | SPS {sps:,.0f} | "
        episodes = agg("episodes")
        if "episodes" in m and not episodes[2] > 0:  # no rate without an ended episode
            message += "no episode ended in this update (return, success, length: n/a)"
        else:
            ended = "" if "episodes" not in m else _ended(m["episodes"], batched)
            message += (f"{ended}return {_fmt(ret[0], '.3f')} | "
                        f"success {_percent(succ[0])} (sampled actions) | "
                        f"length {_fmt(length[0], '.0f')}")
        if math.isfinite(kl[0]):  # value-iteration algorithms have no policy KL
            message += f" | kl {_fmt(kl[0], '.4f')}"
        if batched:
            message += (f" | {m['update'].size} members, success range "
                        f"[{_percent(succ[1], '.0f')}, {_percent(succ[2], '.0f')}]")
        if self.prefix:
            message = f"{self.prefix} | {message}"
        self.bar.update(self.offset + self.members * steps, message=message)


def metric_rows(metrics: dict[str, Any]) -> list[dict[str, float | int | None]]:
    """Stacked per-update metrics (arrays [U] or [U, M]) -> one dict per
    update (and member) of Python scalars, None for NaN or infinite."""
    arrays = {k: np.asarray(v) for k, v in metrics.items()}
    n = arrays["update"].shape[0]
    rows = []
    for i in range(n):
        if arrays["update"].ndim == 1:
            rows.append({k: _scalar(v[i]) for k, v in arrays.items()})
        else:
            for j in range(arrays["update"].shape[1]):
                rows.append({"member": j, **{k: _scalar(v[i, j]) for k, v in arrays.items()}})
    return rows


def _scalar(x: Any) -> float | int | None:
    x = np.asarray(x).item()
    return None if isinstance(x, float) and not math.isfinite(x) else x


def append_jsonl(path: str | pathlib.Path, rows: Iterable[dict[str, Any]]) -> None:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


#: The largest metrics file read (bytes).
MAX_METRICS_BYTES = 4 << 30


def read_jsonl(path: str | pathlib.Path) -> list[dict[str, Any]]:
    """The rows of a metrics file (at most :data:`MAX_METRICS_BYTES`): one
    JSON object with an integer ``update`` per line. A torn last line (a kill
    during the append) is skipped; a damaged line before it is a
    ``ValidationError`` naming the file and the line."""
    path = pathlib.Path(path)
    if not path.exists():
        return []
    data = read_bytes_bounded(path, MAX_METRICS_BYTES, "metrics")
    lines = data.decode("utf-8", errors="replace").splitlines()
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            if line.count("[") + line.count("{") > 256:
                raise ValueError("nested deeper than a metrics row")
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            if isinstance(row.get("update"), bool) or not isinstance(row.get("update"), int):
                raise ValueError("no integer 'update'")
        except (ValueError, RecursionError) as exc:
            if i == len(lines) - 1:
                break  # torn by a kill: the checkpoint never covers it
            raise ValidationError.for_parameter(
                "metrics", f"{path}:{i + 1}", f"one JSON object per line ({exc})") from None
        rows.append(row)
    return rows


def write_jsonl(path: str | pathlib.Path, rows: Iterable[dict[str, Any]]) -> None:
    """Replace the metrics file with ``rows`` (atomically)."""
    atomic_write(path, "".join(json.dumps(row) + "\n" for row in rows))


def rows_up_to(path: str | pathlib.Path, last_update: int) -> list[dict[str, Any]]:
    """The rows of a metrics file up to ``last_update`` (a checkpoint's)."""
    return [r for r in read_jsonl(path) if int(r.get("update", 0)) <= last_update]


def trim_jsonl(path: str | pathlib.Path, last_update: int) -> list[dict[str, Any]]:
    """Keep (and return) only the rows up to ``last_update`` (a
    checkpoint's), so a resumed run counts no update twice."""
    path = pathlib.Path(path)
    kept = rows_up_to(path, last_update)
    if path.exists():
        write_jsonl(path, kept)
    return kept


def write_csv(path: str | pathlib.Path, rows: list[dict[str, Any]]) -> None:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in fields})


# ------------------------------------------------------- TensorBoard and W&B
def check_wandb(project: str | None) -> None:
    """``ValidationError`` if W&B logging is asked for (``project`` set) but
    the ``wandb`` package is not installed."""
    if project is not None and importlib.util.find_spec("wandb") is None:
        raise ValidationError.for_parameter(
            "run.wandb_project", project, "null, or the wandb package installed (pip install "
            "wandb, or pip install 'plume-jax[wandb]') to log to Weights & Biases")


#: What a ``wandb_run_id`` file may hold: W&B's run-id characters, at most
#: 64 of them (read at most 1 KiB).
_WANDB_RUN_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def wandb_run_id(folder: str | pathlib.Path) -> str:
    """The W&B run id kept in ``folder/wandb_run_id`` (a resumed run logs to
    the same W&B run), or a new one, written there (atomically) first;
    ``ValidationError`` when the file is not one :data:`_WANDB_RUN_ID`."""
    id_file = pathlib.Path(folder) / "wandb_run_id"
    if os.path.lexists(id_file):
        run_id = read_text_bounded(id_file, 1024, "wandb_run_id", "a W&B run id file").strip()
        if not _WANDB_RUN_ID.fullmatch(run_id):
            raise ValidationError.for_parameter(
                "wandb_run_id", str(id_file), "a file holding one W&B run id (1 to 64 letters, "
                f"digits, '_', '.' or '-'), not {run_id[:40]!r}")
        return run_id
    run_id = uuid.uuid4().hex[:12]
    atomic_write(id_file, run_id)
    return run_id


def _scalars(row: dict[str, Any], prefix: str) -> dict[str, float]:
    """The finite numbers (not bools) of ``row`` but ``member``, as ``prefix/name``."""
    return {f"{prefix}/{name}": float(value) for name, value in row.items()
            if name != "member" and isinstance(value, (int, float))
            and not isinstance(value, bool) and math.isfinite(value)}


#: Stable-Baselines3's TensorBoard tags, written beside ``train/<metric>``
#: (``rollout/ep_rew_mean`` is the mean return of the episodes that ended in
#: the update, as SB3's is of its recent episodes).
SB3_TAGS = {"return_mean": "rollout/ep_rew_mean", "length_mean": "rollout/ep_len_mean",
            "success_rate": "rollout/success_rate"}

#: Stable-Baselines3's ``EvalCallback`` tags of a periodic evaluation row
#: (``eval/mean_ep_length`` is of the successful episodes here).
PERIODIC_TAGS = {"mean_return": "eval/mean_reward", "mean_steps_to_goal": "eval/mean_ep_length",
                 "success_rate": "eval/success_rate"}


def hparams(config: dict[str, Any]) -> dict[str, Any]:
    """A resolved config's ``env.id``, ``algo.*``, ``network.*`` and
    ``run.seed`` for TensorBoard's HPARAMS table (lists and mappings as
    text, None as ``"null"``)."""
    out: dict[str, Any] = {"env.id": str(config.get("env", {}).get("id"))}
    for section in ("algo", "network"):
        for key, value in (config.get(section) or {}).items():
            out[f"{section}.{key}"] = value if isinstance(value, (int, float, str)) \
                else json.dumps(value)
    out["run.seed"] = int((config.get("run") or {}).get("seed", 0))
    return out


class RunLoggers:
    """The TensorBoard writer (``tensorboard``: event files in
    ``folder/tensorboard/``) and W&B run (``wandb_project`` not None; files
    in ``folder/wandb/``, under ``name`` and ``group``, a sweep's members
    sharing one) of one run or sweep member; ``config``: the resolved config.
    ``history``: a resumed run's metrics rows up to its checkpoint, from
    which the TensorBoard files are written anew."""

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
        """The final evaluation under ``final/`` (a periodic one may fall on
        the same step), named as :data:`PERIODIC_TAGS` name the numbers they
        share (``final/mean_reward``), with the run's hyperparameters in
        TensorBoard's HPARAMS table."""
        names = {name: tag.split("/", 1)[1] for name, tag in PERIODIC_TAGS.items()}
        values = _scalars({names.get(k, k): v for k, v in evaluation.items()}, "final")
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
