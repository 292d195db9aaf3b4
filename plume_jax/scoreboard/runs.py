"""Bench run folders and the explicit step that publishes one.

``plume-jax bench`` writes into a folder of its own (``--out``, by default
``logs/bench/<UTC date-time>``), never into the published board:

- ``scoreboard.json``: the run's record (:mod:`~plume_jax.scoreboard.report`),
  written after each family, so a stopped run keeps the families it
  finished;
- ``scoreboard.md`` and ``scoreboard/``: the run's page and figures;
- ``run.json``: what was asked (families, protocol, agents left out or
  added, a partial ``--agent`` rerun and the sections it merged into) and
  which families finished.

``plume-jax bench --publish RUN_DIR`` (:func:`publish`) copies the
finished families' sections into the published record
(``benchmarks/scoreboard.json``), their figures into ``docs/scoreboard/``,
and renders ``docs/scoreboard.md`` from the whole record. It checks
everything before it writes anything, and refuses a run made in quick mode
or with ``--episodes`` (unless ``allow_quick``; a fixed-start family's
section must have run all its starts), and a partial one — stopped
before every family finished, without the baselines, the zoo agents or the
robustness table, with agents of one's own, or an ``--agent`` rerun whose
published sections changed since it started — unless ``force``. A
family's section is replaced whole, so a run that does not measure again
everything its published section holds (rows of other agents, robustness
cells, start-cell maps, zoo recipe rows) is refused, naming what would go,
unless ``drop_unmeasured`` (``--drop-unmeasured``) says to remove it.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from plume_jax.core.errors import ValidationError

RUN_FORMAT = "plume_jax.bench_run/1"
#: The files of a run folder.
RECORD_NAME, MARKDOWN_NAME, FIGURES_NAME, RUN_NAME = (
    "scoreboard.json", "scoreboard.md", "scoreboard", "run.json")
#: Where runs go by default (under the current folder), as RL Zoo's logs/.
RUNS_ROOT = pathlib.Path("logs") / "bench"


def now_text() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def default_out_dir(root: str | os.PathLike = RUNS_ROOT) -> pathlib.Path:
    """``<root>/<UTC date-time>`` (``-2``, ``-3``, ... added when taken)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    path = pathlib.Path(root) / stamp
    n = 1
    while path.exists():
        n += 1
        path = pathlib.Path(root) / f"{stamp}-{n}"
    return path


def check_new_run_dir(path: str | os.PathLike) -> None:
    """A run folder must be new or empty: not a bench run already (a run's
    record would mix with another's), nor a folder whose files a run's
    ``scoreboard.md`` / ``scoreboard.json`` / ``scoreboard/`` would replace
    (``--out docs`` would have replaced the published board).

    Raises:
        ValidationError: (parameter ``--out``) a file, or a folder that is not empty.
    """
    folder = pathlib.Path(path)
    if (folder / RUN_NAME).exists():
        raise ValidationError.for_parameter(
            "--out", os.fspath(path), "a new folder for this run (this one holds a bench run "
            "already: publish it with `plume-jax bench --publish`, or pick another --out)")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValidationError.for_parameter(
            "--out", os.fspath(path), "a new or empty folder for this run (a run writes "
            "scoreboard.md, scoreboard.json and scoreboard/ there, which would replace what "
            "this folder holds; the published board changes only through --publish)")


def base_fingerprint(section: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies a recorded section an ``--agent`` rerun merges into:
    when it ran and how many partial reruns it has had since."""
    return {"finished_at": section.get("finished_at"),
            "reruns": len(section.get("reruns", []))}


def write_run_info(run_dir: str | os.PathLike, info: Mapping[str, Any]) -> None:
    from plume_jax.files import atomic_write

    atomic_write(pathlib.Path(run_dir) / RUN_NAME, lambda tmp: tmp.write_text(
        json.dumps({"format": RUN_FORMAT, **info}, indent=1) + "\n", encoding="utf-8"))


def read_run(run_dir: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(run.json, record)`` of the run folder ``run_dir``.

    Raises:
        ValidationError: (parameter ``--publish``) not a bench run folder.
    """
    from plume_jax.files.safe_io import load_json_file
    from plume_jax.scoreboard.report import load_record

    folder = pathlib.Path(run_dir)
    what = "a bench run folder (with run.json and scoreboard.json, as `plume-jax bench --out` " \
           "writes)"
    if not (folder / RUN_NAME).is_file() or not (folder / RECORD_NAME).is_file():
        raise ValidationError.for_parameter("--publish", os.fspath(run_dir), what)
    info = load_json_file(folder / RUN_NAME, "--publish", max_bytes=1 << 20)
    if not isinstance(info, dict) or info.get("format") != RUN_FORMAT or not all(
            _is_texts(info.get(key)) for key in ("families", "done")) \
            or not _is_texts(info.get("added", [])) \
            or not isinstance(info.get("bases") or {}, dict) \
            or not all(isinstance(info.get(key, True), bool)
                       for key in ("baselines", "zoo", "robustness")):
        raise ValidationError.for_parameter("--publish", os.fspath(run_dir),
                                            f"{what}; its {RUN_NAME} is not one bench wrote")
    try:
        record = load_record(folder / RECORD_NAME)
    except ValidationError as error:
        raise ValidationError.for_parameter("--publish", os.fspath(run_dir),
                                            f"{what}; its record: {error}") from None
    return info, record


def _is_texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


#: A figure a record names: a plain file name in the figures folder.
_FIGURE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.png")


def partial_reasons(info: Mapping[str, Any], published: Mapping[str, Any]) -> list[str]:
    """Why the run in ``info`` is not a whole board of its families (empty
    when it is); ``published``: the record it would be published into."""
    from plume_jax.scoreboard.families import FAMILIES

    reasons = []
    stopped = [f for f in info["families"] if f not in info["done"]]
    if stopped:
        reasons.append(f"it stopped before finishing {', '.join(stopped)}")
    if not info.get("baselines", True):
        reasons.append("it ran without the baselines (--no-baselines)")
    if not info.get("zoo", True):
        reasons.append("it ran without the zoo agents (--no-zoo)")
    if not info.get("robustness", True) and any(
            FAMILIES[f].robustness_preset or FAMILIES[f].protocol_variants
            for f in info["done"] if f in FAMILIES):
        reasons.append("it ran without the robustness table (--no-robustness)")
    if info.get("added"):
        reasons.append(f"it has agents of your own (--add {', '.join(info['added'])})")
    for name, fingerprint in (info.get("bases") or {}).items():
        section = published["families"].get(name)
        if section is None or base_fingerprint(section) != fingerprint:
            reasons.append(f"its --agent rerun of {name} merged into a section that is no "
                           "longer the published one")
    return reasons


def full_as_dict(name: str) -> dict[str, Any]:
    """The protocol a published section of family ``name`` is made with:
    the board's full protocol, in the family's form (a fixed-start family:
    all its starts, :func:`~plume_jax.scoreboard.fixed_starts.full_protocol`);
    the board's own for a family no longer listed."""
    from plume_jax.scoreboard.families import FAMILIES
    from plume_jax.scoreboard.fixed_starts import full_protocol
    from plume_jax.scoreboard.protocol import FULL

    return (full_protocol(FAMILIES[name]) if name in FAMILIES else FULL).as_dict()


def publish_command(run_dir: str | os.PathLike, info: Mapping[str, Any],
                    record: Mapping[str, Any]) -> str:
    """What the end of a run says about publishing it: the ``plume-jax bench
    --publish`` command with the flags :func:`publish` will ask for
    (``--allow-quick`` for a section not of the full protocol, ``--force``
    for a partial run) and why; ``info`` and ``record`` are the run's
    ``run.json`` and record. A rerun's base is checked by ``--publish``
    itself, against the record it publishes into."""
    done = [f for f in info["done"] if f in record["families"]]
    quick = [f for f in done if dict(record["families"][f]["protocol"]) != full_as_dict(f)]
    reasons = partial_reasons({**info, "bases": None}, {"families": {}})
    flags = (" --allow-quick" if quick else "") + (" --force" if reasons else "")
    why = ([f"it ran {', '.join(quick)} in quick mode or with --episodes"] if quick else []) \
        + reasons
    command = f"`plume-jax bench --publish {os.fspath(run_dir)}{flags}`"
    if not why:
        return f"put it on the published board with {command}"
    return (f"the published board takes full runs of every agent, and {'; '.join(why)}: "
            f"{command} would publish it anyway")


def _named(items: list[str], limit: int = 4) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def unmeasured(name: str, published: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """What publishing the section ``new`` of family ``name`` over the
    published section ``published`` would remove, in words (``None``:
    nothing): results the published section holds that the new one does
    not measure again: rows that ran (by preset and agent), the zoo's
    verdicts (by preset), robustness cells (agent, axis, level), start-cell
    maps (agent), protocol-variant rows (preset, agent, protocol) and zoo
    recipe rows (preset, recipe). Rows and reasons of
    agents that did not apply are not results and are not counted."""
    def ran(section: Mapping[str, Any], key: str, ident: Callable[[Any], Any]) -> list[Any]:
        return list(dict.fromkeys(ident(x) for x in section.get(key) or []
                                  if x.get("status", "ok") == "ok"))

    def every(section: Mapping[str, Any], key: str, ident: Callable[[Any], Any]) -> set[Any]:
        return {ident(x) for x in section.get(key) or []}

    row = (lambda r: (r["preset"], r["label"]))
    lost = []
    rows = [k for k in ran(published, "rows", row) if k not in every(new, "rows", row)]
    if rows:
        labels = list(dict.fromkeys(label for _, label in rows))
        lost.append(f"{len(rows)} row{'s' if len(rows) > 1 else ''} of {_named(labels)}")
    verdicts = [preset for preset, v in (published.get("verdicts") or {}).items()
                if v.get("best_zoo") and preset not in (new.get("verdicts") or {})]
    if verdicts:
        lost.append(f"the zoo verdicts on {_named(verdicts)}")
    cell = (lambda r: (r["label"], r["axis"], str(r["level"])))
    cells = [k for k in ran(published, "robustness", cell)
             if k not in every(new, "robustness", cell)]
    if cells:
        lost.append(f"{len(cells)} robustness cell{'s' if len(cells) > 1 else ''} "
                    f"(of {_named(list(dict.fromkeys(c[0] for c in cells)))})")
    maps = [k for k in ran(published, "maps", lambda m: m["label"])
            if k not in every(new, "maps", lambda m: m["label"])]
    if maps:
        lost.append(f"the start-cell map{'s' if len(maps) > 1 else ''} of {_named(maps)}")
    variant = (lambda r: (r["preset"], r["label"], r["protocol"]))
    variants = [k for k in ran(published, "variants", variant)
                if k not in every(new, "variants", variant)]
    if variants:
        lost.append(f"{len(variants)} protocol-variant row{'s' if len(variants) > 1 else ''} "
                    f"(of {_named(list(dict.fromkeys(v[1] for v in variants)))})")
    recipes = [k for k in ran(published, "recipes", row) if k not in every(new, "recipes", row)]
    if recipes:
        lost.append(f"{len(recipes)} zoo recipe row{'s' if len(recipes) > 1 else ''} "
                    f"(`plume-jax bench --recipes --family {name}` measures them again)")
    return f"{name}: {', '.join(lost)}" if lost else None


def publish(run_dir: str | os.PathLike, json_path: str | os.PathLike,
            markdown_path: str | os.PathLike, figure_dir: str | os.PathLike, *,
            allow_quick: bool = False, force: bool = False, drop_unmeasured: bool = False,
            check_outputs: Callable[[], None] = lambda: None,
            say: Callable[[str], None] = lambda text: None) -> list[str]:
    """Publish the finished families of the run folder ``run_dir`` into the
    record ``json_path``, the page ``markdown_path`` and the figures in
    ``figure_dir``; returns the families published. Every check is made
    before anything is written: the run's, then ``check_outputs()`` (the
    caller's checks of the paths written).

    A family's published section is replaced by the run's; results it
    holds that the run did not measure again (:func:`unmeasured`: rows of
    agents the run left out, robustness cells, start-cell maps, zoo recipe
    rows) are never dropped silently: the call is refused, naming them,
    unless ``drop_unmeasured``, and then ``say`` is told what was removed.

    Raises:
        ValidationError: (parameter ``--publish``) not a run folder, nothing
            finished, a quick-mode run without ``allow_quick``, a partial run
            without ``force``, a run that would remove published results
            without ``drop_unmeasured`` (each with what to pass), a figure
            missing.
    """
    from plume_jax.scoreboard.bench import write_markdown
    from plume_jax.files import atomic_write
    from plume_jax.scoreboard.report import dump_record, load_record

    info, record = read_run(run_dir)
    path = os.fspath(run_dir)
    done = [f for f in info["done"] if f in record["families"]]
    if not done:
        raise ValidationError.for_parameter(
            "--publish", path, "a run with at least one finished family (this one has none)")
    quick = [f"{f} (mode {record['families'][f]['protocol']['mode']!r})" for f in done
             if dict(record["families"][f]["protocol"]) != full_as_dict(f)]
    if quick and not allow_quick:
        raise ValidationError.for_parameter(
            "--publish", path, f"a run of the full protocol, as the published board shows; "
            f"this one ran {', '.join(quick)}: pass --allow-quick to publish it anyway")
    published = load_record(json_path)
    reasons = partial_reasons(info, published)
    if reasons and not force:
        raise ValidationError.for_parameter(
            "--publish", path, f"a whole board of its families, but {'; '.join(reasons)}: "
            "pass --force to publish it anyway")
    removed = [text for text in (unmeasured(f, published["families"][f], record["families"][f])
                                 for f in done if f in published["families"]) if text]
    if removed and not drop_unmeasured:
        raise ValidationError.for_parameter(
            "--publish", path, f"a run that measures again what the published sections hold; "
            f"publishing this one would remove {'; '.join(removed)}: pass --drop-unmeasured "
            "to publish it and remove them")
    source = pathlib.Path(run_dir) / FIGURES_NAME
    names = [section[key] for section in (record["families"][f] for f in done)
             for key in ("figure", "map_figure") if section.get(key)]
    bad = [name for name in names if not _FIGURE_NAME.fullmatch(name)]
    if bad:
        raise ValidationError.for_parameter(
            "--publish", path, f"a record whose figures are plain .png file names in its "
            f"figures folder ({', '.join(map(repr, bad))} is not)")
    copies = [(source / name, pathlib.Path(figure_dir) / name) for name in names]
    linked = [os.fspath(a) for a, _ in copies if a.is_symlink()]
    if linked:
        raise ValidationError.for_parameter(
            "--publish", path, f"a run folder whose figures are files, not links "
            f"({', '.join(linked)})")
    missing = [os.fspath(a) for a, _ in copies if not a.is_file()]
    if missing:
        raise ValidationError.for_parameter(
            "--publish", path, f"a run folder with the figures its record names "
            f"({', '.join(missing)} missing)")
    check_outputs()
    for a, b in copies:
        atomic_write(b, a.read_bytes())
    for name in done:
        published["families"][name] = record["families"][name]
    atomic_write(json_path, lambda tmp: tmp.write_text(dump_record(published),
                                                       encoding="utf-8"))
    write_markdown(published, markdown_path, figure_dir)
    for text in removed:
        say(f"removed from the published board (--drop-unmeasured): {text}")
    return done
