"""``train`` and ``sweep`` share one run function (issue 41, item 1): both
front ends call :func:`plume_jax.train.run.run`, and neither holds a second
copy of its skeleton (locks, folder checks, loading, the training loop,
signals, barriers) or a folder rule of its own. Read from the import
statements (``ast``), nothing is imported."""

from __future__ import annotations

import ast
import pathlib

import pytest

TRAIN = pathlib.Path(__file__).resolve().parents[2] / "plume_jax" / "train"

#: What only the run function (plume_jax/train/run.py) and the folder rules
#: (folder.py) use: a front end importing one of these has a skeleton
#: or a folder rule of its own again.
SKELETON = {"train_program", "init_runner", "load_runner", "evaluate_members", "export_member",
            "write_member", "FolderLock", "check_out_dir", "clear_outputs", "make_out_dir",
            "set_aside_later_state", "check_writable_logdir", "stop_on_signals", "barrier",
            "check_joined", "ProgressBar", "RunLoggers", "check_best", "trim_evaluations"}


def imported_names(path: pathlib.Path) -> dict[str, str]:
    """``name -> module`` of every ``from X import name`` in ``path``
    (function-level imports included)."""
    names = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names[alias.name] = node.module or ""
    return names


@pytest.mark.parametrize("front_end", ["sweep.py", "../cli/train.py"])
def test_both_front_ends_train_through_the_one_run_function(front_end):
    names = imported_names(TRAIN / front_end)
    assert names.get("run") == "plume_jax.train.run", f"{front_end} does not call run.run"
    own = sorted(SKELETON & set(names))
    assert not own, f"{front_end} imports what only the run function uses: {own}"
