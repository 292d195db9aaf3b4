#!/usr/bin/env python
"""Render a FilamentPlume run to a movie file that MoviePlume can play.

The default output is the movie bundled with plume_jax
(``plume_jax/data/filament_movie.npz``, played by ``PlumeNav-Movie-v0``):
a developed plume in a meandering wind, one frame per plume step, stored as
float16 with values below ``1e-4`` of the maximum set to 0 (metadata: ``fps``, ``source`` in pixels, ``wind_velocity`` in pixels
per second, and the settings that made it). The run is deterministic given
``--seed``; re-running with the defaults reproduces the bundled file's frames.

Usage::

    python scripts/tools/make_filament_movie.py                      # the bundled movie
    python scripts/tools/make_filament_movie.py --out /tmp/m.h5 --frames 500 --width 256 --height 128
"""

from __future__ import annotations

import argparse
import pathlib

import jax
import numpy as np

from plume_jax.plumes import FilamentPlume, save_movie
from plume_jax.plumes.movie_files import BUNDLED_MOVIE
from plume_jax.core.types import Grid


def render(width: int, height: int, frames: int, seed: int, fps: float,
           settings: dict) -> tuple[np.ndarray, dict]:
    """``(frames f32[T, H, W], metadata)`` of one filament run."""
    grid = Grid(width=width, height=height)
    plume, params, resolved = FilamentPlume.build(settings, grid, "plume")

    @jax.jit
    def run(key):
        k_init, k_run = jax.random.split(key)
        state = plume.init(k_init, params)

        def body(s, k):
            s = plume.advance(k, s, params)
            return s, plume.field(s, grid, params)

        _, fields = jax.lax.scan(body, state, jax.random.split(k_run, frames))
        return fields

    movie = np.asarray(run(jax.random.key(seed)))
    speed, direction = resolved["wind_speed"], resolved["wind_direction"]
    meta = {
        "fps": fps,
        "source": list(resolved["source"]),
        "wind_velocity": [speed * np.cos(direction) * fps, speed * np.sin(direction) * fps],
        "generator": "plume_jax FilamentPlume (scripts/tools/make_filament_movie.py)",
        "seed": seed,
        "grid_size": [width, height],
        "plume": resolved,
    }
    return movie, meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(BUNDLED_MOVIE),
                        help="movie file (.npz, .h5, .zarr, .npy); default: the bundled movie")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--height", type=int, default=64)
    parser.add_argument("--frames", type=int, default=160)
    parser.add_argument("--fps", type=float, default=10.0,
                        help="frame rate recorded in the metadata (one frame per plume step)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    parser.add_argument("--floor", type=float, default=1e-4,
                        help="values below floor * max are stored as 0 (they compress better)")
    args = parser.parse_args(argv)

    settings = {"source": [12, args.height // 2], "capacity": 256, "warmup_steps": 200,
                "wind_kind": "meander", "wind_speed": 1.0, "wind_direction_std": 0.2,
                "wind_correlation_time": 40.0}
    movie, meta = render(args.width, args.height, args.frames, args.seed, args.fps, settings)
    movie = np.where(movie < args.floor * movie.max(), 0.0, movie).astype(np.float32)
    meta["floor"] = args.floor
    out = pathlib.Path(args.out)
    save_movie(out, movie, dtype=np.dtype(args.dtype), **meta)
    print(f"wrote {out}: {movie.shape[0]} frames of {movie.shape[1]}x{movie.shape[2]}, "
          f"{out.stat().st_size / 1e6:.2f} MB" if out.is_file() else f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
