"""scripts/bench/tune.py (issue 43, item 6): its options and, slow, a
--quick run end to end (every mode measured, the ratio computed)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("optuna", reason="optuna (the tune extra) is not installed")

from scripts.bench import tune as bench  # noqa: E402


def test_quick_shrinks_the_defaults_and_explicit_options_win():
    args = bench.parse(["--quick", "--trials", "3"])
    assert (args.trials, args.total_steps, args.batches) == (3, 2048, [2])
    sets = bench.settings(args)
    assert sets["algo.total_steps"] == 2048 and sets["eval.every"] is None
    assert sets["env.overrides.grid_size"] == [16, 16]
    full = bench.parse([])
    assert (full.trials, full.total_steps, full.batches) == (32, 500_000, [8, 16])
    assert "env.overrides.grid_size" not in bench.settings(full)


@pytest.mark.slow
def test_a_quick_run_measures_every_mode(tmp_path):
    out = tmp_path / "tune.json"
    assert bench.main(["--quick", "--trials", "2", "--out", str(out),
                       "--work", str(tmp_path / "work")]) == 0
    data = json.loads(out.read_text())
    assert [m["mode"] for m in data["modes"]] == ["tune-2", "per-process", "shipped"]
    for m in data["modes"]:
        assert m["wall_seconds"] > 0 and m["compile_seconds"] > 0
        assert 0.0 <= m["best_success"] <= 1.0 and len(m["load_before"]) == 3
    assert data["modes"][0]["speedup_vs_per_process"] == pytest.approx(
        data["modes"][1]["wall_seconds"] / data["modes"][0]["wall_seconds"])
