"""Recorded or precomputed plumes: a ``(T, H, W)`` movie of concentration.

The movie is read once at construction (:mod:`plume_jax.plumes.movie_files`:
``.npz``, ``.npy``, HDF5, zarr), normalised, and kept as a float32 leaf of
the plume's params, so it lives on the device and is passed to compiled
programs as an argument rather than baked into them.

Time: the frame shown ``n`` steps into an episode is at position
``f = start_frame + n · dt · fps`` (``dt`` seconds per env step, ``fps``
frames per second of the movie): the step count and the movie's frame rate
are decoupled. At the end of the movie ``loop="wrap"`` goes on from the first
frame (``f mod T``; frame ``T-1`` blends into frame 0) and
``loop="clamp"`` holds the last frame. With ``interpolate`` the value is
linear in time between frames ``floor(f)`` and ``floor(f) + 1``; without
it, the nearest frame is shown.

Space: the movie's pixel centres span the grid from corner to corner, so
grid point ``(x, y)`` reads pixel coordinates
``(x (W_m - 1) / (W - 1), y (H_m - 1) / (H - 1))`` with bilinear
interpolation (any grid size works; equal sizes read pixels exactly at cell
centres). Row 0 of the stored frames is ``y = 0`` (south); ``flip_y=True``
takes row 0 as north, the usual image convention.

Both interpolations weight ``(1 - w) a + w b``, so they are exact at frame
and pixel centres.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from collections.abc import Mapping
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.plumes.base import Plume
from plume_jax.plumes.movie_files import BUNDLED_MOVIE, LAYOUTS, load_movie
from plume_jax.plumes.wind import constant_wind
from plume_jax.core.pytree import Pytree
from plume_jax.settings import (
    MAX_LENGTH,
    MAX_SCALE,
    angle,
    boolean,
    choice,
    derived,
    grid_position,
    integer,
    is_pair,
    optional,
    real,
    setting,
)
from plume_jax.core.types import Grid


def _path(name: str, value: Any, grid: Grid) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, pathlib.PurePath)) or not str(value):
        raise ValidationError.for_parameter(
            name, value, "None (the bundled movie) or the path of a movie file")
    return str(value)


def _data_id(name: str, value: Any, grid: Grid) -> str | None:
    if value is None:
        return None
    from plume_jax.datasets.registry import check_name

    return check_name(value, name, "None or the id of a registered dataset (plume-jax data "
                                   "list)")


def _optional_name(name: str, value: Any, grid: Grid) -> str | None:
    if value is None or (isinstance(value, str) and value):
        return value
    raise ValidationError.for_parameter(name, value, "None or the non-empty name of an array")


def _frame_range(name: str, value: Any, grid: Grid) -> list[int] | None:
    allowed = "None or a [start, stop] pair of integers with 0 <= start < stop"
    if value is None:
        return None
    if not is_pair(value) or not all(isinstance(v, (int, np.integer))
                                     and not isinstance(v, (bool, np.bool_)) for v in value):
        raise ValidationError.for_parameter(name, value, allowed)
    start, stop = int(value[0]), int(value[1])
    if not 0 <= start < stop:
        raise ValidationError.for_parameter(name, value, allowed)
    return [start, stop]


#: Frame rates and step durations lie in ``[1e-6, 1e6]`` (frames per second,
#: seconds per step), so their product and its multiples stay finite in float32.
_RATE = real(low=1e-6, high=1e6)


@chex.dataclass(frozen=True)
class MovieParams(Pytree):
    """Attributes:
        frames: f32[T, H_m, W_m], the normalised movie (``[t, row, column]``),
            loaded by ``build``.
        source: f32[2], ``(x, y)`` of the source, grid cells.
        fps: f32[], movie frames per second.
        dt: f32[], seconds per env step.
        start_frame: f32[], frame position at the start of an episode.
        scale: f32[], factor applied after normalisation.
        wind_speed: f32[], mean wind reported to wind sensors, cells/step.
        wind_direction: f32[], its direction (toward), radians.

    The settings that default to ``None`` are resolved from the file by
    ``build``.
    """

    frames: jax.Array = derived()
    source: jax.Array = setting(None, optional(grid_position()),
                                doc="(x, y) of the source, cells; None: the file's 'source' "
                                    "(pixels)")
    fps: jax.Array = setting(None, optional(_RATE),
                             doc="movie frames per second, in [1e-6, 1e6]; None: the file's 'fps'")
    dt: jax.Array = setting(None, optional(_RATE),
                            doc="seconds per env step, in [1e-6, 1e6]; None: 1 / fps")
    start_frame: jax.Array = setting(0.0, real(low=0.0, high=1e9),
                                     doc="frame position at the episode start, in [0, 1e9]")
    scale: jax.Array = setting(1.0, real(low=0.0, high=MAX_SCALE),
                               doc=f"factor applied after normalisation, in [0, {MAX_SCALE:g}]")
    wind_speed: jax.Array = setting(None, optional(real(low=0.0, high=MAX_LENGTH)),
                                    doc=f"mean wind speed, cells/step, in [0, {MAX_LENGTH:g}]; "
                                        "None: from 'wind_velocity'")
    wind_direction: jax.Array = setting(None, optional(angle()),
                                        doc="mean wind direction (toward), radians; None: from "
                                            "'wind_velocity'")


@chex.dataclass(frozen=True)
class MovieState(Pytree):
    """Attributes:
        step: i32[], steps since the episode started.
        start_frame: f32[], this episode's frame position at step 0.
    """

    step: jax.Array
    start_frame: jax.Array


@dataclasses.dataclass(frozen=True)
class MoviePlume(Plume[MovieParams, MovieState]):
    """A plume played from a ``(T, H, W)`` movie (see the module docstring
    for the time and space mappings).

    ``path=None`` plays the movie bundled with plume_jax (a
    :class:`~plume_jax.plumes.filament.FilamentPlume` run made by
    ``scripts/tools/make_filament_movie.py``); ``data_id`` plays a registered
    dataset from the cache (:mod:`plume_jax.datasets`; ``plume-jax data
    download ID`` fetches it), its registry entry giving ``dataset``,
    ``layout`` and ``flip_y`` unless set and metadata over the file's
    (``fps``, ``source``, the mean flow as ``wind_velocity``). ``fps``, ``source``, ``wind_speed``
    and ``wind_direction`` default to the file's metadata (``fps``,
    ``source`` in pixels, ``wind_velocity`` in pixels per second); ``dt``
    defaults to ``1 / fps`` (one frame per step). Values are clipped at 0
    and then normalised: ``"max"`` divides by the movie's maximum,
    ``"p99"`` by its 99th percentile, ``"none"`` keeps them.
    """

    path: str | None = setting(None, _path, doc="movie file (.npz, .npy, .h5/.hdf5, .mat v7.3, "
                                                ".zarr); None: the bundled movie or data_id's")
    data_id: str | None = setting(None, _data_id,
                                  doc="a registered dataset (plume-jax data list) to play from "
                                      "the cache instead of path; None: path")
    dataset: str | None = setting(None, _optional_name,
                                  doc="name of the array in the file; None: 'frames' or the only "
                                      "one")
    layout: str = setting("tyx", choice(LAYOUTS),
                          doc="order of the stored axes (t = frames, y = rows, x = columns)")
    frame_range: tuple | None = setting(None, _frame_range,
                                        doc="[start, stop): the frames to load; None: all")
    spatial_stride: int = setting(1, integer(low=1, high=1024),
                                  doc="load every n-th row and column, in [1, 1024]")
    flip_y: bool = setting(False, boolean(),
                           doc="stored row 0 is north (image convention) rather than y = 0")
    normalise: str = setting("max", choice(("none", "max", "p99")),
                             doc="divide by the movie's max, its 99th percentile, or nothing")
    loop: str = setting("wrap", choice(("wrap", "clamp")),
                        doc="after the last frame: wrap to the first, or hold the last")
    interpolate: bool = setting(True, boolean(),
                                doc="linear interpolation in time (else the nearest frame)")
    random_start: bool = setting(False, boolean(),
                                 doc="start each episode at a uniformly random frame position")

    type_name = "movie"
    Params = MovieParams

    @property
    def file(self) -> pathlib.Path:
        """The movie file this plume plays (with ``data_id``: the dataset's
        place in the cache, :func:`plume_jax.datasets.dataset_path`)."""
        if self.data_id is not None:
            from plume_jax import datasets

            return datasets.dataset_path(datasets.get(self.data_id))
        return BUNDLED_MOVIE if self.path is None else pathlib.Path(self.path)

    @classmethod
    def registered(cls, resolved: dict[str, Any], given: Mapping[str, Any], grid: Grid,
                   prefix: str) -> tuple[pathlib.Path | None, dict[str, Any]]:
        """With ``data_id``: the dataset's cached file and the metadata its
        registry entry gives (``fps``, ``source``, ``wind_velocity``:
        :meth:`plume_jax.datasets.Dataset.movie_facts`); the entry's
        ``dataset``, ``layout`` and ``flip_y`` fill ``resolved`` where the
        user gave none (or None). ``(None, {})`` without ``data_id``.

        Raises:
            ValidationError: ``path`` given too; an unknown id; a dataset
                not in the cache (naming ``plume-jax data download ID``).
        """
        data_id = resolved["data_id"]
        if data_id is None:
            return None, {}
        if resolved["path"] is not None:
            raise ValidationError.for_parameter(
                f"{prefix}.path", resolved["path"], f"None when data_id is given ({prefix}."
                f"data_id={data_id!r} plays that dataset's cached file): give one of the two")
        from plume_jax import datasets

        try:
            entry = datasets.get(data_id)
            file = datasets.require_cached(entry)
        except ValidationError as exc:
            raise ValidationError.for_parameter(f"{prefix}.data_id", data_id,
                                                exc.allowed or str(exc)) from None
        settings, meta = entry.movie_facts()
        for name, value in settings.items():
            if given.get(name) is None:  # not given (None: the setting's "from the file")
                resolved[name] = cls.SETTINGS[name].check(
                    f"{prefix}.{name} (from dataset {data_id!r})", value, grid)
        return file, meta

    @classmethod
    def build(cls, values: Mapping[str, Any], grid: Grid, prefix: str):
        """Validate, load and normalise the movie, and resolve the settings
        left to the file's metadata (a plume that reads a file: the one
        component whose ``build`` does more than validate and assemble)."""
        resolved = cls.resolve(values, grid, prefix)
        cached, registry_meta = cls.registered(resolved, values, grid, prefix)
        static = {k: v for k, v in resolved.items() if cls.SETTINGS[k].static}
        component = cls(**{**static, "frame_range": None if static["frame_range"] is None
                           else tuple(static["frame_range"])})
        try:
            raw, meta = load_movie(cached or component.file, component.dataset,
                                   layout=component.layout, frame_range=component.frame_range,
                                   spatial_stride=component.spatial_stride)
        except ValidationError as exc:
            name = exc.parameter if exc.parameter in ("dataset", "layout") else \
                ("data_id" if cached else "path")
            raise ValidationError.for_parameter(f"{prefix}.{name}", resolved[name],
                                                exc.allowed or str(exc)) from None
        meta = {**meta, **registry_meta}  # the registry's facts over the file's attributes
        frames = component.normalised(raw)
        t, h_m, w_m = frames.shape
        cells_per_pixel = (_ratio(grid.width, w_m), _ratio(grid.height, h_m))

        data_id = resolved["data_id"]

        def whence(key: str) -> str:
            """Where a metadata value came from, for error messages."""
            return f"dataset {data_id!r} in the registry" if key in registry_meta \
                else "file metadata"

        def from_file(name: str, key: str, convert):
            if resolved[name] is not None:
                return resolved[name]
            if key not in meta:
                source = "the movie file has no" if data_id is None else \
                    f"neither the movie file nor dataset {data_id!r} in the registry has"
                raise ValidationError.for_parameter(
                    f"{prefix}.{name}", None,
                    f"a value: {source} {key!r} metadata to take it from")
            return convert(meta[key])

        def rate(value):
            name = f"{prefix}.fps ({whence('fps')})"
            return _RATE(name, _fits_float(name, value, _RATE.allowed), grid)

        fps = from_file("fps", "fps", rate)
        dt = resolved["dt"] if resolved["dt"] is not None else 1.0 / fps

        def source_from_pixels(value):
            where = f"{prefix}.source ({whence('source')})"
            value = _pixel_pair(where, value)
            x, y = component.pixel_to_grid(value, (h_m, w_m), cells_per_pixel)
            return grid_position()(f"{where} from pixel {list(value)} of the {w_m}x{h_m} "
                                   "movie as read", [x, y], grid)

        source = from_file("source", "source", source_from_pixels)
        velocity = _file_wind(meta, component, cells_per_pixel, dt, prefix,
                              whence("wind_velocity"))
        speed = resolved["wind_speed"] if resolved["wind_speed"] is not None else \
            real(low=0.0, high=MAX_LENGTH)(f"{prefix}.wind_speed ({whence('wind_velocity')})",
                                           math.hypot(*velocity), grid)
        direction = resolved["wind_direction"] if resolved["wind_direction"] is not None else \
            math.atan2(velocity[1], velocity[0])
        resolved.update(fps=float(fps), dt=float(dt), source=tuple(source),
                        wind_speed=float(speed), wind_direction=float(direction))
        component, params = cls.assemble(resolved, grid, prefix, frames=jnp.asarray(frames))
        return component, params, resolved

    def normalised(self, raw: np.ndarray) -> np.ndarray:
        """float32 frames ``(T, H, W)``: stored orientation fixed
        (``flip_y``), clipped at 0 and normalised."""
        frames = np.clip(np.asarray(raw, np.float32), 0.0, None)
        if self.flip_y:
            frames = frames[:, ::-1, :]
        if self.normalise != "none":
            top = float(frames.max()) if self.normalise == "max" else \
                float(np.percentile(frames, 99.0))
            if top > 0.0:
                frames = frames / np.float32(top)
        return np.ascontiguousarray(frames, np.float32)

    def pixel_to_grid(self, pixel: Any, shape: tuple[int, int],
                      cells_per_pixel: tuple[float, float]) -> tuple[float, float]:
        """``(x, y)`` grid cells of a stored-array pixel ``[x, y]`` (column,
        row) of the file, after ``spatial_stride`` and ``flip_y``."""
        x, y = (float(v) / self.spatial_stride for v in pixel)
        if self.flip_y:
            y = (shape[0] - 1) - y
        return x * cells_per_pixel[0], y * cells_per_pixel[1]

    # -- state -----------------------------------------------------------------
    def init(self, key: jax.Array, params: MovieParams) -> MovieState:
        """Step 0 at ``start_frame`` (or at a uniformly random frame position
        with ``random_start``)."""
        if self.random_start:
            num_frames = params.frames.shape[0]
            start = jax.random.uniform(key, (), jnp.float32, 0.0, float(num_frames))
        else:
            start = jnp.asarray(params.start_frame, jnp.float32)
        return MovieState(step=jnp.zeros((), jnp.int32), start_frame=start)

    def sharing_conflict(self) -> str:
        """A reason: :meth:`reinit` (:meth:`init`) restarts the movie at
        each episode start, so the other agents sharing the realisation
        would see the movie jump in the middle of their episodes."""
        return ("its reinit restarts the movie at each episode start, which would make the "
                "movie jump in the middle of the other agents' episodes")

    def advance(self, key: jax.Array, plume_state: MovieState, params: MovieParams) -> MovieState:
        """One step: ``dt`` seconds later."""
        return plume_state.replace(step=plume_state.step + 1)

    def frame_position(self, plume_state: MovieState, params: MovieParams) -> jax.Array:
        """f32[], the (fractional) frame shown now, after wrap or clamp."""
        num_frames = params.frames.shape[0]
        f = plume_state.start_frame + plume_state.step.astype(jnp.float32) * (params.dt * params.fps)
        if self.loop == "wrap":
            f = jnp.mod(f, float(num_frames))
        else:
            f = jnp.clip(f, 0.0, float(num_frames - 1))
        return f.astype(jnp.float32)

    def _time_blend(self, plume_state: MovieState, params: MovieParams):
        """``(i0, i1, w)``: frames and the weight of ``i1``."""
        num_frames = params.frames.shape[0]
        f = self.frame_position(plume_state, params)
        if not self.interpolate:
            i = jnp.round(f).astype(jnp.int32)
            i = jnp.mod(i, num_frames) if self.loop == "wrap" else jnp.minimum(i, num_frames - 1)
            return i, i, jnp.zeros((), jnp.float32)
        if self.loop == "wrap":
            i0 = jnp.floor(f).astype(jnp.int32)
            w = f - i0.astype(jnp.float32)
            i0 = jnp.mod(i0, num_frames)
            return i0, jnp.mod(i0 + 1, num_frames), w
        i0 = jnp.clip(jnp.floor(f).astype(jnp.int32), 0, max(num_frames - 2, 0))
        w = jnp.clip(f - i0.astype(jnp.float32), 0.0, 1.0) if num_frames > 1 else jnp.zeros(())
        return i0, jnp.minimum(i0 + 1, num_frames - 1), w

    # -- readings --------------------------------------------------------------------
    def source_location(self, plume_state: MovieState, params: MovieParams) -> jax.Array:
        """f32[2], the source position (cells)."""
        return jnp.asarray(params.source, jnp.float32)

    def concentration(self, plume_state: MovieState, points: jax.Array, grid: Grid,
                      params: MovieParams) -> jax.Array:
        """f32[...] at points f32[..., 2]: bilinear in space, linear in time
        (with ``interpolate``), times ``scale``; 0 outside the grid."""
        points = jnp.asarray(points, jnp.float32)
        _, h_m, w_m = params.frames.shape
        i0, i1, w = self._time_blend(plume_state, params)
        px = points[..., 0] * _ratio(w_m, grid.width)
        py = points[..., 1] * _ratio(h_m, grid.height)

        def axis(p, size):
            lo = jnp.clip(jnp.floor(p).astype(jnp.int32), 0, max(size - 2, 0))
            frac = jnp.clip(p - lo.astype(jnp.float32), 0.0, 1.0) if size > 1 else \
                jnp.zeros_like(p)
            return lo, jnp.minimum(lo + 1, size - 1), frac

        x0, x1, fx = axis(px, w_m)
        y0, y1, fy = axis(py, h_m)

        def bilinear(frame):
            bottom = (1.0 - fx) * frame[y0, x0] + fx * frame[y0, x1]
            top = (1.0 - fx) * frame[y1, x0] + fx * frame[y1, x1]
            return (1.0 - fy) * bottom + fy * top

        a = bilinear(params.frames[i0])
        c = a if not self.interpolate else (1.0 - w) * a + w * bilinear(params.frames[i1])
        c = params.scale * c
        return jnp.where(grid.contains(points), c, 0.0).astype(jnp.float32)

    def wind(self, plume_state: MovieState, points: jax.Array, params: MovieParams) -> jax.Array:
        """f32[..., 2]: the movie's constant mean wind (cells/step)."""
        return constant_wind(params.wind_speed, params.wind_direction, points)

    def metadata_extras(self) -> dict[str, Any]:
        """The file played."""
        if self.data_id is None:
            return {"file": str(self.file)}
        try:
            file = str(self.file)
        except ValidationError:  # the id's catalog is no longer set
            file = None
        return {"file": file, "data_id": self.data_id}


def _ratio(target: int, source: int) -> float:
    """``(target - 1) / (source - 1)``: grid/pixel spacing ratio (0 for a single row)."""
    return 0.0 if source <= 1 else (target - 1) / (source - 1)


def _pixel_pair(name: str, value: Any) -> tuple[float, float]:
    """A metadata ``[x, y]`` pair as two finite floats, or a ValidationError
    naming ``name`` (a file's metadata is not trusted)."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        pair = (_fits_float(name, value[0], _PAIR), _fits_float(name, value[1], _PAIR))
        if all(math.isfinite(v) for v in pair):
            return pair
    raise ValidationError.for_parameter(name, value, _PAIR)


_PAIR = "[x, y]: two finite numbers (pixels)"


def _fits_float(name: str, value: Any, allowed: str) -> Any:
    """``value`` as a float when it is an integer too large for one (a
    file's metadata is not trusted): a one-line error instead of an
    ``OverflowError``; any other value is returned unchanged."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise ValidationError.for_parameter(
                name, value, f"{allowed} (this integer is too large for a float)") from None
    return float(value) if isinstance(value, float) else value


def _file_wind(meta: Mapping[str, Any], plume: MoviePlume, cells_per_pixel: tuple[float, float],
               dt: float, prefix: str = "plume", whence: str = "file metadata"
               ) -> tuple[float, float]:
    """The metadata's ``wind_velocity`` (pixels/s) in cells per step (0 if absent);
    ``whence`` names where it came from in errors."""
    if "wind_velocity" not in meta:
        return (0.0, 0.0)
    vx, vy = (v / plume.spatial_stride for v in _pixel_pair(
        f"{prefix}.wind_velocity ({whence})", meta["wind_velocity"]))
    if plume.flip_y:
        vy = -vy
    return (vx * cells_per_pixel[0] * dt, vy * cells_per_pixel[1] * dt)
