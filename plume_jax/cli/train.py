"""``plume-jax train`` and ``plume-jax sweep``: PPO training from a YAML
config (:mod:`plume_jax.train.trainer`) and a grid of trainings as one
compiled program (:mod:`plume_jax.train.sweep`)."""

from __future__ import annotations

import argparse

from plume_jax.cli.common import default_out
from plume_jax.errors import ValidationError


def add_parsers(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser("train", help="train a PPO policy from a YAML config (see configs/)")
    train.add_argument("--config", required=True, help="training config YAML, e.g. "
                       "configs/train_gaussian.yaml")
    train.add_argument("--total-steps", type=int, default=None,
                       help="env steps to train (overrides algo.total_steps)")
    train.add_argument("--seed", type=int, default=None, help="training seed (overrides run.seed)")
    train.add_argument("--out", default=None,
                       help="output folder (default runs/<config name>)")
    train.add_argument("--resume", default=None, metavar="CHECKPOINT",
                       help="continue from a checkpoint folder (e.g. runs/x/checkpoint)")
    train.add_argument("--quiet", action="store_true", help="no progress lines")

    sweep = sub.add_parser("sweep", help="train a grid of configurations as one compiled program")
    sweep.add_argument("--config", required=True, help="sweep YAML, e.g. "
                       "configs/sweep_gaussian.yaml")
    sweep.add_argument("--out", default=None, help="output folder (default runs/<config name>)")
    sweep.add_argument("--quiet", action="store_true", help="no progress lines")


def run_train(args: argparse.Namespace) -> int:
    """``plume-jax train``: see :mod:`plume_jax.train.trainer`."""
    from plume_jax.train.config import load_train_config
    from plume_jax.train.trainer import print_summary, train

    config = load_train_config(args.config)
    if args.total_steps is not None:
        if args.total_steps < 1:
            raise ValidationError.for_parameter("--total-steps", args.total_steps,
                                                "an integer >= 1")
        config = config.replace(algo={"total_steps": args.total_steps})
    if args.seed is not None:
        config = config.replace(run={"seed": args.seed})
    out = args.out or default_out(args.config)
    result = train(config, out, progress=not args.quiet, resume=args.resume)
    print_summary(result.summary)
    print(f"outputs in {out}/ (metrics.jsonl, metrics.csv, learning_curve.png, checkpoint/, "
          "policy/, summary.json)")
    return 0


def run_sweep(args: argparse.Namespace) -> int:
    """``plume-jax sweep``: see :mod:`plume_jax.train.sweep`."""
    from plume_jax.train.sweep import load_sweep_config, print_results, run_sweep as sweep

    config = load_sweep_config(args.config)
    out = args.out or default_out(args.config)
    result = sweep(config, out, progress=not args.quiet)
    print_results(result.summary)
    print(f"outputs in {out}/ (results.csv, results.json, metrics.jsonl, learning_curves.png)")
    return 0
