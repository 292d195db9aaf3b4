"""The preset families of the scoreboard, each a tuple of preset ids.

A family groups presets that share a plume model and a task: the agents
that apply to one of them usually apply to all (the board still checks
each pair). Every preset of :data:`plume_jax.PRESETS` is in exactly one
family or in :data:`LEFT_OUT` with the reason (a test checks it).
"""

from __future__ import annotations

import dataclasses

from plume_jax.core.errors import ValidationError


@dataclasses.dataclass(frozen=True)
class Family:
    """Attributes:
        name: what ``plume-jax bench --family`` takes.
        title: a heading for the docs.
        presets: the preset ids, in the board's order.
        robustness_preset: the preset whose variations the robustness table
            runs (``None``: no robustness table for this family).
        fixed_starts: ``None``: the board's seeded episodes; else the
            evaluation layer's fixed-start protocol the family is measured by
            (``"singh240"``: each preset runs its scenario file's 240 starts
            and env settings, :mod:`plume_jax.scoreboard.fixed_starts`).
        protocol_variants: other fixed-start protocols (variants of
            ``fixed_starts``, each with scenario files of its own) whose
            homings the robustness table shows beside the family's own,
            over several evaluation seeds (:mod:`plume_jax.scoreboard.variants`).
    """

    name: str
    title: str
    presets: tuple[str, ...]
    robustness_preset: str | None = None
    fixed_starts: str | None = None
    protocol_variants: tuple[str, ...] = ()


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("gaussian", "Static Gaussian plume (point sensor, antennae, binary detector)",
           ("PlumeNav-Gaussian-v0", "PlumeNav-GaussianOriented-v0", "PlumeNav-GaussianBinary-v0"),
           robustness_preset="PlumeNav-Gaussian-v0"),
    Family("filament", "Turbulent filament plume: the wind regimes and Farrell's field",
           ("PlumeNav-Filament-Constant-v0", "PlumeNav-Filament-v0",
            "PlumeNav-Filament-SwitchOnce-v0", "PlumeNav-Filament-SwitchMany-v0",
            "PlumeNav-Filament-Sparse-v0", "PlumeNav-Filament-Gusty-v0",
            "PlumeNav-Filament-Farrell-v0"),
           robustness_preset="PlumeNav-Filament-v0"),
    Family("poisson", "Poisson detection benchmarks (Loisy & Heinonen 2023 cases)",
           ("PlumeNav-Poisson-Iso19x19-v0", "PlumeNav-Poisson-Iso53x53-v0",
            "PlumeNav-Poisson-Windy81x41-v0")),
    Family("movie", "Movie plume (the bundled filament recording, played back)",
           ("PlumeNav-Movie-v0",)),
    Family("swarm", "Swarm: eight agents on the filament plume, first arrival",
           ("PlumeNav-Swarm-v0",)),
    Family("singh2023", "Singh et al. (2023)'s task, by their protocol: homings out of 240 "
           "fixed starts",
           ("PlumeNav-Singh2023-Constant-v0", "PlumeNav-Singh2023-SwitchOnce-v0",
            "PlumeNav-Singh2023-SwitchMany-v0", "PlumeNav-Singh2023-Sparse40-v0"),
           fixed_starts="singh240", protocol_variants=("singh240_paper",)),
)}

#: Presets on no board, and why.
LEFT_OUT: dict[str, str] = {
    "PlumeNav-Poisson-v0": "the generic Poisson preset; the board runs the three benchmark "
                           "cases of the poisson family instead",
    **{f"PlumeNav-Singh2023-{name}-v0":
       "Singh et al. (2023)'s sparsity series beyond their table: the singh2023 family is the "
       "four regimes of their table (its sparse column is 0.4, Sparse40), each with their best "
       "homings to compare with; no published figure and no zoo recipe for this one. Measure "
       f"it with plume-jax evaluate --scenario configs/scenarios/singh2023_{name.lower()}.yaml"
       for name in ("Sparse80", "Sparse60", "Sparse20")},
}


def family_names() -> list[str]:
    return list(FAMILIES)


def get_family(name: str) -> Family:
    """The family called ``name``.

    Raises:
        ValidationError: (parameter ``--family``) an unknown name, with the
            closest known ones.
    """
    from plume_jax.settings.schema import did_you_mean

    if name not in FAMILIES:
        raise ValidationError.for_parameter(
            "--family", name, f"a preset family{did_you_mean(name, family_names())}: one of "
            f"{family_names()}")
    return FAMILIES[name]
