"""``plume-jax tune``: hyperparameter search with Optuna, each batch of
trials trained as vmapped programs (:mod:`plume_jax.train.tune`)."""

from __future__ import annotations

import argparse
import pathlib

from plume_jax.cli.common import default_out
from plume_jax.settings import parse_overrides
from plume_jax.core.errors import ValidationError


def add_parser(sub: argparse._SubParsersAction) -> None:
    tune = sub.add_parser("tune", help="tune hyperparameters with Optuna (batches of trials as "
                          "one compiled program each)")
    tune.add_argument("--config", default=None, help="the training config to tune, e.g. "
                      "configs/train_gaussian.yaml")
    tune.add_argument("--space", default=None, help="the search-space YAML, e.g. "
                      "configs/tune_gaussian.yaml")
    tune.add_argument("--trials", type=int, default=None,
                      help="trials the study should hold (complete, pruned or running; with "
                      "--resume: raises the budget)")
    tune.add_argument("--out", default=None,
                      help="output folder, new or empty (default runs/tune_<config name>)")
    tune.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="override a setting of the training config (repeatable)")
    tune.add_argument("--sampler", default=None, choices=("tpe", "random", "grid"),
                      help="Optuna sampler (default: the space's, else tpe)")
    tune.add_argument("--seed", type=int, default=None, help="the sampler's seed")
    tune.add_argument("--pruner", default=None,
                      choices=("none", "median", "successive_halving", "hyperband"),
                      help="Optuna pruner (default: the space's, else none)")
    tune.add_argument("--batch-size", type=int, default=None,
                      help="trials asked for and trained at once (default: the space's, else 8)")
    tune.add_argument("--storage", default=None,
                      help="sqlite (default: DIR/study.db), journal (DIR/study.journal, for "
                      "several processes), journal:PATH, sqlite:///PATH, or a postgresql:// / "
                      "mysql:// URL (its driver installed); not an in-memory database")
    tune.add_argument("--study-name", default=None, help="default: the out folder's name")
    tune.add_argument("--resume", default=None, metavar="DIR",
                      help="continue (or join) the study in DIR, with its own tune.json")
    tune.add_argument("--quiet", action="store_true", help="no progress bar")


#: What a new study needs, option -> what to give.
MISSING = {"config": "the training config to tune, e.g. configs/train_gaussian.yaml",
           "space": "the search-space YAML, e.g. configs/tune_gaussian.yaml",
           "trials": "how many trials the study should hold, e.g. --trials 32"}


def run(args: argparse.Namespace) -> int:
    """``plume-jax tune``."""
    from plume_jax.train.tune import new_record, read_record, tune

    if args.resume is not None:
        given = [f for f in ("config", "space", "sampler", "seed", "pruner", "batch_size",
                             "storage", "study_name", "out") if getattr(args, f) is not None]
        if given or args.set:
            raise ValidationError.for_parameter(
                "--resume", args.resume, "no --" + (given[0] if given else "set").replace(
                    "_", "-") + " with it: a resumed study keeps its tune.json (only "
                "--trials raises the budget)")
        record = read_record(args.resume, args.trials)
    else:
        for flag, what in MISSING.items():
            if getattr(args, flag) is None:
                raise ValidationError(
                    f"--{flag} is required to start a study: {what} (or --resume DIR to "
                    "continue one)", parameter=f"--{flag}", allowed=what)
        out = pathlib.Path(args.out) if args.out else \
            pathlib.Path(default_out(args.config)).with_name(
                f"tune_{pathlib.Path(args.config).stem}")
        record = new_record(args.config, args.space, trials=args.trials, out=out,
                            overrides=parse_overrides(args.set),
                            space_overrides={"sampler": args.sampler, "seed": args.seed,
                                             "pruner": args.pruner,
                                             "batch_size": args.batch_size},
                            storage=args.storage, study_name=args.study_name)
    results = tune(record, resume=args.resume is not None, progress=not args.quiet)
    best = results.get("best")
    if best is not None:
        steps = best.get("mean_steps_to_goal")
        home = record["out"] if best.get("out_id", record.get("out_id")) == \
            record.get("out_id") else best.get("out")
        where = f" ({home}/{best['folder']})" if best.get("folder") else ""
        print(f"best trial {best['trial']}{where}: greedy success {best['value']:.3f}"
              + (f", {steps:.1f} steps to the goal" if isinstance(steps, float) else "")
              + f"; params {best['params']}")
    print(f"outputs in {record['out']}/ (summary.md, best_config.yaml, trials.csv, "
          "results.json, optimization_history.png, parallel_coordinate.png, trials/)")
    return 0
