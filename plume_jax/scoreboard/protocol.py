"""The scoreboard's protocol: how many episodes, which seed, how fine the
start-cell map — one fixed set of numbers per mode, recorded with every
result so that a table says how it was made.

The evaluation seed, :data:`BOARD_SEED`, is used by no training config
(zoo configs train with ``run.seed`` 0 and evaluate after training with
``eval.seed`` 1000003): the board's episodes are not ones an agent was
trained or selected on. Every (preset, agent) pair runs the same episodes
(same seed, same number): the plume, the start and the source are the
same for every agent, episode for episode, where the agent's actions do
not change them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from plume_jax.core.errors import ValidationError

#: The seed of every board and robustness rollout (see the module docstring).
BOARD_SEED = 31_000_031


@dataclasses.dataclass(frozen=True)
class Protocol:
    """Attributes:
        mode: ``"quick"`` or ``"full"``.
        episodes: seeded episodes per (preset, agent) pair.
        robustness_episodes: episodes per (variation, agent).
        map_stride: cells between the start cells of the per-start-cell map.
        map_episodes: episodes per start cell.
        seed: the evaluation seed (:data:`BOARD_SEED`).
        fixed_starts: ``None`` for seeded episodes from each preset's start
            distribution; the name of a fixed-start protocol of the
            evaluation layer (``"singh240"``: Singh et al.'s 240 starts,
            :mod:`plume_jax.scoreboard.fixed_starts`) for a family measured
            by it, whose ``episodes`` are then the starts run (240, or an
            evenly spread subset in a quick run).
    """

    mode: str
    episodes: int
    robustness_episodes: int
    map_stride: int
    map_episodes: int
    seed: int = BOARD_SEED
    fixed_starts: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The record's form; ``fixed_starts`` only when set (sections
        recorded before it existed compare equal to their protocol)."""
        out = dataclasses.asdict(self)
        if out["fixed_starts"] is None:
            del out["fixed_starts"]
        return out


#: The published table's protocol.
FULL = Protocol(mode="full", episodes=1000, robustness_episodes=500, map_stride=8,
                map_episodes=20)
#: A quick look: the same seed, a tenth of the episodes, a coarser map.
QUICK = Protocol(mode="quick", episodes=100, robustness_episodes=50, map_stride=16,
                 map_episodes=8)
MODES = {"quick": QUICK, "full": FULL}


def get_protocol(mode: str, episodes: int | None = None) -> Protocol:
    """The protocol of ``mode``, with ``episodes`` (when given) replacing the
    episodes of every table and map cell (a tiny run for tests and trials;
    the result says so: its mode reads ``quick, N episodes``).

    Raises:
        ValidationError: an unknown mode or episodes below 1.
    """
    if mode not in MODES:
        raise ValidationError.for_parameter("--mode", mode, f"one of {list(MODES)}")
    chosen = MODES[mode]
    if episodes is None:
        return chosen
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValidationError.for_parameter("--episodes", episodes, "an integer >= 1")
    return dataclasses.replace(chosen, mode=f"{mode}, {episodes} episodes", episodes=episodes,
                               robustness_episodes=episodes,
                               map_episodes=min(chosen.map_episodes, episodes))
