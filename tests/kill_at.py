"""``python tests/kill_at.py POINT N ARGS...``: run ``plume-jax ARGS`` and
SIGKILL it at the N-th time it reaches the named POINT, for the
kill-and-resume walk (``tests/train/test_run_folder_property.py``):

- ``best_swap``: before a rename onto a folder named ``best`` (a new best
  policy swapped into ``best/``);
- ``evaluation``: during a periodic evaluation (after that update's
  checkpoint, before its row);
- ``checkpoint_tear``: before a ``meta.json`` is replaced in a checkpoint
  folder in place (the ``runner.msgpack`` beside it already is: a torn
  checkpoint), not in a new folder still being written whole;
- ``kept_checkpoint``: before a new checkpoint folder (a kept
  ``checkpoints/update_N/`` or a first ``checkpoint/``) is renamed into place.

A process that never reaches the point runs to its end.
"""

from __future__ import annotations

import os
import pathlib
import signal
import sys

POINTS = ("best_swap", "evaluation", "checkpoint_tear", "kept_checkpoint")

# Run as a script, Python puts this file's folder (tests/) first on sys.path,
# where tests/agents/ (the agents tests) would shadow the agents package.
if sys.path and pathlib.Path(sys.path[0] or ".").resolve() == pathlib.Path(__file__).resolve().parent:
    del sys.path[0]


def tears_a_checkpoint(src: pathlib.Path, dst: pathlib.Path) -> bool:
    """A ``meta.json`` replaced in a checkpoint folder in place, its
    ``runner.msgpack`` already new: not one renamed into a new folder being
    written whole (``.NAME.partial-*``), which tears nothing."""
    return dst.name == "meta.json" and (dst.parent / "runner.msgpack").exists() \
        and ".partial-" not in dst.parent.name


#: The points met at a rename: ``(the os function, whether (src, dst) is it)``.
RENAMES = {"best_swap": ("replace", lambda s, d: d.name == "best"),
           "checkpoint_tear": ("replace", tears_a_checkpoint),
           "kept_checkpoint": ("rename", lambda s, d: ".partial-" in s.name)}


def periodic() -> bool:
    """Called from a periodic evaluation: ``on_evaluation`` (made by
    ``plume_jax.train.loop.periodic_evaluator``) is on the stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "on_evaluation" and frame.f_code.co_filename.endswith(
                os.path.join("train", "loop.py")):
            return True
        frame = frame.f_back
    return False


def main(argv: list[str]) -> int:
    point, nth, args = argv[0], int(argv[1]), argv[2:]
    if point not in POINTS:
        raise SystemExit(f"kill_at.py: unknown point {point!r} (one of {', '.join(POINTS)})")
    from plume_jax.cli import main as cli
    from plume_jax.train import evaluation

    seen = [0]

    def reached() -> None:
        seen[0] += 1
        if seen[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)

    def renaming(real, is_point):
        def wrapper(src, dst, *a, **k):
            if is_point(pathlib.Path(src), pathlib.Path(dst)):
                reached()
            return real(src, dst, *a, **k)
        return wrapper

    if point in RENAMES:
        name, is_point = RENAMES[point]
        setattr(os, name, renaming(getattr(os, name), is_point))
    else:
        real = evaluation.evaluate

        def evaluate(*a, **k):
            if periodic():  # a final evaluation (the loop calls the same function) is not the point
                reached()
            return real(*a, **k)

        evaluation.evaluate = evaluate
    return cli(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
