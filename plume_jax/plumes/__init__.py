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
- ``field(plume_state, grid, params) -> f32[H, W]`` — for rendering;
- ``source_location(plume_state, params) -> f32[2]``.
"""

from plume_jax.plumes.gaussian import GaussianPlume

PLUMES = {GaussianPlume.type_name: GaussianPlume}

__all__ = ["GaussianPlume", "PLUMES"]
