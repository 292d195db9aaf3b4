"""scripts/validation/singh_validation.py: the match rule, the stored comparison
and the docs table it wrote, and a tiny end-to-end run."""

from __future__ import annotations

import json
import math

from tests.docs_blocks import ROOT

from scripts.validation import singh_validation as sv


def test_a_statistic_matches_within_10_percent_or_2_combined_se():
    assert sv.verdict((1.0, 0.0), (1.09, 0.0))[2]
    assert not sv.verdict((1.0, 0.0), (1.11, 0.0))[2]
    rel, z, ok = sv.verdict((1.0, 0.03), (1.2, 0.04))  # 20 % but 4 combined SEs? no: 0.2/0.05
    assert math.isclose(rel, 0.2) and math.isclose(z, 4.0) and not ok
    assert sv.verdict((1.0, 0.1), (1.2, 0.05))[2]  # 0.2 / 0.112 = 1.8 SE


def test_the_docs_table_is_what_the_stored_comparison_renders():
    """docs/plumes.md holds, between its markers, the summary of
    benchmarks/singh_validation.json (the script wrote both)."""
    stored = json.loads((ROOT / "benchmarks" / "singh_validation.json").read_text())
    reference = json.loads((ROOT / "benchmarks" / "singh_reference.json").read_text())
    rows = sv.compare(reference, stored["plume_jax"])
    assert rows == stored["rows"]
    page = (ROOT / "docs" / "plumes.md").read_text()
    section = page.split(sv.START, 1)[1].split(sv.END, 1)[0]
    assert f"{stored['matching']} of {stored['statistics']} statistics within 10 % or 2 SE" \
        in section
    for line in sv.summary(rows, "").splitlines()[2:]:
        assert line in section


def test_a_tiny_run_writes_the_json_and_the_table(tmp_path):
    out, table = tmp_path / "v.json", tmp_path / "v.md"
    assert sv.main(["--runs", "2", "--frames", "4", "--regimes", "switch-once", "--no-docs",
                    "--out", str(out), "--table", str(table)]) == 0
    payload = json.loads(out.read_text())
    assert payload["statistics"] == len(payload["rows"]) > 60
    assert all(r["variant"].startswith("switch-once") for r in payload["rows"])
    assert "| live puffs |" in table.read_text()


def _stored_runs(regime: str) -> dict:
    stored = json.loads((ROOT / "benchmarks" / "singh_validation.json").read_text())
    return {regime: stored["plume_jax"][regime]}


def _concatenated(first: dict, second: dict) -> dict:
    """The runs of ``second`` appended to those of ``first``, per plume."""
    return {regime: {fraction: {
        "variants": {d: {stat: values + second[regime][fraction]["variants"][d][stat]
                         for stat, values in stats.items()}
                     for d, stats in result["variants"].items()},
        "puff_count": result["puff_count"] + second[regime][fraction]["puff_count"]}
        for fraction, result in per_fraction.items()} for regime, per_fraction in first.items()}


def test_plume_jax_against_itself_counts_what_lies_outside_the_rule():
    """--null's pairs: a group against an identical one leaves nothing
    outside; a group whose live puffs are 50 % more, with the same spread,
    leaves exactly that statistic outside (per diffusion variant: 2)."""
    reference = json.loads((ROOT / "benchmarks" / "singh_reference.json").read_text())
    runs = _stored_runs("switch-once")
    rows = sv.compare(sv.as_reference(reference, runs), runs)
    assert rows and all(r["matches"] and r["z"] == 0.0 for r in rows)

    same = sv.null_comparisons(reference, _concatenated(runs, runs), runs=5, pairs=1)
    assert same == [{"statistics": len(rows), "outside": 0, "more_than_10_percent_apart": 0,
                     "largest_z_beyond_10_percent": 0.0}]

    more = json.loads(json.dumps(runs))
    more["switch-once"]["1"]["puff_count"] = [c * 1.5 for c in more["switch-once"]["1"]["puff_count"]]
    (shifted,) = sv.null_comparisons(reference, _concatenated(runs, more), runs=5, pairs=1)
    assert shifted["outside"] == shifted["more_than_10_percent_apart"] == 2
    assert shifted["largest_z_beyond_10_percent"] > 2.0
    assert "(1 pair of groups," in sv.null_sentence([shifted], 5)
    assert sv.null_sentence([same[0], shifted], 5).startswith(
        "The same rule between two independent groups of 5 seeds")
    n = len(rows)
    assert f"0 of {n}, 2 of {n} statistics outside" in sv.null_sentence([same[0], shifted], 5)
    fewer = {**shifted, "statistics": n - 3}
    assert f"0 of {n}, 2 of {n - 3} statistics outside" in sv.null_sentence([same[0], fewer], 5)


def test_a_negative_null_is_refused_before_anything_runs(capsys):
    import pytest

    with pytest.raises(SystemExit):
        sv.main(["--null", "-1", "--no-docs"])
    assert "--null must be 0" in capsys.readouterr().err
