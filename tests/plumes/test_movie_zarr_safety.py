"""Zarr movie folders are checked from their metadata before zarr reads a
chunk (issue 13, item 15): with zarr 2.x, an object array with the pickle
codec ran code while its chunks were read, before the dtype check.

The stores here are written by hand in the zarr 2 format (``.zarray``,
``.zmetadata``) and the zarr 3 format (``zarr.json``), so the check is
tested for both whichever zarr is installed (or none)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plume_jax import ValidationError
from plume_jax.plumes.movie_files import check_zarr_store, load_movie, save_movie


def _zarr2_array(folder, dtype="<f4", compressor=None, filters=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [2, 3, 4], "chunks": [2, 3, 4], "dtype": dtype,
        "compressor": compressor, "filters": filters, "fill_value": None, "order": "C"}))
    return folder


def _zarr3_array(folder, data_type="float32", codecs=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "zarr.json").write_text(json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": [2, 3, 4], "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3, 4]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0,
        "codecs": codecs if codecs is not None else [{"name": "bytes"}]}))
    return folder


PICKLE = {"id": "pickle", "protocol": 5}


@pytest.mark.parametrize("make, fragment", [
    (lambda d: _zarr2_array(d, dtype="|O", filters=[PICKLE]), "dtype '|O'"),
    (lambda d: _zarr2_array(d, filters=[PICKLE]), "'pickle'"),
    (lambda d: _zarr2_array(d, compressor=PICKLE), "'pickle'"),
    (lambda d: _zarr2_array(d, filters=[{"id": "msgpack2"}]), "'msgpack2'"),
    (lambda d: _zarr2_array(d, dtype=[["a", "<f4"]]), "dtype"),
    (lambda d: _zarr2_array(d, dtype="<U4"), "dtype '<U4'"),
    (lambda d: _zarr3_array(d, codecs=[{"name": "numcodecs.pickle"}]), "'numcodecs.pickle'"),
    (lambda d: _zarr3_array(d, data_type="string"), "dtype 'string'"),
    (lambda d: _zarr3_array(d, codecs=[{"name": "sharding_indexed", "configuration": {
        "codecs": [{"name": "bytes"}, {"name": "numcodecs.pickle"}],
        "index_codecs": [{"name": "bytes"}]}}]), "'numcodecs.pickle'"),
])
def test_zarr_stores_with_object_dtypes_or_codecs_are_refused_from_metadata(tmp_path, make,
                                                                            fragment):
    store = tmp_path / "movie.zarr"
    make(store / "frames")
    with pytest.raises(ValidationError) as excinfo:
        check_zarr_store(store)
    assert excinfo.value.parameter == "path" and fragment in str(excinfo.value)


def test_consolidated_zarr2_metadata_is_checked_too(tmp_path):
    """zarr may read arrays' metadata from ``.zmetadata`` instead of their
    ``.zarray``; a harmless ``.zarray`` must not hide a pickled one there."""
    store = tmp_path / "movie.zarr"
    _zarr2_array(store / "frames")
    (store / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    (store / ".zmetadata").write_text(json.dumps({"zarr_consolidated_format": 1, "metadata": {
        ".zgroup": {"zarr_format": 2},
        "frames/.zarray": {"zarr_format": 2, "shape": [2, 3, 4], "chunks": [2, 3, 4],
                           "dtype": "|O", "compressor": None, "filters": [PICKLE],
                           "fill_value": None, "order": "C"}}}))
    with pytest.raises(ValidationError, match="zmetadata"):
        check_zarr_store(store)


def test_numeric_zarr_stores_of_both_formats_pass_the_check(tmp_path):
    _zarr2_array(tmp_path / "v2.zarr", compressor={"id": "blosc", "cname": "lz4"},
                 filters=[{"id": "delta", "dtype": "<f4"}])
    _zarr2_array(tmp_path / "v2_zstd.zarr", dtype="<u2", compressor={"id": "zstd", "level": 1})
    _zarr3_array(tmp_path / "v3.zarr", codecs=[{"name": "bytes"}, {"name": "zstd"}])
    for name in ("v2.zarr", "v2_zstd.zarr", "v3.zarr"):
        check_zarr_store(tmp_path / name)


def test_a_zarr_path_that_is_not_a_folder_is_refused(tmp_path):
    path = tmp_path / "movie.zarr"
    path.write_bytes(b"PK\x03\x04 not a directory store")
    with pytest.raises(ValidationError, match="zarr folder"):
        check_zarr_store(path)


def test_load_movie_refuses_a_pickled_zarr_array_before_zarr_opens_it(tmp_path, monkeypatch):
    zarr = pytest.importorskip("zarr")

    def no_open(*args, **kwargs):
        raise AssertionError("zarr opened the store before its metadata was checked")

    store = tmp_path / "movie.zarr"
    _zarr2_array(store, dtype="|O", filters=[PICKLE])
    monkeypatch.setattr(zarr, "open", no_open)
    with pytest.raises(ValidationError, match="real numbers"):
        load_movie(store)


def test_movies_saved_by_save_movie_still_load_from_zarr(tmp_path):
    pytest.importorskip("zarr")
    frames = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    save_movie(tmp_path / "ok.zarr", frames, fps=5.0)
    loaded, meta = load_movie(tmp_path / "ok.zarr")
    np.testing.assert_array_equal(loaded, frames)
    assert meta["fps"] == 5.0
