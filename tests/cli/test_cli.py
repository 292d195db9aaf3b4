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


def test_demo_runs_end_to_end_and_writes_a_figure_with_progress(tmp_path, capsys):
    out = tmp_path / "traj.png"
    assert cli.main(["demo", *SMALL, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "success rate:" in text and "mean steps to source:" in text
    assert "env steps per second:" in text and f"trajectory figure:    {out}" in text
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    image = np.asarray(Image.open(out))
    assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 300
    # progress on stderr (plain lines: not a terminal), ending at the last step
    lines = [line for line in captured.err.splitlines() if line.startswith("[demo]")]
    assert lines and lines[-1].startswith("[demo] 80/80 steps (100.0%)")
    assert "16/16 first episodes ended" in lines[-1]


def test_demo_json_figures_are_consistent(tmp_path, capsys):
    assert cli.main(["demo", *SMALL, "--out", "", "--json", "--seed", "3", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # --quiet: no progress at all
    figures = json.loads(captured.out)
    assert figures["num_envs"] == 16 and figures["num_steps"] == 80
    assert figures["env_steps"] == 16 * 80
    assert 0.0 <= figures["success_rate"] <= 1.0
    assert figures["successes"] == round(figures["success_rate"] * 16)
    assert figures["env_steps_per_second"] > 0
    # the klinotaxis policy finds a sigma-5 plume on a 24x24 grid
    assert figures["success_rate"] >= 0.9
    assert 0 < figures["mean_steps_to_source"] < 80
    low, high = figures["success_ci95"]
    assert low <= figures["success_rate"] <= high


def test_demo_is_deterministic_for_a_seed(capsys):
    figures = []
    for quiet in ([], ["--quiet"]):  # with and without the progress callback
        assert cli.main(["demo", *SMALL, "--out", "", "--json", "--seed", "5", *quiet]) == 0
        figures.append(json.loads(capsys.readouterr().out))
    for key in ("success_rate", "mean_steps_to_source"):
        assert figures[0][key] == figures[1][key]


@pytest.mark.parametrize("args, message", [
    (["demo", "--num-envs", "0"], "--num-envs=0"),
    (["demo", "--set", "sigma=-1"], "plume.sigma=-1"),
    (["demo", "--set", "sigma"], "--set='sigma'"),
    (["demo", "--set", "sigma=!!python/object/apply:os.system [echo]"], "--set="),
    (["demo", "--set", "grid_size=[1, 2"], "--set="),
    (["demo", "--preset", "Nope-v0"], "env_id='Nope-v0'"),
    (["demo", "--seed", "-1"], "--seed=-1"),
    (["demo", "--seed", str(2**63)], "--seed=9223372036854775808"),
    (["demo", "--scale", "1000"], "--scale=1000"),
    (["demo", "--out", "/nonexistent/x.png"], "--out='/nonexistent/x.png'"),
    (["demo", "--out", "figure.unknown"], "--out='figure.unknown'"),
])
def test_bad_arguments_exit_2_with_a_clear_message(args, message, capsys, monkeypatch):
    """Every demo input is checked before the rollout compiles (`--out
    /nonexistent/x.png` once failed only after the whole run)."""
    import plume_jax.evaluate

    class NoRollout:
        def lower(self, *args, **kwargs):
            raise AssertionError("the rollout started before every input was checked")

    monkeypatch.setattr(plume_jax.evaluate, "rollout", NoRollout())
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("plume-jax: error:") and message in err, err


def test_console_script_lists_presets():
    exe = shutil.which("plume-jax")
    command = [exe, "list"] if exe else [sys.executable, "-m", "plume_jax.cli", "list"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "PlumeNav-Gaussian-v0" in result.stdout


def test_list_piped_into_a_reader_that_stops_early_ends_without_a_broken_pipe_traceback():
    """Issue 30 item 10: `plume-jax list | head -1` ended in a BrokenPipeError
    traceback. The reader here is gone before the command writes anything
    (as `head` is once it has its line): no traceback, status 141 (128 +
    SIGPIPE, what a shell shows for such a stop)."""
    proc = subprocess.Popen([sys.executable, "-m", "plume_jax", "list"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader went away
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()
    assert err == b""
    assert proc.returncode == cli.BROKEN_PIPE_STATUS


def test_version_prints_the_package_version(capsys):
    """Issue 30 item 10: there was no `plume-jax --version`."""
    import plume_jax

    with pytest.raises(SystemExit) as stopped:
        cli.main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"plume-jax {plume_jax.__version__}"
