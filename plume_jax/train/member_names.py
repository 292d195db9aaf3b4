"""Sweep members' folder names (``sigma-10.0_seed-0``) and the one
migration from the names older sweeps gave them (``sigma=10.0,seed=0``:
``=`` and ``,`` need quoting in a shell), in this module's last section;
nothing else in the package knows an older name.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Mapping
from typing import Any, Protocol

from plume_jax.core.errors import StateError, ValidationError


class SweepMembers(Protocol):
    """What this module and the sweep's report read of a sweep (a
    :class:`plume_jax.train.sweep.SweepConfig`, which imports them)."""

    @property
    def members(self) -> list[dict[str, Any]]: ...
    @property
    def configs(self) -> list[Any]: ...
    @property
    def names(self) -> list[str]: ...


def short_key(key: str) -> str:
    """``run.seed`` -> ``seed``; ``env.overrides.reward.scale`` and
    ``env.reward.scale`` -> ``reward.scale``."""
    parts = key.split(".")
    if parts[0] == "env" and len(parts) > 1:
        parts = parts[2:] if parts[1] == "overrides" and len(parts) > 2 else parts[1:]
    elif len(parts) > 1:
        parts = parts[1:]
    return ".".join(parts)


@dataclasses.dataclass(frozen=True)
class _NameStyle:
    """How :func:`member_names` spells a member's grid values."""

    key_value: str      # between a key and its value
    entries: str        # between two grid entries
    mapping: str        # between the items of a mapping value
    unsafe: re.Pattern  # characters replaced by ``_``
    strip: str          # leading characters removed


#: Shell-safe folder names (``sigma-10.0_seed-0``).
SHELL_SAFE = _NameStyle("-", "_", "_", re.compile(r"[^A-Za-z0-9._-]+"), ".-")


def _value_text(value: Any, style: _NameStyle) -> str:
    if isinstance(value, (list, tuple)):
        return "x".join(_value_text(v, style) for v in value)
    if isinstance(value, Mapping):
        return style.mapping.join(f"{k}{style.key_value}{_value_text(v, style)}"
                                  for k, v in value.items())
    return str(value)


def member_names(members: list[dict[str, Any]], max_length: int = 100,
                 style: _NameStyle = SHELL_SAFE) -> list[str]:
    """Folder names from the grid values (``sigma-10.0_seed-0``): letters,
    digits and ``-_.`` only (no shell quoting), never starting with ``-`` or
    ``.``, at most ``max_length`` characters, and unique: a name that clashes
    with an earlier member's (also only in case, or in characters replaced by
    ``_``) gets ``-<member index>``. ``style=LEGACY``: older sweeps' names."""
    names: list[str] = []
    seen: set[str] = set()
    for i, assignment in enumerate(members):
        short = {k: short_key(k) for k in assignment}
        if len(set(short.values())) < len(short):  # two keys with one short name
            short = {k: k for k in assignment}
        parts = [style.unsafe.sub("_", f"{short[k]}{style.key_value}{_value_text(v, style)}")
                 for k, v in assignment.items()]
        name = style.entries.join(parts).lstrip(style.strip) or f"member{i}"
        name = name[:max_length]
        clash, extra = name, 0
        while name.casefold() in seen:  # -i, then -i-1, -i-2, ... until it is new
            suffix = f"-{i}" + (f"-{extra}" if extra else "")
            name, extra = f"{clash[:max_length - max(8, len(suffix))]}{suffix}", extra + 1
        seen.add(name.casefold())
        names.append(name)
    return names


def member_label(assignment: dict[str, Any]) -> str:
    """``sigma=10.0, seed=0``."""
    return ", ".join(f"{short_key(k)}={v}" for k, v in assignment.items())


# ------------------------------------------------------------------ older names
#: The names older sweeps gave their members (``sigma=10.0,seed=0``).
LEGACY = _NameStyle("=", ",", "+", re.compile(r"[^A-Za-z0-9._=+-]+"), ".")


def legacy_member_names(members: list[dict[str, Any]]) -> list[str]:
    """The folder names older sweeps gave their members (:data:`LEGACY`)."""
    return member_names(members, style=LEGACY)


def member_folders(out: pathlib.Path, sweep: SweepMembers, *, resume: bool = False
                   ) -> list[pathlib.Path]:
    """Each member's run folder in the sweep folder ``out``: ``members/<name>``,
    or, when ``resume`` and only its older name's folder exists, that one
    (``ValidationError`` when both exist)."""
    folders = []
    old_names = legacy_member_names(sweep.members) if resume else sweep.names
    for name, old in zip(sweep.names, old_names):
        new_dir, old_dir = out / "members" / name, out / "members" / old
        if old == name or not old_dir.is_dir():
            folders.append(new_dir)
        elif new_dir.exists():
            raise ValidationError.for_parameter(
                "--resume", str(out),
                f"one folder per member: members/{old} (the member's older name) and "
                f"members/{name} (its name now) are both there; move the one that is not "
                "this sweep's member out of the sweep folder")
        else:
            folders.append(old_dir)
    return folders


def rename_legacy_member_folders(out: pathlib.Path, sweep: SweepMembers,
                                 locks: Mapping[pathlib.Path, Any] | None = None
                                 ) -> list[tuple[pathlib.Path, pathlib.Path]]:
    """``sweep --resume``: rename each member folder that has only its older
    name to its name now, one atomic ``rename`` each; returns the (older, new)
    folders renamed. If one fails, those renamed so far are renamed back
    before the ``StateError``, so the sweep is as it was; a kill between two
    renames leaves both kinds of name, which the next resume finishes.
    ``locks`` (the member folders' locks by folder) move with their folders."""
    moves = [(folder, out / "members" / name)
             for folder, name in zip(member_folders(out, sweep, resume=True), sweep.names)
             if folder.name != name]
    for k, (old, new) in enumerate(moves):
        try:
            old.rename(new)
        except OSError as exc:
            for back, renamed in reversed(moves[:k]):
                renamed.rename(back)
            raise StateError(
                f"sweep --resume: the member folder {old} could not be renamed to {new.name} "
                f"({exc}); the member folders are as they were") from None
    for old, new in moves:
        lock = (locks or {}).get(old)
        if lock is not None:  # the flock follows the folder; its holder file moved with it
            lock.folder, lock.path = new, new / lock.path.name
    return moves


def checkpoint_member_names(meta: Mapping[str, Any], sweep: SweepMembers, members: list[int]
                            ) -> list[str]:
    """The names a program's checkpoint (its ``meta``) gives the sweep's
    ``members`` (indices): their older names when an older sweep wrote it,
    else their names now."""
    names = [sweep.names[i] for i in members]
    every_old = legacy_member_names(sweep.members)
    old = [every_old[i] for i in members]
    return old if old != names and meta.get("members") == old else names


def row_names(sweep: SweepMembers) -> list[tuple[str, ...]]:
    """Each member's names in the sweep's ``metrics.jsonl`` rows: now, and
    as an older sweep wrote them."""
    return list(zip(sweep.names, legacy_member_names(sweep.members)))
