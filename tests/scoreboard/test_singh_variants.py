"""The singh2023 section's robustness table (issue 57): each agent that ran
under Singh et al.'s protocol as their code ran it (``singh240``) and under
the paper's reading (``singh240_paper``), each over three evaluation seeds,
as rows the record schema checks, the rerun merge and the publish check
keep, and the page renders with what a reader may conclude."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from plume_jax import ValidationError
from plume_jax.evaluate import singh_protocol as sp
from plume_jax.scoreboard import board, families, report, runs, variants
from plume_jax.scoreboard.contenders import Contender
from plume_jax.scoreboard.fixed_starts import full_protocol, scenario_for
from plume_jax.scoreboard.record_schema import VARIANT_PROTOCOLS, check_record
from plume_jax.scoreboard.rerun import merge_section
from tests.scoreboard.test_singh_board import CONSTANT, SINGH, SURGE, _ran, _section

GRU = "zoo:singh2023-constant-gru@1"


def _variant(preset, label, protocol, homings, kind="zoo", trained_on=CONSTANT):
    row = {"family": "singh2023", "preset": preset, "label": label, "kind": kind,
           "protocol": protocol, "status": "ok", "seeds": [31000031, 31000032, 31000033],
           "homings": list(homings), "episodes": 240, "seconds": 30.0}
    if kind == "zoo":
        row["trained_on"] = trained_on
    return row


def _record_with(rows):
    section = _section([_ran(CONSTANT, "cast_and_surge", "baseline", 127),
                        _ran(CONSTANT, GRU, "zoo", 140, CONSTANT)])
    section["variants"] = rows
    return {"format": report.RECORD_FORMAT, "families": {"singh2023": section}}


def test_the_family_runs_its_own_protocol_and_the_papers_reading_each_with_scenario_files():
    assert variants.protocols(SINGH) == ("singh240", "singh240_paper")
    assert set(VARIANT_PROTOCOLS) == set(sp.PROTOCOLS)  # the record takes every protocol
    for preset in SINGH.presets:
        assert scenario_for(preset, "singh240_paper")["protocol"] == "singh240_paper"
    assert variants.runs_per_contender(SINGH) == 8
    assert variants.protocols(families.FAMILIES["gaussian"]) == ()


def test_each_pair_runs_under_every_evaluation_seed_and_a_refusal_is_its_reason(monkeypatch):
    calls = []

    def plan(preset, contender, episodes, seed, built=None, fixed_starts=None):
        calls.append((preset, contender.label, fixed_starts, seed, episodes))
        if contender.label == "mine" and fixed_starts == "singh240_paper":
            return None, "needs something"
        return {"seed": seed, "protocol": fixed_starts}, None

    def execute(planned):
        shift = 10 if planned["protocol"] == "singh240_paper" else 0
        return {"metrics": {"protocol": {"homings": planned["seed"] % 100 + shift,
                                         "episodes": 8}}}

    from plume_jax.evaluate import scenario as sc

    monkeypatch.setattr(board, "plan", plan)
    monkeypatch.setattr(sc, "execute_run", execute)
    one = families.Family("one", "t", (CONSTANT,), fixed_starts="singh240",
                          protocol_variants=("singh240_paper",))
    protocol = full_protocol(one)
    mine = Contender("mine", "yours", "trained")
    said = []
    rows = variants.run_variants(one, [SURGE, mine], protocol, progress=said.append)
    seed = protocol.seed
    assert [(c[2], c[3]) for c in calls[:6]] == [
        ("singh240", seed), ("singh240", seed + 1), ("singh240", seed + 2),
        ("singh240_paper", seed), ("singh240_paper", seed + 1), ("singh240_paper", seed + 2)]
    assert all(c[4] == 240 for c in calls)
    assert [(r["label"], r["protocol"], r["status"]) for r in rows] == [
        ("cast_and_surge", "singh240", "ok"), ("cast_and_surge", "singh240_paper", "ok"),
        ("mine", "singh240", "ok"), ("mine", "singh240_paper", "not applicable")]
    assert rows[0]["seeds"] == [seed, seed + 1, seed + 2]
    assert rows[0]["homings"] == [seed % 100 + i for i in range(3)]
    assert rows[1]["homings"] == [seed % 100 + 10 + i for i in range(3)]
    assert rows[0]["episodes"] == 8 and "trained_on" not in rows[0]
    assert rows[3]["reason"] == "needs something"
    assert len(said) == 4 and said[1] == f"{CONSTANT} / cast_and_surge / protocol singh240_paper"
    check_record(_record_with(rows), "x.json")


def test_the_table_shows_each_protocols_mean_and_range_and_the_change():
    rows = [_variant(CONSTANT, "cast_and_surge", "singh240", (127, 120, 131), kind="baseline"),
            _variant(CONSTANT, "cast_and_surge", "singh240_paper", (100, 104, 99),
                     kind="baseline"),
            _variant(CONSTANT, GRU, "singh240", (140, 150, 145)),
            {**_variant(CONSTANT, GRU, "singh240_paper", ()), "status": "not applicable",
             "reason": "needs x"}]
    for r in rows[3:]:
        for key in ("seeds", "homings", "episodes", "seconds"):
            r.pop(key)
    lines = variants.variant_lines(rows)
    assert lines[0] == ("| regime | agent | kind | trained on | `singh240`: mean [range] | "
                        "`singh240_paper`: mean [range] | change, `singh240_paper` |")
    assert "| Singh2023-Constant | cast_and_surge | baseline | — | 126.0 [120, 131] | " \
        "101.0 [99, 104] | -25.0 |" in lines
    assert f"| Singh2023-Constant | {GRU} | zoo | own preset | 145.0 [140, 150] | n/a | — |" \
        in lines
    assert lines[-1] == ("Homings of 240 starts; mean over 3 evaluation seeds (31000031, "
                         "31000032, 31000033) [least, most].")
    page = report.render(_record_with(rows), "intro", "fig")
    assert "### Robustness: the protocol's readings (singh240, singh240_paper)" in page
    assert "diffusion halved to 0.5" in page and "**What you may conclude:**" in page
    assert "(`plume-jax bench --family singh2023`, with `--agent` for a rerun listed above); " \
        "its runs took 1.5 min." in page  # three rows that ran, 30 s each
    # a section without the table renders as before
    assert "### Robustness: the protocol" not in report.render(_record_with([]), "intro", "fig")


@pytest.mark.parametrize("change, where", [
    (lambda r: r.pop("homings"), r"variants\[0\]: the key 'homings' is missing"),
    (lambda r: r.update(protocol="singh300"), r"variants\[0\]\.protocol: 'singh300' is not one"),
    (lambda r: r.update(homings=[-1, 2, 3]), r"variants\[0\]\.homings\[0\]: -1 is below 0"),
    (lambda r: r.update(seeds=[]), r"variants\[0\]\.seeds: \[\] has 0 items"),
    (lambda r: (r.update(status="not applicable"), r.pop("homings")),
     r"variants\[0\]: the key 'reason' is missing"),
])
def test_a_malformed_variant_row_is_refused_naming_its_place(tmp_path, change, where):
    row = _variant(CONSTANT, GRU, "singh240", (1, 2, 3))
    check_record(_record_with([row]), "x.json")
    change(row)
    path = tmp_path / "board.json"
    path.write_text(json.dumps(_record_with([row])), encoding="utf-8")
    with pytest.raises(ValidationError, match=where):
        report.load_record(path)


def test_a_rerun_replaces_its_agents_variant_rows_and_keeps_the_others():
    old = _record_with([_variant(CONSTANT, "cast_and_surge", "singh240", (1, 2, 3),
                                 kind="baseline"),
                        _variant(CONSTANT, GRU, "singh240", (4, 5, 6))])["families"]["singh2023"]
    partial = {**copy.deepcopy(old), "git_revision": None}
    partial["rows"] = [r for r in partial["rows"] if r["label"] == GRU]
    partial["variants"] = [_variant(CONSTANT, GRU, "singh240", (7, 8, 9))]
    gru = Contender(GRU, "zoo", GRU)
    merged = merge_section(old, partial, SINGH, [gru], ["cast_and_surge", GRU], True)
    assert [(r["label"], r["homings"]) for r in merged["variants"]] == [
        ("cast_and_surge", [1, 2, 3]), (GRU, [7, 8, 9])]
    assert merged["reruns"][-1]["robustness"] is True
    kept = merge_section(old, {**partial, "variants": []}, SINGH, [gru], [], False)
    assert kept["variants"] == old["variants"] and kept["reruns"][-1]["robustness"] is False


def test_publishing_names_the_variant_rows_a_run_would_drop_and_no_table_is_partial():
    published = _record_with([_variant(CONSTANT, GRU, "singh240_paper", (4, 5, 6))])
    new = copy.deepcopy(published["families"]["singh2023"])
    assert runs.unmeasured("singh2023", published["families"]["singh2023"], new) is None
    new["variants"] = []
    assert runs.unmeasured("singh2023", published["families"]["singh2023"], new) == (
        f"singh2023: 1 protocol-variant row (of {GRU})")
    info = {"families": ["singh2023"], "done": ["singh2023"], "robustness": False}
    assert runs.partial_reasons(info, {"families": {}}) == [
        "it ran without the robustness table (--no-robustness)"]


def test_bench_progress_counts_each_agents_variant_runs():
    from plume_jax.scoreboard.bench import FamilyProgress

    progress = FamilyProgress(SINGH, 3, with_robustness=True, quiet=True)
    assert progress.bar.total == 4 * 3 + 3 * 4 * 2  # pairs, then (preset, protocol) per agent
    assert FamilyProgress(SINGH, 3, with_robustness=False, quiet=True).bar.total == 12


@pytest.mark.slow  # 1 preset x 1 agent x 2 protocols x 3 evaluation seeds of 2 starts: ~2 min
def test_a_sections_variant_rows_are_the_agents_homings_under_each_protocol_and_seed():
    """The section's own protocol at its own seed gives the row's homings
    again (the same run), and the agents without a row get no variant row."""
    from plume_jax.scoreboard.bench import run_family_section

    one = families.Family("one", "t", (CONSTANT,), fixed_starts="singh240",
                          protocol_variants=("singh240_paper",))
    protocol = dataclasses.replace(full_protocol(one), episodes=2, mode="quick, 2 of the 240 "
                                   "starts")
    grid = Contender("klinotaxis", "baseline", "klinotaxis")
    section = run_family_section(one, [SURGE, grid], protocol, True, lambda text: None)
    assert [r["label"] for r in section["rows"] if r["status"] == "ok"] == ["cast_and_surge"]
    own, paper = section["variants"]
    assert (own["protocol"], paper["protocol"]) == ("singh240", "singh240_paper")
    assert own["seeds"] == paper["seeds"] == [protocol.seed + i for i in range(3)]
    assert own["homings"][0] == section["rows"][0]["homings"]["homings"]
    assert own["episodes"] == paper["episodes"] == 2
