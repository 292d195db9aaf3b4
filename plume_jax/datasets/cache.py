"""The dataset cache: where files live, resumable verified downloads.

- Cache folder: ``$PLUME_JAX_DATA_DIR``, else ``~/.cache/plume_jax``
  (``$XDG_CACHE_HOME/plume_jax`` when that is set); a dataset's file is
  ``<cache>/<id>/<filename>``.
- Mirror: ``$PLUME_JAX_DATA_MIRROR`` (a base URL) replaces the entry's URL by
  ``<mirror>/<id>/<filename>``, so a lab or a CI can serve copies.
- A download streams into ``<filename>.part`` (resumed with an HTTP
  ``Range`` request when a part is there and the server honours it), is
  checked against the expected size and checksum, and only then renamed onto
  ``<filename>`` — a complete, verified file or nothing. A wrong checksum
  keeps nothing and names the file and both hashes.
- Size limit: an entry larger than ``max_bytes`` (default
  :data:`MAX_DOWNLOAD_BYTES`, or ``$PLUME_JAX_DATA_MAX_BYTES``) is refused
  before anything is fetched, and so is a stream that grows past it.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
from collections.abc import Callable
from typing import Any

from plume_jax.datasets.registry import Dataset, check_name
from plume_jax.errors import ValidationError

#: Largest file a download fetches unless told otherwise (64 GiB: every
#: built-in entry fits; lower it with ``--max-bytes``).
MAX_DOWNLOAD_BYTES = 64 << 30

_CHUNK = 1 << 20


def cache_dir() -> pathlib.Path:
    """The cache folder (not created)."""
    if os.environ.get("PLUME_JAX_DATA_DIR"):
        return pathlib.Path(os.environ["PLUME_JAX_DATA_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return pathlib.Path(base).expanduser() / "plume_jax"


def dataset_path(entry: Dataset) -> pathlib.Path:
    """Where ``entry``'s verified file lives in the cache."""
    check_name(entry.id, "dataset id", "a dataset id")
    check_name(entry.filename, "filename", "a file name")
    return cache_dir() / entry.id / entry.filename


def source_url(entry: Dataset) -> str:
    mirror = os.environ.get("PLUME_JAX_DATA_MIRROR")
    if mirror:
        return f"{mirror.rstrip('/')}/{entry.id}/{entry.filename}"
    return entry.url


def file_hash(path: str | os.PathLike, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _expected_checksum(entry: Dataset, checksum: str | None,
                       allow_unverified: bool) -> str | None:
    expected = checksum.lower() if checksum else entry.checksum
    if checksum and not (checksum.lower().startswith(("sha256:", "md5:"))):
        raise ValidationError.for_parameter("--checksum", checksum,
                                            "'sha256:<hex>' or 'md5:<hex>'")
    if expected is None and not allow_unverified:
        raise ValidationError.for_parameter(
            "dataset", entry.id, "an entry with a known checksum: this one has none, so its "
            "download is refused; pass the checksum you trust "
            f"(plume-jax data download {entry.id} --checksum sha256:<hex>) or opt in to an "
            "unverified copy (--allow-unverified)")
    return expected


def verify_file(path: pathlib.Path, entry: Dataset, expected: str | None) -> str:
    """Check ``path`` against ``expected`` (``"algo:hex"``); returns the hash.

    Raises:
        ValidationError: a mismatch, naming the file and both hashes.
    """
    if expected is None:
        return "sha256:" + file_hash(path, "sha256")
    algorithm, want = expected.split(":", 1)
    got = file_hash(path, algorithm)
    if got != want:
        raise ValidationError.for_parameter(
            "checksum", str(path),
            f"a file whose {algorithm} is {want} (the registry's for {entry.id!r}); this "
            f"one's is {got}: the copy is corrupt or not the registered file")
    return expected


def download(entry: Dataset, *, checksum: str | None = None, allow_unverified: bool = False,
             max_bytes: int | None = None, timeout: float = 60.0,
             progress: Callable[[int, int | None], None] | None = None,
             client: Any = None) -> pathlib.Path:
    """Fetch ``entry`` into the cache (resuming a partial download), verify
    it, and return the path of the verified file. A verified file already
    there is returned without a request.

    Raises:
        ValidationError: no checksum known and no opt-in; larger than
            ``max_bytes``; a network error or HTTP status; a truncated
            download (kept as ``.part`` for a resume); a wrong checksum
            (nothing kept).
    """
    import httpx

    expected = _expected_checksum(entry, checksum, allow_unverified)
    limit = MAX_DOWNLOAD_BYTES if max_bytes is None else int(max_bytes)
    if entry.size_bytes > limit:
        raise ValidationError.for_parameter(
            "--max-bytes", limit, f"at least {entry.id!r}'s size, {entry.size_bytes:,} bytes "
            f"(the download was refused before it started; raise --max-bytes to fetch it)")
    final = dataset_path(entry)
    if final.exists():
        verify_file(final, entry, expected)
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(final.name + ".part")
    url = source_url(entry)
    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    own = client is None
    client = client or httpx.Client(timeout=timeout, follow_redirects=True)
    total: int | None  # bytes of the whole file, when the server says
    try:
        with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 416 and have:  # the part is already whole
                total = have
            elif response.status_code not in (200, 206):
                raise ValidationError.for_parameter(
                    "url", url, f"a reachable file (HTTP {response.status_code})")
            else:
                if response.status_code == 200:
                    have = 0  # no resume: start over
                length = response.headers.get("Content-Length")
                total = have + int(length) if length is not None else None
                if total is not None and total > limit:
                    raise ValidationError.for_parameter(
                        "--max-bytes", limit, f"at least the served size of {entry.id!r}, "
                        f"{total:,} bytes (download stopped)")
                with open(part, "ab" if have else "wb") as f:
                    done = have
                    for block in response.iter_bytes():  # as it arrives: an interruption keeps it
                        done += len(block)
                        if done > limit:
                            raise ValidationError.for_parameter(
                                "--max-bytes", limit, f"at least the size of {entry.id!r} "
                                "(the server sent more; download stopped)")
                        f.write(block)
                        if progress is not None:
                            progress(done, total)
    except httpx.HTTPError as error:
        raise ValidationError.for_parameter(
            "url", url, f"a reachable file ({type(error).__name__}: {error}); what arrived is "
            f"kept in {part} and the next download resumes from it") from None
    finally:
        if own:
            client.close()
    size = part.stat().st_size
    if total is not None and size != total:
        raise ValidationError.for_parameter(
            "download", str(part), f"{total:,} bytes as served; {size:,} arrived (interrupted: "
            "run the download again to resume)")
    if entry.size_exact and size != entry.size_bytes:
        part.unlink()  # the server's whole copy has the wrong size: nothing to resume
        raise ValidationError.for_parameter(
            "download", str(final), f"{entry.size_bytes:,} bytes (the registry's size for "
            f"{entry.id!r}); {size:,} arrived (truncated or wrong file; nothing kept)")
    try:
        verify_file(part, entry, expected)
    except ValidationError:
        part.unlink()
        raise
    os.replace(part, final)
    return final


def status(entry: Dataset) -> str:
    """``"cached"``, ``"partial (N bytes)"`` or ``"not cached"`` (no hashing)."""
    path = dataset_path(entry)
    if path.exists():
        return "cached"
    part = path.with_name(path.name + ".part")
    if part.exists():
        return f"partial ({part.stat().st_size:,} bytes)"
    return "not cached"


def require_cached(entry: Dataset) -> pathlib.Path:
    """The cached file of ``entry``, or a ``ValidationError`` giving the
    command that fetches it."""
    path = dataset_path(entry)
    if not path.exists():
        command = f"plume-jax data download {entry.id}" + (
            "" if entry.origin == "builtin" else f" --catalog {entry.origin}")
        raise ValidationError.for_parameter(
            "data_id", entry.id, f"a dataset in the cache ({path} is missing): run "
            f"`{command}`")
    return path
