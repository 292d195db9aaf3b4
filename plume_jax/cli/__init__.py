"""The ``plume-jax`` command line (layer 5).

One module per subcommand, each with ``add_parser(s)`` and ``run``:

- ``plume-jax demo`` (:mod:`.demo`): the main job on its embedded default;
- ``plume-jax list`` (:mod:`.presets`): the presets (``--zoo``: the zoo,
  ``--scenarios``: the shipped evaluation scenarios);
- ``plume-jax configs`` (:mod:`.configs`): the shipped ``configs/`` folder,
  written out for the docs' commands;
- ``plume-jax train`` / ``plume-jax sweep`` (:mod:`.train`): training (PPO,
  value iteration, ..., or a user's algorithm) and sweeps from YAML configs;
- ``plume-jax tune`` (:mod:`.tune`): hyperparameter search with Optuna;
- ``plume-jax zoo publish`` (:mod:`.zoo`): a finished run, policy or seed sweep
  into the zoo;
- ``plume-jax evaluate`` (:mod:`.evaluate`): evaluation scenarios;
- ``plume-jax record`` (:mod:`.record`): a video of a trained policy;
- ``plume-jax data`` (:mod:`.data`): registered plume datasets;
- ``plume-jax bench`` (:mod:`.bench`): the scoreboard of every agent on
  every preset family.

Bad input (``ValidationError``) and a state that forbids the command
(``StateError``: a run or sweep folder in use by another process, a run
whose metrics lack rows its checkpoint covers, ...) exit 2 with one line,
``plume-jax: error: <what was wrong and what is allowed>``. Ctrl-C (SIGINT)
or SIGTERM during ``train`` / ``sweep`` stops at the end of the current
chunk with a checkpoint and exits 130 / 143 with one line naming the
command that resumes; a second Ctrl-C stops at once, without a new checkpoint, with
one line and exit status 130 (so does Ctrl-C in any other command). Output piped into a
reader that stops early (``plume-jax list | head -1``) ends quietly with
exit status 141 (128 + SIGPIPE, as a shell reports a command SIGPIPE
stopped). ``plume-jax --version`` prints ``plume_jax.__version__`` (:mod:`plume_jax.core.version`).
"""

from __future__ import annotations

import argparse
import os
import sys

from plume_jax.cli import bench, configs, data, demo, evaluate, presets, record, train, tune, zoo
from plume_jax.cli.demo import DEMO_DEFAULTS, run_demo

__all__ = ["DEMO_DEFAULTS", "main", "run_demo"]

_COMMANDS = {
    "demo": demo.run,
    "list": presets.run,
    "configs": configs.run,
    "train": train.run_train,
    "sweep": train.run_sweep,
    "tune": tune.run,
    "zoo": zoo.run,
    "evaluate": evaluate.run,
    "record": record.run,
    "data": data.run,
    "bench": bench.run,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plume-jax", description="plume_jax: odour-plume navigation in JAX — demo, "
        "presets, training and sweeps, evaluation scenarios, datasets, the scoreboard.")
    from plume_jax.core.version import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo.add_parser(sub)
    presets.add_parser(sub)
    configs.add_parser(sub)
    train.add_parsers(sub)
    tune.add_parser(sub)
    zoo.add_parser(sub)
    evaluate.add_parser(sub)
    record.add_parser(sub)
    data.add_parser(sub)
    bench.add_parser(sub)
    return parser


#: The exit status after the reader of stdout went away (128 + SIGPIPE).
BROKEN_PIPE_STATUS = 141


def _stdout_gone() -> int:
    """After a ``BrokenPipeError`` on stdout: point stdout at ``os.devnull``
    so that the interpreter's final flush cannot fail again (Python's
    documented recipe, "Note on SIGPIPE" in the ``signal`` module), and return
    :data:`BROKEN_PIPE_STATUS`."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):  # a stdout without a file descriptor
        pass
    return BROKEN_PIPE_STATUS


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    try:
        return _main(argv)
    except BrokenPipeError:
        return _stdout_gone()


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    from plume_jax.core.errors import StateError, ValidationError
    from plume_jax.train.loop import Interrupted

    try:
        status = _COMMANDS[args.command](args)
        sys.stdout.flush()  # a reader gone shows here, not at interpreter exit
        return status
    except (ValidationError, StateError) as error:
        print(f"plume-jax: error: {error}", file=sys.stderr)
        return 2
    except Interrupted as stopped:  # checkpointed on SIGINT / SIGTERM
        print(f"plume-jax: {stopped}", file=sys.stderr)
        return 130 if stopped.signal_name == "SIGINT" else 143
    except KeyboardInterrupt as stopped:  # a second Ctrl-C in train / sweep, or any Ctrl-C
        print(f"plume-jax: {str(stopped) or 'interrupted by SIGINT'}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
