"""The dataset registry: recorded and simulated plumes, their facts and
their file layout (no JAX; imports layer 0 only, so the movie plume of
layer 1 resolves ``data_id`` through it).

Built-in entries (:data:`BUILTIN`) are the public plumes plume_nav_sim's
data zoo lists; their facts (URLs, DOIs, licences, citations, approximate
sizes, MD5 checksums, array names and axis order) were taken from that
registry and its ingest code. No SHA-256 is published for them, so their
checksum is the MD5 plume_nav_sim pins (integrity against corruption, not
against a hostile mirror).

User entries come from a YAML catalog (``--catalog FILE`` or
``PLUME_JAX_DATA_CATALOG``) read through :mod:`plume_jax.files.safe_io`::

    datasets:
      - id: my_plif
        title: My PLIF recording
        url: http://127.0.0.1:8000/plif.h5
        filename: plif.h5
        size_bytes: 4096
        checksum: sha256:<64 hex digits>
        licence: CC-BY-4.0
        layout: {dataset: frames, axes: tyx, flip_y: true, fps: 15.0}
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from plume_jax.core.errors import ValidationError

#: Catalog files are YAML of at most this many bytes.
MAX_CATALOG_BYTES = 1 << 20

# matched whole (``fullmatch``): ``$`` would also accept a trailing newline
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_CHECKSUM = re.compile(r"sha256:[0-9a-f]{64}|md5:[0-9a-f]{32}")
#: What a checksum may be, for error messages.
CHECKSUM_FORMS = "'sha256:<64 hex digits>' or 'md5:<32 hex digits>'"
_AXES = ("tyx", "txy", "yxt", "xyt")
#: Frame rates a catalog may give (the movie plume's own range).
_FPS_RANGE = (1e-6, 1e6)

#: Fields of ``layout`` (how the array is stored), all optional but ``dataset``.
LAYOUT_FIELDS = ("dataset", "axes", "flip_y", "fps", "pixel_size_mm", "source_px",
                 "mean_flow_m_s", "frames", "shape", "notes")


@dataclasses.dataclass(frozen=True)
class Dataset:
    """One registered dataset: where it is, what it is, how it is stored.

    Attributes:
        id: the name used on the command line (letters, digits, ``_ . -``).
        title, description: what it is.
        url: where it is downloaded from (``PLUME_JAX_DATA_MIRROR`` replaces
            everything up to the file name).
        filename: its name in the cache (no path separators, no ``..``).
        size_bytes: its size (approximate when ``size_exact`` is False).
        checksum: ``"sha256:<hex>"`` or ``"md5:<hex>"``, or ``None`` when
            unknown (then a download needs an explicit checksum or
            ``allow_unverified``).
        doi, licence, citation, paper_doi: provenance.
        layout: ``dataset`` (array name), ``axes`` (stored axis order of
            ``t``, ``y``, ``x``), ``flip_y``, ``fps``, ``pixel_size_mm``,
            ``source_px`` (``[x, y]`` pixels), ``mean_flow_m_s`` (toward
            increasing stored x), ``frames``,
            ``shape``, ``notes``.
        origin: ``"builtin"`` or the catalog file it came from.
    """

    id: str
    title: str
    url: str
    filename: str
    size_bytes: int
    checksum: str | None
    licence: str
    citation: str
    doi: str | None = None
    paper_doi: str | None = None
    description: str = ""
    size_exact: bool = False
    layout: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    origin: str = "builtin"

    @property
    def checksum_algorithm(self) -> str | None:
        return None if self.checksum is None else self.checksum.split(":", 1)[0]

    def movie_facts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """What the movie plume takes from this entry when it plays it
        (``plume={"type": "movie", "data_id": ...}``).

        Returns:
            ``(settings, metadata)``: ``settings`` holds the movie plume's
            ``dataset``, ``layout`` (from ``axes``) and ``flip_y`` where the
            layout gives them; ``metadata`` the file-metadata keys the plume
            reads (``fps``; ``source`` in pixels ``[x, y]`` of the stored
            array; ``wind_velocity`` in pixels per second, from
            ``mean_flow_m_s`` and ``pixel_size_mm``, along +x: the registry
            records the mean flow as a speed toward increasing stored x).
        """
        layout = self.layout
        settings = {name: layout[key] for name, key in
                    (("dataset", "dataset"), ("layout", "axes"), ("flip_y", "flip_y"))
                    if layout.get(key) is not None}
        metadata: dict[str, Any] = {}
        if layout.get("fps") is not None:
            metadata["fps"] = layout["fps"]
        if layout.get("source_px") is not None:
            metadata["source"] = layout["source_px"]
        flow, pixel = layout.get("mean_flow_m_s"), layout.get("pixel_size_mm")
        if flow is not None and pixel is not None and _positive(flow) and _positive(pixel):
            metadata["wind_velocity"] = [float(flow) * 1000.0 / float(pixel), 0.0]
        return settings, metadata

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["layout"] = dict(self.layout)
        return out


_CRIMALDI = ("Connor, E. G., McHugh, M. K. & Crimaldi, J. P. (2018). Quantification of "
             "airborne odor plumes using planar laser-induced fluorescence. Experiments in "
             "Fluids 59, 137. https://doi.org/10.1007/s00348-018-2591-3")
_RIGOLLI = ("Rigolli, N., Reddy, G., Seminara, A. & Vergassola, M. (2022). Alternation "
            "emerges as a multi-modal strategy for turbulent odor navigation. eLife 11, "
            "e76989. https://doi.org/10.7554/eLife.76989")
_DEMIR = ("Demir, M., Kadakia, N., Anderson, H. D., Clark, D. A. & Emonet, T. (2020). "
          "Walking Drosophila navigate complex plumes using stochastic decisions biased by "
          "the timing of odor encounters. eLife 9, e57524. https://doi.org/10.7554/eLife.57524")
_EMONET_URL = "https://datadryad.org/api/v2/files/852661/download"
_EMONET_LAYOUT: dict[str, Any] = {
    "dataset": "frames", "axes": "txy", "flip_y": False, "fps": 90.0,
    "pixel_size_mm": 300.0 / 2048.0, "shape": "2048 x 1200 pixels (300 x 180 mm arena)",
    "notes": "smoke intensity (a proxy for concentration) from a walking-arena wind tunnel; "
             "each frame is stored (x, y); subtract a background before use"}


def _rigolli(level: str, name: str, md5: str) -> Dataset:
    return Dataset(
        id=f"rigolli_dns_{level}_v1",
        title=f"Rigolli et al. 2022 DNS turbulent plume, {name}",
        description=f"Odour concentration in a horizontal plane ({name}) of a direct numerical "
                    "simulation of a turbulent channel flow with a point source; MATLAB v7.3 "
                    "(HDF5). The grid coordinates are in coordinates.mat (X, Y) in the same "
                    "record.",
        url=f"https://zenodo.org/records/15469831/files/{level}_data.mat?download=1",
        filename=f"{level}_data.mat", size_bytes=6_800_000_000, checksum=f"md5:{md5}",
        doi="10.5281/zenodo.15469831", paper_doi="10.7554/eLife.76989",
        licence="CC-BY-4.0", citation=_RIGOLLI,
        layout={"dataset": level, "axes": "xyt",
                "notes": "MATLAB stores (x, y, t); axis order is confirmed against the "
                         "lengths of X and Y in coordinates.mat"})


#: The built-in entries, by id.
#: The Emonet-lab file; plume_nav_sim registers it twice (full and tail-trimmed).
_EMONET = Dataset(
    id="emonet_smoke_v1",
    title="Emonet lab smoke plume video (Demir et al. 2020), full",
    description="90 Hz video of a smoke plume in a walking-arena wind tunnel, 300 x 180 mm; "
                "MATLAB v7.3 (HDF5). Very large download.",
    url=_EMONET_URL, filename="emonet_smoke.mat", size_bytes=29_000_000_000,
    checksum="md5:6f87df24e4a5146c49c56979aca0fd78",
    doi="10.5061/dryad.4j0zpc87z", paper_doi="10.7554/eLife.57524",
    licence="CC0-1.0", citation=_DEMIR, layout=dict(_EMONET_LAYOUT))

BUILTIN: dict[str, Dataset] = {d.id: d for d in (
    Dataset(
        id="colorado_jet_v1",
        title="CU Boulder PLIF odour plume (near-bed release, 10 cm/s)",
        description="Acetone plume measured by planar laser-induced fluorescence, 150 frames "
                    "at 15 Hz over a 406 x 216 pixel field (about 300 x 160 mm), isokinetic "
                    "near-bed release at 0.10 m/s. Dryad dataset mirrored on Zenodo 4971113.",
        url="https://zenodo.org/api/records/4971113/files/10302017_10cms_bounded_2.h5/content",
        filename="10302017_10cms_bounded_2.h5", size_bytes=46_000_000,
        checksum="md5:cf3cadd8a9b53c2a3f6d3aca37f71a62",
        doi="10.5061/dryad.g27mq71", paper_doi="10.1007/s00348-018-2591-3",
        licence="CC-BY-4.0", citation=_CRIMALDI,
        layout={"dataset": "dataset2", "axes": "tyx", "fps": 15.0, "frames": 150,
                "shape": "406 x 216 pixels", "pixel_size_mm": 0.74,
                "source_px": [0, 107], "mean_flow_m_s": 0.10,
                "notes": "source at the upstream edge (x = 0), mid-height; pixel size "
                         "approximate (about 300 mm over 406 pixels)"}),
    _rigolli("nose", "nose level (about 50 cm)", "ce390644cf1b075fac06360a6dbe1881"),
    _rigolli("ground", "ground level (z = 0)", "5e674b6a30890f2de0dc720809baa936"),
    _EMONET,
    dataclasses.replace(
        _EMONET, id="emonet_smoke_trimmed_v1",
        title="Emonet lab smoke plume video (Demir et al. 2020), tail-trimmed",
        description="The same file as emonet_smoke_v1; plume_nav_sim drops the faint frames at "
                    "the end when it ingests it. Very large download.",
        layout={**_EMONET_LAYOUT, "notes": _EMONET_LAYOUT["notes"]
                + "; trim the low-intensity tail (frame_range)"}),
)}


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def check_name(value: Any, parameter: str, what: str) -> str:
    """A dataset id or file name: a plain name, no path separators, no ``..``.

    Raises:
        ValidationError: naming ``parameter``.
    """
    if (not isinstance(value, str) or not _ID.fullmatch(value) or ".." in value
            or "/" in value or "\\" in value or os.sep in value):
        raise ValidationError.for_parameter(
            parameter, value, f"{what}: 1-64 letters, digits, '_', '.', '-', starting with a "
            "letter or digit, without path separators or '..'")
    return value


def check_checksum(value: Any, parameter: str, unknown: str = "") -> str:
    """A checksum, ``"sha256:<64 hex>"`` or ``"md5:<32 hex>"`` (either case,
    matched whole: no trailing newline), returned in lower case.

    Raises:
        ValidationError: naming ``parameter``; ``unknown`` is added to what
            is allowed (e.g. how to say "no checksum").
    """
    if not isinstance(value, str) or not _CHECKSUM.fullmatch(value.lower()):
        raise ValidationError.for_parameter(parameter, value, CHECKSUM_FORMS + unknown)
    return value.lower()


def check_url(value: Any, parameter: str) -> str:
    """An ``http(s)`` URL with a host, without spaces or control characters
    (a newline in a catalog's URL would otherwise be dropped silently by
    the URL parser, or crash the HTTP client).

    Raises:
        ValidationError: naming ``parameter``.
    """
    allowed = "an http(s) URL with a host, without spaces or control characters"
    if not isinstance(value, str) or any(ord(c) <= 32 or ord(c) == 127 for c in value):
        raise ValidationError.for_parameter(parameter, value, allowed)
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018  (parsing the port refuses one out of range)
    except ValueError as error:
        raise ValidationError.for_parameter(parameter, value, f"{allowed} ({error})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValidationError.for_parameter(parameter, value, allowed)
    return value


def _number(value: Any, parameter: str, low: float, high: float | None = None,
            low_inclusive: bool = True) -> float:
    """A finite real number (not a bool, not a string) in ``[low, high]``
    (``(low, high]`` unless ``low_inclusive``), as a float; an integer too
    large for a float is refused, not an ``OverflowError``."""
    interval = (f"{'[' if low_inclusive else '('}{low:g}, "
                f"{'inf)' if high is None else f'{high:g}]'}")
    allowed = f"a finite number in {interval}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError.for_parameter(parameter, value, allowed)
    try:
        v = float(value)
    except OverflowError:
        raise ValidationError.for_parameter(parameter, value,
                                            allowed + " (this integer is too large for a "
                                            "float)") from None
    if not math.isfinite(v) or v < low or (v == low and not low_inclusive) or (
            high is not None and v > high):
        raise ValidationError.for_parameter(parameter, value, allowed)
    return v


def _text(value: Any, parameter: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValidationError.for_parameter(parameter, value,
                                            "a string" + (" or null" if optional else ""))
    return value


def _layout(layout: Any, where: str) -> dict[str, Any]:
    """A catalog entry's ``layout``, each field checked for its type and
    range (a string where a number belongs is refused, never dropped)."""
    if layout is None:
        return {}
    if not isinstance(layout, Mapping) or not all(isinstance(k, str) for k in layout) \
            or set(layout) - set(LAYOUT_FIELDS):
        raise ValidationError.for_parameter(where, layout,
                                            f"a mapping with keys among {list(LAYOUT_FIELDS)}")
    out = dict(layout)
    for key, value in layout.items():
        name = f"{where}.{key}"
        if value is None:
            continue
        if key == "axes":
            if not isinstance(value, str) or value not in _AXES:
                raise ValidationError.for_parameter(name, value, f"one of {list(_AXES)}")
        elif key == "dataset":
            if not isinstance(value, str) or not value.strip():
                raise ValidationError.for_parameter(name, value,
                                                    "the array's name in the file (a string)")
        elif key in ("shape", "notes"):
            _text(value, name)
        elif key == "flip_y":
            if not isinstance(value, bool):
                raise ValidationError.for_parameter(name, value, "true or false")
        elif key == "fps":
            out[key] = _number(value, name, *_FPS_RANGE)
        elif key == "pixel_size_mm":
            out[key] = _number(value, name, 0.0, None, low_inclusive=False)
        elif key == "mean_flow_m_s":
            out[key] = _number(value, name, 0.0)
        elif key == "frames":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError.for_parameter(name, value, "a positive integer")
        elif key == "source_px":
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise ValidationError.for_parameter(name, value,
                                                    "[x, y]: two numbers >= 0 (pixels)")
            out[key] = [_number(v, f"{name}[{j}]", 0.0) for j, v in enumerate(value)]
    return out


def _entry(raw: Any, source: str, i: int) -> Dataset:
    where = f"{source}: datasets[{i}]"
    if not isinstance(raw, Mapping):
        raise ValidationError.for_parameter(where, raw, "a mapping of dataset fields")
    fields = {f.name for f in dataclasses.fields(Dataset)} - {"origin"}
    unknown = sorted(set(map(str, raw)) - fields)
    if unknown:
        raise ValidationError.for_parameter(f"{where}.{unknown[0]}", raw.get(unknown[0]),
                                            f"one of the fields {sorted(fields)}")
    for name in ("id", "url", "filename", "size_bytes"):
        if name not in raw:
            raise ValidationError.for_parameter(f"{where}.{name}", None, "a value (required)")
    check_name(raw["id"], f"{where}.id", "a dataset id")
    check_name(raw["filename"], f"{where}.filename", "a file name")
    check_url(raw["url"], f"{where}.url")
    size = raw["size_bytes"]
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValidationError.for_parameter(f"{where}.size_bytes", size, "a positive integer")
    size_exact = raw.get("size_exact", True)
    if not isinstance(size_exact, bool):
        raise ValidationError.for_parameter(f"{where}.size_exact", size_exact,
                                            "true or false (whether size_bytes is exact)")
    checksum = raw.get("checksum")
    if checksum is not None:
        checksum = check_checksum(checksum, f"{where}.checksum", " or null (unknown: downloads "
                                  "then need --checksum or --allow-unverified)")
    text = {k: _text(raw.get(k, ""), f"{where}.{k}")
            for k in ("title", "licence", "citation", "description")}
    dois = {k: _text(raw.get(k), f"{where}.{k}", optional=True) for k in ("doi", "paper_doi")}
    return Dataset(
        id=raw["id"], url=raw["url"], filename=raw["filename"], size_bytes=size,
        checksum=checksum,
        title=text["title"] or raw["id"], licence=text["licence"] or "unknown",
        citation=text["citation"] or "", description=text["description"] or "",
        doi=dois["doi"], paper_doi=dois["paper_doi"],
        size_exact=size_exact, layout=_layout(raw.get("layout"), f"{where}.layout"),
        origin=source)


def load_catalog(path: str | os.PathLike) -> dict[str, Dataset]:
    """The entries of a YAML catalog file (``{"datasets": [...]}``), checked.

    Raises:
        ValidationError: an unreadable, oversized or malformed file, a bad
            field (named), an id or file name with a path separator or
            ``..``, or an id given twice.
    """
    from plume_jax.files.safe_io import load_yaml_file

    source = os.fspath(path)
    raw = load_yaml_file(path, "--catalog", max_bytes=MAX_CATALOG_BYTES)
    if not isinstance(raw, Mapping) or not isinstance(raw.get("datasets"), list):
        raise ValidationError.for_parameter("--catalog", source,
                                            "a YAML file with a list under 'datasets'")
    out: dict[str, Dataset] = {}
    for i, item in enumerate(raw["datasets"]):
        entry = _entry(item, source, i)
        if entry.id in out:
            raise ValidationError.for_parameter(f"{source}: datasets[{i}].id", entry.id,
                                                "an id not used before in the catalog")
        out[entry.id] = entry
    return out


def registry(catalog: str | os.PathLike | None = None) -> dict[str, Dataset]:
    """Built-in entries plus those of ``catalog`` (default:
    ``$PLUME_JAX_DATA_CATALOG`` when set); a catalog entry with a built-in's
    id replaces it."""
    catalog = catalog or os.environ.get("PLUME_JAX_DATA_CATALOG") or None
    out = dict(BUILTIN)
    if catalog:
        out.update(load_catalog(catalog))
    return out


def get(dataset_id: str, catalog: str | os.PathLike | None = None) -> Dataset:
    """The entry ``dataset_id``.

    Raises:
        ValidationError: an unknown id (listing the known ones).
    """
    check_name(dataset_id, "dataset id", "a dataset id")
    entries = registry(catalog)
    if dataset_id not in entries:
        raise ValidationError.for_parameter("dataset id", dataset_id,
                                            f"one of {sorted(entries)} (plume-jax data list)")
    return entries[dataset_id]
