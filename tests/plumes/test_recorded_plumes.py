"""Recorded plumes by dataset id: ``plume={"type": "movie", "data_id": ID}``,
the presets on registered data (``DATA_PRESETS``), MATLAB v7.3 files, and a
catalog dataset served from a local HTTP server that downloads and then runs
under ``plume-jax evaluate`` — no internet: the files are small synthetic
arrays in each dataset's real layout."""

from __future__ import annotations

import ast
import hashlib
import json
import pathlib

import numpy as np
import pytest

import plume_jax
from plume_jax import ValidationError, cli
from plume_jax import datasets as ds
from plume_jax.plumes.movie_files import load_movie, save_movie
from tests.datasets.test_datasets import server  # noqa: F401  (the local HTTP server fixture)

h5py = pytest.importorskip("h5py")
pq = pytest.importorskip("pyarrow.parquet")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _plume(t: int, h: int, w: int, source_row: float) -> np.ndarray:
    """f32[t, h, w]: a smooth plume spreading east from (0, source_row)."""
    x = np.arange(w, dtype=np.float32)[None, None, :]
    y = np.arange(h, dtype=np.float32)[None, :, None]
    phase = np.arange(t, dtype=np.float32)[:, None, None]
    width = 2.0 + 0.1 * x
    return np.exp(-0.5 * ((y - source_row - np.sin(0.3 * x + phase)) / width) ** 2
                  - 0.01 * x).astype(np.float32)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PLUME_JAX_DATA_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PLUME_JAX_DATA_CATALOG", raising=False)
    monkeypatch.delenv("PLUME_JAX_DATA_MIRROR", raising=False)
    return tmp_path / "cache"


def _crimaldi_file(cache: pathlib.Path) -> pathlib.Path:
    """colorado_jet_v1's layout: HDF5 ``dataset2``, (t, y, x), 216 x 406
    pixels, source at pixel (0, 107); 3 frames instead of 150."""
    entry = ds.get("colorado_jet_v1")
    path = cache / entry.id / entry.filename
    save_movie(path, _plume(3, 216, 406, 107.0), dataset="dataset2", dtype=np.float16)
    return path


def test_a_dataset_not_in_the_cache_names_the_download_command(cache):
    with pytest.raises(ValidationError) as error:
        plume_jax.make("PlumeNav-Crimaldi-v0")
    message = str(error.value)
    assert "plume.data_id" in message and "plume-jax data download colorado_jet_v1" in message
    import gymnasium

    with pytest.raises(ValidationError, match="plume-jax data download colorado_jet_v1"):
        gymnasium.make("plume_jax/PlumeNav-Crimaldi-v0")
    with pytest.raises(ValidationError, match=r"one of \[.*colorado_jet_v1"):
        plume_jax.make("PlumeNav-Movie-v0", plume={"data_id": "no_such_dataset"})
    with pytest.raises(ValidationError, match="path separators"):
        plume_jax.make("PlumeNav-Movie-v0", plume={"data_id": "../colorado_jet_v1"})


def test_the_crimaldi_preset_takes_the_registry_facts(cache):
    _crimaldi_file(cache)
    env, params = plume_jax.make("PlumeNav-Crimaldi-v0")
    plume = env.settings["plume"]
    assert env.grid.width == 203 and env.grid.height == 108
    assert plume["data_id"] == "colorado_jet_v1" and plume["path"] is None
    assert plume["dataset"] == "dataset2" and plume["layout"] == "tyx"
    assert plume["fps"] == 15.0 and plume["dt"] == pytest.approx(1 / 15)
    # source pixel (0, 107) at stride 2 on a 203 x 108 grid of 203 x 108 pixels
    np.testing.assert_allclose(plume["source"], [0.0, 53.5])
    # 0.10 m/s over 0.74 mm pixels, 2 pixels per cell, 15 steps per second
    assert plume["wind_speed"] == pytest.approx(100.0 / 0.74 / 2 / 15, rel=1e-6)
    assert plume["wind_direction"] == 0.0
    assert params.plume.frames.shape == (3, 108, 203)
    assert env.plume.metadata_extras()["data_id"] == "colorado_jet_v1"
    # explicit settings win over the registry's
    env2, _ = plume_jax.make("PlumeNav-Crimaldi-v0", plume={"fps": 30.0, "source": [5, 50]})
    assert env2.settings["plume"]["fps"] == 30.0
    assert list(env2.settings["plume"]["source"]) == [5.0, 50.0]
    with pytest.raises(ValidationError, match=r"plume\.path.*give one of the two"):
        plume_jax.make("PlumeNav-Crimaldi-v0", plume={"path": "x.h5"})
    assert "PlumeNav-Crimaldi-v0" in plume_jax.list_presets()
    assert "PlumeNav-Crimaldi-v0" not in plume_jax.PRESETS  # builds only with data


def test_the_shipped_recorded_scenarios_and_training_config_are_valid(cache):
    from plume_jax.evaluate import scenario as sc
    from plume_jax.train.config import load_train_config

    _crimaldi_file(cache)
    files = sorted((ROOT / "configs" / "scenarios" / "recorded").glob("*.yaml"))
    assert {sc.load_scenario(p)["agent"]["name"] for p in files} == {
        "random_walk", "klinotaxis", "cast_and_surge"}
    for path in files:
        assert sc.load_scenario(path)["env"]["preset"] == "PlumeNav-Crimaldi-v0"
    config = load_train_config(ROOT / "configs" / "train_crimaldi_gru.yaml")
    assert config.env["id"] == "PlumeNav-Crimaldi-v0"


@pytest.mark.slow
def test_the_recorded_scenarios_run_on_a_file_in_the_real_layout(cache, tmp_path):
    _crimaldi_file(cache)
    rc = cli.main(["evaluate", "--scenario", str(ROOT / "configs" / "scenarios" / "recorded"),
                   "--episodes", "4", "--out", str(tmp_path / "ev"), "--quiet"])
    assert rc == 0
    assert len(list((tmp_path / "ev").glob("crimaldi_*__*.json"))) == 3


def test_a_matlab_v73_file_in_the_rigolli_layout_plays(tmp_path):
    frames = _plume(4, 6, 9, 3.0)
    path = save_movie(tmp_path / "nose_data.mat", frames.transpose(2, 1, 0), dataset="nose")
    assert path.read_bytes()[:10] == b"MATLAB 7.3"
    loaded, meta = load_movie(path, "nose", layout="xyt")
    np.testing.assert_array_equal(loaded, frames)
    assert meta["MATLAB_class"] == "single"
    old = tmp_path / "v5.mat"
    old.write_bytes(b"MATLAB 5.0 MAT-file".ljust(128) + bytes(256))
    with pytest.raises(ValidationError, match=r"v7\.3.*save\(name, '-v7\.3'\)"):
        load_movie(old)


def test_datasets_import_nothing_above_layer_0():
    """The movie plume (layer 1) resolves data_id through plume_jax.datasets,
    so datasets may import only the standard library, yaml/httpx and
    layer-0 modules."""
    allowed = {"plume_jax.core.errors", "plume_jax.files.safe_io", "plume_jax.files", "plume_jax.datasets",
               "plume_jax.datasets.cache", "plume_jax.datasets.registry"}
    for path in (ROOT / "plume_jax" / "datasets").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            for name in names:
                assert not name.startswith(("plume_jax", "jax")) or name in allowed, \
                    f"{path.name} imports {name}"


def _served_catalog(server, tmp_path, monkeypatch):  # noqa: F811
    """A catalog entry ``served_plif`` for a 5-frame (t, y, x) HDF5 movie
    that the local server serves; the catalog set as PLUME_JAX_DATA_CATALOG."""
    handler, base = server
    source = tmp_path / "served.h5"
    save_movie(source, _plume(5, 16, 24, 8.0), dataset="conc", dtype=np.float16)
    body = source.read_bytes()
    handler.files["/plumes/served.h5"] = body
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(json.dumps({"datasets": [{
        "id": "served_plif", "title": "served", "url": f"{base}/plumes/served.h5",
        "filename": "served.h5", "size_bytes": len(body), "licence": "CC0-1.0",
        "checksum": "sha256:" + hashlib.sha256(body).hexdigest(),
        "layout": {"dataset": "conc", "axes": "tyx", "fps": 10.0, "source_px": [0, 8],
                   "pixel_size_mm": 1.0, "mean_flow_m_s": 0.01}}]}))
    monkeypatch.setenv("PLUME_JAX_DATA_CATALOG", str(catalog))
    return catalog


def test_a_catalog_dataset_downloads_and_plays_by_id(server, tmp_path, monkeypatch):  # noqa: F811
    catalog = _served_catalog(server, tmp_path, monkeypatch)
    with pytest.raises(ValidationError, match=f"plume-jax data download served_plif --catalog "
                                              f"{catalog}"):
        plume_jax.make("PlumeNav-Movie-v0", plume={"data_id": "served_plif"})
    assert cli.main(["data", "download", "served_plif", "--quiet"]) == 0
    env, params = plume_jax.make("PlumeNav-Movie-v0", grid_size=[24, 16],
                                 plume={"data_id": "served_plif"})
    plume = env.settings["plume"]
    assert plume["dataset"] == "conc" and plume["fps"] == 10.0
    assert list(plume["source"]) == [0.0, 8.0]
    # wind from the mean flow: 10 mm/s over 1 mm pixels, one frame (0.1 s) per step
    assert plume["wind_speed"] == pytest.approx(1.0)
    assert params.plume.frames.shape == (5, 16, 24)


@pytest.mark.slow
def test_a_catalog_dataset_downloads_and_evaluate_runs_it(server, tmp_path, monkeypatch,  # noqa: F811
                                                          capsys):
    """The issue's end-to-end: a catalog entry served over HTTP downloads,
    verifies, and plays as a movie preset under ``plume-jax evaluate``."""
    catalog = _served_catalog(server, tmp_path, monkeypatch)
    scenario = tmp_path / "served.yaml"
    scenario.write_text(json.dumps({
        "name": "served", "agent": "cast_and_surge", "episodes": 4, "max_steps": 40,
        "env": {"preset": "PlumeNav-Movie-v0", "overrides": {
            "grid_size": [24, 16], "plume": {"data_id": "served_plif"},
            "start": {"type": "downwind", "min_distance": 5.0, "max_distance": 20.0,
                      "half_width": 3.0}}}}))
    argv = ["evaluate", "--scenario", str(scenario), "--out", str(tmp_path / "ev"),
            "--capture", str(tmp_path / "cap"), "--quiet"]
    assert cli.main(argv) == 2  # not downloaded yet
    err = capsys.readouterr().err
    assert f"`plume-jax data download served_plif --catalog {catalog}`" in err
    assert cli.main(["data", "download", "served_plif", "--quiet"]) == 0
    assert cli.main(argv) == 0
    report = json.loads((tmp_path / "ev" / "served__cast_and_surge.json").read_text())
    assert report["metrics"]["episodes"] == 4
    episodes = pq.read_table(tmp_path / "cap" / "episodes.parquet")
    steps = pq.read_table(tmp_path / "cap" / "steps.parquet")
    assert np.asarray(episodes.column("length")).sum() == steps.num_rows
    run = json.loads((tmp_path / "cap" / "run.json").read_text())["runs"][0]
    assert run["overrides"]["plume"]["data_id"] == "served_plif"


def test_the_not_cached_error_quotes_the_whole_download_command_with_its_catalog(cache,
                                                                                  tmp_path):
    """Regression: the command was quoted without its ``--catalog FILE``
    (``run `plume-jax data download ID` --catalog FILE``)."""
    catalog = tmp_path / "c.yaml"
    catalog.write_text(json.dumps({"datasets": [{
        "id": "mine", "url": "http://127.0.0.1:9/m.h5", "filename": "m.h5",
        "size_bytes": 10, "checksum": None}]}))
    with pytest.raises(ValidationError) as error:
        ds.require_cached(ds.get("mine", catalog))
    assert f"`plume-jax data download mine --catalog {catalog}`" in str(error.value)
    with pytest.raises(ValidationError) as error:
        ds.require_cached(ds.get("colorado_jet_v1"))
    assert "`plume-jax data download colorado_jet_v1`" in str(error.value)


def test_registry_facts_that_do_not_fit_the_file_are_named_as_the_registry_s(cache):
    entry = ds.get("colorado_jet_v1")
    save_movie(cache / entry.id / entry.filename, _plume(2, 27, 51, 10.0), dataset="dataset2")
    with pytest.raises(ValidationError, match=r"plume\.source \(dataset 'colorado_jet_v1' in "
                                              r"the registry\) from pixel \[0\.0, 107\.0\]"):
        plume_jax.make("PlumeNav-Crimaldi-v0")
    nose = ds.get("rigolli_dns_nose_v1")
    save_movie(cache / nose.id / nose.filename, _plume(2, 6, 4, 2.0).transpose(2, 1, 0),
               dataset="nose")
    with pytest.raises(ValidationError, match="neither the movie file nor dataset "
                                              "'rigolli_dns_nose_v1' in the registry has 'fps'"):
        plume_jax.make("PlumeNav-Movie-v0", plume={"data_id": "rigolli_dns_nose_v1"})
    env, params = plume_jax.make("PlumeNav-Movie-v0", plume={
        "data_id": "rigolli_dns_nose_v1", "fps": 10.0, "source": [10, 30]})
    assert env.settings["plume"]["layout"] == "xyt" and params.plume.frames.shape == (2, 6, 4)
    # without data_id the message is the file's alone
    bare = save_movie(cache / "bare.h5", _plume(2, 6, 4, 2.0))
    with pytest.raises(ValidationError, match="the movie file has no 'fps' metadata"):
        plume_jax.make("PlumeNav-Movie-v0", plume={"path": str(bare)})
    # a None given for dataset is no choice: the registry's array is read
    env, _ = plume_jax.make("PlumeNav-Movie-v0", plume={
        "data_id": "rigolli_dns_nose_v1", "dataset": None, "fps": 10.0, "source": [10, 30]})
    assert env.settings["plume"]["dataset"] == "nose"


# -------------------------------------- HDF5 movies read only their own bytes (issue 42, 16)

def _other_file(tmp_path) -> pathlib.Path:
    """Another local file whose bytes a hostile movie would play."""
    other = tmp_path / "secret.bin"
    other.write_bytes(np.arange(2 * 4 * 5, dtype=np.float32).tobytes())
    return other


def test_an_hdf5_movie_with_external_raw_storage_is_refused(tmp_path):
    other = _other_file(tmp_path)
    path = tmp_path / "external.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("frames", shape=(2, 4, 5), dtype="f4",
                         external=[(str(other), 0, h5py.h5f.UNLIMITED)])
    with pytest.raises(ValidationError, match="external raw files"):
        load_movie(path)


def _target_h5(tmp_path) -> pathlib.Path:
    """Another HDF5 file a hostile movie would link to."""
    target = tmp_path / "target.h5"
    with h5py.File(target, "w") as f:
        f.create_dataset("frames", data=np.ones((2, 4, 5), np.float32))
    return target


def test_an_hdf5_movie_through_an_external_link_is_refused(tmp_path):
    target = _target_h5(tmp_path)
    path = tmp_path / "linked.h5"
    with h5py.File(path, "w") as f:
        f["frames"] = h5py.ExternalLink(str(target), "/frames")
        f.create_group("g")["conc"] = h5py.ExternalLink(str(target), "/frames")
        f["via"] = h5py.ExternalLink(str(target), "/")
    for dataset in (None, "frames", "via/frames", "/frames"):
        with pytest.raises(ValidationError, match="external link to another file"):
            load_movie(path, dataset)
    with pytest.raises(ValidationError, match=r"'g/conc' is an external link"):
        load_movie(path, "g/conc")
    soft = tmp_path / "soft.h5"
    with h5py.File(soft, "w") as f:
        f["ext"] = h5py.ExternalLink(str(target), "/")
        f["frames"] = h5py.SoftLink("/ext/frames")
    with pytest.raises(ValidationError, match="a soft link"):
        load_movie(soft)


def test_an_hdf5_movie_that_is_a_virtual_dataset_is_refused(tmp_path):
    target = _target_h5(tmp_path)
    layout = h5py.VirtualLayout(shape=(2, 4, 5), dtype="f4")
    layout[:] = h5py.VirtualSource(str(target), "frames", shape=(2, 4, 5))
    path = tmp_path / "virtual.h5"
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("frames", layout)
    with pytest.raises(ValidationError, match="virtual dataset"):
        load_movie(path)


# -------------------------------------- integers too large for a float (issue 42, item 7)

@pytest.mark.parametrize("metadata,named", [({"fps": 10**400}, r"plume\.fps"),
                                            ({"source": [10**400, 1]}, r"plume\.source"),
                                            ({"wind_velocity": [1, 10**400]},
                                             r"plume\.wind_velocity")])
def test_movie_metadata_with_an_integer_too_large_for_a_float_is_refused(tmp_path, metadata,
                                                                         named):
    meta = {"fps": 10.0, "source": [0, 3], **metadata}
    path = save_movie(tmp_path / "huge.npz", _plume(2, 6, 8, 3.0), **meta)
    with pytest.raises(ValidationError, match=rf"{named} \(file metadata\)=.*too large for a "
                                              r"float"):
        plume_jax.make("PlumeNav-Movie-v0", plume={"path": str(path)})
