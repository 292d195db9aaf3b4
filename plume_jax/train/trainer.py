"""``train(config)``: one training run from a validated config, the Python
door to what ``plume-jax train`` runs: a sweep of one member
(:func:`single_run`), through the one run function
(:func:`plume_jax.train.run.run`) with the single-run folder rules
(:class:`plume_jax.train.folder.SingleRun`); the loop is
:mod:`plume_jax.train.loop`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
from typing import Any, Callable, TextIO

import numpy as np

from plume_jax.train.algorithms.base import Algorithm
from plume_jax.train.config import TrainConfig
from plume_jax.train.folder import SingleRun
from plume_jax.train.lane_schedule import lanes_line
from plume_jax.train.loop import Member, Program, build_program
from plume_jax.train.run import run


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns: the ``config`` and ``algo`` trained, the
    final ``runner`` (parameters, optimiser and env state), this call's
    per-update metrics ``rows``, the ``summary`` (also ``summary.json``:
    budget, timings, throughput, evaluation) and the output folder (or
    None)."""

    config: TrainConfig
    algo: Algorithm
    runner: Any
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    out_dir: pathlib.Path | None

    def policy(self, greedy: bool = True):
        """The trained policy as an ``agents.trained.TrainedPolicy``."""
        from agents.trained import TrainedPolicy

        spec, arrays = self.algo.policy(self.runner)
        spec = {**spec, "env": self.algo.env.settings}
        return TrainedPolicy(spec, {k: np.asarray(v) for k, v in arrays.items()},
                             greedy=greedy)


def single_run(config: TrainConfig, out: pathlib.Path | None,
               resume: str | pathlib.Path | None = None
               ) -> tuple[SingleRun, Callable[[], list[Program]]]:
    """The folder rules and the program builder of one run of ``config`` in
    ``out``, for :func:`plume_jax.train.run.run`: a program of one member
    whose run folder (and checkpoint folder) is ``out``."""
    def build() -> list[Program]:
        env, env_params = config.make_env()
        return [build_program([Member(config, env, env_params, folder=out)], batched=False,
                              folder=out)]

    return SingleRun(out, config, resume), build


def train(config: TrainConfig, out_dir: str | pathlib.Path | None = None, *,
          progress: bool = True, stream: TextIO | None = None,
          resume: str | pathlib.Path | None = None, evaluate: bool = True,
          overwrite: bool = False) -> TrainResult:
    """Train with ``config``.

    Args:
        config: a validated :class:`TrainConfig`.
        out_dir: output folder (None: write nothing, return only). It must be
            new or empty, unless ``overwrite`` or it is the folder of the run
            being resumed.
        progress: show a progress bar (a terminal) or progress lines (to
            ``stream``, default stderr; the summary is for stdout).
        resume: a run folder or checkpoint folder to continue from; the
            config may differ from the checkpoint's only in the budget,
            logging, checkpointing, devices and evaluation settings
            (:func:`~plume_jax.train.folder.resume_point`).
        evaluate: run the greedy evaluation at the end.
        overwrite: delete the outputs of an earlier run in ``out_dir``
            (:data:`~plume_jax.train.folder.RUN_OUTPUTS`; other files
            stay) before writing.

    Everything is checked (the folder, the env, the checkpoint and its
    config) before anything is written or compiled, holding the folder's
    lock (:class:`~plume_jax.train.folder.FolderLock`: a second process
    on the same folder gets a ``StateError`` naming this one) until
    everything is written. With several processes every process calls
    ``train`` with the same arguments, after
    :func:`plume_jax.train.distributed.join`; only process 0 shows progress
    and writes ``out_dir``.
    """
    out = pathlib.Path(out_dir) if out_dir is not None else None
    folders, build = single_run(config, out, resume)
    result = run(folders, build, [config], progress=progress, stream=stream, evaluate=evaluate,
                 overwrite=overwrite)
    trained = result.programs[0]
    return TrainResult(config=config, algo=trained.setup.algo, runner=trained.runner,
                       rows=trained.rows[0], summary=result.summaries[0], out_dir=out)


def print_summary(summary: dict[str, Any], stream: TextIO | None = None) -> None:
    """A run's summary for the terminal: what was trained, how fast, the
    evaluation, the notes (``stream``: default stdout)."""
    import sys

    stream = stream or sys.stdout
    p = functools.partial(print, file=stream)
    p(f"trained {summary['env_steps_this_call']:,} env steps ({summary['updates_this_call']} "
      f"updates, {summary['env_steps_total']:,} in total) on {summary['env']}")
    sps = summary["steps_per_second_excl_compile"]
    p(f"compile {summary['compile_seconds']:.1f} s, train {summary['train_seconds']:.1f} s"
      + (f" ({sps:,.0f} env steps/s excluding compile)" if sps else ""))
    lanes = lanes_line(summary.get("config", {}).get("run", {}).get("lanes"),
                       summary["num_updates"])
    if lanes is not None:  # N copies trained: N times the compute, steps/s one lane's
        p(lanes)
    ev = summary.get("evaluation")
    if ev:
        kind = "greedy" if ev["greedy"] else "sampled"
        steps = ev["mean_steps_to_goal"]
        p(f"{kind} evaluation on {ev['episodes']} fresh episodes (seed {ev['seed']}): "
          f"success {100 * ev['success_rate']:.1f}% ({ev['successes']}/{ev['episodes']})"
          + (f", mean steps to goal {steps:.1f}" if steps is not None else ""))
        if ev.get("mean_steps_to_first_arrival") is not None:
            p(f"first arrival after {ev['mean_steps_to_first_arrival']:.1f} steps on average; "
              f"{ev['mean_arrivals']:.2f} agents at the goal and {ev['mean_collisions']:.1f} "
              "blocked moves per episode")
    for note in summary.get("notes", []):
        p(f"note: {note}")
    p(f"wall time {summary['wall_seconds']:.1f} s")
