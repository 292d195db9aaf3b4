"""``plume-jax bench``: the scoreboard (:mod:`plume_jax.scoreboard`).

Every baseline and every zoo agent (plus ``--add`` agents of your own) on
every preset of each family, a robustness table and start-cell map for the
Gaussian and filament families; the singh2023 family on Singh et al.'s 240
fixed starts instead of seeded episodes
(:mod:`plume_jax.scoreboard.fixed_starts`). A run writes into its own folder
(``--out``, by default ``logs/bench/<UTC date-time>``: its record
``scoreboard.json``, page ``scoreboard.md``, figures ``scoreboard/`` and
``run.json``, :mod:`plume_jax.scoreboard.runs`); it never touches the
published board. ``--publish RUN_DIR`` is the explicit step that puts a
finished run on the published board (``benchmarks/scoreboard.json``,
``docs/scoreboard.md``, ``docs/scoreboard/``), refusing a quick-mode run
without ``--allow-quick``, a partial one without ``--force``, and one that
would remove published results it did not measure again (rows of other
agents, robustness cells, start-cell maps, zoo recipe rows) without
``--drop-unmeasured``.
``--recipes`` runs the kept per-seed policies of the zoo's recipes
(``zoo:<name>@<version>#<seed>``) on their own presets (in a section of
Singh et al.'s protocol, on every regime they fly) under a recorded
section's protocol and writes the recipe rows (IQM, mean, intervals,
probability of improvement, verdicts; :mod:`plume_jax.scoreboard.recipes`)
into that record (``--json``, by default the published one), its page and a
performance-profile figure per family.
``--agent`` reruns some agents only and merges their rows into recorded
sections (``--from RECORD`` seeds the run with them,
:mod:`plume_jax.scoreboard.rerun`). Every input (mode, families, agents,
output paths) is checked before anything runs.
"""

from __future__ import annotations

import argparse
import os
import sys

#: The published board (what --publish and --render-only write).
PUBLISHED = {"markdown": "docs/scoreboard.md", "json": "benchmarks/scoreboard.json",
             "figures": "docs/scoreboard"}
#: Options that only a run takes (dest -> option), refused with --publish / --render-only.
RUN_OPTIONS = {"mode": "--mode", "family": "--family", "episodes": "--episodes",
               "add": "--add", "agent": "--agent", "no_baselines": "--no-baselines",
               "no_zoo": "--no-zoo", "no_robustness": "--no-robustness", "out": "--out",
               "base": "--from"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser(
        "bench", help="the scoreboard: every agent on every preset family",
        description="Run every baseline and zoo agent (and yours, --add) on every preset of "
        "each family under one protocol, into a run folder of its own (--out); put a finished "
        "run on the published board (docs/scoreboard.md, benchmarks/scoreboard.json, "
        "docs/scoreboard/) with --publish RUN_DIR. SB3 models (--add x=model.zip) run pickled "
        "code: only your own files.")
    bench.add_argument("--mode", default=None, choices=["quick", "full"],
                       help="full (default): the published protocol; quick: a tenth of the "
                       "episodes and a coarser start-cell map")
    bench.add_argument("--family", nargs="+", action="extend", default=None,
                       help="run only these families; default all")
    bench.add_argument("--episodes", type=int, default=None,
                       help="episodes per (preset, agent) and per robustness cell, replacing "
                       "the mode's (the docs then say so); the singh2023 family runs that many "
                       "of its 240 fixed starts, evenly spread (at most all 240)")
    bench.add_argument("--add", action="append", default=[], metavar="[LABEL=]TARGET",
                       help="your agent on the board: a policy or run folder, an SB3 .zip, "
                       "module:attribute, or an agent name (repeatable)")
    bench.add_argument("--agent", nargs="+", action="extend", default=None,
                       help="rerun only these agents (labels, or zoo:<name> for its newest "
                       "version) and merge their rows into the families' recorded sections "
                       "(--from), which must have been made in the same mode; default all")
    bench.add_argument("--no-baselines", action="store_true", help="leave the baselines out")
    bench.add_argument("--no-zoo", action="store_true", help="leave the zoo agents out")
    bench.add_argument("--no-robustness", action="store_true",
                       help="skip the robustness table and start-cell map")
    bench.add_argument("--out", default=None, metavar="DIR",
                       help="the run's own folder (record, page, figures, run.json); default "
                       "logs/bench/<UTC date-time>")
    bench.add_argument("--from", dest="base", default=None, metavar="RECORD",
                       help="start the run's record from this one (e.g. "
                       "benchmarks/scoreboard.json), so that --agent merges into its sections")
    bench.add_argument("--publish", default=None, metavar="RUN_DIR",
                       help="run nothing: put the finished families of a run folder on the "
                       "published board (--json, --markdown, --figures)")
    bench.add_argument("--allow-quick", action="store_true",
                       help="--publish a run made in quick mode or with --episodes")
    bench.add_argument("--force", action="store_true",
                       help="--publish a partial run (stopped early, without the baselines, "
                       "the zoo or the robustness table, with --add agents, or a rerun of "
                       "sections no longer published)")
    bench.add_argument("--drop-unmeasured", action="store_true",
                       help="--publish a run that does not measure everything the published "
                       "sections hold (rows of other agents, robustness cells, start-cell "
                       "maps, zoo recipe rows) and remove what it did not measure (without "
                       "it, --publish refuses and names them)")
    bench.add_argument("--markdown", default=None,
                       help=f"--publish / --render-only: the page written (default "
                       f"{PUBLISHED['markdown']})")
    bench.add_argument("--json", default=None,
                       help=f"--publish / --render-only: the record read and updated (default "
                       f"{PUBLISHED['json']})")
    bench.add_argument("--figures", default=None,
                       help=f"--publish / --render-only: the figures' folder (default "
                       f"{PUBLISHED['figures']})")
    bench.add_argument("--render-only", action="store_true",
                       help="run nothing: rewrite --markdown from the record --json (and the "
                       "zoo's current entries)")
    bench.add_argument("--recipes", action="store_true",
                       help="run each zoo recipe's kept seed policies (zoo:NAME@VERSION#SEED) "
                       "on its own preset (on every regime it flies, for singh2023) under the "
                       "recorded section's protocol and write the "
                       "recipe rows into --json, --markdown and --figures (default the "
                       "published board; --family picks families)")
    bench.add_argument("--quiet", action="store_true", help="no progress lines")


def _check_options(args: argparse.Namespace) -> None:
    """One action per call, and only options it uses (a run's options with
    --publish, or the published board's paths with a run, are refused)."""
    from plume_jax.core.errors import ValidationError

    actions = [name for name, on in (("--publish RUN_DIR", args.publish is not None),
                                      ("--render-only", args.render_only),
                                      ("--recipes", args.recipes)) if on]
    if len(actions) > 1:
        raise ValidationError.for_parameter(actions[-1].split()[0], True,
                                            f"one of {', '.join(actions)}, not both")
    if actions:
        action = actions[0].split()[0]
        for dest, option in RUN_OPTIONS.items():
            if dest == "family" and args.recipes:
                continue  # --recipes --family picks the families
            if getattr(args, dest):
                raise ValidationError.for_parameter(
                    option, getattr(args, dest), f"no run options with {action}, which runs "
                    "nothing")
        for dest, default in PUBLISHED.items():
            if getattr(args, dest) is None:
                setattr(args, dest, default)
        return
    for dest in PUBLISHED:
        if getattr(args, dest) is not None:
            raise ValidationError.for_parameter(
                f"--{dest}", getattr(args, dest), f"--{dest} only with --publish, "
                "--render-only or --recipes (a run writes into its own folder, --out DIR)")
    for option, value in (("--allow-quick", args.allow_quick), ("--force", args.force),
                          ("--drop-unmeasured", args.drop_unmeasured)):
        if value:
            raise ValidationError.for_parameter(option, True, f"{option} only with --publish "
                                                "RUN_DIR")


def run(args: argparse.Namespace) -> int:
    from plume_jax.cli.common import check_output_file, check_output_folder
    from plume_jax.core.errors import ValidationError
    from plume_jax.scoreboard import runs
    from plume_jax.scoreboard.bench import run_bench
    from plume_jax.scoreboard.contenders import board_contenders
    from plume_jax.scoreboard.families import FAMILIES, get_family
    from plume_jax.scoreboard.protocol import get_protocol
    from plume_jax.scoreboard.report import load_record

    _check_options(args)
    if args.render_only:
        from plume_jax.scoreboard.bench import write_markdown

        check_output_file(args.markdown, "--markdown", (".md",))
        if not os.path.isfile(args.json):
            raise ValidationError.for_parameter("--json", args.json,
                                                "an existing scoreboard record (--render-only)")
        write_markdown(load_record(args.json), args.markdown, args.figures)
        print(f"wrote {args.markdown}")
        return 0
    if args.recipes:
        return _recipes(args)
    if args.publish is not None:
        def check_outputs() -> None:
            check_output_file(args.markdown, "--markdown", (".md",))
            check_output_file(args.json, "--json", (".json",))
            check_output_folder(args.figures, "--figures")

        done = runs.publish(args.publish, args.json, args.markdown, args.figures,
                            allow_quick=args.allow_quick, force=args.force,
                            drop_unmeasured=args.drop_unmeasured,
                            check_outputs=check_outputs, say=print)
        print(f"published {', '.join(done)} from {args.publish}: wrote {args.markdown}, "
              f"{args.json} and figures in {args.figures}/")
        return 0
    protocol = get_protocol(args.mode or "full", args.episodes)
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
    base = None
    if args.base is not None:
        if not os.path.isfile(args.base):
            raise ValidationError.for_parameter("--from", args.base,
                                                "an existing scoreboard record")
        try:
            base = load_record(args.base)
        except ValidationError as error:
            raise ValidationError.for_parameter("--from", args.base,
                                                error.allowed or str(error)) from None
    out = args.out if args.out is not None else os.fspath(runs.default_out_dir())
    runs.check_new_run_dir(out)
    bases = None
    if rerun is not None:  # before the folder is made: a refused rerun leaves nothing
        from plume_jax.scoreboard.rerun import check_rerun

        if base is None:
            raise ValidationError.for_parameter(
                "--agent", args.agent, "--from RECORD too: the record whose sections the rerun "
                "rows merge into (the published one: --from benchmarks/scoreboard.json)")
        check_rerun(base, families, protocol)
        bases = {f.name: runs.base_fingerprint(base["families"][f.name]) for f in families}
    check_output_folder(out, "--out")
    json_path = os.path.join(out, runs.RECORD_NAME)
    if base is not None:
        from plume_jax.files import atomic_write
        from plume_jax.scoreboard.report import dump_record

        atomic_write(json_path, lambda tmp: tmp.write_text(dump_record(base), encoding="utf-8"))
    info = {"options": {k: v for k, v in sorted(vars(args).items()) if v not in (None, False, [])
                        and not callable(v)},
            "started_at": runs.now_text(), "finished_at": None,
            "families": [f.name for f in families], "done": [], "protocol": protocol.as_dict(),
            "baselines": not args.no_baselines, "zoo": not args.no_zoo,
            "robustness": not args.no_robustness, "added": list(args.add),
            "agents": None if rerun is None else [c.label for c in rerun],
            "from": args.base, "bases": bases}
    runs.write_run_info(out, info)

    def finished(name: str) -> None:
        info["done"].append(name)
        if len(info["done"]) == len(families):
            info["finished_at"] = runs.now_text()
        runs.write_run_info(out, info)

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    run_bench(families, contenders, protocol, json_path=json_path,
              markdown_path=os.path.join(out, runs.MARKDOWN_NAME),
              figure_dir=os.path.join(out, runs.FIGURES_NAME),
              with_robustness=not args.no_robustness, rerun=rerun, say=say, quiet=args.quiet,
              on_family=finished)
    from plume_jax.scoreboard.report import load_record

    print(f"wrote the run to {out}/ (scoreboard.md, scoreboard.json, figures); "
          f"{runs.publish_command(out, info, load_record(json_path))}")
    return 0


def _recipes(args: argparse.Namespace) -> int:
    """``--recipes``: the recipe rows of the recorded families (all, or
    ``--family``), written into the record, its page and figures."""
    from plume_jax.cli.common import check_output_file, check_output_folder
    from plume_jax.core.errors import ValidationError
    from plume_jax.files import atomic_write
    from plume_jax.scoreboard.bench import run_recipes, write_markdown
    from plume_jax.scoreboard.families import FAMILIES, get_family
    from plume_jax.scoreboard.report import dump_record, load_record

    check_output_file(args.markdown, "--markdown", (".md",))
    check_output_file(args.json, "--json", (".json",))
    check_output_folder(args.figures, "--figures")
    if not os.path.isfile(args.json):
        raise ValidationError.for_parameter("--json", args.json,
                                            "an existing scoreboard record (--recipes)")
    record = load_record(args.json)
    families = [get_family(name) for name in dict.fromkeys(args.family or FAMILIES)]
    absent = [f.name for f in families if f.name not in record["families"]]
    if args.family and absent:
        raise ValidationError.for_parameter(
            "--family", absent[0], f"a family on the record {args.json}: one of "
            f"{list(record['families'])} (run and publish it first)")

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    done = run_recipes(record, families, args.figures, say)
    atomic_write(args.json, lambda tmp: tmp.write_text(dump_record(record), encoding="utf-8"))
    write_markdown(record, args.markdown, args.figures)
    print(f"wrote the recipe rows of {', '.join(done) or 'no family'} into {args.json}, "
          f"{args.markdown} and {args.figures}/")
    return 0
