"""The dataset registry and cache (plume_jax.datasets, ``plume-jax data``),
against a local HTTP server on 127.0.0.1 — no internet."""

from __future__ import annotations

import hashlib
import http.server
import re
import threading

import numpy as np
import pytest

from plume_jax import ValidationError, cli
from plume_jax import datasets as ds

pytest.importorskip("httpx")


class _Handler(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    cut_after: int | None = None  # close the connection after this many bytes (once)
    ranges: list[str] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = self.files.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        start = 0
        rng = self.headers.get("Range")
        type(self).ranges.append(rng)
        if rng:
            start = int(re.match(r"bytes=(\d+)-", rng).group(1))
            if start >= len(body):
                self.send_response(416)
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        cut = type(self).cut_after
        if cut is not None:
            type(self).cut_after = None
            self.wfile.write(body[start:start + cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body[start:])


@pytest.fixture
def server(tmp_path, monkeypatch):
    handler = type("H", (_Handler,), {"files": {}, "cut_after": None, "ranges": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.timeout = 5
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    monkeypatch.setenv("PLUME_JAX_DATA_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PLUME_JAX_DATA_MIRROR", raising=False)
    monkeypatch.delenv("PLUME_JAX_DATA_CATALOG", raising=False)
    try:
        yield handler, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _plif_bytes(tmp_path) -> bytes:
    """A small file in colorado_jet_v1's layout: HDF5 ``dataset2`` (t, y, x)."""
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "plif.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("dataset2", data=np.random.default_rng(0).random((5, 6, 8),
                                                                          dtype=np.float32))
        f["dataset2"].attrs["fps"] = 15.0
    return path.read_bytes()


def _catalog(tmp_path, base, body, checksum="auto", **extra) -> str:
    import yaml

    entry = {"id": "plif_local", "title": "local PLIF", "url": f"{base}/plif.h5",
             "filename": "plif.h5", "size_bytes": len(body), "licence": "CC0-1.0",
             "layout": {"dataset": "dataset2", "axes": "tyx", "fps": 15.0}, **extra}
    if checksum == "auto":
        entry["checksum"] = "sha256:" + hashlib.sha256(body).hexdigest()
    elif checksum is not None:
        entry["checksum"] = checksum
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump({"datasets": [entry]}))
    return str(path)


def test_builtin_entries_have_the_facts_and_well_formed_urls_and_checksums():
    assert set(ds.BUILTIN) == {"colorado_jet_v1", "rigolli_dns_nose_v1", "rigolli_dns_ground_v1",
                               "emonet_smoke_v1", "emonet_smoke_trimmed_v1"}
    for e in ds.BUILTIN.values():
        assert re.match(r"^https://(zenodo\.org|datadryad\.org)/", e.url), e.url
        assert re.match(r"^(md5:[0-9a-f]{32}|sha256:[0-9a-f]{64})$", e.checksum)
        assert e.licence in ("CC-BY-4.0", "CC0-1.0") and e.citation and e.doi
        assert re.match(r"^10\.\d{4,}/", e.doi) and e.size_bytes > 1_000_000
        assert e.layout["dataset"] and e.layout["axes"] in ("tyx", "txy", "xyt", "yxt")
    assert ds.BUILTIN["colorado_jet_v1"].layout["fps"] == 15.0


def test_download_verifies_and_the_cli_lists_describes_and_verifies(server, tmp_path, capsys):
    handler, base = server
    body = _plif_bytes(tmp_path)
    handler.files["/plif.h5"] = body
    catalog = _catalog(tmp_path, base, body)
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local", "--quiet"]) == 0
    path = tmp_path / "cache" / "plif_local" / "plif.h5"
    assert path.read_bytes() == body and not path.with_name("plif.h5.part").exists()
    assert cli.main(["data", "--catalog", catalog, "verify", "plif_local"]) == 0
    assert cli.main(["data", "--catalog", catalog, "list"]) == 0
    out = capsys.readouterr().out
    assert "plif_local" in out and "cached" in out and "colorado_jet_v1" in out
    assert "CC-BY-4.0" in out and "~6.8 GB" in out
    assert cli.main(["data", "--catalog", catalog, "describe", "plif_local"]) == 0
    assert "layout.dataset: dataset2" in capsys.readouterr().out
    # a second download makes no request
    handler.ranges.clear()
    assert ds.download(ds.get("plif_local", catalog)) == path and handler.ranges == []
    # a corrupted cached copy fails verify, naming the file and both hashes
    path.write_bytes(body[:-1] + bytes([body[-1] ^ 1]))
    assert cli.main(["data", "--catalog", catalog, "verify"]) == 1
    err = capsys.readouterr().err
    assert str(path) in err and hashlib.sha256(body).hexdigest() in err
    assert hashlib.sha256(path.read_bytes()).hexdigest() in err


def test_an_interrupted_download_resumes_with_a_range_request(server, tmp_path):
    handler, base = server
    body = bytes(range(256)) * 40
    handler.files["/plif.h5"] = body
    handler.cut_after = 3000
    entry = ds.get("plif_local", _catalog(tmp_path, base, body))
    with pytest.raises(ValidationError, match="interrupted"):
        ds.download(entry)
    part = tmp_path / "cache" / "plif_local" / "plif.h5.part"
    assert part.stat().st_size == 3000
    assert not (tmp_path / "cache" / "plif_local" / "plif.h5").exists()
    assert ds.status(entry) == "partial (3,000 bytes)"
    path = ds.download(entry)
    assert handler.ranges[-1] == "bytes=3000-"
    assert path.read_bytes() == body and not part.exists()


def test_a_wrong_checksum_is_refused_naming_the_file_and_both_hashes(server, tmp_path):
    handler, base = server
    body = b"not the registered file" * 10
    handler.files["/plif.h5"] = body
    want = "0" * 64
    entry = ds.get("plif_local", _catalog(tmp_path, base, body, checksum=f"sha256:{want}"))
    with pytest.raises(ValidationError) as error:
        ds.download(entry)
    message = str(error.value)
    assert "plif.h5" in message and want in message
    assert hashlib.sha256(body).hexdigest() in message
    assert not list((tmp_path / "cache" / "plif_local").iterdir())  # nothing kept


def test_a_truncated_file_is_not_accepted(server, tmp_path):
    handler, base = server
    body = b"x" * 1000
    handler.files["/plif.h5"] = body[:600]  # the server has a short copy
    entry = ds.get("plif_local", _catalog(tmp_path, base, body))
    with pytest.raises(ValidationError, match=r"1,000 bytes \(the registry.s size .*600 arrived"):
        ds.download(entry)
    assert not (tmp_path / "cache" / "plif_local" / "plif.h5").exists()


def test_an_entry_without_a_checksum_needs_one_or_an_opt_in(server, tmp_path, capsys):
    handler, base = server
    body = b"y" * 100
    handler.files["/plif.h5"] = body
    catalog = _catalog(tmp_path, base, body, checksum=None)
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local", "--quiet"]) == 2
    assert "--checksum" in capsys.readouterr().err
    digest = hashlib.sha256(body).hexdigest()
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local", "--quiet",
                     "--checksum", f"sha256:{digest}"]) == 0


def test_a_dataset_too_large_is_refused_before_it_is_fetched(server, tmp_path, capsys):
    handler, base = server
    body = b"z" * 5000
    handler.files["/plif.h5"] = body
    catalog = _catalog(tmp_path, base, body)
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local", "--quiet",
                     "--max-bytes", "4096"]) == 2
    assert "5,000 bytes" in capsys.readouterr().err and handler.ranges == []
    with pytest.raises(ValidationError, match="at least"):
        ds.download(ds.BUILTIN["emonet_smoke_v1"], max_bytes=10**9)


@pytest.mark.parametrize("field,value", [("id", "../escape"), ("id", "a/b"),
                                         ("filename", "../../etc/passwd"),
                                         ("filename", "sub/plif.h5"), ("filename", "..")])
def test_a_catalog_with_a_path_traversal_name_is_refused(tmp_path, field, value):
    catalog = _catalog(tmp_path, "http://127.0.0.1:9", b"q", **{field: value})
    with pytest.raises(ValidationError, match="path separators"):
        ds.load_catalog(catalog)


def test_the_mirror_replaces_the_url(server, tmp_path, monkeypatch):
    handler, base = server
    body = b"m" * 64
    handler.files["/plif_local/plif.h5"] = body
    entry = ds.get("plif_local", _catalog(tmp_path, "http://127.0.0.1:9/nowhere", body))
    monkeypatch.setenv("PLUME_JAX_DATA_MIRROR", base + "/")
    assert ds.download(entry).read_bytes() == body
