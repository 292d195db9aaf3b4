"""``plume-jax train`` and ``plume-jax sweep``: a training run from a YAML
config (any algorithm, ``algo.algorithm``; :func:`plume_jax.train.run.train`)
and a grid of trainings, one compiled program per static structure
(:mod:`plume_jax.train.sweep`). Each parses its arguments into one config
and makes one call to the run function (:mod:`plume_jax.train.run`); the
closing line names the outputs from their one list
(:data:`plume_jax.train.folder.RUN_FILES`, ``SWEEP_FILES``).

Every input (config files, ``--set`` values, the output folder, the
checkpoint to resume and its config) is checked before anything is
written or compiled.

Both run across several processes (hosts) when their flags
(``--coordinator``, ``--num-processes``, ``--process-id``) or the launcher's
environment say so (:mod:`plume_jax.train.distributed`): they join the
multi-process system right after reading the config, before any other JAX
computation, and only process 0 reports."""

from __future__ import annotations

import argparse
import functools
import pathlib
import sys
from typing import Any, TextIO

from plume_jax.cli.common import default_out
from plume_jax.settings import parse_overrides
from plume_jax.core.errors import ValidationError

_SET_HELP = ("override one setting by its dotted name, VALUE in YAML syntax (repeatable), e.g. "
             "--set algo.learning_rate=3e-4 --set env.overrides.sigma=10 "
             "--set env.overrides.reward.scale=0.05")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser("train", help="train a policy from a YAML config (see configs/; "
                           "PPO unless algo.algorithm names another)")
    train.add_argument("--config", default=None, help="training config YAML, e.g. "
                       "configs/train_gaussian.yaml (with --resume: default the run's own "
                       "config.yaml)")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help=_SET_HELP)
    train.add_argument("--total-steps", type=int, default=None,
                       help="env steps to train (same as --set algo.total_steps=N)")
    train.add_argument("--seed", type=int, default=None,
                       help="training seed (same as --set run.seed=S)")
    train.add_argument("--out", default=None,
                       help="output folder, new or empty (default runs/<config name>; for "
                       "the best_config.yaml of a plume-jax tune study DIR: runs/<DIR "
                       "name>_best; with --resume: the resumed run's folder)")
    train.add_argument("--resume", default=None, metavar="RUN",
                       help="continue a run: its folder (e.g. runs/train_gaussian, or a sweep "
                       "member's folder) or one of its checkpoint folders")
    train.add_argument("--overwrite", action="store_true",
                       help="replace the outputs of an earlier run in --out (other files stay)")
    train.add_argument("--wandb", default=None, metavar="PROJECT",
                       help="also log to this Weights & Biases project (needs wandb)")
    train.add_argument("--quiet", action="store_true", help="no progress bar or lines")
    _add_process_flags(train)

    sweep = sub.add_parser("sweep", help="train a grid of configurations (one compiled program "
                           "per static structure)")
    sweep.add_argument("--config", default=None, help="sweep YAML, e.g. "
                       "configs/sweep_gaussian.yaml")
    sweep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a setting of the base config by its dotted name (e.g. "
                       "--set algo.total_steps=500000), or the sweep's own grid.KEY=[...] or "
                       "mode=zip; VALUE in YAML syntax (repeatable)")
    sweep.add_argument("--out", default=None,
                       help="output folder, new or empty (default runs/<config name>)")
    sweep.add_argument("--overwrite", action="store_true",
                       help="replace the outputs of an earlier sweep in --out (other files stay)")
    sweep.add_argument("--resume", default=None, metavar="DIR",
                       help="continue a killed sweep in its folder, from its programs' "
                       "checkpoints (its own sweep.yaml; no --config or --set)")
    sweep.add_argument("--wandb", default=None, metavar="PROJECT",
                       help="also log every member to this Weights & Biases project (needs "
                       "wandb)")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar or lines")
    _add_process_flags(sweep)


def _add_process_flags(parser: argparse.ArgumentParser) -> None:
    multi = parser.add_argument_group(
        "several processes", "run across processes (hosts): start the same command in every "
        "process with these three flags, or let run.distributed=auto read them from the "
        "launcher (SLURM srun, multi-host Cloud TPU, JAX_COORDINATOR_ADDRESS / "
        "JAX_NUM_PROCESSES / JAX_PROCESS_ID); process 0 writes the outputs")
    multi.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                       help="address of process 0, where the processes meet")
    multi.add_argument("--num-processes", type=int, default=None, metavar="N",
                       help="number of processes")
    multi.add_argument("--process-id", type=int, default=None, metavar="I",
                       help="this process's id, 0 to N-1")


def _join(args: argparse.Namespace, distributed: str) -> bool:
    """Join the multi-process system the flags, ``run.distributed`` and the
    launcher ask for (before any JAX computation); True in process 0."""
    from plume_jax.train.distributed import is_main_process, join

    join(distributed, coordinator=args.coordinator, num_processes=args.num_processes,
         process_id=args.process_id)
    return is_main_process()


def train_overrides(args: argparse.Namespace) -> dict:
    """The dotted overrides of ``train``'s command line, in order: ``--set``,
    then ``--total-steps``, ``--seed``, ``--wandb``."""
    overrides = parse_overrides(args.set)
    if args.total_steps is not None:
        overrides["algo.total_steps"] = args.total_steps
    if args.seed is not None:
        overrides["run.seed"] = args.seed
    if args.wandb is not None:
        overrides["run.wandb_project"] = args.wandb
    return overrides


def run_train(args: argparse.Namespace) -> int:
    """``plume-jax train``: one run (:func:`plume_jax.train.run.single_run`)
    through the run function (:func:`plume_jax.train.run.run`)."""
    from plume_jax.train.checkpoint import find_checkpoint, read_checkpoint
    from plume_jax.train.config import current_form, load_train_config, train_config, \
        with_overrides
    from plume_jax.train.folder import RUN_FILES, outputs_line
    from plume_jax.train.run import run, single_run

    overrides = train_overrides(args)
    run_dir = None
    if args.resume is not None:
        run_dir, ckpt = find_checkpoint(args.resume)
        if args.config is None and not (run_dir / "config.yaml").is_file():
            saved = read_checkpoint(ckpt)[0].get("config")
            if not isinstance(saved, dict):
                raise ValidationError.for_parameter(
                    "--config", None, f"a config (the run folder {run_dir} has no config.yaml "
                    "and the checkpoint none either)")
            config = train_config(with_overrides(current_form(saved), overrides))
        else:
            config = load_train_config(args.config or run_dir / "config.yaml", overrides,
                                       written=args.config is None)
    elif args.config is None:
        raise ValidationError.for_parameter("--config", None,
                                            "a training config YAML (or --resume RUN)")
    else:
        config = load_train_config(args.config, overrides)
    out = pathlib.Path(args.out) if args.out else (
        run_dir if run_dir is not None else pathlib.Path(default_out(args.config)))
    main = _join(args, config.run["distributed"])
    folders, build = single_run(config, out, args.resume)
    summary = run(folders, build, [config], progress=not args.quiet,
                  overwrite=args.overwrite).summaries[0]
    if not main:
        return 0  # process 0 reports
    print_summary(summary)
    print(outputs_line(out, RUN_FILES, config))
    best = summary.get("best_periodic_evaluation")
    if best is not None:
        steps = best["mean_steps_to_goal"]
        print(f"best periodic evaluation: update {best['update']}, success "
              f"{100 * best['success_rate']:.1f}% of {best['episodes']} episodes"
              + (f", mean steps to goal {steps:.1f}" if steps is not None else "")
              + f" (policy in {out}/best/)")
    return 0


def run_sweep(args: argparse.Namespace) -> int:
    """``plume-jax sweep``: see :mod:`plume_jax.train.sweep`."""
    from plume_jax.train.folder import SWEEP_FILES, outputs_line
    from plume_jax.train.report import print_results
    from plume_jax.train.sweep import load_sweep_config, run_sweep as sweep

    overrides = parse_overrides(args.set)
    if args.wandb is not None:
        overrides["run.wandb_project"] = args.wandb
    if args.resume is not None:
        folder = pathlib.Path(args.resume)
        if args.config is not None or overrides:
            raise ValidationError.for_parameter(
                "--resume", args.resume, "no --config, --set or --wandb with it: a resumed sweep "
                "continues its own sweep.yaml (train a member further with plume-jax train "
                "--resume <member folder>)")
        if not (folder / "sweep.yaml").is_file():
            raise ValidationError.for_parameter("--resume", args.resume,
                                                "the folder of a sweep (with its sweep.yaml)")
        config = load_sweep_config(folder / "sweep.yaml", written=True)
        out = pathlib.Path(args.out) if args.out else folder
        if out.resolve() != folder.resolve():
            raise ValidationError.for_parameter("--out", args.out,
                                                f"the resumed sweep's own folder {folder}")
    elif args.config is None:
        raise ValidationError.for_parameter("--config", None, "a sweep YAML (or --resume DIR)")
    else:
        config = load_sweep_config(args.config, overrides)
        out = pathlib.Path(args.out or default_out(args.config))
    main = _join(args, config.base.run["distributed"])
    result = sweep(config, out, progress=not args.quiet, overwrite=args.overwrite,
                   resume=args.resume is not None)
    if not main:
        return 0  # process 0 reports
    print_results(result.summary)
    print(outputs_line(out, SWEEP_FILES))
    return 0


def print_summary(summary: dict[str, Any], stream: TextIO | None = None) -> None:
    """A run's summary for the terminal: what was trained, how fast, the
    evaluation, the notes (``stream``: default stdout)."""
    stream = stream or sys.stdout
    p = functools.partial(print, file=stream)
    p(f"trained {summary['env_steps_this_call']:,} env steps ({summary['updates_this_call']} "
      f"updates, {summary['env_steps_total']:,} in total) on {summary['env']}")
    sps = summary["steps_per_second_excl_compile"]
    p(f"compile {summary['compile_seconds']:.1f} s, train {summary['train_seconds']:.1f} s"
      + (f" ({sps:,.0f} env steps/s excluding compile)" if sps else ""))
    from plume_jax.train.lane_schedule import lanes_line

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
