"""``plume-jax train`` reaches ``Algorithm.update`` in at most five calls
(issue 56, item 3): a reader follows the command line to the update through
the run function, the training loop and the algorithm's own loop, with no
layer that only forwards.

What is counted: a tiny ``plume-jax train`` runs in-process (the CLI's
``main``), with ``PPO.update`` wrapped to record the Python stack while it
is traced (inside the compiled program it is never called from Python
again). The calls counted are the frames of functions in ``plume_jax/``
strictly between the CLI's train handler (``plume_jax/cli/train.py``
``run_train``) and ``update``: module-level functions and methods. A
closure or lambda defined inside a function is part of that function (as
``tests/repo/test_function_length.py`` counts its lines), and JAX's own
frames (``jit``, ``lax.scan``, ``lax.cond``) are not ``plume_jax``'s.

The same run, given ``--set algo.learning_rate=<marker>``, follows that
setting (issue 56, "Done when"): from the handler until ``PPO.hparams``
returns the hyperparameters, every ``plume_jax`` function whose arguments
or locals hold the value itself (the ``--set`` text, the parsed number, its
f32[] leaf) is recorded by a profile hook; inside the compiled program the
value is a tracer, so the file that hands it to ``optax.scale`` is recorded
by wrapping ``optax.scale``. Files that receive the config or the
hyperparameters whole and pass them on do not handle the value; the YAML
reader (``files/safe_io.py``), which every value of a file or ``--set``
goes through, is named apart."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import optax
import pytest
import yaml

from plume_jax import cli
from plume_jax.train.algorithms.ppo import PPO

PACKAGE = pathlib.Path(cli.__file__).resolve().parents[1]
HANDLER = (PACKAGE / "cli" / "train.py", "run_train")
MAX_CALLS = 5

#: 2 updates of 32 env steps, no evaluation.
TINY = {"env": {"id": "PlumeNav-Gaussian-v0",
                "overrides": {"grid_size": [12, 12], "max_steps": 20, "goal_radius": 3.0}},
        "algo": {"total_steps": 2 * 4 * 8, "num_envs": 4, "num_steps": 8,
                 "update_epochs": 1, "num_minibatches": 1},
        "network": {"hidden_sizes": [8]},
        "run": {"seed": 0, "tensorboard": False},
        "eval": {"num_envs": 2, "num_steps": 5}}


def calls_between(frame) -> list[str] | None:
    """The counted calls (module docstring) from the handler down to
    ``frame``'s caller, outermost first; None when the handler is not on
    the stack."""
    chain = []
    while frame is not None:
        path = pathlib.Path(frame.f_code.co_filename).resolve()
        if (path, frame.f_code.co_name) == HANDLER:
            return chain[::-1]
        if PACKAGE in path.parents and "<locals>" not in frame.f_code.co_qualname:
            chain.append(f"{path.relative_to(PACKAGE.parent)}:{frame.f_code.co_qualname}")
        frame = frame.f_back
    return None


#: ``--set algo.learning_rate=MARKER``: a value no default or other setting has.
MARKER = "0.000123456"

#: The files that handle ``algo.learning_rate`` on its way to optax
#: (docs/training.md, "Adding an algorithm"), beside the YAML reader.
SETTING_PATH = {"plume_jax/cli/train.py", "plume_jax/settings/schema.py",
                "plume_jax/train/config.py", "plume_jax/settings/checks.py",
                "plume_jax/train/algorithms/epochs.py"}
YAML_READER = "plume_jax/files/safe_io.py"
MAX_FILES = 5


def holds_marker(value) -> bool:
    """``value`` is the marker itself: text containing it, the number, or a
    concrete scalar array of it (at f32)."""
    if isinstance(value, str):
        return MARKER in value
    if isinstance(value, float):
        return value == float(MARKER)
    if isinstance(value, dict) and len(value) < 100:  # the parsed --set, the algo section
        return any(isinstance(v, float) and v == float(MARKER) for v in value.values())
    if getattr(value, "shape", None) == () and hasattr(value, "dtype") \
            and "Tracer" not in type(value).__name__:
        try:
            return float(value) == float(np.float32(float(MARKER)))
        except (TypeError, ValueError):
            return False
    return False


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    """One tiny ``plume-jax train`` with ``--set algo.learning_rate=MARKER``:
    the call chains to ``PPO.update``, the files that held the marker (host
    side, until ``PPO.hparams`` returned) and the callers of ``optax.scale``."""
    tmp = tmp_path_factory.mktemp("traced")
    config = tmp / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    chains, holders, scalers = [], set(), set()
    real_update, real_hparams, real_scale = PPO.update, PPO.hparams, optax.scale

    def update(self, *args, **kwargs):
        chains.append(calls_between(sys._getframe(1)))
        return real_update(self, *args, **kwargs)

    def profile(frame, event, arg):
        path = pathlib.Path(frame.f_code.co_filename)
        if event in ("call", "return") and PACKAGE in path.resolve().parents:
            if any(holds_marker(v) for v in list(frame.f_locals.values())):
                holders.add(str(path.resolve().relative_to(PACKAGE.parent)))

    def hparams(self, *args, **kwargs):
        try:
            return real_hparams(self, *args, **kwargs)
        finally:
            sys.setprofile(None)  # the value is now an f32[] leaf of the hyperparameters

    def scale(step_size, *args, **kwargs):
        caller = pathlib.Path(sys._getframe(1).f_code.co_filename).resolve()
        if PACKAGE in caller.parents:
            scalers.add(str(caller.relative_to(PACKAGE.parent)))
        return real_scale(step_size, *args, **kwargs)

    def handler(args):  # the --set strings enter here (cli/__init__ only dispatches argv)
        sys.setprofile(profile)
        return real_handler(args)

    patch = pytest.MonkeyPatch()
    real_handler = cli._COMMANDS["train"]
    patch.setitem(cli._COMMANDS, "train", handler)
    patch.setattr(PPO, "update", update)
    patch.setattr(PPO, "hparams", hparams)
    patch.setattr(optax, "scale", scale)
    try:
        code = cli.main(["train", "--config", str(config), "--out", str(tmp / "run"),
                         "--set", f"algo.learning_rate={MARKER}", "--quiet"])
    finally:
        sys.setprofile(None)
        patch.undo()
    assert code == 0
    return chains, holders, scalers


def test_plume_jax_train_reaches_update_in_at_most_five_calls(traced_run):
    chains = traced_run[0]
    traced = [c for c in chains if c is not None]
    assert traced, f"PPO.update was not traced under the CLI's train handler: {chains}"
    longest = max(traced, key=len)
    assert "plume_jax/train/algorithms/base.py:Algorithm.run" in longest, longest
    assert len(longest) <= MAX_CALLS, (
        f"plume-jax train reaches PPO.update through {len(longest)} calls (at most "
        f"{MAX_CALLS}): {' -> '.join(longest)}")


def test_algo_learning_rate_reaches_optax_through_at_most_five_files(traced_run):
    _, holders, scalers = traced_run
    assert scalers == {"plume_jax/train/algorithms/epochs.py"}, (
        f"optax.scale (the step size) is called from {sorted(scalers)}: one place, "
        "epochs.adam, should hand the learning rate to optax")
    files = (holders - {YAML_READER}) | scalers
    assert len(files) <= MAX_FILES, (
        f"--set algo.learning_rate reaches optax through {len(files)} files (at most "
        f"{MAX_FILES}): {sorted(files)}")
    assert files == SETTING_PATH, sorted(files)  # the path docs/training.md gives
