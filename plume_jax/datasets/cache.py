"""The dataset cache: where files live, resumable verified downloads.

- Cache folder: ``$PLUME_JAX_DATA_DIR``, else ``~/.cache/plume_jax``
  (``$XDG_CACHE_HOME/plume_jax`` when that is set); a dataset's file is
  ``<cache>/<id>/<filename>``.
- Mirror: ``$PLUME_JAX_DATA_MIRROR`` (a base URL) replaces the entry's URL by
  ``<mirror>/<id>/<filename>``, so a lab or a CI can serve copies.
- A download holds ``<filename>.lock`` (a second download of the same id is
  refused while the first runs), streams into ``<filename>.part`` (resumed
  with an HTTP ``Range`` request when a part is there; the answer's
  ``Content-Range`` must start where the part ends, else the part is
  discarded), is checked against the expected size and checksum, and only
  then renamed onto ``<filename>`` — a complete, verified file or nothing.
  A wrong checksum keeps nothing and names the file and both hashes.
- Transfer: ``Accept-Encoding: identity`` is asked for; a server that
  compresses anyway with one ``Content-Encoding: gzip`` is read decoded here,
  at most the bytes the size limits still allow at a time, sizes counting the
  decoded bytes (such a download cannot be resumed); any other encoding
  (``gzip, gzip``, ``br``, ``deflate``) is refused. Redirects are followed,
  except from https to anything but https.
- Size limit: an entry larger than ``max_bytes`` (default
  :data:`MAX_DOWNLOAD_BYTES`; ``plume-jax data download --max-bytes``) is refused
  before anything is fetched, and so is a stream that grows past it or,
  for an entry whose size is exact, past that size.
- ``download --checksum`` over the registry's checksum is remembered beside
  the file (``<filename>.checksum``), so ``verify`` and ``data list`` check
  the file against the checksum it was downloaded with.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import re
import stat
import urllib.parse
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from plume_jax.datasets.registry import Dataset, check_checksum, check_name, check_url
from plume_jax.core.errors import ValidationError
from plume_jax.files import atomic_write

#: Largest file a download fetches unless told otherwise (64 GiB: every
#: built-in entry fits; lower it with ``--max-bytes``).
MAX_DOWNLOAD_BYTES = 64 << 30
#: Redirects a download follows.
MAX_REDIRECTS = 10

_CHUNK = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)")
#: Whose checksum a file is checked against, in messages.
REGISTRY = "the registry's"
_GIVEN = "given by --checksum"
_REMEMBERED = "remembered from an earlier download --checksum"


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


def _beside(path: pathlib.Path, suffix: str) -> pathlib.Path:
    return path.with_name(path.name + suffix)


def source_url(entry: Dataset) -> str:
    """The URL ``entry`` is downloaded from (the mirror's when
    ``$PLUME_JAX_DATA_MIRROR`` is set), checked.

    Raises:
        ValidationError: a malformed mirror or URL.
    """
    mirror = os.environ.get("PLUME_JAX_DATA_MIRROR")
    if mirror:
        check_url(mirror, "PLUME_JAX_DATA_MIRROR")
        return check_url(f"{mirror.rstrip('/')}/{entry.id}/{entry.filename}",
                         "PLUME_JAX_DATA_MIRROR")
    return check_url(entry.url, "url")


def _cache_error(path: pathlib.Path, what: str, error: OSError) -> ValidationError:
    """A one-line error for a cache path the file system refused."""
    reason = error.strerror or type(error).__name__
    return ValidationError.for_parameter(
        "cache", str(path), f"{what} ({type(error).__name__}: {reason}); check the cache "
        "folder ($PLUME_JAX_DATA_DIR) exists as a writable folder")


def _kind(path: pathlib.Path) -> str | None:
    """``None`` when nothing is at ``path`` (or a regular file is), else what
    is there instead ("a folder", "a special file")."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        if isinstance(error, NotADirectoryError):
            return None  # a parent is a file: reported where the folder is made
        raise _cache_error(path, "a path the cache can read", error) from None
    if stat.S_ISREG(mode):
        return None
    return "a folder" if stat.S_ISDIR(mode) else "a special file"


def _check_file_slot(path: pathlib.Path, role: str) -> None:
    """Refuse a folder (or a device, a FIFO) where the cache keeps a file."""
    kind = _kind(path)
    if kind is not None:
        raise ValidationError.for_parameter(
            "cache", str(path), f"a regular file or nothing where the cache keeps {role}, "
            f"not {kind}: move it away and run the command again")


def file_hash(path: str | os.PathLike, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def remembered_checksum(entry: Dataset) -> str | None:
    """The checksum a cached file was downloaded with when ``download
    --checksum`` overrode the registry's (kept in ``<filename>.checksum``),
    else ``None``.

    Raises:
        ValidationError: an unreadable or malformed record.
    """
    from plume_jax.files.safe_io import read_text_bounded

    final = dataset_path(entry)
    record = _beside(final, ".checksum")
    if not final.is_file() or not record.exists():
        return None
    text = read_text_bounded(record, 1024, "cache", "a checksum record")
    return check_checksum(text.strip(), f"cache ({record})")


def effective_checksum(entry: Dataset) -> tuple[str | None, str]:
    """``(checksum, whose)``: the checksum the cached file is checked
    against (the remembered override, else the registry's) and where it
    comes from, for messages."""
    remembered = remembered_checksum(entry)
    return (remembered, _REMEMBERED) if remembered is not None else (entry.checksum, REGISTRY)


def _remember(entry: Dataset, checksum: str | None) -> None:
    """Record ``checksum`` beside the file when it is not the registry's;
    remove the record when it is."""
    record = _beside(dataset_path(entry), ".checksum")
    try:
        if checksum is None or checksum == entry.checksum:
            if record.exists():
                record.unlink()
            return
        atomic_write(record, checksum + "\n")
    except OSError as error:
        raise _cache_error(record, "a checksum record the cache can write", error) from None


def _expected_checksum(entry: Dataset, checksum: str | None, allow_unverified: bool,
                       remembered: bool) -> tuple[str | None, str]:
    if checksum is not None:
        return check_checksum(checksum, "--checksum", " (the checksum given, refused before "
                              "anything was downloaded)"), _GIVEN
    expected, whose = effective_checksum(entry) if remembered else (entry.checksum, REGISTRY)
    if expected is None and not allow_unverified:
        raise ValidationError.for_parameter(
            "dataset", entry.id, "an entry with a known checksum: this one has none, so its "
            "download is refused; pass the checksum you trust "
            f"(plume-jax data download {entry.id} --checksum sha256:<hex>) or opt in to an "
            "unverified copy (--allow-unverified)")
    return expected, whose


def verify_file(path: pathlib.Path, entry: Dataset, expected: str | None,
                whose: str = REGISTRY, what: str | None = None) -> str:
    """Check ``path`` against ``expected`` (``"algo:hex"``, ``whose``
    checksum); returns the checksum (the file's sha256 when ``expected`` is
    None). ``what`` names the file in messages (default: its path).

    Raises:
        ValidationError: a mismatch, naming the file and both hashes; a
            path that is not a readable regular file.
    """
    _check_file_slot(path, f"the file of {entry.id!r}")
    algorithm, want = expected.split(":", 1) if expected is not None else ("sha256", None)
    try:
        got = file_hash(path, algorithm)
    except OSError as error:
        raise _cache_error(path, "a readable file", error) from None
    if expected is None or want is None:
        return f"sha256:{got}"
    if got != want:
        raise ValidationError(
            f"{what or path}: its {algorithm} is {got}, but {whose} checksum for "
            f"{entry.id!r} is {expected}: the copy is corrupt or not the registered file",
            parameter="checksum", value=expected, allowed=f"a file whose {algorithm} is {want}")
    return expected


@contextlib.contextmanager
def _get(client: Any, url: str, headers: dict[str, str]) -> Iterator[Any]:
    """A streamed GET of ``url``, redirects followed by hand so that a step
    from https to anything else is refused; yields the last response."""
    for _ in range(MAX_REDIRECTS + 1):
        response = client.send(client.build_request("GET", url, headers=headers), stream=True,
                               follow_redirects=False)
        try:
            if not response.has_redirect_location:
                yield response
                return
            target = str(response.url.join(response.headers["Location"]))
        finally:
            response.close()
        if urllib.parse.urlsplit(url).scheme.lower() == "https" and \
                urllib.parse.urlsplit(target).scheme.lower() != "https":
            raise ValidationError.for_parameter(
                "url", url, f"a download that stays on https: it redirects to {target}, "
                "which is not https (refused: the file would travel unprotected)")
        url = check_url(target, f"the redirect from {url}")
    raise ValidationError.for_parameter("url", url, f"at most {MAX_REDIRECTS} redirects")


def _discard(part: pathlib.Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        part.unlink()


def _fetch(entry: Dataset, client: Any, url: str, part: pathlib.Path, limit: int,
           progress: Callable[[int, int | None], None] | None) -> int | None:
    """Stream ``url`` into ``part`` (resuming it); returns the file's size
    as served, when known."""
    have = part.stat().st_size if part.exists() else 0
    headers = {"Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    cap = min(limit, entry.size_bytes) if entry.size_exact else limit
    with _get(client, url, headers) as response:
        if response.status_code == 416 and have:  # the part may already be whole
            served = _content_range(response)[2]
            if served is not None and served != have:
                _discard(part)
                raise ValidationError.for_parameter(
                    "download", url, f"a resume the server can serve: the partial copy has "
                    f"{have:,} bytes, the file {served:,}; the partial copy was discarded: "
                    "run the download again to start over")
            return have
        if response.status_code not in (200, 206):
            raise ValidationError.for_parameter(
                "url", url, f"a reachable file (HTTP {response.status_code})")
        encoded = _gzipped(response, url)
        start: int | None = 0
        total: int | None = None
        if response.status_code == 206:
            start, _, total = _content_range(response)
            if encoded or start != have:
                _discard(part)
                where = "no usable Content-Range" if start is None else \
                    f"bytes starting at {start:,}"
                raise ValidationError.for_parameter(
                    "download", url, f"a resume from byte {have:,}: the server answered with "
                    f"{where}{' compressed in transit' if encoded else ''}; the partial copy "
                    "was discarded (its start would be written twice): run the download again "
                    "to start over")
        else:
            have = 0  # the server sends the whole file: start over
        if total is None and not encoded:
            length = response.headers.get("Content-Length", "")
            total = have + int(length) if length.isascii() and length.isdigit() else None
        if encoded:  # the length on the wire is not the file's
            total = entry.size_bytes if entry.size_exact else None
        if total is not None and total > limit:
            raise ValidationError.for_parameter(
                "--max-bytes", limit, f"at least the served size of {entry.id!r}, "
                f"{total:,} bytes (download stopped)")
        if total is not None and total > cap:
            _discard(part)
            raise ValidationError.for_parameter(
                "download", url, f"a file of {entry.size_bytes:,} bytes (the registry's exact "
                f"size for {entry.id!r}); the server offers {total:,} (wrong file; nothing kept)")
        if progress is not None:
            progress(have, total)
        done = have
        try:
            with open(part, "ab" if have else "wb") as f:
                # as it arrives: an interruption keeps it
                for block in _body(response, url, encoded, lambda: cap - done + 1):
                    done += len(block)
                    if done > cap:
                        raise ValidationError.for_parameter(
                            "--max-bytes" if cap == limit else "download", url,
                            f"at most {cap:,} bytes for {entry.id!r} (the server sent more; "
                            "download stopped, nothing kept)")
                    f.write(block)
                    if progress is not None:
                        progress(done, total)
        except ValidationError:
            _discard(part)
            raise
        except Exception:
            if encoded:  # a compressed stream cannot be resumed by byte ranges
                _discard(part)
            raise
    return total


def _gzipped(response: Any, url: str) -> bool:
    """Whether the body comes gzip-compressed (one ``Content-Encoding:
    gzip``); sent as is (``identity`` or no header) is False.

    Raises:
        ValidationError: any other encoding (``gzip, gzip``, ``br``, ...):
            its decoded size could not be bounded before it is in memory.
    """
    sent = response.headers.get("Content-Encoding", "")
    encoding = sent.strip().lower()
    if encoding in ("", "identity", "gzip"):
        return encoding == "gzip"
    raise ValidationError.for_parameter(
        "download", url, f"a file sent as is or gzip-compressed once (Content-Encoding: "
        f"identity or gzip); the server sent Content-Encoding: {sent[:80]!r} (refused before "
        "anything was written)")


def _body(response: Any, url: str, gzipped: bool, room: Callable[[], int]) -> Iterator[bytes]:
    """The raw body as it arrives; a gzip one decoded here, never more than
    ``room()`` bytes (what the size limits still allow, plus one) at once."""
    if not gzipped:
        yield from response.iter_raw()
        return
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    problem = "the body ended before the stream did"
    try:
        for raw in response.iter_raw():
            if inflate.eof and raw:
                break
            while raw and not inflate.eof:
                block = inflate.decompress(raw, max(1, min(_CHUNK, room())))
                raw = inflate.unconsumed_tail
                if block:
                    yield block
            if inflate.unused_data:
                break
        else:
            block = inflate.flush()  # what the last input left (one match at most)
            if inflate.eof:
                if block:
                    yield block
                return
        if inflate.eof:
            problem = "the body goes on after the stream's end"
    except zlib.error as error:
        problem = str(error)
    raise ValidationError.for_parameter(
        "download", url, f"one whole gzip stream (Content-Encoding: gzip): {problem} "
        "(download stopped, nothing kept)")


def _content_range(response: Any) -> tuple[int | None, int | None, int | None]:
    """``(first, last, total)`` of a ``Content-Range`` header (None: absent
    or malformed, or ``*``); a 416's ``bytes */total`` gives only the total."""
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    if match is None:
        return None, None, None
    first, last, total = (None if group is None or group == "*" else int(group)
                          for group in match.groups())
    return first, last, total


def download(entry: Dataset, *, checksum: str | None = None, allow_unverified: bool = False,
             max_bytes: int | None = None, timeout: float = 60.0,
             progress: Callable[[int, int | None], None] | None = None,
             client: Any = None) -> pathlib.Path:
    """Fetch ``entry`` into the cache (resuming a partial download), verify
    it, and return the path of the verified file. A verified file already
    there is returned without a request. ``progress(done, total)`` is
    called with the bytes of the file so far and its size when known.

    Raises:
        ValidationError: a malformed ``checksum`` (before anything is
            fetched); no checksum known and no opt-in; larger than
            ``max_bytes``; a cache path that cannot be used; another
            download of the same id running; a network error or HTTP
            status; a redirect from https to http; a resume the server does
            not honour (the part is discarded); a truncated download (kept
            as ``.part`` for a resume); a wrong checksum (nothing kept).
    """
    import filelock
    import httpx

    final = dataset_path(entry)
    expected, whose = _expected_checksum(entry, checksum, allow_unverified,
                                         remembered=checksum is None and final.is_file())
    limit = MAX_DOWNLOAD_BYTES if max_bytes is None else int(max_bytes)
    if entry.size_bytes > limit:
        raise ValidationError.for_parameter(
            "--max-bytes", limit, f"at least {entry.id!r}'s size, {entry.size_bytes:,} bytes "
            f"(the download was refused before it started; raise --max-bytes to fetch it)")
    part = _beside(final, ".part")
    url = source_url(entry)
    if _cached(final, entry, expected, whose, checksum):
        return final
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _cache_error(final.parent, "a folder the cache can create", error) from None
    lock = filelock.FileLock(_beside(final, ".lock"), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise ValidationError.for_parameter(
            "download", entry.id, f"no other download of {entry.id!r} running: another one "
            f"holds {lock.lock_file} and writes {part}; wait for it to end, then run the "
            "command again") from None
    except OSError as error:
        raise _cache_error(final.parent, "a folder the cache can write in", error) from None
    own = client is None
    try:
        if _cached(final, entry, expected, whose, checksum):  # another download just ended
            return final
        _check_file_slot(part, f"the partial download of {entry.id!r}")
        client = client or httpx.Client(timeout=timeout)
        try:
            total = _fetch(entry, client, url, part, limit, progress)
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as error:
            kept = part.stat().st_size if part.exists() else 0
            raise ValidationError.for_parameter(
                "url", url, f"a reachable file ({type(error).__name__}: {error}); " + (
                    f"what arrived ({kept:,} bytes) is kept in {part} and the next download "
                    "resumes from it" if kept else "nothing was kept")) from None
        except OSError as error:
            raise _cache_error(part, "a partial download the cache can write", error) from None
        size = part.stat().st_size
        if total is not None and size != total:
            raise ValidationError.for_parameter(
                "download", str(part), f"{total:,} bytes as served; {size:,} arrived "
                "(interrupted: run the download again to resume)")
        if entry.size_exact and size != entry.size_bytes:
            _discard(part)  # the server's whole copy has the wrong size: nothing to resume
            raise ValidationError.for_parameter(
                "download", str(final), f"{entry.size_bytes:,} bytes (the registry's size for "
                f"{entry.id!r}); {size:,} arrived (truncated or wrong file; nothing kept)")
        try:
            verify_file(part, entry, expected, whose, what=f"the download of {entry.id!r} "
                        f"from {url} ({size:,} bytes, not kept)")
        except ValidationError:
            _discard(part)
            raise
        _remember(entry, checksum if checksum is not None else expected)
        try:
            os.replace(part, final)
        except OSError as error:
            raise _cache_error(final, "a place the cache can put the verified file",
                               error) from None
        return final
    finally:
        if own and client is not None:
            client.close()
        lock.release()


def _cached(final: pathlib.Path, entry: Dataset, expected: str | None, whose: str,
            given: str | None) -> bool:
    """Whether a verified file of ``entry`` is already at ``final`` (a
    mismatch raises); a ``--checksum`` it matches is remembered."""
    _check_file_slot(final, f"the file of {entry.id!r}")
    if not final.is_file():
        return False
    verify_file(final, entry, expected, whose)
    if given is not None and given.lower() != effective_checksum(entry)[0]:
        _remember(entry, given.lower())
    return True


def status(entry: Dataset) -> str:
    """``"cached"`` (``"cached, checksum from --checksum"`` when the
    download's checksum overrode the registry's), ``"partial (N bytes)"``,
    ``"not cached"``, or what blocks the cache (no hashing)."""
    path = dataset_path(entry)
    part = _beside(path, ".part")
    try:
        for where in (path, part):
            kind = _kind(where)
            if kind is not None:
                return f"blocked: {where.name} is {kind}"
        if path.is_file():
            return "cached" + (", checksum from --checksum"
                               if remembered_checksum(entry) is not None else "")
        if part.is_file():
            return f"partial ({part.stat().st_size:,} bytes)"
    except (ValidationError, OSError) as error:
        return f"unreadable: {str(error).splitlines()[0][:120]}"
    return "not cached"


def require_cached(entry: Dataset) -> pathlib.Path:
    """The cached file of ``entry``, or a ``ValidationError`` giving the
    command that fetches it."""
    path = dataset_path(entry)
    _check_file_slot(path, f"the file of {entry.id!r}")
    if not path.is_file():
        command = f"plume-jax data download {entry.id}" + (
            "" if entry.origin == "builtin" else f" --catalog {entry.origin}")
        raise ValidationError.for_parameter(
            "data_id", entry.id, f"a dataset in the cache ({path} is missing): run "
            f"`{command}`")
    return path
