"""The plume-jax command line, used as a user would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from plume_jax import cli

SMALL = ["--num-envs", "16", "--set", "grid_size=[24, 24]", "--set", "sigma=5",
         "--set", "max_steps=80"]


def test_demo_runs_end_to_end_and_writes_png(tmp_path, capsys):
    out = tmp_path / "traj.png"
    assert cli.main(["demo", *SMALL, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "success rate:" in text and "mean steps to source:" in text
    assert "env steps per second:" in text
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    image = np.asarray(Image.open(out))
    assert image.shape == (24 * 4, 24 * 4, 3)


def test_demo_json_figures_are_consistent(tmp_path, capsys):
    assert cli.main(["demo", *SMALL, "--out", "", "--json", "--seed", "3"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["num_envs"] == 16 and figures["num_steps"] == 80
    assert figures["env_steps"] == 16 * 80
    assert 0.0 <= figures["success_rate"] <= 1.0
    assert figures["successes"] == round(figures["success_rate"] * 16)
    assert figures["env_steps_per_second"] > 0
    # the klinotaxis policy finds a sigma-5 plume on a 24x24 grid
    assert figures["success_rate"] >= 0.9
    assert 0 < figures["mean_steps_to_source"] < 80


def test_demo_is_deterministic_for_a_seed(capsys):
    figures = []
    for _ in range(2):
        assert cli.main(["demo", *SMALL, "--out", "", "--json", "--seed", "5"]) == 0
        figures.append(json.loads(capsys.readouterr().out))
    for key in ("success_rate", "mean_steps_to_source"):
        assert figures[0][key] == figures[1][key]


@pytest.mark.parametrize("args, message", [
    (["demo", "--num-envs", "0"], "--num-envs=0"),
    (["demo", "--set", "sigma=-1"], "plume.sigma=-1"),
    (["demo", "--set", "sigma"], "--set='sigma'"),
    (["demo", "--preset", "Nope-v0"], "env_id='Nope-v0'"),
])
def test_bad_arguments_exit_2_with_a_clear_message(args, message, capsys):
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err


def test_console_script_lists_presets():
    exe = shutil.which("plume-jax")
    command = [exe, "list"] if exe else [sys.executable, "-m", "plume_jax.cli", "list"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "PlumeNav-Gaussian-v0" in result.stdout
