"""A family measured by a fixed-start protocol of the evaluation layer
instead of the board's seeded episodes (``Family.fixed_starts``).

Today one such protocol: ``singh240``, Singh et al. (2023)'s 240 fixed starts
(:mod:`plume_jax.evaluate.singh_protocol`). Nothing of it is restated here:
each preset of the family runs as its scenario file
(``configs/scenarios/*.yaml`` with ``protocol: singh240`` and that preset)
says — its env overrides (halved diffusion, unit odour gain) and, for the
baseline the scenario names as its own agent (``cast_and_surge``), that
agent's parameters — and the paper's best homings come from
:data:`plume_jax.evaluate.singh_protocol.PAPER_BEST`.

The board's protocol (:mod:`plume_jax.scoreboard.protocol`) maps onto it:
the full board runs all 240 starts (seed :data:`BOARD_SEED`, the board's:
the plume realisations and puff samples the starts are drawn from); a quick
or ``--episodes`` run takes an evenly spread subset
(:func:`plume_jax.evaluate.singh_protocol.subset`), recorded as such, which
publishing refuses without ``--allow-quick``.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
from collections.abc import Mapping
from typing import Any

from plume_jax.core.errors import ValidationError
from plume_jax.files.shipped import shipped_path
from plume_jax.scoreboard.protocol import FULL, Protocol

#: Where the scenario files live (the checkout's ``configs/scenarios``, else the
#: installed package's copy: :func:`plume_jax.files.shipped.shipped_path`).
SCENARIO_DIR = shipped_path("scenarios")


def protocol_episodes(name: str) -> int:
    """The number of fixed starts of protocol ``name``."""
    from plume_jax.evaluate import singh_protocol

    if name != singh_protocol.PROTOCOL:
        raise ValidationError.for_parameter("fixed_starts", name,
                                            f"one of [{singh_protocol.PROTOCOL!r}]")
    return singh_protocol.EPISODES


def family_protocol(family: Any, protocol: Protocol) -> Protocol:
    """The protocol ``family`` runs under when the board runs ``protocol``:
    ``protocol`` itself for a family of seeded episodes; for a fixed-start
    family, its starts (all of them under the full board, else the
    ``protocol.episodes`` first of an even spread, at most all), no
    robustness or start-cell map, the board's seed. A run of all the starts
    is mode ``full`` (nothing of the protocol is left out); a subset's mode
    reads ``quick, N of the 240 starts``."""
    if family.fixed_starts is None:
        return protocol
    total = protocol_episodes(family.fixed_starts)
    n = total if protocol == FULL else min(protocol.episodes, total)
    mode = "full" if n == total else f"quick, {n} of the {total} starts"
    return Protocol(mode=mode, episodes=n, robustness_episodes=0, map_stride=0, map_episodes=0,
                    seed=protocol.seed, fixed_starts=family.fixed_starts)


def full_protocol(family: Any) -> Protocol:
    """What a published section of ``family`` must have been made with."""
    return family_protocol(family, FULL)


@functools.cache
def _scenarios(directory: pathlib.Path, name: str) -> dict[str, dict[str, Any]]:
    from plume_jax.evaluate.scenario import load_scenario

    found: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("*.yaml")):
        scenario = load_scenario(path)
        if scenario.get("protocol") == name:
            found.setdefault(scenario["env"]["preset"], scenario)
    return found


def scenario_for(preset: str, name: str, directory: pathlib.Path = SCENARIO_DIR
                 ) -> dict[str, Any]:
    """The validated scenario file of ``directory`` that runs ``preset``
    under protocol ``name`` (the first by file name, should there be two).

    Raises:
        ValidationError: (parameter ``--family``) no such file.
    """
    found = _scenarios(pathlib.Path(directory), name)
    if preset not in found:
        raise ValidationError.for_parameter(
            "--family", preset, f"a preset with a scenario file of protocol {name} in "
            f"{directory} (those run {sorted(found)})")
    return found[preset]


def protocol_contender(contender: Any, scenario: Mapping[str, Any]) -> tuple[Any, str | None]:
    """``(contender as it runs the scenario's protocol, None)``, or
    ``(contender, reason)`` when it cannot: an agent driven from Python
    (the protocol runs its own jitted rollout), or one that brings its own
    setting of what the scenario sets (a zoo entry's own sensor: the
    scenario's sensor is part of the protocol). A baseline that is the
    scenario's own agent runs with the scenario's parameters."""
    if contender.host:
        return contender, (f"needs a functional agent (protocol {scenario['protocol']} runs its "
                           "own jitted rollout)")
    clash = sorted(set(contender.env_overrides) & set(scenario["env"]["overrides"]))
    if clash:
        return contender, (f"needs its own {', '.join(clash)}, which protocol "
                           f"{scenario['protocol']} sets itself (scenario {scenario['name']})")
    own = scenario["agent"]
    if contender.kind == "baseline" and contender.agent == own["name"] and own["params"]:
        return dataclasses.replace(contender, params={**own["params"],
                                                      **contender.params}), None
    return contender, None


__all__ = ["SCENARIO_DIR", "family_protocol", "full_protocol", "protocol_contender",
           "protocol_episodes", "scenario_for"]
