"""``plume-jax bench``: the scoreboard (:mod:`plume_jax.scoreboard`).

Every baseline and every zoo agent (plus ``--add`` agents of your own) on
every preset of each family, a robustness table and start-cell map for the
Gaussian and filament families; writes ``docs/scoreboard.md``, its record
``benchmarks/scoreboard.json`` and a figure per family in
``docs/scoreboard/``. ``--agent`` reruns some agents only and merges their
rows into the recorded families (:mod:`plume_jax.scoreboard.rerun`). Every
input (mode, families, agents, output paths) is checked before anything
runs.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser(
        "bench", help="the scoreboard: every agent on every preset family",
        description="Run every baseline and zoo agent (and yours, --add) on every preset of "
        "each family under one protocol; write docs/scoreboard.md, benchmarks/scoreboard.json "
        "and a figure per family. SB3 models (--add x=model.zip) run pickled code: only your "
        "own files.")
    bench.add_argument("--mode", default="full", choices=["quick", "full"],
                       help="full: the published protocol; quick: a tenth of the episodes and "
                       "a coarser start-cell map")
    bench.add_argument("--family", nargs="+", action="extend", default=None,
                       help="run only these families (the record keeps the others); default "
                       "all")
    bench.add_argument("--episodes", type=int, default=None,
                       help="episodes per (preset, agent) and per robustness cell, replacing "
                       "the mode's (the docs then say so)")
    bench.add_argument("--add", action="append", default=[], metavar="[LABEL=]TARGET",
                       help="your agent on the board: a policy or run folder, an SB3 .zip, "
                       "module:attribute, or an agent name (repeatable)")
    bench.add_argument("--agent", nargs="+", action="extend", default=None,
                       help="rerun only these agents (labels, or zoo:<name> for its newest "
                       "version) and merge their rows into the families' recorded sections, "
                       "which must have been made in the same mode; default all")
    bench.add_argument("--no-baselines", action="store_true", help="leave the baselines out")
    bench.add_argument("--no-zoo", action="store_true", help="leave the zoo agents out")
    bench.add_argument("--no-robustness", action="store_true",
                       help="skip the robustness table and start-cell map")
    bench.add_argument("--markdown", default="docs/scoreboard.md", help="the markdown written")
    bench.add_argument("--json", default="benchmarks/scoreboard.json",
                       help="the record read and updated (per family)")
    bench.add_argument("--figures", default="docs/scoreboard",
                       help="folder of the figures (one per family, plus start-cell maps)")
    bench.add_argument("--render-only", action="store_true",
                       help="run nothing: rewrite --markdown from the record --json (and the "
                       "zoo's current entries)")
    bench.add_argument("--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    from plume_jax.cli.common import check_output_file, check_output_folder
    from plume_jax.errors import ValidationError
    from plume_jax.scoreboard.bench import run_bench
    from plume_jax.scoreboard.contenders import board_contenders
    from plume_jax.scoreboard.families import FAMILIES, get_family
    from plume_jax.scoreboard.protocol import get_protocol
    from plume_jax.scoreboard.report import load_record

    if args.render_only:
        from plume_jax.scoreboard.bench import write_markdown

        check_output_file(args.markdown, "--markdown", (".md",))
        if not os.path.isfile(args.json):
            raise ValidationError.for_parameter("--json", args.json,
                                                "an existing scoreboard record (--render-only)")
        write_markdown(load_record(args.json), args.markdown, args.figures)
        print(f"wrote {args.markdown}")
        return 0
    protocol = get_protocol(args.mode, args.episodes)
    families = [get_family(name) for name in dict.fromkeys(args.family or FAMILIES)]
    contenders = board_contenders(include_baselines=not args.no_baselines,
                                  include_zoo=not args.no_zoo, added=args.add)
    if not contenders:
        raise ValidationError.for_parameter(
            "--add", args.add, "at least one agent (--no-baselines and --no-zoo leave none)")
    rerun = None
    if args.agent:
        from plume_jax.scoreboard.rerun import pick_contenders

        rerun = pick_contenders(contenders, args.agent)
    check_output_file(args.markdown, "--markdown", (".md",))
    check_output_file(args.json, "--json", (".json",))
    check_output_folder(args.figures, "--figures")
    # run_bench reads the record (a file that is not one fails) and checks a rerun against
    # it before it runs anything

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    run_bench(families, contenders, protocol, json_path=args.json,
              markdown_path=args.markdown, figure_dir=args.figures,
              with_robustness=not args.no_robustness, rerun=rerun, say=say)
    print(f"wrote {args.markdown}, {args.json} and figures in {args.figures}/")
    return 0
