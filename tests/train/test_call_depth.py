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
frames (``jit``, ``lax.scan``, ``lax.cond``) are not ``plume_jax``'s."""

from __future__ import annotations

import pathlib
import sys

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


def test_plume_jax_train_reaches_update_in_at_most_five_calls(tmp_path, monkeypatch):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    real = PPO.update
    chains = []

    def update(self, *args, **kwargs):
        chains.append(calls_between(sys._getframe(1)))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(PPO, "update", update)
    assert cli.main(["train", "--config", str(config), "--out", str(tmp_path / "run"),
                     "--quiet"]) == 0
    traced = [c for c in chains if c is not None]
    assert traced, f"PPO.update was not traced under the CLI's train handler: {chains}"
    longest = max(traced, key=len)
    assert "plume_jax/train/algorithms/base.py:Algorithm.run" in longest, longest
    assert len(longest) <= MAX_CALLS, (
        f"plume-jax train reaches PPO.update through {len(longest)} calls (at most "
        f"{MAX_CALLS}): {' -> '.join(longest)}")
