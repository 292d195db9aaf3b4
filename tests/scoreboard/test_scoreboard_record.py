"""Scoreboard records are checked section by section when read (issue
42.10): a malformed section anywhere in the record is a one-line error
naming its path inside the record, before ``bench --render-only``, the
rerun check or any family's run, instead of a crash."""

from __future__ import annotations

import copy
import json
import re

import pytest

from plume_jax import ValidationError, cli
from plume_jax.scoreboard import report
from plume_jax.scoreboard.protocol import QUICK

PUBLISHED = json.loads(open("benchmarks/scoreboard.json", encoding="utf-8").read())


def _small_record() -> dict:
    """The published gaussian section cut to a ran row, a not-applicable
    row, two robustness rows, two maps (one ran) and one rerun, under
    ``gaussian`` (well formed) and ``filament`` (the one each case breaks)."""
    section = copy.deepcopy(PUBLISHED["families"]["gaussian"])
    ok = next(r for r in section["rows"] if r["status"] == "ok")
    skipped = next(r for r in section["rows"] if r["status"] != "ok")
    section["rows"] = [ok, skipped]
    section["verdicts"] = {ok["preset"]: section["verdicts"][ok["preset"]]}
    section["robustness"] = [next(r for r in section["robustness"] if r["status"] == s)
                             for s in ("ok", "not applicable")]
    section["maps"] = [next(m for m in section["maps"] if m["status"] == s)
                       for s in ("ok", "not applicable")]
    section["reruns"] = section["reruns"][:1]
    section["protocol"] = QUICK.as_dict()
    return {"format": report.RECORD_FORMAT,
            "families": {"gaussian": section, "filament": copy.deepcopy(section)}}


def _set(path: str, value):
    def change(section):
        *keys, last = path.split(".")
        target = section
        for key in keys:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is KeyError:
            del target[last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return change


def _verdict(section):
    next(iter(section["verdicts"].values())).pop("best_zoo")


MALFORMED = {
    # (change to the filament section, where the error must point)
    "ran row without metrics": (_set("rows.0.metrics", KeyError), r"rows\[0\]: the key "
                                r"'metrics' is missing"),
    "one-sided interval": (_set("rows.0.metrics.success_ci95", [0.1]),
                           r"rows\[0\]\.metrics\.success_ci95: \[0\.1\] has 1 items"),
    "rate as text": (_set("rows.0.metrics.success_rate", "high"),
                     r"rows\[0\]\.metrics\.success_rate: 'high' is not a finite number"),
    "rate NaN": (_set("rows.0.metrics.mean_steps", float("nan")),
                 r"rows\[0\]\.metrics\.mean_steps: nan is not a finite number or a null"),
    "unknown status": (_set("rows.0.status", "done"), r"rows\[0\]\.status: 'done' is not one of"),
    "skipped row without reason": (_set("rows.1.reason", KeyError),
                                   r"rows\[1\]: the key 'reason' is missing"),
    "label a number": (_set("rows.0.label", 7), r"rows\[0\]\.label: 7 is not a string"),
    "rows not a list": (_set("rows", {}), r"\.rows: \{\} is not an array"),
    "verdicts a list": (_set("verdicts", []), r"\.verdicts: \[\] is not an object"),
    "verdict without best_zoo": (_verdict, r"verdicts\['PlumeNav-Gaussian-v0'\]: the key "
                                 r"'best_zoo' is missing"),
    "protocol without mode": (_set("protocol.mode", KeyError), r"protocol: the key 'mode'"),
    "episodes as text": (_set("protocol.episodes", "100"),
                         r"protocol\.episodes: '100' is not an integer"),
    "no wall time": (_set("wall_seconds", KeyError), r": the key 'wall_seconds' is missing"),
    "finished_at a number": (_set("finished_at", 5), r"finished_at: 5 is not a string"),
    "robustness row without axis": (_set("robustness.0.axis", KeyError),
                                    r"robustness\[0\]: the key 'axis' is missing"),
    "robustness text": (_set("robustness", "x"), r"\.robustness: 'x' is not an array"),
    "map with no cells": (_set("maps.0.success", []),
                          r"maps\[0\]\.success: \[\] has no start cell"),
    "map with no xs": (_set("maps.0.xs", []), r"maps\[0\]\.xs: \[\] has 0 items"),
    "rerun robustness text": (_set("reruns.0.robustness", "yes"),
                              r"reruns\[0\]\.robustness: 'yes' is not a boolean or a null"),
    "rerun agents text": (_set("reruns.0.agents", "zoo:x"),
                          r"reruns\[0\]\.agents: 'zoo:x' is not an array"),
    # issue 54 item 16: figure paths that leave the figures folder
    "figure outside its folder": (_set("figure", "../../../../etc/passwd"),
                                  r"\.figure: '../../../../etc/passwd' is not a plain \.png file"),
    "map figure in a subfolder": (_set("map_figure", "sub/x.png"),
                                  r"\.map_figure: 'sub/x.png' is not a plain \.png file"),
    "recipe figure absolute": (_set("recipe_figure", "/tmp/x.png"),
                               r"\.recipe_figure: '/tmp/x.png' is not a plain \.png file"),
    "figure name ending in a newline": (_set("figure", "x.png\n"),
                                        r"\.figure: 'x.png\\n' is not a plain \.png file"),
}


def _write(tmp_path, change=None):
    record = _small_record()
    if change is not None:
        change(record["families"]["filament"])
    path = tmp_path / "board.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def test_the_published_record_and_the_small_one_are_well_formed(tmp_path):
    assert report.load_record("benchmarks/scoreboard.json")["families"]
    assert report.load_record(_write(tmp_path))["families"]["filament"]["rows"]


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_section_is_refused_when_read_naming_its_path_not_a_crash(tmp_path, case):
    change, where = MALFORMED[case]
    with pytest.raises(ValidationError, match=r"at \$\.families\.filament.*" + where) as caught:
        report.load_record(_write(tmp_path, change))
    assert "\n" not in str(caught.value)


def test_render_only_with_a_malformed_section_is_a_one_line_error(tmp_path, capsys):
    path = _write(tmp_path, _set("rows.0.metrics", KeyError))
    out = tmp_path / "board.md"
    assert cli.main(["bench", "--render-only", "--json", str(path), "--markdown", str(out),
                     "--figures", str(tmp_path / "fig")]) == 2
    err = capsys.readouterr().err
    assert "families.filament.rows[0]: the key 'metrics' is missing" in err
    assert "Traceback" not in err and not out.exists()


def test_a_bad_section_of_another_family_stops_bench_before_any_run(tmp_path, capsys):
    """A rerun of gaussian (well formed) with filament's section broken: refused
    before anything runs, where it used to crash writing after the whole run."""
    path = _write(tmp_path, _set("reruns.0.agents", "zoo:x"))
    before = path.read_bytes()
    out = tmp_path / "run"
    assert cli.main(["bench", "--family", "gaussian", "--mode", "quick", "--agent",
                     "klinotaxis", "--no-zoo", "--from", str(path), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "families.filament.reruns[0].agents" in captured.err
    assert "PlumeNav" not in captured.out  # no pair ran
    assert path.read_bytes() == before and not out.exists()


@pytest.mark.parametrize("name", ["../../x", "a/b", "gaussian\n", "", ".."])
def test_a_family_name_that_is_not_a_plain_name_is_refused(tmp_path, name):
    """Issue 54 item 16: a family named ``../../x`` was accepted; its name
    becomes its figures' file names and its section of the page."""
    record = _small_record()
    record["families"][name] = record["families"].pop("filament")
    path = tmp_path / "board.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ValidationError, match=r"at \$\.families: .* is not a family name") as info:
        report.load_record(path)
    assert "\n" not in str(info.value)


def test_text_from_a_record_cannot_break_the_pages_tables_or_carry_html(tmp_path):
    """Issue 54 item 16: labels holding ``|``, a newline or ``<script>`` went
    straight into the generated markdown (a ``|`` adds a table column, a
    newline ends the row, ``<script>`` is HTML on the page)."""
    record = _small_record()
    section = record["families"]["gaussian"]
    hostile = "evil|col\n| x |<script>alert(1)</script>"
    section["rows"][0]["label"] = hostile
    section["rows"][1]["reason"] = hostile
    section["machine_text"] = hostile
    section["maps"][0]["label"] = hostile
    section["robustness"][0]["label"] = hostile
    page = report.render(record, "intro", "fig")
    assert "<script>" not in page and "</script>" not in page
    assert "evil\\|col \\| x \\|&lt;script&gt;" in page
    for line in page.splitlines():  # every table row has its header's number of cells
        if line.startswith("|"):
            cells = len(re.findall(r"(?<!\\)\|", line))
            assert cells in header_cells(page), line
    # text without those characters reads as before
    assert report.md_text("zoo:gaussian-mlp@1 (own x, y)") == "zoo:gaussian-mlp@1 (own x, y)"


def header_cells(page: str) -> set[int]:
    """The number of unescaped ``|`` of each table's header row."""
    lines = page.splitlines()
    return {len(re.findall(r"(?<!\\)\|", lines[i - 1])) for i, line in enumerate(lines)
            if line.startswith("|---")}
