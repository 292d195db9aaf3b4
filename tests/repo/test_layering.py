"""Imports point down the layers (docs/architecture.md), and the functional core
(layers 0-2) imports only jax, chex, numpy, gymnax
(and the standard library / yaml): never gymnasium, torch, flax,
matplotlib or stable-baselines3. Read from the import statements."""

from __future__ import annotations

import ast
import pathlib

import pytest

import plume_jax

PACKAGE = pathlib.Path(plume_jax.__file__).parent
#: The layer of every folder of the package (docs/architecture.md, shared/DESIGN.md):
#: 0 core, 1 the component families, 2 the functional envs and rendering,
#: 3 the adapters, 5 training, evaluation and tools (4 is the top-level ``agents``).
LAYER_OF_FOLDER = {
    "core": 0, "settings": 0, "files": 0, "datasets": 0,
    "plumes": 1, "sensors": 1, "actions": 1, "rewards": 1, "starts": 1,
    "envs": 2, "render": 2,
    "gym": 3,
    "train": 5, "evaluate": 5, "scoreboard": 5, "cli": 5,
}
#: The top-level modules: the package entry points and the progress bar of the tools.
LAYER_OF_TOP_MODULE = {"__init__.py": 5, "__main__.py": 5, "progress.py": 5}
#: The package root (``import plume_jax``, ``from plume_jax import NAME``) is the top
#: layer: what ``plume_jax/__init__.py`` gathers for users; no module of the package
#: imports it (each takes a name from the module that defines it).
ROOT_LAYER = 6
COMPONENT_FOLDERS = tuple(f for f, layer in LAYER_OF_FOLDER.items() if layer == 1)


def layer_of(path: pathlib.Path) -> int:
    relative = path.relative_to(PACKAGE)
    if len(relative.parts) == 1:
        return LAYER_OF_TOP_MODULE[relative.name]
    return LAYER_OF_FOLDER[relative.parts[0]]


def layer_of_module(name: str) -> int | None:
    """The layer of an imported ``plume_jax...`` or ``agents...`` module (None for others)."""
    parts = name.split(".")
    if parts[0] == "agents":
        return 4
    if parts[0] != "plume_jax":
        return None
    if len(parts) == 1:
        return ROOT_LAYER
    if parts[1] in LAYER_OF_FOLDER:
        return LAYER_OF_FOLDER[parts[1]]
    return LAYER_OF_TOP_MODULE.get(parts[1] + ".py")


ALL_MODULES = sorted(PACKAGE.rglob("*.py"))
# datasets (layer 0) reads files with h5py/zarr/httpx: the library rule is for the rest.
CORE_MODULES = sorted(p for p in ALL_MODULES if layer_of(p) <= 2
                      and p.relative_to(PACKAGE).parts[0] != "datasets")
# Layer 3: the adapters.
ADAPTER_MODULES = sorted(p for p in ALL_MODULES if layer_of(p) == 3)
AGENTS = pathlib.Path(__file__).resolve().parents[2] / "agents"
AGENT_MODULES = sorted(AGENTS.rglob("*.py"))
# Layer 4 (agents) may import layers 0-2 only: not the adapters (3) nor
# training, evaluation, the CLI or the progress bar (5).
AGENTS_FORBIDDEN = ("plume_jax.gym", "plume_jax.train", "plume_jax.evaluate",
                    "plume_jax.scoreboard", "plume_jax.cli", "plume_jax.progress")
FORBIDDEN = ("gymnasium", "torch", "flax", "matplotlib", "stable_baselines3", "optax")
# Layers 0-2 may not import from layers 3-5 either.
FORBIDDEN_INTERNAL = ("plume_jax.gym", "plume_jax.train", "plume_jax.evaluate", "plume_jax.cli",
                      "plume_jax.scoreboard", "plume_jax.progress", "agents")


def _imports(path: pathlib.Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "plume_jax" and node.level == 0:
            # ``from plume_jax import datasets`` imports a subpackage; ``from plume_jax
            # import make`` (or ``__version__``) imports the root
            names += [f"plume_jax.{alias.name}" if _is_submodule(alias.name) else "plume_jax"
                      for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _is_submodule(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


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
                   "from plume_jax.core.types import Grid\n")
    assert [n for n in _imports(bad) if _from(n, AGENTS_FORBIDDEN)] == [
        "plume_jax.gym", "plume_jax.train"]


def test_every_folder_and_top_level_module_has_a_layer():
    for path in ALL_MODULES:
        layer_of(path)  # a KeyError names a folder or module missing from the tables


@pytest.mark.parametrize("path", ALL_MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_downward(path):
    """A module imports plume_jax modules of its own layer or lower, never higher
    (function-level imports included; layer 4 is the top-level agents package)."""
    own = layer_of(path)
    upward = [n for n in _imports(path)
              if (layer := layer_of_module(n)) is not None and layer > own]
    assert not upward, f"{path.relative_to(PACKAGE)} (layer {own}) imports {upward}"


def test_the_checker_catches_a_module_importing_the_package_root(tmp_path):
    """``import plume_jax`` from inside the package drew an arrow from a low layer
    (files/, gym/) to the top, which the layer table did not see: the root had no layer."""
    bad = tmp_path / "bad.py"
    bad.write_text("import plume_jax\nfrom plume_jax import __version__\n"
                   "from plume_jax import datasets\n")
    assert _imports(bad) == ["plume_jax", "plume_jax", "plume_jax.datasets"]
    assert layer_of_module("plume_jax") == ROOT_LAYER > max(LAYER_OF_FOLDER.values())
    assert layer_of_module("plume_jax.datasets") == 0


def test_the_downward_checker_catches_an_upward_import():
    assert layer_of_module("plume_jax.train.algorithms.ppo") == 5
    assert layer_of_module("plume_jax.envs.plume_env") == 2
    assert layer_of_module("agents.zoo") == 4
    assert layer_of_module("plume_jax.core.types") == 0
    assert layer_of_module("numpy") is None


def test_the_command_line_has_one_entry_point():
    """Zoo publishing had its own argparse and ``__main__`` inside the library
    (``python -m plume_jax.scoreboard.zoo_publish``): a second command line
    beside ``plume-jax``. Only plume_jax/cli/ (and ``python -m plume_jax``)
    parse arguments."""
    others = [str(path.relative_to(PACKAGE)) for path in ALL_MODULES
              if path.relative_to(PACKAGE).parts[0] not in ("cli", "__main__.py")
              and ("ArgumentParser(" in (text := path.read_text())
                   or '__name__ == "__main__"' in text)]
    assert others == []
