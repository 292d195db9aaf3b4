"""Helpers shared by the ``plume-jax`` subcommands: ``--set NAME=VALUE``
parsing and the default output folder."""

from __future__ import annotations

import pathlib
from typing import Any

from plume_jax.errors import ValidationError


def parse_overrides(items: list[str], option: str = "--set") -> dict[str, Any]:
    """``["sigma=10", "grid_size=[64, 64]"]`` -> dict, values parsed as YAML
    (``yaml.safe_load``: a malformed value or a ``!!python/...`` tag is a
    ``ValidationError`` naming ``option``). A name given twice keeps the
    last value."""
    from plume_jax.train.config import parse_yaml_value

    out = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise ValidationError.for_parameter(option, item, "NAME=VALUE (VALUE in YAML syntax)")
        out[name.strip()] = parse_yaml_value(raw, f"{option} {name.strip()}")
    return out


def default_out(config: str) -> str:
    """``runs/<config file stem>``."""
    return str(pathlib.Path("runs") / pathlib.Path(config).stem)
