"""Where an algorithm's settings are named (issue 56): each PPO setting at
most three times in ``ppo.py`` (declared once, read where it is used), and no
module outside ``plume_jax/train/algorithms/`` names any algorithm's setting
in its code: the config, the run folder, sweeps, tune and the CLI handle
them through the declarations (``SETTINGS``), never by name. The names are
read from the declarations, not from a list here."""

from __future__ import annotations

import ast
import pathlib
import re

from plume_jax.train.algorithms import ppo
from plume_jax.train.algorithms.base import ALGORITHMS, algorithm_class

PACKAGE = pathlib.Path(ppo.__file__).resolve().parents[2]
ALGORITHMS_DIR = pathlib.Path(ppo.__file__).resolve().parent

#: Algorithm setting names that also name something else outside the
#: algorithms: a bare use of them there is that other thing. Reading one from
#: a config's ``algo`` section (``algo["gamma"]``, ``"algo.gamma"``) is still
#: refused below.
OTHER_MEANINGS = {
    "gamma": "a reward shaping's discount (a component setting) and the wind model's",
    "batch_size": "plume-jax tune's trials per batch, and the capture and filament batches",
    "max_episode_steps": "gymnasium's TimeLimit",
    "normalize_obs": "a field of the exported policy's spec (policy.json), read by its users",
}
#: The variable that lists the ``algo`` keys 0.1.x wrote (its readers: the one
#: place allowed to name other algorithms' settings).
OLD_KEYS = "ALGO_KEYS_0_1"


def _setting_names() -> set[str]:
    names: set[str] = set()
    for name in ALGORITHMS:
        names |= set(algorithm_class(name).SETTINGS)
    return names


def test_a_ppo_setting_is_named_at_most_three_times_in_ppo_py():
    """A PPO setting is declared once and read where it is used: adding
    one is a line where it is declared and the lines that read it. Counted
    as a plain word search over the whole file (docstrings included)."""
    text = pathlib.Path(ppo.__file__).read_text()
    counts = {name: len(re.findall(rf"\b{name}\b", text)) for name in ppo.PPO_SETTINGS}
    assert len(counts) >= 16  # the declarations were read (its own and epochs.py's)
    assert {name: n for name, n in counts.items() if n > 3} == {}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _old_keys(tree: ast.AST) -> set[int]:
    """The string constants of the assignment to :data:`OLD_KEYS`."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == OLD_KEYS for t in node.targets):
            found |= {id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    return found


def settings_named(source: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, what)`` for each place ``source`` names one of ``names`` in
    its code (docstrings and comments aside; :data:`OLD_KEYS` aside): an
    identifier, attribute, argument or keyword, or a string that is the
    name; a name of :data:`OTHER_MEANINGS` only where it is read from an
    ``algo`` section (``algo["gamma"]``, ``algo.get("gamma")``,
    ``"algo.gamma"``)."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _old_keys(tree)
    dotted = re.compile(r"^algo\.(\w+)$")
    hits = []
    for node in ast.walk(tree):
        found: list[str] = []
        from_algo = False
        if isinstance(node, ast.Name):
            found = [node.id]
        elif isinstance(node, ast.Attribute):
            found = [node.attr]
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            found = [node.arg]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found = [node.name]
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            base = ast.unparse(node.value)
            if base == "algo" or base.endswith(".algo") or base.endswith("['algo']"):
                found, from_algo = [str(node.slice.value)], True
                skip.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args \
                and isinstance(node.args[0], ast.Constant):
            base = ast.unparse(node.func.value)
            if base == "algo" or base.endswith(".algo"):
                found, from_algo = [str(node.args[0].value)], True
                skip.add(id(node.args[0]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in skip:
            match = dotted.match(node.value)
            if match:
                found, from_algo = [match.group(1)], True
            else:
                found = [node.value]
        for name in found:
            if name in names and (from_algo or name not in OTHER_MEANINGS):
                hits.append((getattr(node, "lineno", 0), name))
    return hits


def test_the_check_finds_a_setting_named_in_code():
    """The check below can fail: each way of naming a setting is caught,
    documentation is not."""
    names = {"learning_rate", "gamma"}
    code = '''
"""Module doc: algo.learning_rate."""
x = config.algo["learning_rate"]
y = cfg["algo"]["gamma"]
z = config.algo.get("gamma")
w = {"algo.gamma": 1}
v = hp.learning_rate
def f(learning_rate): ...
f(learning_rate=1)
ALGO_KEYS_0_1 = ("learning_rate", "gamma")
reward_gamma = params.gamma  # another meaning: allowed
'''
    assert sorted(settings_named(code, names)) == [
        (3, "learning_rate"), (4, "gamma"), (5, "gamma"), (6, "gamma"), (7, "learning_rate"),
        (8, "learning_rate"), (9, "learning_rate")]


def test_no_module_outside_the_algorithms_names_an_algorithms_setting():
    """Resume notes, sweep reports, tune spaces and the CLI read an
    algorithm's settings through its declarations: no module outside
    train/algorithms/ names one in its code, the 0.1.x readers' list
    (one module's :data:`OLD_KEYS`) aside."""
    names = _setting_names()
    assert {"learning_rate", "anneal_lr", "memory_size", "epsilon"} <= names
    named, old = {}, []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ALGORITHMS_DIR in path.parents:
            continue
        source = path.read_text()
        if re.search(rf"^{OLD_KEYS}\b", source, re.M):
            old.append(path.relative_to(PACKAGE).as_posix())
        hits = settings_named(source, names)
        if hits:
            named[path.relative_to(PACKAGE).as_posix()] = hits
    assert named == {}
    assert len(old) == 1, old  # the 0.1.x readers, kept in one place
