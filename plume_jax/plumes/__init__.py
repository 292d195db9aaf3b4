"""Plume models (layer 1).

The interface every plume implements is :class:`plume_jax.plumes.base.Plume`
(``init``, ``reinit``, ``advance``, ``concentration``, ``wind``, ``field``,
``source_location``; units, shapes and dtypes in its docstrings). A plume is
a frozen dataclass whose fields are its static settings and whose
``Params`` holds the dynamic ones, each declared once with
:func:`plume_jax.settings.setting`. ``PLUMES`` maps config type names to
the classes; ``plume_jax.make`` and the contract tests read it.

============  ==================================================================
type name     model
============  ==================================================================
``gaussian``  static isotropic Gaussian, constant wind (:mod:`.gaussian`)
``filament``  turbulent puff plume, Farrell et al. 2002 style; constant,
              meandering (OU) or switching wind (:mod:`.filament`, :mod:`.wind`),
              optionally in a 2-D wind field that travels with the puffs
              (self-advected, :mod:`.advected_field`; or linearised,
              :mod:`.wind_field`); 2-D or 3-D puff kernels, optional
              vertical dispersion
``poisson``   infotaxis Poisson hit-rate law, isotropic (K0) or windy; the
              source may be drawn per episode (:mod:`.poisson`)
``movie``     a recorded or precomputed ``(T, H, W)`` movie (:mod:`.movie`)
``singh``     Singh et al. (2023)'s puff plume in metres: 100 Hz Euler steps,
              square top-hat puffs of concentration ``(r0/r)^3``, constant,
              switch-once or switch-many wind, a stray limit (:mod:`.singh`)
============  ==================================================================
"""

from plume_jax.plumes.base import Plume
from plume_jax.plumes.filament import FilamentPlume
from plume_jax.plumes.gaussian import GaussianPlume
from plume_jax.plumes.movie import MoviePlume
from plume_jax.plumes.movie_files import load_movie, save_movie
from plume_jax.plumes.poisson import PoissonPlume
from plume_jax.plumes.singh import SinghPlume
from plume_jax.plumes.wind import WIND_KINDS, WindModel
from plume_jax.settings import type_table

PLUMES: dict[str, type[Plume]] = type_table(GaussianPlume, FilamentPlume, PoissonPlume,
                                            MoviePlume, SinghPlume)

__all__ = [
    "FilamentPlume",
    "GaussianPlume",
    "MoviePlume",
    "PLUMES",
    "Plume",
    "PoissonPlume",
    "SinghPlume",
    "WIND_KINDS",
    "WindModel",
    "load_movie",
    "save_movie",
]
