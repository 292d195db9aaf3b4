"""The functional core (layers 0-2) imports only jax, chex, numpy, gymnax
(and the standard library / yaml): never gymnasium, torch, flax,
matplotlib or stable-baselines3. Read from the import statements."""

from __future__ import annotations

import ast
import pathlib

import pytest

import plume_jax

PACKAGE = pathlib.Path(plume_jax.__file__).parent
# Every top-level module is layer 0-2 except these (layers 3-5, or the package
# entry points: __init__ registers the Gymnasium envs, __main__ runs the CLI;
# agents_package checks the layer-4 `agents` package for layer 5).
NOT_CORE = {"__init__.py", "__main__.py", "agents_package.py", "video.py", "progress.py"}
COMPONENT_FOLDERS = ("plumes", "sensors", "actions", "rewards", "starts")
CORE_MODULES = sorted(
    [p for p in PACKAGE.glob("*.py") if p.name not in NOT_CORE]
    + [p for folder in ("settings", "files", *COMPONENT_FOLDERS)
       for p in (PACKAGE / folder).rglob("*.py")]
)
# Layer 3: the adapters.
ADAPTER_MODULES = sorted(list((PACKAGE / "gym").rglob("*.py")) + [PACKAGE / "video.py"])
AGENTS = pathlib.Path(__file__).resolve().parents[1] / "agents"
AGENT_MODULES = sorted(AGENTS.rglob("*.py"))
# Layer 4 (agents) may import layers 0-2 only: not the adapters (3) nor
# training, evaluation, the CLI or the progress bar (5).
AGENTS_FORBIDDEN = ("plume_jax.gym", "plume_jax.video", "plume_jax.train", "plume_jax.evaluate",
                    "plume_jax.cli", "plume_jax.progress")
FORBIDDEN = ("gymnasium", "torch", "flax", "matplotlib", "stable_baselines3", "optax")
# Layers 0-2 may not import from layers 3-5 either.
FORBIDDEN_INTERNAL = ("plume_jax.gym", "plume_jax.train", "plume_jax.evaluate", "plume_jax.cli",
                      "agents")


def _imports(path: pathlib.Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_core_module_list_is_not_empty():
    assert len(CORE_MODULES) >= 10


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_imports_no_forbidden_library(path):
    for name in _imports(path):
        top = name.split(".")[0]
        assert top not in FORBIDDEN, f"{path.name} imports {name}"
        assert not any(name == f or name.startswith(f + ".") for f in FORBIDDEN_INTERNAL), \
            f"{path.name} imports {name} from a higher layer"


def test_the_checker_catches_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy\nfrom gymnasium import spaces\nimport torch.nn as nn\n")
    assert [n for n in _imports(bad) if n.split(".")[0] in FORBIDDEN] == ["gymnasium", "torch.nn"]


def _from(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == f or name.startswith(f + ".") for f in prefixes)


@pytest.mark.parametrize("path", CORE_MODULES + ADAPTER_MODULES,
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_layers_0_to_3_never_import_agents(path):
    assert not [n for n in _imports(path) if _from(n, ("agents",))], \
        f"{path.name} imports the agents package (layer 4)"


@pytest.mark.parametrize("path", AGENT_MODULES, ids=lambda p: p.name)
def test_agents_import_only_layers_0_to_2(path):
    bad = [n for n in _imports(path) if _from(n, AGENTS_FORBIDDEN)]
    assert not bad, f"agents/{path.name} imports {bad} (layers 3 or 5)"


def test_the_agent_checker_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from plume_jax.gym import PlumeGymEnv\nfrom plume_jax.train import ppo\n"
                   "from plume_jax.types import Grid\n")
    assert [n for n in _imports(bad) if _from(n, AGENTS_FORBIDDEN)] == [
        "plume_jax.gym", "plume_jax.train"]
