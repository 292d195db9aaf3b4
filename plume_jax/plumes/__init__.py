"""Plume models (layer 1).

A plume is a frozen dataclass with pure methods:

- ``init(key, params) -> plume_state`` — a fresh plume (may be expensive:
  a turbulent plume warms up here);
- ``reinit(key, plume_state, params) -> plume_state`` — the plume for the
  next episode under auto-reset; must be cheap (a static plume re-inits, a
  dynamic plume may keep its developed state running);
- ``advance(key, plume_state, params) -> plume_state`` — one env step;
- ``concentration(plume_state, points, grid, params) -> f32[...]`` — at
  float points ``f32[..., 2]``, zero outside the grid;
- ``wind(plume_state, points, params) -> f32[..., 2]`` — the air velocity
  (cells per step, toward) at those points; the env exposes it to sensors,
  actions and starts as ``PlumeProbe.wind``;
- ``field(plume_state, grid, params) -> f32[H, W]`` — for rendering;
- ``source_location(plume_state, params) -> f32[2]``.

============  ==================================================================
type name     model
============  ==================================================================
``gaussian``  static isotropic Gaussian, constant wind (:mod:`.gaussian`)
``filament``  turbulent puff plume, Farrell et al. 2002 style; constant,
              meandering (OU) or switching wind (:mod:`.filament`, :mod:`.wind`)
``poisson``   infotaxis Poisson hit-rate law, isotropic (K0) or windy; the
              source may be drawn per episode (:mod:`.poisson`)
``movie``     a recorded or precomputed ``(T, H, W)`` movie (:mod:`.movie`)
============  ==================================================================
"""

from plume_jax.plumes.filament import FilamentPlume
from plume_jax.plumes.gaussian import GaussianPlume
from plume_jax.plumes.movie import MoviePlume
from plume_jax.plumes.movie_files import load_movie, save_movie
from plume_jax.plumes.poisson import PoissonPlume
from plume_jax.plumes.wind import WIND_KINDS, WindModel

PLUMES = {cls.type_name: cls for cls in (GaussianPlume, FilamentPlume, PoissonPlume, MoviePlume)}

__all__ = [
    "FilamentPlume",
    "GaussianPlume",
    "MoviePlume",
    "PLUMES",
    "PoissonPlume",
    "WIND_KINDS",
    "WindModel",
    "load_movie",
    "save_movie",
]
