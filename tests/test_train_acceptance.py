"""Acceptance (slow): the shipped configs train policies that reach the
source in >= 90% of fresh episodes, evaluated greedily."""

from __future__ import annotations

import json
import pathlib

import pytest

from plume_jax.cli import main

CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["train_gaussian.yaml", "train_gaussian_gru.yaml"])
def test_shipped_gaussian_config_reaches_90_percent_greedy_success(name, tmp_path):
    out = tmp_path / "run"
    assert main(["train", "--config", str(CONFIGS / name), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    ev = summary["evaluation"]
    assert ev["greedy"] and ev["episodes"] >= 1000
    assert ev["success_rate"] >= 0.9, ev
