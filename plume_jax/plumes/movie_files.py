"""Reading and writing plume movies: ``(T, H, W)`` arrays of concentration.

Formats, chosen by the file name:

==================  ==========================================================
suffix              storage
==================  ==========================================================
``.npz``            NumPy archive: the frames under ``dataset`` (default
                    ``"frames"``, or the only array), metadata as a JSON
                    string under ``"metadata"``
``.npy``            one NumPy array, no metadata
``.h5``, ``.hdf5``  HDF5 dataset ``dataset`` (optional extra: ``h5py``);
                    metadata from the file's and the dataset's attributes
``.mat``            MATLAB v7.3 file (HDF5 behind a 512-byte header), read
                    as HDF5; older MAT versions (v4-v7, not HDF5) are refused
                    with the MATLAB command that converts them
``.zarr``           a zarr array, or array ``dataset`` of a zarr group
                    (optional extra: ``zarr``); metadata from attributes
==================  ==========================================================

Files from elsewhere are read without pickle: ``.npz``/``.npy`` with
``allow_pickle=False``, and a zarr folder only after every array's metadata
(zarr 2 or 3 format) shows a real-number dtype and numeric codecs only
(:func:`check_zarr_store`), since zarr 2 would unpickle an object array's
chunks while reading them.

Metadata keys that :class:`plume_jax.plumes.movie.MoviePlume` reads when the
corresponding setting is not given: ``fps`` (frames per second),
``source`` (``[x, y]`` in pixels of the stored array: x = column, y = row)
and ``wind_velocity`` (``[vx, vy]``, pixels per second, same axes).

Every file is read with bounds and every malformed one is a one-line
:class:`~plume_jax.core.errors.ValidationError` naming the file and what is
expected (never a raw ``ValueError``, ``BadZipFile``, ``EOFError``,
``MemoryError`` or ``RecursionError``): the array's declared shape and
dtype (the ``.npy`` header, each ``.npz`` member's header *before* it is
decompressed, the HDF5 dataset, the zarr metadata and chunk shape) are
checked first, and no movie array larger than :data:`MAX_MOVIE_BYTES`
(2 GiB, stored or as float32 frames; raise it by setting the module
attribute) is allocated; metadata (JSON in ``.npz``, zarr metadata files)
is read with the size and depth bounds of :mod:`plume_jax.files.safe_io`.

``layout`` names the stored axes (``"tyx"`` = frames, rows, columns;
``"yxt"`` for arrays saved frame-last, as MATLAB exports often are), and
``frame_range`` / ``spatial_stride`` select a part of the movie; for HDF5
and zarr only that part is read from disk.
"""

from __future__ import annotations

import functools
import json
import math
import os
import pathlib
import stat
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.files.safe_io import (MAX_CONFIG_BYTES, describe_bytes, load_json_bounded,
                               load_json_file, read_npy_header)
from plume_jax.settings import plain

#: The valid ``layout`` strings: each a permutation of "t", "y", "x".
LAYOUTS = ("tyx", "txy", "ytx", "yxt", "xty", "xyt")
SUFFIXES = (".npz", ".npy", ".h5", ".hdf5", ".mat", ".zarr")
#: Suffixes read with h5py (MATLAB v7.3 ``.mat`` files are HDF5).
HDF5_SUFFIXES = (".h5", ".hdf5", ".mat")
#: The movie bundled with plume_jax (made by ``scripts/tools/make_filament_movie.py``).
BUNDLED_MOVIE = pathlib.Path(__file__).resolve().parent.parent / "data" / "filament_movie.npz"
#: The largest movie array read: stored (a whole ``.npz`` member, one zarr
#: chunk, the part of a file selected) and as float32 frames.
MAX_MOVIE_BYTES = 2 << 30
#: The largest ``.npy`` header read (numpy's own default).
_MAX_HEADER = 10_000


def _refuse(path: pathlib.Path, expected: str, error: BaseException | None = None):
    """A one-line ValidationError (parameter ``path``) naming the file and
    what is expected, with the reader's complaint when there is one."""
    detail = "" if error is None else \
        f" ({type(error).__name__}: {' '.join(str(error).split())[:200]})"
    return ValidationError.for_parameter("path", str(path), expected + detail)


def _selected_shape(shape: Sequence[int], select: tuple) -> tuple[int, ...]:
    """The shape of ``array[select]`` for an array of ``shape``, without the
    array."""
    return tuple(len(range(*s.indices(n))) for s, n in zip(select, shape))


def _check_size(path: pathlib.Path, shape: Sequence[int], itemsize: int, what: str) -> None:
    """Refuse ``shape`` x ``itemsize`` (and its float32 frames) over
    :data:`MAX_MOVIE_BYTES` before anything that size is allocated."""
    count = math.prod(int(n) for n in shape)
    size = count * max(int(itemsize), 4)
    if size > MAX_MOVIE_BYTES:
        raise _refuse(path, f"a movie of at most {describe_bytes(MAX_MOVIE_BYTES)} "
                            f"(plume_jax.plumes.movie_files.MAX_MOVIE_BYTES); {what} is "
                            f"{tuple(int(n) for n in shape)} of {itemsize}-byte values, "
                            f"{describe_bytes(size)} as float32 frames or stored")


def _check_dtype(path: pathlib.Path, dtype: np.dtype) -> None:
    if dtype.kind not in "biuf" or dtype.hasobject:
        raise _refuse(path, f"a movie of real numbers, not dtype {dtype}")


def _npy_header(fp: Any, path: pathlib.Path, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` from an ``.npy`` header, refused
    when it is not one."""
    try:
        return read_npy_header(fp, _MAX_HEADER)
    except (ValueError, EOFError, SyntaxError, TypeError, KeyError, OverflowError) as error:
        raise _refuse(path, f"{where} with a valid .npy header", error) from None


def _suffix(path: pathlib.Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValidationError.for_parameter(
            "path", str(path), f"a movie file ending in one of {list(SUFFIXES)}")
    return suffix


def _selection(layout: str, frame_range: Sequence[int] | None, stride: int) -> tuple:
    t = slice(None) if frame_range is None else slice(int(frame_range[0]), int(frame_range[1]))
    space = slice(None, None, stride)
    return tuple(t if axis == "t" else space for axis in layout)


#: Codecs a zarr movie may use — zarr 2 ``compressor``/``filters`` ids and
#: zarr 3 ``codecs`` names (plain or ``numcodecs.``-prefixed): byte order,
#: transposition, checksums, numeric filters and compressors. Codecs that
#: (de)serialise Python objects (``pickle``, ``msgpack2``, ``json2``,
#: ``vlen-*``, ``categorize``, ...) are not listed, so a store using them is
#: refused before zarr reads a chunk.
ZARR_CODECS = frozenset({
    "bytes", "endian", "transpose", "sharding_indexed", "crc32c", "crc32", "adler32",
    "fletcher32", "jenkins_lookup3", "blosc", "zlib", "gzip", "bz2", "lzma", "zstd", "lz4",
    "delta", "fixedscaleoffset", "quantize", "bitround", "shuffle", "astype", "packbits",
})
#: zarr 3 ``data_type`` names of real numbers (and booleans).
ZARR3_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                          "uint32", "uint64", "float16", "float32", "float64"})


def _check_zarr_codec(path: pathlib.Path, where: str, codec: Any) -> None:
    """Refuse a codec (a zarr 2 ``{"id": ...}`` or zarr 3 ``{"name": ...}``
    entry) that is not in :data:`ZARR_CODECS`; recurse into sharding."""
    name = codec.get("id", codec.get("name")) if isinstance(codec, Mapping) else codec
    if not isinstance(name, str) or name.removeprefix("numcodecs.") not in ZARR_CODECS:
        raise ValidationError.for_parameter(
            "path", str(path), f"a zarr movie whose codecs are all numeric ones ({where} uses "
            f"{name!r}; allowed: {sorted(ZARR_CODECS)})")
    config = codec.get("configuration") if isinstance(codec, Mapping) else None
    if isinstance(config, Mapping):
        for key in ("codecs", "index_codecs"):
            for inner in config.get(key) or []:
                _check_zarr_codec(path, where, inner)


def _check_zarr_array(path: pathlib.Path, where: str, meta: Any) -> None:
    """Check one array's metadata (zarr 2 ``.zarray`` or zarr 3 ``zarr.json``):
    a real-number dtype and only :data:`ZARR_CODECS`."""
    if not isinstance(meta, Mapping):
        raise ValidationError.for_parameter("path", str(path), f"zarr metadata ({where})")
    if meta.get("zarr_format") == 3 or "data_type" in meta:
        dtype = meta.get("data_type")
        ok = isinstance(dtype, str) and dtype in ZARR3_DTYPES
        codecs = list(meta.get("codecs") or [])
    else:
        dtype = meta.get("dtype")
        try:
            ok = isinstance(dtype, str) and np.dtype(dtype).kind in "biuf"
        except TypeError:
            ok = False
        codecs = [c for c in [meta.get("compressor")] if c is not None] \
            + list(meta.get("filters") or [])
    if not ok:
        raise ValidationError.for_parameter(
            "path", str(path), f"a zarr movie of real numbers ({where} has dtype {dtype!r})")
    for codec in codecs:
        _check_zarr_codec(path, where, codec)
    if meta.get("zarr_format") == 3 or "data_type" in meta:
        grid = meta.get("chunk_grid")
        config = grid.get("configuration") if isinstance(grid, Mapping) else None
        chunks = config.get("chunk_shape") if isinstance(config, Mapping) else None
        itemsize = np.dtype(dtype).itemsize
    else:
        chunks = meta.get("chunks")
        itemsize = np.dtype(dtype).itemsize
    shape = meta.get("shape")
    for name, value in (("shape", shape), ("chunks", chunks)):
        if not isinstance(value, (list, tuple)) or len(value) > 32 or not all(
                isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**62 for n in value):
            raise ValidationError.for_parameter(
                "path", str(path), f"zarr metadata ({where}: {name} is a list of non-negative "
                f"integers, not {value!r})")
    assert isinstance(chunks, (list, tuple))  # checked just above
    # reading any part of the array decompresses whole chunks
    _check_size(path, chunks, itemsize, f"one chunk of {where}")


def check_zarr_store(path: pathlib.Path) -> None:
    """Check every array's metadata in the zarr folder ``path`` — zarr 2
    (``.zarray``, consolidated ``.zmetadata``) and zarr 3 (``zarr.json``,
    with consolidated metadata) — before zarr opens it: real-number dtypes
    and only :data:`ZARR_CODECS`. Every metadata file (also ``.zattrs`` and
    ``.zgroup``) is read with the size and depth bounds of
    :mod:`plume_jax.files.safe_io`. Reads JSON only, never a chunk, and follows no
    symbolic links.

    Raises:
        ValidationError: ``path`` is not a folder, a metadata file is not
            JSON (or is too big or too deep), or an array has another dtype
            or codec.
    """
    if not path.is_dir():
        raise ValidationError.for_parameter("path", str(path), "a zarr folder (directory store)")
    for root, _, files in os.walk(path):
        for name in files:
            if name not in (".zarray", ".zmetadata", "zarr.json", ".zattrs", ".zgroup"):
                continue
            file = pathlib.Path(root, name)
            where = str(file.relative_to(path))
            try:
                meta = load_json_file(file, "path", max_bytes=MAX_CONFIG_BYTES)
            except ValidationError as error:
                raise ValidationError.for_parameter(
                    "path", str(path), f"zarr metadata in JSON ({where}: {error.allowed})"
                ) from None
            if name == ".zarray":
                _check_zarr_array(path, where, meta)
                continue
            if name == ".zmetadata":
                nodes = (meta.get("metadata") or {}) if isinstance(meta, Mapping) else {}
                if not isinstance(nodes, Mapping):
                    raise ValidationError.for_parameter(
                        "path", str(path), f"zarr metadata ({where}: 'metadata' is a mapping)")
                for key, node in nodes.items():
                    if str(key).endswith(".zarray"):
                        _check_zarr_array(path, f"{where}[{key}]", node)
                continue
            if name != "zarr.json":
                continue
            if isinstance(meta, Mapping) and meta.get("node_type") == "array":
                _check_zarr_array(path, where, meta)
            consolidated = meta.get("consolidated_metadata") if isinstance(meta, Mapping) \
                else None
            nodes = ((consolidated or {}).get("metadata") or {}) \
                if isinstance(consolidated, Mapping) or consolidated is None else None
            if not isinstance(nodes, Mapping):
                raise ValidationError.for_parameter(
                    "path", str(path), f"zarr metadata ({where}: consolidated_metadata is a "
                    "mapping with a 'metadata' mapping)")
            for key, node in nodes.items():
                if isinstance(node, Mapping) and node.get("node_type") == "array":
                    _check_zarr_array(path, f"{where}[{key}]", node)


def _open_zarr(path: pathlib.Path, dataset: str | None):
    try:
        import zarr
    except ImportError:
        raise ValidationError.for_parameter(
            "path", str(path), "a movie format whose reader is installed: .zarr needs the "
            "optional 'zarr' package (pip install 'plume-jax[movies]')") from None
    check_zarr_store(path)
    node = zarr.open(str(path), mode="r")
    attrs = dict(node.attrs)
    if hasattr(node, "shape") and hasattr(node, "dtype"):
        return node, attrs
    names = sorted(dict(node.arrays()) if hasattr(node, "arrays") else node.array_keys())
    key = dataset if dataset is not None else (names[0] if len(names) == 1 else None)
    if key is None or key not in names:
        raise ValidationError.for_parameter(
            "dataset", dataset, f"the name of an array in {path}: one of {names}")
    array = node[key]
    return array, {**attrs, **dict(array.attrs)}


def _meta_mapping(path: pathlib.Path, meta: Any) -> dict:
    if not isinstance(meta, Mapping):
        raise _refuse(path, f"movie metadata that is a JSON mapping, not {type(meta).__name__}")
    return dict(meta)


def _read_npy(path: pathlib.Path, layout: str, select: tuple) -> tuple[np.ndarray, dict]:
    with open(path, "rb") as fp:
        shape, _, dtype = _npy_header(fp, path, "a .npy file")
        offset = fp.tell()
    _check_dtype(path, dtype)
    _checked_shape(shape, path, layout)
    size = offset + math.prod(shape) * dtype.itemsize
    if path.stat().st_size < size:
        raise _refuse(path, f"a .npy file holding the whole array its header declares "
                            f"({shape} of {dtype}: {size} bytes, the file has "
                            f"{path.stat().st_size})")
    _check_size(path, _selected_shape(shape, select), dtype.itemsize, "the part selected")
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    return np.array(array[select]), {}


def _read_npz(path: pathlib.Path, dataset: str | None, layout: str,
              select: tuple) -> tuple[np.ndarray, dict]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, ValueError, OSError) as error:
        raise _refuse(path, "a .npz archive (a zip of .npy arrays)", error) from None
    with archive:
        members = {(n[:-4] if n.endswith(".npy") else n): archive.getinfo(n)
                   for n in archive.namelist()}
        names = [n for n in members if n != "metadata"]
        key = dataset if dataset is not None else (
            "frames" if "frames" in names else (names[0] if len(names) == 1 else None))
        if key is None or key not in names:
            raise ValidationError.for_parameter(
                "dataset", dataset, f"the name of an array in {path}: one of {names}")
        meta = {}
        if "metadata" in members:
            text = _read_member(archive, members["metadata"], path, "metadata", text=True)
            meta = _meta_mapping(path, load_json_bounded(
                text, "path", value=str(path), what="movie metadata in JSON (the .npz member "
                "'metadata')"))
        array = _read_member(archive, members[key], path, key, layout=layout)
    return array[select], meta


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: pathlib.Path,
                 name: str, layout: str | None = None, text: bool = False) -> Any:
    """One ``.npz`` member: its header checked (dtype, rank, declared size
    against the bound) before its data is decompressed, and its
    uncompressed size against what the header declares."""
    where = f"a .npz member {name!r}"
    try:
        with archive.open(info) as fp:
            shape, _, dtype = _npy_header(fp, path, where)
            header = fp.tell()
            if text:
                if dtype.kind not in "US" or shape != () \
                        or dtype.itemsize > 4 * MAX_CONFIG_BYTES:
                    raise _refuse(path, f"{where} holding one JSON string of at most "
                                        f"{describe_bytes(MAX_CONFIG_BYTES)}, not {shape} of "
                                        f"{dtype}")
            else:
                _check_dtype(path, dtype)
                _checked_shape(shape, path, layout)
                _check_size(path, shape, dtype.itemsize, where)
            expected = header + math.prod(shape) * dtype.itemsize
            if info.file_size < expected:
                raise _refuse(path, f"{where} holding the whole array its header declares "
                                    f"({expected} bytes, the member has {info.file_size})")
            if info.file_size > expected + 64:
                raise _refuse(path, f"{where} no larger than its header declares "
                                    f"({expected} bytes, the member unpacks to {info.file_size})")
        with archive.open(info) as fp:
            array = np.lib.format.read_array(fp, allow_pickle=False)
    except ValidationError:
        raise
    except Exception as error:  # truncated, bad CRC, bad zlib stream, ...
        raise _refuse(path, f"{where} that can be read", error) from None
    return str(array) if text else array


def _checked_shape(shape: Sequence[int], path: pathlib.Path, layout: str | None) -> None:
    if len(shape) != 3:
        raise ValidationError.for_parameter(
            "path", str(path),
            f"a 3-D movie array (layout {layout!r}), not one of shape {tuple(shape)}")


def _read(path: pathlib.Path, dataset: str | None, layout: str,
          frame_range: tuple | None, stride: int) -> tuple[np.ndarray, dict]:
    suffix = _suffix(path)
    if not path.exists():
        raise ValidationError.for_parameter("path", str(path), "an existing movie file")
    select = _selection(layout, frame_range, stride)
    kind = {".npy": "a .npy file", ".npz": "a .npz archive", ".h5": "an HDF5 file",
            ".hdf5": "an HDF5 file", ".mat": "a MATLAB v7.3 (HDF5) .mat file",
            ".zarr": "a zarr folder"}[suffix]
    mode = path.stat().st_mode
    if suffix == ".zarr" and not stat.S_ISDIR(mode):
        raise _refuse(path, "a zarr folder (directory store), not a file")
    if suffix != ".zarr" and not stat.S_ISREG(mode):
        raise _refuse(path, f"{kind} (a regular file, not a "
                            f"{'folder' if stat.S_ISDIR(mode) else 'special file'})")
    try:
        if suffix == ".npy":
            return _read_npy(path, layout, select)
        if suffix == ".npz":
            return _read_npz(path, dataset, layout, select)
        if suffix in HDF5_SUFFIXES:
            return _read_hdf5(path, dataset, layout, select)
        return _read_zarr(path, dataset, layout, select)
    except ValidationError:
        raise
    except Exception as error:  # whatever else a malformed file makes a reader raise
        raise _refuse(path, f"{kind} holding a movie that can be read", error) from None


def _read_hdf5(path: pathlib.Path, dataset: str | None, layout: str,
               select: tuple) -> tuple[np.ndarray, dict]:
    try:
        import h5py
    except ImportError:
        raise ValidationError.for_parameter(
            "path", str(path), "a movie format whose reader is installed: HDF5 needs the "
            "optional 'h5py' package (pip install 'plume-jax[movies]')") from None
    try:
        f = h5py.File(path, "r")
    except OSError as error:
        if path.suffix.lower() == ".mat":
            raise _refuse(path, "a MATLAB v7.3 .mat file (HDF5 inside); older MAT versions are "
                                "not HDF5: re-save it in MATLAB with save(name, '-v7.3')",
                          error) from None
        raise _refuse(path, "an HDF5 file", error) from None
    with f:
        # links are looked at before anything is opened through them: an
        # external link would open another file
        names = sorted(k for k in f.keys() if _hdf5_link(h5py, f, k) == "a hard link"
                       and isinstance(f[k], h5py.Dataset))
        key = dataset if dataset is not None else (
            "frames" if _hdf5_link(h5py, f, "frames") else (names[0] if len(names) == 1 else None))
        if key is not None:
            _check_hdf5_links(h5py, f, key, path)
        if key is None or key not in f or not isinstance(f[key], h5py.Dataset):
            raise ValidationError.for_parameter(
                "dataset", dataset, f"the name of a dataset in {path}: one of {names}")
        data = f[key]
        if data.external or data.is_virtual:
            raise _refuse(path, f"an HDF5 movie whose dataset {key!r} is stored in the file "
                                "itself, not in " + ("external raw files" if data.external
                                                     else "a virtual dataset mapping other "
                                                     "files") + " (refused: it would read "
                                "other files' bytes as frames)")
        _check_dtype(path, data.dtype)
        _checked_shape(data.shape, path, layout)
        _check_size(path, _selected_shape(data.shape, select), data.dtype.itemsize,
                    "the part selected")
        meta = _bounded_meta(path, {**plain(dict(f.attrs)), **plain(dict(data.attrs))})
        return np.asarray(data[select]), meta


def _hdf5_link(h5py: Any, group: Any, name: str) -> str | None:
    """What kind of link ``name`` (one path component) is in ``group``, or
    None when there is none; asks the link table only, so nothing is opened
    through the link (h5py's own ``in`` and ``get`` resolve the path)."""
    links = group.id.links
    key = name.encode()
    if not links.exists(key):
        return None
    return {h5py.h5l.TYPE_HARD: "a hard link", h5py.h5l.TYPE_SOFT: "a soft link",
            h5py.h5l.TYPE_EXTERNAL: "an external link to another file"}.get(
                links.get_info(key).type, "a user-defined link")


def _check_hdf5_links(h5py: Any, f: Any, key: str, path: pathlib.Path) -> None:
    """Refuse a dataset name whose path goes through anything but hard
    links (an external link opens another file; a soft link may lead to
    one), before any object on that path is opened."""
    group = f
    parts = [p for p in key.split("/") if p]
    for i, part in enumerate(parts):
        kind = _hdf5_link(h5py, group, part) if isinstance(group, h5py.Group) else None
        if kind is None:
            return  # not there: refused by the caller, naming the datasets
        if kind != "a hard link":
            raise _refuse(path, f"an HDF5 movie whose dataset {key!r} is stored in the file "
                                f"itself: {'/'.join(parts[:i + 1])!r} is {kind} (refused: it "
                                "could read other files)")
        group = group[part]


def _read_zarr(path: pathlib.Path, dataset: str | None, layout: str,
               select: tuple) -> tuple[np.ndarray, dict]:
    array, attrs = _open_zarr(path, dataset)
    _check_dtype(path, np.dtype(array.dtype))
    _checked_shape(array.shape, path, layout)
    _check_size(path, _selected_shape(array.shape, select), np.dtype(array.dtype).itemsize,
                "the part selected")
    chunks = getattr(array, "chunks", None)
    if chunks is not None:
        _check_size(path, chunks, np.dtype(array.dtype).itemsize, "one chunk")
    return np.asarray(array[select]), _bounded_meta(path, plain(attrs))


def _bounded_meta(path: pathlib.Path, meta: Any) -> dict:
    """Attributes as metadata, refused when not JSON-able or over the
    metadata bounds (size, depth)."""
    try:
        text = json.dumps(meta)
    except (TypeError, ValueError, RecursionError) as error:
        raise _refuse(path, "movie metadata (attributes) that JSON can hold", error) from None
    return _meta_mapping(path, load_json_bounded(text, "path", value=str(path),
                                                 what="movie metadata (attributes)"))


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, stamp: tuple, dataset: str | None, layout: str,
                 frame_range: tuple | None, stride: int) -> tuple[np.ndarray, str]:
    raw, meta = _read(pathlib.Path(path), dataset, layout, frame_range, stride)
    if not np.issubdtype(raw.dtype, np.number) or np.issubdtype(raw.dtype, np.complexfloating):
        raise ValidationError.for_parameter("path", path, f"real numbers, not dtype {raw.dtype}")
    frames = np.transpose(raw, [layout.index(a) for a in "tyx"]).astype(np.float32)
    if frames.shape[0] < 1 or frames.shape[1] < 1 or frames.shape[2] < 1:
        raise ValidationError.for_parameter("path", path, f"a non-empty movie, not {frames.shape}")
    if not np.all(np.isfinite(frames)):
        raise ValidationError.for_parameter("path", path, "finite values (the movie has nan/inf)")
    frames = np.ascontiguousarray(frames)
    frames.setflags(write=False)
    return frames, json.dumps(meta)


def load_movie(path: str | os.PathLike, dataset: str | None = None, *, layout: str = "tyx",
               frame_range: Sequence[int] | None = None,
               spatial_stride: int = 1) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a movie file.

    Args:
        path: a ``.npz``, ``.npy``, ``.h5``/``.hdf5`` or ``.zarr`` file.
        dataset: the array's name in the file (default: ``"frames"`` or the
            only array).
        layout: the stored axes order, one of :data:`LAYOUTS`.
        frame_range: ``(start, stop)``: keep frames ``start .. stop-1``.
        spatial_stride: keep every ``spatial_stride``-th row and column.

    Returns:
        ``(frames, metadata)``: read-only float32 ``(T, H, W)`` frames indexed
        ``[t, row, column]`` and the file's metadata dict (``{}`` if none).
        Results are cached per file version and selection.

    Raises:
        ValidationError: unknown suffix, missing file or dataset, missing
            optional reader, wrong rank, non-finite values.
    """
    if layout not in LAYOUTS:
        raise ValidationError.for_parameter("layout", layout, f"one of {list(LAYOUTS)}")
    path = pathlib.Path(path).expanduser().resolve()
    _suffix(path)
    if not path.exists():
        raise ValidationError.for_parameter("path", str(path), "an existing movie file")
    st = path.stat()
    frame_range = None if frame_range is None else (int(frame_range[0]), int(frame_range[1]))
    frames, meta = _load_cached(str(path), (st.st_mtime_ns, st.st_size), dataset, layout,
                                frame_range, int(spatial_stride))
    return frames, json.loads(meta)


#: MATLAB's class names of the dtypes a ``.mat`` movie is written with.
_MATLAB_CLASS = {"float64": "double", "float32": "single", "uint8": "uint8",
                 "uint16": "uint16", "int16": "int16", "int32": "int32"}
#: The 128-byte header MATLAB puts at the start of a v7.3 file's 512-byte
#: user block: 116 bytes of text, 8 bytes of subsystem offset, version 0x0200
#: and the endian mark ``IM``.
_MATLAB_HEADER = (b"MATLAB 7.3 MAT-file, written by plume_jax. HDF5 schema 1.00 .".ljust(116)
                  + b"\x00" * 8 + b"\x00\x02" + b"IM")


def save_movie(path: str | os.PathLike, frames: Any, *, dataset: str = "frames",
               dtype: Any = None, **metadata: Any) -> pathlib.Path:
    """Write ``(T, H, W)`` frames (``[t, row, column]``) and metadata.

    Args:
        path: target file; the suffix picks the format (see the module;
            ``.mat`` writes HDF5 behind a 512-byte MATLAB v7.3 header and
            user block, the layout of MATLAB's ``save(..., '-v7.3')``).
        frames: array-like of shape ``(T, H, W)``.
        dataset: the array's name in ``.npz`` / HDF5 / zarr-group files.
        dtype: storage dtype (default: the array's own, e.g. ``float16`` to
            halve the size).
        **metadata: JSON-serialisable values (``fps``, ``source``,
            ``wind_velocity``, anything else); ``.npy`` cannot store them.

    Returns:
        The path written.
    """
    path = pathlib.Path(path)
    suffix = _suffix(path)
    array = np.asarray(frames)
    if array.ndim != 3:
        raise ValidationError.for_parameter("frames", array.shape, "an array of shape (T, H, W)")
    if dtype is not None:
        array = array.astype(dtype)
    meta = plain(metadata)
    json.dumps(meta)  # fail early on values no format could store
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".npy":
        if meta:
            raise ValidationError.for_parameter(
                "metadata", sorted(meta), "no metadata for .npy files (use .npz)")
        np.save(path, array)
    elif suffix == ".npz":
        members: dict[str, Any] = {dataset: array, "metadata": np.asarray(json.dumps(meta))}
        np.savez_compressed(path, **members)
    elif suffix in HDF5_SUFFIXES:
        import h5py

        mat = suffix == ".mat"
        with h5py.File(path, "w", userblock_size=512 if mat else 0) as f:
            ds = f.create_dataset(dataset, data=array, compression="gzip")
            if mat:
                ds.attrs["MATLAB_class"] = np.bytes_(_MATLAB_CLASS.get(array.dtype.name,
                                                                       "double"))
            for key, value in meta.items():
                ds.attrs[key] = value
        if mat:
            with open(path, "r+b") as fp:
                fp.write(_MATLAB_HEADER)
    else:
        import zarr

        root = zarr.open_group(str(path), mode="w")
        root.attrs.update(meta)
        kwargs: dict[str, Any] = {"shape": array.shape, "dtype": array.dtype}
        if hasattr(root, "create_array"):
            out = root.create_array(dataset, **kwargs)
        else:
            out = root.create_dataset(dataset, **kwargs)
        out[...] = array
    return path
