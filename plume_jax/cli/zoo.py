"""``plume-jax zoo publish``: put a finished training run, an exported
policy or a seed sweep into the zoo (:mod:`plume_jax.scoreboard.zoo_publish`
does the work; ``plume-jax list --zoo`` lists what is there)."""

from __future__ import annotations

import argparse
import json
import pathlib

from plume_jax.core.errors import ValidationError


def add_parser(sub: argparse._SubParsersAction) -> None:
    from plume_jax.scoreboard.zoo_publish import MAX_POLICY_BYTES, POLICY_BYTES_CEILING

    zoo = sub.add_parser("zoo", help="add trained agents to the zoo (plume-jax list --zoo "
                         "lists it)", description="The zoo of trained agents (docs/agents.md).")
    actions = zoo.add_subparsers(dest="zoo_command", required=True)
    p = actions.add_parser(
        "publish", help="put a finished run, an exported policy or a seed sweep into the zoo",
        description="Copy a finished run's policy into configs/zoo/NAME/<version>/ with its "
        "config and entry.yaml (preset, seed, training cost, greedy evaluation); an exported "
        "policy with --config and --facts; or, with --seeds, every member of a seed sweep of "
        "entry NAME@VERSION's config (zoo:NAME@VERSION#SEED).")
    p.add_argument("run", help="a finished run folder of plume-jax train, or an exported "
                   "policy folder (with --config and --facts), or a seed sweep (--seeds)")
    p.add_argument("name", help="the zoo name, e.g. filament-gru (with --seeds: NAME@VERSION)")
    p.add_argument("--seeds", action="store_true",
                   help="RUN is a finished seed sweep of entry NAME@VERSION's config: keep "
                   "every member's policy under it (zoo:NAME@VERSION#SEED)")
    p.add_argument("--device", default=None,
                   help="what it was trained on (default: from the run's summary.json)")
    p.add_argument("--description", default="", help="one line saying what it is")
    p.add_argument("--config", default=None,
                   help="an exported policy's training config (policy folders only)")
    p.add_argument("--facts", default=None,
                   help="an exported policy's measured training facts, a YAML file (policy "
                   "folders only; plume_jax.scoreboard.zoo_publish says what it holds)")
    p.add_argument("--max-policy-bytes", type=int, default=MAX_POLICY_BYTES,
                   help=f"the largest policy accepted (default {MAX_POLICY_BYTES}, at most "
                   f"{POLICY_BYTES_CEILING})")


def run(args: argparse.Namespace) -> int:
    """``plume-jax zoo publish``: prints ``{"written": ...}`` (JSON) on
    success; a ``ValidationError`` (one line, exit 2) for flags that do not
    go with what ``RUN`` is."""
    from plume_jax.scoreboard.zoo_publish import publish, publish_policy, publish_seeds

    if args.seeds:
        given = [flag for flag, value in (("--config", args.config), ("--facts", args.facts),
                                          ("--device", args.device)) if value is not None]
        if given:
            raise ValidationError.for_parameter(
                given[0], getattr(args, given[0][2:]), "nothing with --seeds (the sweep's own "
                "files hold the facts)")
        written = publish_seeds(args.run, args.name)
        print(json.dumps({"written": [str(p) for p in written]}))
        return 0
    if (pathlib.Path(args.run) / "policy.json").is_file():
        if args.config is None or args.facts is None or args.device is not None:
            raise ValidationError.for_parameter(
                "run", args.run, "with an exported policy folder: --config and --facts (its "
                "device goes in the facts), or a run folder of plume-jax train")
        from plume_jax.train.config import read_yaml

        folder = publish_policy(args.run, args.name, config=args.config,
                                facts=read_yaml(args.facts, "--facts"),
                                description=args.description,
                                max_policy_bytes=args.max_policy_bytes)
    else:
        if args.config is not None or args.facts is not None:
            raise ValidationError.for_parameter(
                "--config", args.config or args.facts, "nothing with a run folder (its "
                "config.yaml and summary.json hold them); --config and --facts go with an "
                "exported policy folder")
        folder = publish(args.run, args.name, device=args.device, description=args.description,
                         max_policy_bytes=args.max_policy_bytes)
    print(json.dumps({"written": str(folder)}))
    return 0
