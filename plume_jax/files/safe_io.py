"""Bounded readers (layer 0): every file and every text the package parses
is bounded in size and nesting *before* it is parsed, and every refusal is
a one-line :class:`~plume_jax.core.errors.ValidationError` naming the file (or
option), the limit and what is allowed.

Limits (generous for real use; a caller may pass its own):

- :data:`MAX_CONFIG_BYTES` = 1 MiB: a YAML or JSON text (config, scenario,
  sweep grid, policy or run metadata) or a ``--set`` value;
- :data:`MAX_DEPTH` = 64 levels of nested lists and mappings;
- :data:`MAX_YAML_NODES` = 100 000 YAML nodes *after alias expansion*: an
  alias counts every node it stands for, so a ~1 KB "billion laughs" alias
  bomb is refused from its node graph, before anything is built from it
  (and a recursive alias is refused outright).

How:

- :func:`read_bytes_bounded` / :func:`read_text_bounded` stat the path first
  (a folder is refused; a regular file over the limit is refused unread) and
  then read at most ``limit + 1`` bytes, so ``/dev/zero`` or a FIFO is
  refused after reading just over the limit, never gigabytes; a FIFO with
  no writer reads as empty instead of blocking.
- :func:`load_yaml_bounded` composes the YAML node graph with a safe loader
  whose composer counts depth as it goes, walks the graph once (shared
  nodes memoised) to count the expanded nodes and the expanded depth, and
  only then constructs Python objects (``yaml.SafeLoader``: no tags that
  build Python objects).
- :func:`load_json_bounded` measures the nesting of the text (outside
  strings) before ``json.loads``; a ``RecursionError`` is still caught.
- :func:`load_npz_bounded` reads a ``.npz`` archive of numeric arrays
  (policy weights, ...) without pickle, each member's declared shape x
  itemsize checked against the budget before it is decompressed, and its
  unpacked size against what its header declares (a zip bomb is refused).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import zipfile
from typing import Any

import numpy as np
import yaml

from plume_jax.core.errors import ValidationError, bounded_repr

#: Bytes of a YAML / JSON text (config, scenario, metadata, --set value).
MAX_CONFIG_BYTES = 1 << 20
#: Levels of nested lists / mappings in a YAML or JSON document.
MAX_DEPTH = 64
#: YAML nodes of a document after alias expansion.
MAX_YAML_NODES = 100_000


def describe_bytes(n: int) -> str:
    """``1048576`` -> ``"1 MiB"``; ``1536`` -> ``"1.5 KiB"``."""
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if size == int(size) else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def read_bytes_bounded(path: str | os.PathLike, max_bytes: int, parameter: str,
                       what: str = "a readable file") -> bytes:
    """The bytes of the file ``path``, refused when over ``max_bytes``.

    A regular file's size is checked before it is opened; anything else
    (a device such as ``/dev/zero``, a pipe) is read for at most
    ``max_bytes + 1`` bytes. A FIFO is opened without waiting for a writer
    (with none, it reads as empty).

    Raises:
        ValidationError: naming ``parameter`` and the path: missing or
            unreadable, a folder, or larger than ``max_bytes``; ``what``
            (``"a readable file"``) starts the description of what is allowed.
    """
    name = os.fspath(path)
    allowed = f"{what} of at most {describe_bytes(max_bytes)}"
    try:
        info = os.stat(name)
    except (OSError, ValueError) as error:
        raise ValidationError.for_parameter(
            parameter, name, f"{allowed} ({getattr(error, 'strerror', None) or error})") from None
    if stat.S_ISDIR(info.st_mode):
        raise ValidationError.for_parameter(parameter, name, f"{allowed} (this is a folder)")
    if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes:
        raise ValidationError.for_parameter(
            parameter, name, f"{allowed} (this one is {describe_bytes(info.st_size)})")
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(max_bytes + 1)
        finally:
            os.close(fd)
    except OSError as error:
        raise ValidationError.for_parameter(
            parameter, name, f"{allowed} ({error.strerror or error})") from None
    if len(data) > max_bytes:
        raise ValidationError.for_parameter(
            parameter, name, f"{allowed} (more than that could be read from it)")
    return data


def read_text_bounded(path: str | os.PathLike, max_bytes: int = MAX_CONFIG_BYTES,
                      parameter: str = "path", what: str = "a readable text file") -> str:
    """The UTF-8 text of the file ``path``, refused when over ``max_bytes``
    (see :func:`read_bytes_bounded`) or not UTF-8 text.

    Raises:
        ValidationError: naming ``parameter`` and the path; ``what``
            (``"a readable text file"``) starts the description of what is
            allowed.
    """
    data = read_bytes_bounded(path, max_bytes, parameter, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValidationError.for_parameter(
            parameter, os.fspath(path), f"{what} in UTF-8 (byte {error.start} "
            f"cannot be decoded: {error.reason})") from None


_TEXT = object()  # quote an excerpt of the text itself


def _check_text(text: Any, max_bytes: int, parameter: str, value: Any, what: str) -> None:
    if not isinstance(text, str):
        raise ValidationError.for_parameter(parameter, text, f"{what} (text, a str)")
    # a str of n characters holds at least n bytes of UTF-8; check that first
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ValidationError.for_parameter(
            parameter, value, f"{what} of at most {describe_bytes(max_bytes)}")


class _TooDeep(Exception):
    pass


class _DuplicateKey(Exception):
    """A mapping holds one key twice (``key``, its first and second line)."""

    def __init__(self, key: Any, first: int, again: int) -> None:
        super().__init__(key, first, again)
        self.key, self.first, self.again = key, first, again


class _BoundedLoader(yaml.SafeLoader):
    """A safe loader that reads YAML 1.2's core schema and refuses what a
    config must not hold.

    - Plain scalars resolve as in YAML 1.2's core schema, not PyYAML's YAML
      1.1: only ``true``/``false`` (any of three casings) are booleans
      (``on``, ``yes``, ``no`` stay text); integers are decimal, ``0o``
      octal or ``0x`` hexadecimal (no base-60 ``1:25:20``, no ``0b``, no
      ``_`` separators; ``010`` is ten); floats may have an exponent with no
      dot (``3e-4``, ``1e6``) and ``.inf``/``.nan``; ``null``, ``~`` and an
      empty value are null; dates are text. ``<<`` merge keys still merge
      (a widely used extension that YAML 1.2 readers such as ruamel.yaml keep).
    - A mapping that holds a key twice is refused (:class:`_DuplicateKey`),
      ``<<`` included (PyYAML would keep the first ``<<`` and drop the
      second without a word); several mappings merge with one
      ``<<: [*a, *b]``.
    - The composer refuses nesting deeper than ``max_depth`` as it composes
      (before Python's recursion limit)."""

    max_depth = MAX_DEPTH
    # YAML 1.2 core schema only (PyYAML's YAML 1.1 resolvers are dropped
    # below, and the core schema's added in their place)
    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        if self._depth > self.max_depth:
            raise _TooDeep
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            merge_line = 0
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:  # merged keys may be overridden; one << a mapping
                    line = key_node.start_mark.line + 1
                    if merge_line:  # PyYAML keeps the first and drops the second silently
                        raise _DuplicateKey("<<", merge_line, line)
                    merge_line = line
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = key in first_line
                except TypeError:  # an unhashable key: the base class says so
                    break
                line = key_node.start_mark.line + 1
                if seen:
                    raise _DuplicateKey(key, first_line[key], line)
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_core_int(self, node: Any) -> int:
        text = str(self.construct_scalar(node))
        if text[:2] in ("0o", "0x"):
            return int(text[2:], 8 if text[1] == "o" else 16)
        return int(text, 10)

    def construct_core_float(self, node: Any) -> float:
        text = str(self.construct_scalar(node))
        bare = text.lstrip("+-").lower()
        if bare in (".inf", ".nan"):
            return float(text.replace(".", "", 1))
        return float(text)


# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution),
# plus ``<<`` merge keys
_MERGE = "tag:yaml.org,2002:merge"
_BoundedLoader.add_implicit_resolver(_MERGE, re.compile(r"\A<<\Z"), ["<"])
_CORE_SCHEMA = tuple(
    (f"tag:yaml.org,2002:{tag}", re.compile(rf"\A{pattern}\Z"), first) for tag, pattern, first in (
        ("null", r"(?:~|null|Null|NULL|)", ["~", "n", "N", ""]),
        ("bool", r"(?:true|True|TRUE|false|False|FALSE)", list("tTfF")),
        ("int", r"(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)", list("-+0123456789")),
        ("float", r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                  r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))", list("-+0123456789."))))
for _tag, _pattern, _first in _CORE_SCHEMA:
    _BoundedLoader.add_implicit_resolver(_tag, _pattern, _first)
_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_core_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_core_float)


class YAMLDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that also quotes every string YAML 1.2's core
    schema would read as another type (``'0o17'``, ``'1e6'``), so that what
    plume_jax writes reads back the same through :func:`load_yaml_bounded`
    (and through PyYAML's own YAML 1.1 reader)."""


for _tag, _pattern, _first in _CORE_SCHEMA:
    YAMLDumper.add_implicit_resolver(_tag, _pattern, _first)


def _expanded_size(root: yaml.Node, max_nodes: int, max_depth: int) -> str | None:
    """Walk a composed node graph without recursion, each shared node once,
    and return why it is refused (``None``: within the limits): more than
    ``max_nodes`` nodes or ``max_depth`` levels once aliases are expanded,
    or an alias that contains itself."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            on_path.discard(key)
            if size[key] > max_nodes:
                return f"at most {max_nodes:,} nodes once aliases are expanded"
            if depth[key] > max_depth:
                return f"at most {max_depth} levels of nesting once aliases are expanded"
            continue
        if key in size:
            continue
        if key in on_path:
            return "no alias that contains itself (a recursive structure)"
        on_path.add(key)
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) not in size:
                if id(kid) in on_path:
                    return "no alias that contains itself (a recursive structure)"
                stack.append((kid, False))
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml_bounded(text: str, parameter: str, *, value: Any = _TEXT, what: str = "YAML",
                      max_bytes: int = MAX_CONFIG_BYTES, max_depth: int = MAX_DEPTH,
                      max_nodes: int = MAX_YAML_NODES) -> Any:
    """The YAML document ``text`` read with YAML 1.2's core schema (see
    :class:`_BoundedLoader`: ``on`` and ``1:25:20`` are text), refused
    (before anything is built) when the text is over ``max_bytes``, nests
    deeper than ``max_depth`` or holds more than ``max_nodes`` nodes once
    aliases are expanded, and refused when a mapping holds a key twice.

    Errors name ``parameter`` and quote ``value`` (default: the start of
    the text); ``what`` (``"YAML"``, ``"a YAML file"``) starts the
    description of what is allowed.

    Raises:
        ValidationError: too big, too deep, too many nodes (an alias bomb), a
            recursive alias, a key given twice in one mapping (naming the key
            and both lines), not YAML, or a tag that builds Python objects.
    """
    value = _excerpt(text) if value is _TEXT else value
    _check_text(text, max_bytes, parameter, value, what)
    loader = _BoundedLoader(text)
    loader.max_depth = max_depth
    try:
        try:
            node = loader.get_single_node()
        except _TooDeep:
            raise ValidationError.for_parameter(
                parameter, value, f"{what} nested at most {max_depth} levels deep") from None
        if node is None:
            return None
        problem = _expanded_size(node, max_nodes, max_depth)
        if problem:
            raise ValidationError.for_parameter(parameter, value, f"{what} with {problem}")
        return loader.construct_document(node)
    except ValidationError:
        raise
    except _DuplicateKey as twice:
        raise ValidationError.for_parameter(
            parameter, value, f"{what} with each key once in a mapping (the key "
            f"{bounded_repr(twice.key, 80)} is on line {twice.first} and again on line "
            f"{twice.again}" + ("; merge several mappings with one <<: [*a, *b]"
                                if twice.key == "<<" else "") + ")") from None
    except yaml.YAMLError as error:
        raise ValidationError.for_parameter(
            parameter, value, f"{what} ({' '.join(str(error).split())[:300]}; tags that build "
            "Python objects (!!python/...) are refused)") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as error:
        raise ValidationError.for_parameter(
            parameter, value, f"{what} whose values can be read ({type(error).__name__}: "
            f"{' '.join(str(error).split())[:200]})") from None
    finally:
        loader.dispose()


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in a JSON text, strings left out
    (an upper bound for malformed text; never recursive)."""
    bare = _JSON_STRING.sub("", text)
    codes = np.frombuffer(bare.encode("utf-8", "surrogatepass"), np.uint8)
    steps = (np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
             - np.isin(codes, (ord("]"), ord("}"))).astype(np.int64))
    return int(np.cumsum(steps).max(initial=0))


def load_json_bounded(text: str | bytes, parameter: str, *, value: Any = _TEXT,
                      what: str = "JSON", max_bytes: int = MAX_CONFIG_BYTES,
                      max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(text)``, refused when the text is over ``max_bytes`` or
    nests deeper than ``max_depth`` (measured before parsing). Errors name
    ``parameter`` and quote ``value`` (default: the start of the text).

    Raises:
        ValidationError: too big, too deep or not JSON.
    """
    if isinstance(text, (bytes, bytearray)):
        if value is _TEXT:
            value = bytes(text[:64])
        if len(text) > max_bytes:
            raise ValidationError.for_parameter(
                parameter, value, f"{what} of at most {describe_bytes(max_bytes)}")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValidationError.for_parameter(
                parameter, value, f"{what} in UTF-8 ({error.reason})") from None
    value = _excerpt(text) if value is _TEXT else value
    _check_text(text, max_bytes, parameter, value, what)
    depth = json_depth(text)
    if depth > max_depth:
        raise ValidationError.for_parameter(
            parameter, value, f"{what} nested at most {max_depth} levels deep (this is {depth})")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValidationError.for_parameter(
            parameter, value, f"{what} nested at most {max_depth} levels deep") from None
    except ValueError as error:
        raise ValidationError.for_parameter(
            parameter, value, f"{what} ({' '.join(str(error).split())[:200]})") from None


def load_yaml_file(path: str | os.PathLike, parameter: str, *,
                   max_bytes: int = MAX_CONFIG_BYTES, max_depth: int = MAX_DEPTH,
                   max_nodes: int = MAX_YAML_NODES) -> Any:
    """:func:`read_text_bounded` then :func:`load_yaml_bounded`; errors
    name ``parameter`` and quote the path."""
    text = read_text_bounded(path, max_bytes, parameter, "a YAML file: a readable text file")
    return load_yaml_bounded(text, parameter, value=os.fspath(path), what="a YAML file",
                             max_bytes=max_bytes, max_depth=max_depth, max_nodes=max_nodes)


def load_json_file(path: str | os.PathLike, parameter: str, *,
                   max_bytes: int = MAX_CONFIG_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`read_text_bounded` then :func:`load_json_bounded`; errors
    name ``parameter`` and quote the path."""
    text = read_text_bounded(path, max_bytes, parameter, "a JSON file: a readable text file")
    return load_json_bounded(text, parameter, value=os.fspath(path), what="a JSON file",
                             max_bytes=max_bytes, max_depth=max_depth)


def load_npz_bounded(path: str | os.PathLike, parameter: str, *, max_bytes: int,
                     max_members: int = 1024) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` archive ``path`` (member name without
    ``.npy`` -> array), read without pickle and with bounds: at most
    ``max_members`` members and ``max_bytes`` of array data in all, each
    member's header (dtype: numbers, booleans or fixed-size strings, never
    objects; declared shape) checked before its data is decompressed, and
    its unpacked size checked against what the header declares.

    Raises:
        ValidationError: naming ``parameter`` and the path, for a missing
            file, a folder, a file that is not such an archive, a member that
            is truncated, damaged, of object dtype or over the bounds.
    """
    name = os.fspath(path)
    allowed = f"a .npz archive of numeric arrays (at most {describe_bytes(max_bytes)})"

    def refuse(detail: str) -> ValidationError:
        return ValidationError.for_parameter(parameter, name, f"{allowed}; {detail}")

    try:
        info = os.stat(name)
    except (OSError, ValueError) as error:
        raise refuse(f"{getattr(error, 'strerror', None) or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise refuse("this is a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file")
    budget = max_bytes
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(name) as archive:
            members = archive.infolist()
            if len(members) > max_members:
                raise refuse(f"it has {len(members)} members, at most {max_members} allowed")
            for member in members:
                key = member.filename[:-4] if member.filename.endswith(".npy") \
                    else member.filename
                with archive.open(member) as fp:
                    shape, _, dtype = read_npy_header(fp)
                    header = fp.tell()
                if dtype.hasobject or dtype.kind not in "biufcUS":
                    raise refuse(f"member {key!r} has dtype {dtype}")
                size = math.prod(shape) * dtype.itemsize
                if size > budget:
                    raise refuse(f"member {key!r} declares {shape} of {dtype} "
                                 f"({describe_bytes(size)}), over what is left of the bound")
                if not header + size <= member.file_size <= header + size + 64:
                    raise refuse(f"member {key!r} unpacks to {member.file_size} bytes, its "
                                 f"header declares {header + size}")
                budget -= size
                with archive.open(member) as fp:
                    out[key] = np.lib.format.read_array(fp, allow_pickle=False)
    except ValidationError:
        raise
    except Exception as error:  # not a zip, truncated, bad CRC or zlib stream, bad header
        raise refuse(f"it cannot be read ({type(error).__name__}: "
                     f"{' '.join(str(error).split())[:200]})") from None
    return out


def read_npy_header(fp: Any, max_header_size: int = 10_000
                    ) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` from the ``.npy`` header at ``fp``'s
    position (numpy's parser, versions 1-3, header at most
    ``max_header_size`` bytes). Raises ``ValueError`` for anything else."""
    version = np.lib.format.read_magic(fp)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(
            fp, max_header_size=max_header_size)
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(
            fp, max_header_size=max_header_size)
    else:
        raise ValueError(f"unknown .npy format version {version}")
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"bad shape {shape!r}")
    return tuple(shape), bool(fortran), dtype


def _excerpt(text: str, limit: int = 80) -> str:
    """The start of ``text``, for an error message (the whole text never)."""
    if not isinstance(text, str):
        return text
    return text if len(text) <= limit else text[:limit] + "..."
