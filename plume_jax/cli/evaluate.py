"""``plume-jax evaluate``: evaluation scenarios (agent x scenario x seeds),
see :mod:`plume_jax.evaluate.scenario`."""

from __future__ import annotations

import argparse
import json
import os
import sys

from plume_jax.cli.common import parse_overrides
from plume_jax.errors import ValidationError


def add_parser(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser("evaluate", help="run evaluation scenarios (agent x scenario x seeds)")
    ev.add_argument("--scenario", nargs="+", required=True,
                    help="scenario YAML file(s) or folder(s) of them (configs/scenarios/)")
    ev.add_argument("--agent", nargs="+", default=None,
                    help="agent name(s) to run instead of each scenario's own agent")
    ev.add_argument("--agent-param", action="append", default=[], metavar="NAME=VALUE",
                    help="parameter for --agent (repeatable, VALUE in YAML syntax)")
    ev.add_argument("--episodes", type=int, default=None, help="override each scenario's episodes")
    ev.add_argument("--seed", type=int, default=None, help="override each scenario's seed")
    ev.add_argument("--out", default="eval_out", help="folder for JSON, summary.md and PNGs")
    ev.add_argument("--baseline", default=None, help="saved report JSON to compare against")
    ev.add_argument("--save-baseline", default=None, help="write this run's reports as a baseline")


def scenario_files(paths: list[str]) -> list[str]:
    """The YAML files named, folders expanded (sorted)."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += sorted(os.path.join(path, f) for f in os.listdir(path)
                            if f.endswith((".yaml", ".yml")))
        else:
            files.append(path)
    return files


def run(args: argparse.Namespace) -> int:
    """Exit 0 when every expectation holds and nothing regressed against
    ``--baseline``, 1 otherwise (2 for bad input)."""
    from plume_jax.evaluate import scenario as sc

    if args.episodes is not None and args.episodes < 1:
        raise ValidationError.for_parameter("--episodes", args.episodes, "an integer >= 1")
    agent_params = parse_overrides(args.agent_param, "--agent-param") if args.agent_param \
        else None
    if agent_params and not args.agent:
        raise ValidationError.for_parameter("--agent-param", args.agent_param,
                                            "to be used together with --agent")
    baseline = {}
    if args.baseline:
        try:
            with open(args.baseline) as f:
                baseline = {(r["scenario"], r["agent"]["name"]): r["metrics"]
                            for r in json.load(f)["reports"]}
        except (OSError, KeyError, ValueError) as error:
            raise ValidationError.for_parameter("--baseline", args.baseline,
                                                f"a report JSON written by --save-baseline ({error})")
    reports = []
    for path in scenario_files(args.scenario):
        scenario = sc.load_scenario(path)
        for agent in (args.agent or [None]):
            report = sc.run_scenario(scenario, agent=agent, agent_params=agent_params,
                                     episodes=args.episodes, seed=args.seed)
            key = (report["scenario"], report["agent"]["name"])
            report["regressions"] = sc.compare_to_baseline(report["metrics"], baseline[key]) \
                if key in baseline else []
            reports.append(report)
    sc.write_outputs(reports, args.out)
    if args.save_baseline:
        with open(args.save_baseline, "w") as f:
            json.dump({"reports": [sc.public(r) for r in reports]}, f, indent=2)
    print(sc.markdown_table(reports))
    print(f"\nreports, summary.md and trajectory PNGs in {args.out}/")
    failed = [r for r in reports if r["failures"] or r["regressions"]]
    if failed:
        print(f"{len(failed)} of {len(reports)} runs failed an expectation or regressed",
              file=sys.stderr)
    return 1 if failed else 0
