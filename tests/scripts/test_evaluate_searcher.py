"""scripts/bench/evaluate_searcher.py (issue 59's before/after of the learned
searcher's evaluation): its arguments; the timed runs themselves are the
benchmark (BENCHMARKS.md), too long for a test."""

from __future__ import annotations

import argparse

import pytest

from scripts.bench.evaluate_searcher import main, parse_size


def test_sizes_are_a_count_optionally_captured():
    assert parse_size("256") == (256, False)
    assert parse_size("2048:capture") == (2048, True)
    for bad in ("0", "-3", "12:save", "many"):
        with pytest.raises(argparse.ArgumentTypeError, match="a number of searches"):
            parse_size(bad)


def test_a_folder_that_is_not_a_source_tree_is_refused_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--before", str(tmp_path), "--after", ".", "--sizes", "4"])
    assert stopped.value.code == 2
    assert "a plume_jax source tree with configs/scenarios/poisson_iso19x19_learned.yaml" in \
        capsys.readouterr().err
