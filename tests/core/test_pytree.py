"""``plume_jax.core.pytree.Pytree``: what type checkers are told about the frozen
``chex.dataclass`` pytrees is what the decorator makes of them.

The classes are checked at run time, and mypy runs over the package and over
user code that builds and replaces pytrees (``python -m mypy`` from the
repository root is the same check). mypy comes with the ``typecheck`` extra,
part of the README's test command, so CI type-checks every change.

The test keeps mypy's own incremental cache where ``mypy`` by hand keeps it,
the repository's ``.mypy_cache/`` (gitignored): a fresh clone's first run
checks every module; later runs recheck the modules whose contents changed
and those that depend on them (mypy keys its cache on each file's hash, its
options and its own version), as a developer's ``mypy`` does.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import subprocess
import sys
import textwrap

import jax
import pytest

import agents
import plume_jax
from tests.docs_blocks import ROOT
from plume_jax.core.pytree import Pytree

# Modules whose import needs an optional extra or starts something: their pytrees
# are not Pytree subclasses anyway.
_SKIP = ("plume_jax.cli", "plume_jax.gym.sb3", "plume_jax.gym.pettingzoo_env",
         "plume_jax.__main__", "agents.sb3")


def _pytree_classes() -> list[type]:
    for package in (plume_jax, agents):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.startswith(_SKIP):
                importlib.import_module(info.name)
    found, pending = [], list(Pytree.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending += cls.__subclasses__()
    # chex.dataclass returns a new class (a Mapping too); the class statement's own
    # class is left behind as a subclass as well: keep the ones the modules export
    public = [c for c in set(found)
              if getattr(sys.modules[c.__module__], c.__qualname__, None) is c]
    return sorted(public, key=lambda c: f"{c.__module__}.{c.__qualname__}")


PYTREES = _pytree_classes()


def test_the_core_pytrees_are_pytree_subclasses():
    names = {cls.__name__ for cls in PYTREES}
    assert {"AgentState", "EnvState", "EnvParams", "GaussianPlumeParams",
            "KlinotaxisCarry"} <= names


def test_the_training_pytrees_are_pytree_subclasses():
    names = {cls.__name__ for cls in PYTREES if cls.__module__.startswith("plume_jax.train")}
    assert names == {"AdamHparams", "Hparams", "LookaheadRunner", "ObsStats",
                     "RewardScalingRunner", "Runner", "SearcherRunner", "Transition",
                     "ValueIterationHparams"}


@pytest.mark.parametrize("cls", PYTREES, ids=lambda c: c.__qualname__)
def test_every_pytree_is_a_frozen_keyword_only_chex_dataclass(cls):
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, \
        f"{cls.__qualname__} derives from Pytree but is not @chex.dataclass(frozen=True)"
    assert callable(getattr(cls, "replace", None)), f"{cls.__qualname__} has no replace"
    values = {f.name: 0.0 for f in dataclasses.fields(cls) if f.init}
    instance = cls(**values)
    assert jax.tree.leaves(instance) == list(jax.tree.leaves(values)), \
        f"{cls.__qualname__} is not a registered pytree"
    if values:
        with pytest.raises((TypeError, ValueError)):  # keyword-only, as the checkers are told
            cls(*values.values())


def test_mypy_passes_on_the_package_and_on_user_code_using_pytrees(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[typecheck]')")
    user = tmp_path / "user_code.py"
    user.write_text(textwrap.dedent("""
        import jax.numpy as jnp
        import plume_jax
        from plume_jax.core.types import AgentState, EnvParams

        env, params = plume_jax.make("PlumeNav-Gaussian-v0")
        longer: EnvParams = params.replace(max_steps=jnp.asarray(10))
        agent = AgentState(position=jnp.zeros(2), heading=jnp.zeros(()))
        moved: AgentState = agent.replace(heading=jnp.ones(()))
        wrong = AgentState(position=jnp.zeros(2), heading=jnp.zeros(()), speed=1.0)
    """))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary",
         "plume_jax", "agents", str(user)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "user_code.py:10" in errors[0] and "speed" in errors[0], \
        result.stdout + result.stderr
