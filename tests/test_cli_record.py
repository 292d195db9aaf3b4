"""``plume-jax record RUN --out video``: a video of a trained policy (issue 30:
RL Zoo's ``record_video``; plume-jax had no command for it)."""

from __future__ import annotations

import pytest

import plume_jax
from plume_jax.cli import main
from policy_folders import write_policy_folder

iio = pytest.importorskip("imageio.v3")

SMALL = {"grid_size": [12, 12], "max_steps": 6}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    run = tmp_path_factory.mktemp("run")
    write_policy_folder(run / "policy", env, params)
    return run


def test_record_writes_the_episodes_of_a_run_folder_side_by_side(run_folder, tmp_path, capsys):
    out = tmp_path / "two.gif"
    assert main(["record", str(run_folder), "--out", str(out), "--episodes", "2",
                 "--scale", "2", "--seed", "5"]) == 0
    frames = iio.imread(out, index=None)
    assert frames.ndim == 4 and frames.shape[-1] == 3
    assert frames.shape[2] > 2 * 12 * 2  # two 24-pixel panels side by side
    printed = capsys.readouterr().out
    assert printed.count("episode ") == 2 and f"wrote {out}" in printed


def test_record_refuses_bad_input_before_running_anything(run_folder, tmp_path, capsys):
    existing = tmp_path / "old.gif"
    existing.write_bytes(b"GIF89a")
    cases = [
        (["record", str(tmp_path), "--out", str(tmp_path / "a.gif")], "policy.json"),
        (["record", str(run_folder), "--out", str(tmp_path / "a.avi")], ".gif"),
        (["record", str(run_folder), "--out", str(existing)], "--overwrite"),
        (["record", str(run_folder), "--out", str(tmp_path / "a.gif"), "--episodes", "0"],
         "--episodes"),
        (["record", str(run_folder / "policy"), "--out", str(tmp_path / "a.gif"),
          "--preset", "PlumeNav-Filament-v0"], "trained"),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("plume-jax: error:") and words in err, (argv, err)
    assert existing.read_bytes() == b"GIF89a"
    assert not list(tmp_path.glob("a.*"))


def test_readme_record_command_runs(tmp_path, monkeypatch):
    """The README's ``plume-jax record`` line, as written, on a run folder of
    the shapes ``train --config configs/train_gaussian.yaml`` writes (a few
    steps at one pixel per cell: the command's own options come after)."""
    import yaml

    from docs_blocks import ROOT
    from test_readme import _console_command

    argv = _console_command("plume-jax record")
    config = yaml.safe_load((ROOT / "configs" / "train_gaussian.yaml").read_text())
    env, params = plume_jax.make(config["env"]["id"], **config["env"].get("overrides", {}))
    write_policy_folder(tmp_path / argv[1] / "policy", env, params)
    monkeypatch.chdir(tmp_path)
    suffix = argv[argv.index("--out") + 1].rsplit(".", 1)[1]
    if suffix == "mp4" and not (_has("imageio_ffmpeg") or _has("av")):
        pytest.skip("no ffmpeg backend for MP4 (the video extra)")
    assert main([*argv, "--steps", "3", "--scale", "1"]) == 0
    assert (tmp_path / argv[argv.index("--out") + 1]).stat().st_size > 0


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
