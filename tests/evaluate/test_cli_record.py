"""``plume-jax record RUN --out video``: a video of a trained policy (issue 30:
RL Zoo's ``record_video``; plume-jax had no command for it)."""

from __future__ import annotations

import pytest

import plume_jax
from plume_jax.cli import main
from tests.policy_folders import write_policy_folder

pytest.importorskip("imageio", reason="the video extra is not installed")

SMALL = {"grid_size": [12, 12], "max_steps": 6}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    run = tmp_path_factory.mktemp("run")
    write_policy_folder(run / "policy", env, params)
    return run


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


def test_readme_record_command_runs(tmp_path, monkeypatch, capsys):
    """The README's ``plume-jax record`` line, as written, on a run folder of
    the shapes ``train --config configs/train_gaussian.yaml`` writes (two
    episodes side by side, a few steps at one pixel per cell: the options
    added come after the README's)."""
    import yaml

    from tests.docs_blocks import ROOT
    from tests.docs.test_readme import _console_command

    argv = _console_command("plume-jax record")
    config = yaml.safe_load((ROOT / "configs" / "train_gaussian.yaml").read_text())
    env, params = plume_jax.make(config["env"]["id"], **config["env"].get("overrides", {}))
    write_policy_folder(tmp_path / argv[1] / "policy", env, params)
    monkeypatch.chdir(tmp_path)
    suffix = argv[argv.index("--out") + 1].rsplit(".", 1)[1]
    if suffix == "mp4" and not (_has("imageio_ffmpeg") or _has("av")):
        pytest.skip("no ffmpeg backend for MP4 (the video extra)")
    assert main([*argv, "--episodes", "2", "--steps", "3", "--scale", "1"]) == 0
    out = argv[argv.index("--out") + 1]
    assert (tmp_path / out).stat().st_size > 0
    printed = capsys.readouterr().out
    assert printed.count("episode ") == 2 and f"wrote {out}" in printed


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
