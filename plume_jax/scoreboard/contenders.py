"""The agents on the board: the hand-coded baselines, the newest version of
every zoo entry, and a user's own (``plume-jax bench --add LABEL=TARGET``).

A user's ``TARGET`` is one of

- a policy folder exported by ``plume-jax train`` (``policy.json`` and
  ``policy.npz``), or the run folder holding it as ``policy/``;
- a Stable-Baselines3 model file (``.zip``; it runs pickled code: your own
  files only);
- ``module:attribute``, a functional policy (``init(key) -> carry``,
  ``act(carry, obs, key) -> (action, carry)``) or a function
  ``f(env) -> policy`` that builds one for each preset's env (the module is
  imported from the current folder or ``PYTHONPATH``);
- an agent name of the registry (``klinotaxis``, ``zoo:<name>@<version>``).

Each runs on every preset of the families asked for, under the board's
protocol, and gets a row in the same format as the baselines; where it
cannot act on a preset (other actions or observations) the row says why.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pathlib
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from plume_jax.core.errors import ValidationError

#: The hand-coded agents of the registry, in the board's order.
BASELINES = ("random_walk", "klinotaxis", "chemotaxis", "cast_and_surge", "infotaxis",
             "space_aware_infotaxis")
_LABEL = re.compile(r"[A-Za-z0-9_.@:#-]+")  # fullmatch: `$` takes a trailing newline
_TARGETS = ("a policy folder (policy.json + policy.npz) or a run folder holding policy/, an SB3 "
            "model .zip, module:attribute (a functional policy or a function env -> policy), "
            "or an agent name (plume-jax evaluate --agent)")


@dataclasses.dataclass(frozen=True)
class Contender:
    """One agent on the board.

    Attributes:
        label: its name in the tables (unique on a board).
        kind: ``"baseline"``, ``"zoo"`` or ``"yours"``.
        agent: the registry name (``"trained"``, ``"sb3"``, ``"zoo:x@1"``,
            ...) or ``"python:<module>:<attribute>"``.
        params: the registry agent's parameters.
        factory: for ``python:`` agents, ``factory(env) -> policy``.
        source: where it comes from, for the docs (a path, a zoo version).
        env_overrides: settings it needs on top of each preset (a zoo
            entry's ``env_overrides``: only ``sensor``).
        trained_on: the preset a zoo entry was trained on (``None`` for
            the others), so a row on another preset can say so.
    """

    label: str
    kind: str
    agent: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    factory: Callable[[Any], Any] | None = None
    source: str = ""
    env_overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    trained_on: str | None = None

    @property
    def host(self) -> bool:
        """Driven from Python, one batched call per step (an SB3 model)."""
        from agents.registry import is_host_agent

        return self.factory is None and is_host_agent(self.agent)

    def build(self, env: Any) -> Any:
        """The agent for ``env`` (checked against it).

        Raises:
            ValidationError: it cannot act on this env (the reason is the
                error's ``allowed``).
        """
        if self.factory is None:
            from agents.registry import make_agent

            return make_agent(self.agent, env, **self.params)
        try:
            policy = self.factory(env)
        except ValidationError:
            raise
        except Exception as error:  # a user's function: report, never crash the board
            raise ValidationError.for_parameter(
                "agent", self.label, f"a function that builds a policy for this env "
                f"({type(error).__name__}: {' '.join(str(error).split())[:300]})") from None
        if getattr(env, "is_multi_agent", False):
            from agents.batched import PerAgentPolicy

            policy = PerAgentPolicy(policy, env.num_agents)
        return policy


def baseline_contenders() -> list[Contender]:
    return [Contender(label=name, kind="baseline", agent=name) for name in BASELINES]


def zoo_contenders(root: str | os.PathLike | None = None) -> list[Contender]:
    """The newest version of every zoo entry, labelled ``zoo:<name>@<version>``."""
    from agents.zoo import entries

    return [Contender(label=e.reference, kind="zoo", agent=e.reference, source=str(e.folder),
                      env_overrides=e.env_overrides, trained_on=e.preset)
            for e in entries(root, latest_only=True)]


def _python_factory(target: str) -> Callable[[Any], Any]:
    """``module:attribute`` -> ``factory(env) -> policy``."""
    module_name, _, attribute = target.partition(":")
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValidationError.for_parameter(
            "--add", target, f"module:attribute with an importable module ({error})") from None
    finally:
        if added:
            sys.path.remove(os.getcwd())
    if not hasattr(module, attribute):
        raise ValidationError.for_parameter(
            "--add", target, f"module:attribute naming something module {module_name!r} has")
    found = getattr(module, attribute)
    if hasattr(found, "init") and hasattr(found, "act"):
        return lambda env: found
    if callable(found):
        return found
    raise ValidationError.for_parameter(
        "--add", target, "module:attribute naming a functional policy (init, act) or a "
                         "function env -> policy")


def user_contender(spec: str) -> Contender:
    """A ``--add LABEL=TARGET`` (see the module docstring); ``TARGET`` alone
    is labelled by its last path part.

    Raises:
        ValidationError: (parameter ``--add``) a missing target, a label with
            other characters than letters, digits and ``_ . @ : # -``, or an
            unknown agent name.
    """
    from agents.registry import agent_names, is_agent_name
    from plume_jax.settings.schema import did_you_mean

    label, sep, target = spec.partition("=")
    if not sep:
        target, label = spec, pathlib.Path(spec.rstrip("/")).name or spec
    if not target:
        raise ValidationError.for_parameter("--add", spec, f"LABEL=TARGET with TARGET {_TARGETS}")
    if not _LABEL.fullmatch(label):
        raise ValidationError.for_parameter(
            "--add", spec, "LABEL=TARGET with LABEL made of letters, digits and _ . @ : # -")
    path = pathlib.Path(target)
    if path.is_dir():
        folder = path if (path / "policy.json").is_file() else path / "policy"
        if not (folder / "policy.json").is_file():
            raise ValidationError.for_parameter(
                "--add", spec, f"TARGET {_TARGETS}; folder {target} holds no policy.json and "
                "no policy/policy.json")
        return Contender(label=label, kind="yours", agent="trained",
                         params={"path": str(folder)}, source=str(folder))
    if path.suffix == ".zip":
        if not path.is_file():
            raise ValidationError.for_parameter("--add", spec, f"an SB3 model file; no file "
                                                f"{target}")
        return Contender(label=label, kind="yours", agent="sb3", params={"path": target},
                         source=target)
    if is_agent_name(target):
        return Contender(label=label, kind="yours", agent=target, source=target)
    module, colon, attribute = target.partition(":")
    if colon and module and attribute and not target.startswith("zoo:") and "/" not in target:
        return Contender(label=label, kind="yours", agent=f"python:{target}",
                         factory=_python_factory(target), source=target)
    raise ValidationError.for_parameter(
        "--add", spec, f"LABEL=TARGET with TARGET {_TARGETS}"
        f"{did_you_mean(target, agent_names())}; {target!r} is none of these")


def board_contenders(include_baselines: bool = True, include_zoo: bool = True,
                     added: list[str] | None = None) -> list[Contender]:
    """The agents of a board, baselines first, then the zoo, then the
    user's (``added``: ``--add`` specs).

    Raises:
        ValidationError: a bad ``--add`` or two agents with one label.
    """
    from plume_jax.core.agents_package import check_agents_package

    check_agents_package()
    board = (baseline_contenders() if include_baselines else []) + \
        (zoo_contenders() if include_zoo else []) + [user_contender(s) for s in added or []]
    seen: set[str] = set()
    for contender in board:
        if contender.label in seen:
            raise ValidationError.for_parameter(
                "--add", contender.label, "a label no other agent on the board has "
                "(name yours with LABEL=TARGET)")
        seen.add(contender.label)
    return board
