"""Malformed movie files are one-line ValidationErrors naming the file and
what is expected, with their size bounded before anything is allocated
(issue 26, defect 6: garbage or object npz -> ValueError, truncated ->
BadZipFile, empty -> EOFError, bad or deep metadata JSON, short npy, a
folder, a zip bomb or a huge zarr -> MemoryError, deep metadata ->
RecursionError)."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from plume_jax import ValidationError, cli
from plume_jax.plumes import movie_files
from plume_jax.plumes.movie import MoviePlume
from plume_jax.plumes.movie_files import load_movie, save_movie
from plume_jax.core.types import Grid


def _npy_bytes(shape, dtype="<f4", data=b"") -> bytes:
    """An .npy header declaring ``shape`` of ``dtype``, then ``data``."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": dtype, "fortran_order": False, "shape": tuple(shape)})
    return buffer.getvalue() + data


def _zip(path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _good_npz(path, **metadata):
    return save_movie(path, np.ones((2, 3, 4), np.float32), **metadata)


def garbage_npz(tmp):
    (tmp / "m.npz").write_bytes(b"this is not a zip archive at all \x00\xff" * 10)
    return tmp / "m.npz"


def garbage_npy(tmp):
    (tmp / "m.npy").write_bytes(b"\x93NUMPY garbage garbage garbage")
    return tmp / "m.npy"


def object_npz(tmp):
    np.savez(tmp / "m.npz", frames=np.array([[[{"a": 1}]]], dtype=object))
    return tmp / "m.npz"


def object_npy(tmp):
    np.save(tmp / "m.npy", np.array([[[None]]], dtype=object), allow_pickle=True)
    return tmp / "m.npy"


def truncated_npz(tmp):
    data = _good_npz(tmp / "full.npz").read_bytes()
    (tmp / "m.npz").write_bytes(data[: len(data) // 2])
    return tmp / "m.npz"


def bad_crc_npz(tmp):
    frames = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    path = _zip(tmp / "m.npz", {"frames.npy": _npy_bytes((2, 3, 4), data=frames.tobytes())},
                zipfile.ZIP_STORED)
    data = bytearray(path.read_bytes())
    at = data.index(frames.tobytes()) + 10
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def empty_npz(tmp):
    (tmp / "m.npz").write_bytes(b"")
    return tmp / "m.npz"


def empty_npy(tmp):
    (tmp / "m.npy").write_bytes(b"")
    return tmp / "m.npy"


def bad_json_metadata(tmp):
    frames = np.ones((2, 3, 4), np.float32)
    np.savez(tmp / "m.npz", frames=frames, metadata=np.asarray("{fps: not json"))
    return tmp / "m.npz"


def deep_json_metadata(tmp):
    np.savez(tmp / "m.npz", frames=np.ones((2, 3, 4), np.float32),
             metadata=np.asarray("[" * 100_000 + "]" * 100_000))
    return tmp / "m.npz"


def list_metadata(tmp):
    np.savez(tmp / "m.npz", frames=np.ones((2, 3, 4), np.float32), metadata=np.asarray("[1]"))
    return tmp / "m.npz"


def array_metadata(tmp):
    np.savez(tmp / "m.npz", frames=np.ones((2, 3, 4), np.float32),
             metadata=np.zeros((1000, 1000)))
    return tmp / "m.npz"


def short_npy(tmp):
    (tmp / "m.npy").write_bytes(_npy_bytes((10, 10, 10), data=b"\x00" * 40))
    return tmp / "m.npy"


def folder_npz(tmp):
    (tmp / "m.npz").mkdir()
    return tmp / "m.npz"


def huge_header_npz(tmp):
    # declares 10**15 float32 values (4 PB) in a few bytes
    return _zip(tmp / "m.npz", {"frames.npy": _npy_bytes((10**5, 10**5, 10**5), data=b"\0" * 64)})


def huge_header_npy(tmp):
    (tmp / "m.npy").write_bytes(_npy_bytes((10**5, 10**5, 10**5), data=b"\0" * 64))
    return tmp / "m.npy"


def zip_bomb_npz(tmp):
    # a small declared array followed by 8 MiB of zeros that deflate to ~8 KiB
    return _zip(tmp / "m.npz", {"frames.npy": _npy_bytes((1, 2, 2), data=b"\0" * (8 << 20))})


def _zarray(folder, shape, chunks, extra=None):
    folder.mkdir()
    (folder / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": "<f4",
        "compressor": None, "filters": None, "fill_value": 0.0, "order": "C"}))
    for name, text in (extra or {}).items():
        (folder / name).write_text(text)
    return folder


def huge_zarr(tmp):
    return _zarray(tmp / "m.zarr", [10**6, 10**6, 10**6], [10**6, 10**6, 10**6])


def huge_zarr_small_chunks(tmp):
    pytest.importorskip("zarr")
    return _zarray(tmp / "m.zarr", [10**6, 10**6, 10**6], [1, 8, 8])


def deep_zarr_attributes(tmp):
    return _zarray(tmp / "m.zarr", [2, 3, 4], [2, 3, 4], {".zattrs": "[" * 5000 + "]" * 5000})


def bad_zarr_shape(tmp):
    return _zarray(tmp / "m.zarr", "big", [2, 3, 4])


def bad_json_zarr(tmp):
    return _zarray(tmp / "m.zarr", [2, 3, 4], [2, 3, 4], {".zgroup": "{not json"})


def zarr_file_not_folder(tmp):
    (tmp / "m.zarr").write_bytes(b"PK\x03\x04 not a folder")
    return tmp / "m.zarr"


def garbage_hdf5(tmp):
    pytest.importorskip("h5py")
    (tmp / "m.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\xff" * 200)
    return tmp / "m.h5"


MALFORMED = [garbage_npz, garbage_npy, object_npz, object_npy, truncated_npz, bad_crc_npz,
             empty_npz, empty_npy, bad_json_metadata, deep_json_metadata, list_metadata,
             array_metadata, short_npy, folder_npz, huge_header_npz, huge_header_npy,
             zip_bomb_npz, huge_zarr, huge_zarr_small_chunks, deep_zarr_attributes,
             bad_zarr_shape, bad_json_zarr, zarr_file_not_folder, garbage_hdf5]


@pytest.mark.parametrize("make", MALFORMED, ids=lambda f: f.__name__)
def test_malformed_movie_file_is_a_one_line_validation_error(make, tmp_path):
    path = make(tmp_path)
    with pytest.raises(ValidationError) as info:
        load_movie(path)
    message = str(info.value)
    assert info.value.parameter == "path", message
    assert str(path.resolve()) in message and "\n" not in message and len(message) < 1000
    assert "expected" in message


@pytest.mark.parametrize("make", [garbage_npz, truncated_npz, deep_json_metadata, huge_zarr],
                         ids=lambda f: f.__name__)
def test_malformed_movie_through_the_cli_exits_2_with_one_line(make, tmp_path, capsys):
    path = make(tmp_path)
    assert cli.main(["demo", "--preset", "PlumeNav-Movie-v0", "--set", f"path={path}",
                     "--out", ""]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plume-jax: error: plume.path=") and err.count("\n") == 1, err
    assert str(path) in err


def test_movie_size_bound_is_checked_from_the_header_before_reading(tmp_path, monkeypatch):
    path = _good_npz(tmp_path / "ok.npz")
    assert load_movie(path)[0].shape == (2, 3, 4)
    monkeypatch.setattr(movie_files, "MAX_MOVIE_BYTES", 64)
    with pytest.raises(ValidationError, match="a movie of at most 64 bytes"):
        load_movie(tmp_path / "ok.npz", layout="txy")  # another selection: not cached


def test_object_arrays_are_never_unpickled(tmp_path, monkeypatch):
    import pickle

    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    with pytest.raises(ValidationError, match="real numbers"):
        load_movie(object_npz(tmp_path))


@pytest.mark.parametrize("metadata, name", [
    ({"fps": 1.0, "source": [1, 1], "wind_velocity": "abc"}, "plume.wind_velocity"),
    ({"fps": 1.0, "source": [1, 1], "wind_velocity": [1, 2, 3]}, "plume.wind_velocity"),
    ({"fps": 1.0, "source": [1, 1], "wind_velocity": [float("nan"), 0]}, "plume.wind_velocity"),
    ({"fps": 1.0, "source": "centre"}, "plume.source"),
    ({"fps": 1.0, "source": [None, 1]}, "plume.source"),
])
def test_bad_movie_metadata_values_name_the_field(metadata, name, tmp_path):
    path = _good_npz(tmp_path / "m.npz", **metadata)
    with pytest.raises(ValidationError, match=name.replace(".", r"\.")) as info:
        MoviePlume.build({"path": str(path)}, Grid(width=8, height=6), "plume")
    assert "(file metadata)" in str(info.value)


def test_well_formed_movies_still_load(tmp_path):
    frames = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for name in ("a.npz", "a.npy"):
        kwargs = {"fps": 2.0} if name.endswith("npz") else {}
        path = save_movie(tmp_path / name, frames, **kwargs)
        loaded, meta = load_movie(path, frame_range=(1, 2))
        np.testing.assert_array_equal(loaded, frames[1:2])
        assert meta == kwargs
