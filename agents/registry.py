"""Resolve agents by name, with parameters.

``make_agent(name, env, **params)`` builds the named agent for ``env``
(action ids and observation indices looked up by name): a functional
policy (jittable), or a host-side agent with ``act_batch`` that the
scenario runner drives with one batched call per step. Names:

=========================  ===================================================
``random_walk``            uniform random moves (null model)
``klinotaxis``             run and tumble on one concentration reading
``chemotaxis``             bilateral gradient climbing with two antennae
``cast_and_surge``         surge upwind on detection, cast crosswind when lost
``infotaxis``              Bayesian search maximising expected information gain
``space_aware_infotaxis``  infotaxis variant of Loisy & Eloy (2022)
``trained``                a policy exported by ``plume-jax train`` (``path=...``)
``zoo:<name>``             a shipped trained agent (:mod:`agents.zoo`;
                           ``zoo:<name>@<version>`` for one version)
``sb3``                    host-side: a Stable-Baselines3 model file (``path=...``)
=========================  ===================================================
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agents.cast_and_surge import CastAndSurgePolicy
from agents.chemotaxis import BilateralChemotaxisPolicy
from agents.klinotaxis import KlinotaxisPolicy
from agents.random_walk import RandomWalkPolicy
from plume_jax.core.errors import ValidationError
from plume_jax.settings.schema import did_you_mean


def _trained(env: Any, path: str, greedy: bool = True) -> Any:
    from agents.trained import TrainedPolicy

    return TrainedPolicy.for_env(env, path, greedy=greedy)


def _sb3(env: Any, path: str, algorithm: str = "PPO", deterministic: bool = True) -> Any:
    from agents.sb3 import SB3Agent

    return SB3Agent.for_env(env, path, algorithm=algorithm, deterministic=deterministic)


def _infotaxis_factories() -> dict[str, Callable[..., Any]]:
    try:
        from agents.infotaxis import InfotaxisPolicy
    except ImportError:  # pragma: no cover - module added with the Poisson plume
        return {}
    return {
        "infotaxis": InfotaxisPolicy.for_env,
        "space_aware_infotaxis": lambda env, **kw: InfotaxisPolicy.for_env(
            env, space_aware=True, **kw),
    }


FUNCTIONAL_AGENTS: dict[str, Callable[..., Any]] = {
    "random_walk": RandomWalkPolicy.for_env,
    "klinotaxis": KlinotaxisPolicy.for_env,
    "chemotaxis": BilateralChemotaxisPolicy.for_env,
    "cast_and_surge": CastAndSurgePolicy.for_env,
    "trained": _trained,
    **_infotaxis_factories(),
}
HOST_AGENTS: dict[str, Callable[..., Any]] = {"sb3": _sb3}


def agent_names() -> list[str]:
    """Every registered agent name, then every zoo reference
    (``zoo:<name>``, ``zoo:<name>@<version>``: :mod:`agents.zoo`)."""
    from agents.zoo import references

    return sorted(FUNCTIONAL_AGENTS) + sorted(HOST_AGENTS) + references()


def is_agent_name(name: str) -> bool:
    """Whether ``name`` names an agent: one of :func:`agent_names`, or one
    seed's policy of a zoo recipe (``zoo:<name>@<version>#<seed>``, not
    listed there: an entry may keep many).

    Raises:
        ValidationError: a ``zoo:...#<seed>`` reference that names no kept
            seed (its own one-line error, :func:`agents.zoo.resolve`).
    """
    from agents.zoo import is_zoo_reference, resolve

    if is_zoo_reference(name) and "#" in name:
        resolve(name)
        return True
    return name in agent_names()


def _functional_table(name: str) -> dict[str, Callable[..., Any]]:
    """The table that builds functional agent ``name``: the registry's, or
    a one-entry table for a zoo reference (resolved: an unknown zoo name
    raises, with the closest known ones)."""
    from agents.zoo import is_zoo_reference, policy_factory

    if is_zoo_reference(name):
        return {name: policy_factory(name)}
    return FUNCTIONAL_AGENTS


def _build(table: dict, name: str, env: Any, params: dict[str, Any]) -> Any:
    factory = table[name]
    signature = inspect.signature(factory)
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    allowed = [p for p in signature.parameters if p != "env"]
    for key in params:
        if key not in allowed and not accepts_any:
            raise ValidationError.for_parameter(f"agent.{key}", params[key],
                                                f"a parameter of agent {name!r}: one of {allowed}")
    for key, value in params.items():
        parameter = signature.parameters.get(key)
        if parameter is not None and _is_boolean(parameter) and not isinstance(value, bool):
            raise ValidationError.for_parameter(
                f"agent.{key}", value, f"true or false (a boolean parameter of agent {name!r})")
    missing = [p.name for p in signature.parameters.values()
               if p.name != "env" and p.default is p.empty
               and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in params]
    if missing:
        raise ValidationError.for_parameter(f"agent.{missing[0]}", None,
                                            f"a value (agent {name!r} requires it)")
    try:
        return factory(env, **params)
    except ValidationError:
        raise
    except (TypeError, ValueError, OverflowError) as error:  # e.g. float("x") of a parameter
        raise ValidationError.for_parameter(
            "agent.params", dict(params),
            f"parameter values agent {name!r} accepts ({type(error).__name__}: {error})"
        ) from None


def _is_boolean(parameter: inspect.Parameter) -> bool:
    """A factory parameter that takes a boolean (annotated ``bool`` or with
    a boolean default): ``greedy``, ``deterministic``, ``include_noop``..."""
    return parameter.annotation in (bool, "bool") or isinstance(parameter.default, bool)


def default_params(name: str) -> dict[str, Any]:
    """The parameters agent ``name`` takes by default (required ones, such
    as ``trained``'s ``path``, are absent); ``{}`` for an unknown name."""
    from agents.zoo import is_zoo_reference

    if is_zoo_reference(name):
        return {"greedy": True}
    table = FUNCTIONAL_AGENTS if name in FUNCTIONAL_AGENTS else HOST_AGENTS
    if name not in table:
        return {}
    return {p.name: p.default for p in inspect.signature(table[name]).parameters.values()
            if p.name != "env" and p.default is not p.empty}


def is_host_agent(name: str) -> bool:
    """True for agents driven from Python (not jittable), e.g. ``sb3``."""
    return name in HOST_AGENTS


def make_agent(name: str, env: Any, **params: Any) -> Any:
    """Build the named agent for ``env``: a functional policy, or a host agent
    with ``act_batch`` for names in ``HOST_AGENTS``. For a multi-agent env
    the functional policy is wrapped in :class:`agents.batched.PerAgentPolicy`
    (observations ``[num_agents, ...]`` to actions ``[num_agents]``).

    Raises:
        ValidationError: unknown name (with the closest known ones), unknown or
            missing parameter, or an env that lacks the observations/actions the
            agent needs.
    """
    functional = _functional_table(name)
    if name in functional:
        policy = _build(functional, name, env, params)
        # one call acts for every agent (env may be a description dict: not wrapped)
        if getattr(env, "is_multi_agent", False):
            from agents.batched import PerAgentPolicy

            policy = PerAgentPolicy(policy, env.num_agents)
        return policy
    if name in HOST_AGENTS:
        return _build(HOST_AGENTS, name, env, params)
    known = agent_names()
    raise ValidationError.for_parameter(
        "agent", name, f"a known agent{did_you_mean(name, known)}: one of {known}")
