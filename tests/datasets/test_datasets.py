"""The dataset registry and cache (plume_jax.datasets, ``plume-jax data``),
against a local HTTP server on 127.0.0.1 — no internet."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import re
import threading
import time

import numpy as np
import pytest

from plume_jax import ValidationError, cli
from plume_jax import datasets as ds

pytest.importorskip("httpx")


class _Handler(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    cut_after: int | None = None  # close the connection after this many bytes (once)
    ranges: list[str] = []
    # misbehaviours, off by default
    range_reply: str = "honour"  # "ignore": 200 with the whole file; "from_zero": 206 from 0
    gzip: int = 0  # gzip the body this many times whatever was asked (Content-Encoding: gzip, ...)
    encoding: str | None = None  # a Content-Encoding sent as is (the body left as it is)
    no_length: bool = False  # no Content-Length: the body ends when the connection closes
    redirects: dict[str, str] = {}  # path -> Location of a 302
    delay: float = 0.0  # seconds between 100-byte pieces of the body
    started: threading.Event | None = None  # set when a body starts to be sent

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path in self.redirects:
            self.send_response(302)
            self.send_header("Location", self.redirects[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.files.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        start = 0
        rng = self.headers.get("Range")
        type(self).ranges.append(rng)
        if rng and self.range_reply != "ignore":
            start = int(re.match(r"bytes=(\d+)-", rng).group(1))
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")  # RFC 9110 15.5.17
                self.end_headers()
                return
            if self.range_reply == "from_zero":
                start = 0
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        for _ in range(self.gzip):
            payload = gzip.compress(payload)
        if self.gzip:
            self.send_header("Content-Encoding", ", ".join(["gzip"] * self.gzip))
        if self.encoding is not None:
            self.send_header("Content-Encoding", self.encoding)
        if self.no_length:
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.started is not None:
            self.started.set()
        cut = type(self).cut_after
        if cut is not None:
            type(self).cut_after = None
            self.wfile.write(payload[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        if self.delay:
            for i in range(0, len(payload), 100):
                self.wfile.write(payload[i:i + 100])
                self.wfile.flush()
                time.sleep(self.delay)
            return
        self.wfile.write(payload)


@pytest.fixture
def server(tmp_path, monkeypatch):
    handler = type("H", (_Handler,), {"files": {}, "cut_after": None, "ranges": [],
                                      "redirects": {}})
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
    kept = (tmp_path / "cache" / "plif_local").iterdir()
    assert [p.name for p in kept if p.suffix != ".lock"] == []  # nothing kept but the lock


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


# ---------------------------------------------------------------- downloads (issue 42, item 6)

def _entry(tmp_path, base, body, **extra):
    return ds.get("plif_local", _catalog(tmp_path, base, body, **extra))


def _part(tmp_path):
    return tmp_path / "cache" / "plif_local" / "plif.h5.part"


def test_a_second_download_of_the_same_id_is_refused_while_the_first_runs(server, tmp_path):
    handler, base = server
    body = bytes(range(256)) * 8
    handler.files["/plif.h5"] = body
    handler.delay, handler.started = 0.02, threading.Event()
    entry = _entry(tmp_path, base, body)
    outcome: list = []
    first = threading.Thread(target=lambda: outcome.append(ds.download(entry)))
    first.start()
    assert handler.started.wait(10)
    with pytest.raises(ValidationError, match=r"no other download of 'plif_local' running.*"
                                              r"plif\.h5\.lock"):
        ds.download(entry)
    first.join(30)
    assert outcome and outcome[0].read_bytes() == body and not _part(tmp_path).exists()
    assert len(handler.ranges) == 1  # the second one sent no request


def _half_downloaded(server, tmp_path):
    """A served file, its entry and a ``.part`` holding its first 3,000 bytes."""
    handler, base = server
    body = bytes(range(256)) * 40
    handler.files["/plif.h5"] = body
    entry = _entry(tmp_path, base, body)
    part = _part(tmp_path)
    part.parent.mkdir(parents=True)
    part.write_bytes(body[:3000])
    return handler, body, entry, part


def test_a_server_answering_a_resume_from_byte_0_does_not_double_the_start(server, tmp_path):
    handler, body, entry, part = _half_downloaded(server, tmp_path)
    handler.range_reply = "from_zero"  # 206, Content-Range bytes 0-...
    with pytest.raises(ValidationError, match=r"resume from byte 3,000: the server answered "
                                              r"with bytes starting at 0.*discarded"):
        ds.download(entry)
    assert handler.ranges == ["bytes=3000-"] and not part.exists()
    assert not ds.dataset_path(entry).exists()
    # the next download starts over and gets the file once
    assert ds.download(entry).read_bytes() == body
    # a server that ignores the range (200, the whole file) is read from byte 0
    ds.dataset_path(entry).unlink()
    part.write_bytes(body[:3000])
    handler.range_reply = "ignore"
    assert ds.download(entry).read_bytes() == body


def test_a_resume_answered_with_a_range_starting_elsewhere_is_refused(server, tmp_path,
                                                                      monkeypatch):
    handler, body, entry, part = _half_downloaded(server, tmp_path)

    def elsewhere(self):  # 206 from byte 100, whatever the request asked
        self.send_response(206)
        self.send_header("Content-Range", f"bytes 100-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - 100))
        self.end_headers()
        self.wfile.write(body[100:])

    monkeypatch.setattr(handler, "do_GET", elsewhere)
    with pytest.raises(ValidationError, match="bytes starting at 100"):
        ds.download(entry)
    assert not part.exists() and not ds.dataset_path(entry).exists()


def test_an_exact_size_caps_the_stream(server, tmp_path):
    handler, base = server
    body = b"e" * 1000
    handler.files["/plif.h5"] = body + b"f" * 50_000  # more than the entry, no length given
    handler.no_length = True
    entry = _entry(tmp_path, base, body)
    seen: list[int] = []
    with pytest.raises(ValidationError, match=r"at most 1,000 bytes for 'plif_local' \(the "
                                              r"server sent more"):
        ds.download(entry, progress=lambda done, total: seen.append(done))
    assert max(seen) <= 1000 and not _part(tmp_path).exists()


def test_a_gzip_encoded_download_is_accepted(server, tmp_path):
    handler, base = server
    body = bytes(range(256)) * 64  # compresses well: the wire length is not the file's
    handler.files["/plif.h5"] = body
    handler.gzip = True
    entry = _entry(tmp_path, base, body)
    seen: list[tuple] = []
    path = ds.download(entry, progress=lambda done, total: seen.append((done, total)))
    assert path.read_bytes() == body
    assert seen[-1] == (len(body), len(body))


def test_a_gzip_body_that_expands_past_the_cap_is_stopped_before_it_is_decoded_whole(
        server, tmp_path, monkeypatch):
    import zlib

    handler, base = server
    body = b"\0" * 1000
    handler.files["/plif.h5"] = b"\0" * (16 << 20)  # 16 MiB of zeros: ~16 KB gzipped
    handler.gzip = 1
    entry = _entry(tmp_path, base, body)
    produced: list[int] = []
    real = zlib.decompressobj

    class Counting:  # counts every byte any gzip decoder (ours or httpx's) produces
        def __init__(self, *args):
            self._inflate = real(*args)

        def decompress(self, data, max_length=0):
            out = self._inflate.decompress(data, max_length)
            produced.append(len(out))
            return out

        def flush(self, *args):
            out = self._inflate.flush(*args)
            produced.append(len(out))
            return out

        def __getattr__(self, name):
            return getattr(self._inflate, name)

    monkeypatch.setattr(zlib, "decompressobj", Counting)
    with pytest.raises(ValidationError, match=r"at most 1,000 bytes for 'plif_local' \(the "
                                              r"server sent more"):
        ds.download(entry)
    assert produced and sum(produced) <= 1001  # the cap, plus one byte to see it passed
    assert not _part(tmp_path).exists() and not ds.dataset_path(entry).exists()


def test_a_gzip_body_cut_short_is_not_kept_as_the_dataset(server, tmp_path):
    handler, base = server
    body = bytes(range(256)) * 64
    handler.files["/plif.h5"] = body
    handler.gzip, handler.no_length = 1, True  # the body ends when the connection closes
    handler.cut_after = len(gzip.compress(body)) - 20
    entry = _entry(tmp_path, base, body, checksum=None, size_exact=False)
    with pytest.raises(ValidationError, match=r"one whole gzip stream \(Content-Encoding: "
                                              r"gzip\): the body ended before the stream did"):
        ds.download(entry, allow_unverified=True)
    assert not _part(tmp_path).exists() and not ds.dataset_path(entry).exists()


@pytest.mark.parametrize("gzips, encoding, named", [(2, None, "gzip, gzip"), (0, "br", "br"),
                                                    (0, "deflate", "deflate")])
def test_a_content_encoding_other_than_one_gzip_is_refused_in_one_line(
        server, tmp_path, capsys, gzips, encoding, named):
    handler, base = server
    body = b"\0" * 1000
    handler.files["/plif.h5"] = body
    handler.gzip, handler.encoding = gzips, encoding
    catalog = _catalog(tmp_path, base, body)
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"Content-Encoding: {named!r}" in err and len(err.strip().splitlines()) == 1
    assert not _part(tmp_path).exists()
    assert not (tmp_path / "cache" / "plif_local" / "plif.h5").exists()


def test_a_416_naming_a_smaller_file_does_not_make_a_longer_part_the_dataset(server, tmp_path):
    handler, base = server
    body = bytes(range(256)) * 4
    handler.files["/plif.h5"] = body
    entry = _entry(tmp_path, base, body, checksum=None, size_exact=False)
    part = _part(tmp_path)
    part.parent.mkdir(parents=True)
    part.write_bytes(body + b"stale tail of another file")
    with pytest.raises(ValidationError, match=r"the partial copy has 1,050 bytes, the file "
                                              r"1,024; the partial copy was discarded"):
        ds.download(entry, allow_unverified=True)
    assert handler.ranges == ["bytes=1050-"]
    assert not part.exists() and not ds.dataset_path(entry).exists()
    # the next download starts over and gets the served file
    assert ds.download(entry, allow_unverified=True).read_bytes() == body


def test_a_redirect_from_https_to_http_is_refused(server, tmp_path):
    import httpx

    handler, base = server
    body = b"r" * 300
    handler.files["/plif.h5"] = body
    # an http -> http redirect is followed
    handler.redirects["/old.h5"] = f"{base}/plif.h5"
    entry = _entry(tmp_path, base, body, url=f"{base}/old.h5")
    assert ds.download(entry).read_bytes() == body
    # an https origin redirecting to http is not
    asked: list[str] = []

    def reply(request):
        asked.append(str(request.url))
        if request.url.scheme == "https":
            return httpx.Response(302, headers={"Location": "http://plain.example/plif.h5"})
        return httpx.Response(200, content=body)

    entry = ds.get("plif_tls", _catalog(tmp_path, "https://secure.example", body,
                                        id="plif_tls"))
    with httpx.Client(transport=httpx.MockTransport(reply)) as client, \
            pytest.raises(ValidationError, match=r"stays on https: it redirects to "
                                                 r"http://plain\.example/plif\.h5"):
        ds.download(entry, client=client)
    assert asked == ["https://secure.example/plif.h5"]
    assert not ds.dataset_path(entry).exists()


# ------------------------------------------------ cache paths and bad URLs (issue 42, item 9)

def _served(server, tmp_path, fill: bytes):
    """A 100-byte file served at /plif.h5 and its catalog."""
    handler, base = server
    body = fill * 100
    handler.files["/plif.h5"] = body
    return handler, body, _catalog(tmp_path, base, body)


def test_a_cache_path_that_is_a_file_gives_a_one_line_error(server, tmp_path, capsys):
    handler, _, catalog = _served(server, tmp_path, b"c")
    (tmp_path / "cache").write_text("not a folder")
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plume-jax: error: cache=") and "a folder the cache can create" in err
    assert len(err.strip().splitlines()) == 1 and handler.ranges == []
    assert cli.main(["data", "--catalog", catalog, "list"]) == 0
    assert cli.main(["data", "--catalog", catalog, "verify", "plif_local"]) == 1


@pytest.mark.parametrize("which", ["final", "part"])
def test_a_final_file_or_part_that_is_a_folder_gives_a_one_line_error(server, tmp_path, capsys,
                                                                       which):
    handler, _, catalog = _served(server, tmp_path, b"d")
    folder = _part(tmp_path) if which == "part" else _part(tmp_path).with_name("plif.h5")
    folder.mkdir(parents=True)
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "not a folder: move it away" in err and str(folder) in err
    assert len(err.strip().splitlines()) == 1 and handler.ranges == []
    assert cli.main(["data", "--catalog", catalog, "list"]) == 0
    assert f"blocked: {folder.name} is a folder" in capsys.readouterr().out
    assert cli.main(["data", "--catalog", catalog, "verify"]) == (1 if which == "final" else 0)
    assert cli.main(["data", "--catalog", catalog, "verify", "plif_local"]) == 1
    err = capsys.readouterr().err
    assert "plif_local: FAILED: " in err and "Traceback" not in err


def _read_only(patch, folder) -> None:
    """Make ``folder`` read-only; as root (who writes anyway) also make
    the lock and the folders under it fail as the file system would."""
    import os

    import filelock

    folder.chmod(0o500)
    if os.geteuid() != 0:
        return

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    original = type(folder).mkdir
    patch.setattr(filelock.FileLock, "acquire", refuse)
    patch.setattr(type(folder), "mkdir", lambda self, *a, **k: refuse() if folder in
                  self.parents else original(self, *a, **k))


def test_a_read_only_cache_gives_a_one_line_error_and_still_serves_a_cached_file(
        server, tmp_path, monkeypatch, capsys):
    _, body, catalog = _served(server, tmp_path, b"o")
    entry = ds.get("plif_local", catalog)
    cache = tmp_path / "cache"
    cache.mkdir()
    try:
        with monkeypatch.context() as patch:
            _read_only(patch, cache)
            assert cli.main(["data", "--catalog", catalog, "download", "plif_local",
                             "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "PermissionError: Permission denied" in err and len(err.strip().splitlines()) == 1
        cache.chmod(0o700)
        assert ds.download(entry).read_bytes() == body
        # a file already cached is served from a read-only cache without writing
        with monkeypatch.context() as patch:
            _read_only(patch, cache / "plif_local")
            _read_only(patch, cache)
            assert ds.download(entry).read_bytes() == body
    finally:
        for folder in (cache / "plif_local", cache):
            if folder.exists():
                folder.chmod(0o700)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/a\nb.h5", "http://[::1/plif.h5",
                                 "ftp://example.org/plif.h5", "http://127.0.0.1:99999/x.h5",
                                 "http://exa mple.org/x.h5"])
def test_a_catalog_url_with_a_newline_or_a_bad_host_is_refused(tmp_path, url):
    catalog = _catalog(tmp_path, "http://127.0.0.1:9", b"q", url=url)
    with pytest.raises(ValidationError, match=r"datasets\[0\]\.url=.*an http\(s\) URL"):
        ds.load_catalog(catalog)


def test_a_broken_mirror_gives_a_one_line_error(server, tmp_path, monkeypatch, capsys):
    handler, base = server
    catalog = _catalog(tmp_path, base, b"m" * 10)
    monkeypatch.setenv("PLUME_JAX_DATA_MIRROR", "http://[::1")
    for action in (["download", "plif_local", "--quiet"], ["describe", "plif_local"]):
        assert cli.main(["data", "--catalog", catalog, *action]) == 2
        err = capsys.readouterr().err
        assert err.startswith("plume-jax: error: PLUME_JAX_DATA_MIRROR='http://[::1") and \
            "Invalid IPv6 URL" in err and len(err.strip().splitlines()) == 1
    assert handler.ranges == []


def test_a_catalog_layout_axes_given_as_a_list_is_refused_not_a_type_error(tmp_path):
    catalog = _catalog(tmp_path, "http://127.0.0.1:9", b"q", layout={"axes": ["t"]})
    with pytest.raises(ValidationError, match=r"layout\.axes=\['t'\] is invalid: expected one "
                                              r"of \['tyx'"):
        ds.load_catalog(catalog)


# ----------------------------------------------------- trailing newlines (issue 42, item 13)

@pytest.mark.parametrize("field,value", [("id", "x1\n"), ("filename", "p.bin\n")])
def test_a_name_with_a_trailing_newline_is_refused(tmp_path, field, value):
    catalog = _catalog(tmp_path, "http://127.0.0.1:9", b"q", **{field: value})
    with pytest.raises(ValidationError, match=field):
        ds.load_catalog(catalog)
    with pytest.raises(ValidationError, match="dataset id"):
        ds.get("x1\n")


def test_a_checksum_with_a_trailing_newline_is_refused(tmp_path):
    body = b"q"
    catalog = _catalog(tmp_path, "http://127.0.0.1:9", body,
                       checksum="sha256:" + hashlib.sha256(body).hexdigest() + "\n")
    with pytest.raises(ValidationError, match=r"datasets\[0\]\.checksum"):
        ds.load_catalog(catalog)


@pytest.mark.parametrize("given", ["sha256:zz", "md5:" + "0" * 31, "sha256:" + "a" * 64 + "\n",
                                   "crc32:00000000"])
def test_a_malformed_checksum_option_is_refused_before_downloading(server, tmp_path, capsys,
                                                                  given):
    handler, base = server
    body = b"k" * 100
    handler.files["/plif.h5"] = body
    catalog = _catalog(tmp_path, base, body)
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local", "--quiet",
                     "--checksum", given]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plume-jax: error: --checksum=") and "the checksum given" in err
    assert "registry" not in err and handler.ranges == []


# ------------------------------------------------------ catalog field types (issue 42, 7 and 15)

@pytest.mark.parametrize("field,value,named", [
    ("size_exact", "false", "size_exact"),
    ("layout", {"mean_flow_m_s": "fast"}, "layout.mean_flow_m_s"),
    ("layout", {"mean_flow_m_s": -1.0}, "layout.mean_flow_m_s"),
    ("layout", {"mean_flow_m_s": 10**400}, "layout.mean_flow_m_s"),
    ("layout", {"fps": "15"}, "layout.fps"),
    ("layout", {"fps": 0}, "layout.fps"),
    ("layout", {"fps": 10**400}, "layout.fps"),
    ("layout", {"fps": True}, "layout.fps"),
    ("layout", {"pixel_size_mm": 10**400}, "layout.pixel_size_mm"),
    ("layout", {"pixel_size_mm": 0.0}, "layout.pixel_size_mm"),
    ("layout", {"flip_y": "yes"}, "layout.flip_y"),
    ("layout", {"frames": 1.5}, "layout.frames"),
    ("layout", {"source_px": [1]}, "layout.source_px"),
    ("layout", {"source_px": ["a", 1]}, r"layout.source_px\[0\]"),
    ("layout", {"source_px": [1, 10**400]}, r"layout.source_px\[1\]"),
    ("layout", {"dataset": 5}, "layout.dataset"),
    ("layout", {"notes": ["x"]}, "layout.notes"),
    ("layout", ["dataset"], "layout"),
    ("doi", 5, "doi"),
    ("title", 3, "title"),
])
def test_a_catalog_field_of_the_wrong_type_or_range_is_refused(tmp_path, field, value, named):
    catalog = _catalog(tmp_path, "http://127.0.0.1:9", b"q", **{field: value})
    with pytest.raises(ValidationError, match=rf"datasets\[0\]\.{named}=.* is invalid: "
                                              r"expected") as error:
        ds.load_catalog(catalog)
    assert "\n" not in str(error.value)


def test_catalog_numbers_are_kept_as_numbers(tmp_path):
    catalog = _catalog(tmp_path, "http://127.0.0.1:9", b"q", size_exact=False, layout={
        "dataset": "d", "axes": "txy", "fps": 15, "pixel_size_mm": 1, "mean_flow_m_s": 0.1,
        "source_px": [0, 7], "flip_y": True, "frames": 3})
    entry = ds.load_catalog(catalog)["plif_local"]
    assert entry.size_exact is False and entry.layout["fps"] == 15.0
    settings, meta = entry.movie_facts()
    assert settings == {"dataset": "d", "layout": "txy", "flip_y": True}
    assert meta == {"fps": 15.0, "source": [0.0, 7.0], "wind_velocity": [100.0, 0.0]}


# ----------------------------------------------------------- download frictions (issue 44, 6)

def test_a_checksum_given_at_download_is_remembered_by_list_and_verify(server, tmp_path,
                                                                     capsys):
    handler, base = server
    body = b"new release" * 20
    handler.files["/plif.h5"] = body
    stale = "sha256:" + "1" * 64  # the catalog's checksum is of an older file
    catalog = _catalog(tmp_path, base, body, checksum=stale)
    given = "sha256:" + hashlib.sha256(body).hexdigest()
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local", "--quiet",
                     "--checksum", given]) == 0
    assert given in capsys.readouterr().out
    entry = ds.get("plif_local", catalog)
    assert ds.remembered_checksum(entry) == given
    assert ds.status(entry) == "cached, checksum from --checksum"
    assert cli.main(["data", "--catalog", catalog, "verify"]) == 0
    out = capsys.readouterr().out
    assert f"plif_local: ok ({given}, remembered from an earlier download --checksum)" in out
    assert cli.main(["data", "--catalog", catalog, "list"]) == 0
    assert "cached, checksum from --checksum" in capsys.readouterr().out
    assert cli.main(["data", "--catalog", catalog, "describe", "plif_local"]) == 0
    assert f"checksum_from_download: {given}" in capsys.readouterr().out
    # a download again without --checksum checks the file against the remembered one
    assert ds.download(entry) == ds.dataset_path(entry)
    # a corrupted copy then fails verify against the remembered checksum
    ds.dataset_path(entry).write_bytes(body[::-1])
    assert cli.main(["data", "--catalog", catalog, "verify"]) == 1
    assert "remembered from an earlier download --checksum" in capsys.readouterr().err


def test_the_download_progress_has_one_total_and_reaches_100_percent(server, tmp_path, capsys):
    handler, base = server
    body = b"p" * 1000
    handler.files["/plif.h5"] = body
    # the registry's size is approximate and larger than the file served
    catalog = _catalog(tmp_path, base, body, size_exact=False, size_bytes=5000)
    assert cli.main(["data", "--catalog", catalog, "download", "plif_local"]) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("[download plif_local] 1,000/1,000 bytes (100.0%)")
    assert all("/5,000" not in line and " / " not in line for line in lines)


def test_a_failed_download_that_kept_nothing_does_not_name_a_part(server, tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    entry = _entry(tmp_path, f"http://127.0.0.1:{port}", b"n" * 10)
    with pytest.raises(ValidationError, match="nothing was kept") as error:
        ds.download(entry, timeout=5)
    assert ".part" not in str(error.value) and not _part(tmp_path).exists()


def test_a_checksum_error_does_not_show_a_path_as_the_checksum(server, tmp_path):
    handler, base = server
    body = b"not it" * 10
    handler.files["/plif.h5"] = body
    want = "sha256:" + "0" * 64
    with pytest.raises(ValidationError) as error:
        ds.download(_entry(tmp_path, base, body, checksum=want))
    message = str(error.value)
    assert not re.search(r"checksum='?/", message) and error.value.value == want
    assert message.startswith("the download of 'plif_local' from ")
    assert f"but the registry's checksum for 'plif_local' is {want}" in message


def test_the_download_walkthrough_names_the_movies_extra():
    import pathlib

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "plumes.md").read_text()
    section = text[text.index("## Registered datasets"):text.index("### From a dataset id")]
    assert "plume-jax[data,movies]" in section and "h5py" in section
