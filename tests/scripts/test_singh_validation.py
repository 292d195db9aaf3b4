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
