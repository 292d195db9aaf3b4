"""Which presets the default test run checks one by one.

Presets that differ from another preset only in settings (the filament wind
modes, the sparse filament, the 2-D-kernel gust preset, the larger isotropic
Poisson grid) share every code path with it; their per-preset smoke tests run
with the slow tests (``-m slow``), so the default run stays within CI's
budget while each plume model, wind model, kernel and sensor is still
covered there. Used by the per-preset smoke tests, Gymnasium's and SB3's env
checkers and the extreme-settings test.
"""

from __future__ import annotations

import pytest

SAME_CODE_AS_ANOTHER_PRESET = frozenset({
    "PlumeNav-Filament-Constant-v0",     # = PlumeNav-Filament-v0, constant wind
    "PlumeNav-Filament-SwitchOnce-v0",   # = PlumeNav-Filament-v0, one switch
    "PlumeNav-Filament-SwitchMany-v0",   # = PlumeNav-Filament-v0, many switches
    "PlumeNav-Filament-Sparse-v0",       # = PlumeNav-Filament-v0, 64 puffs
    "PlumeNav-Filament-Gusty-v0",        # = PlumeNav-Filament-Farrell-v0, 2-D kernel and the
                                         #   linearised field (tests/plumes/test_plumes_wind_field.py)
    "PlumeNav-Poisson-Iso53x53-v0",      # = PlumeNav-Poisson-Iso19x19-v0, larger grid
    "PlumeNav-Singh2023-Sparse80-v0",    # = PlumeNav-Singh2023-Constant-v0, fewer puffs
    "PlumeNav-Singh2023-Sparse60-v0",    # (the birth rate is a dynamic param)
    "PlumeNav-Singh2023-Sparse40-v0",
    "PlumeNav-Singh2023-Sparse20-v0",
})


#: Presets whose Gymnasium interface (spaces, reset and step signatures, render
#: modes) is another preset's, differing only in the plume's wind code: the
#: API checkers (Gymnasium's, SB3's) run them with the slow tests.
SAME_INTERFACE_AS_ANOTHER_PRESET = SAME_CODE_AS_ANOTHER_PRESET | frozenset({
    "PlumeNav-Singh2023-SwitchOnce-v0",  # = PlumeNav-Singh2023-Constant-v0's interface
    "PlumeNav-Singh2023-SwitchMany-v0",
})


def per_preset(presets, same=SAME_CODE_AS_ANOTHER_PRESET):
    """``presets`` as pytest params, those in ``same`` (default
    SAME_CODE_AS_ANOTHER_PRESET) marked slow."""
    return [pytest.param(p, marks=pytest.mark.slow) if p in same else p for p in presets]
