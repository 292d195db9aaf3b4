"""``plume-jax train``'s default output folder: ``runs/<config name>``, and
for the ``best_config.yaml`` that ``plume-jax tune`` writes into its study
folder ``DIR``, ``runs/<DIR name>_best`` (regression: every study's best
config trained into the one folder ``runs/best_config``)."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from plume_jax import cli
from plume_jax.cli.common import default_out

TINY = {"env": {"id": "PlumeNav-Gaussian-v0", "overrides": {"grid_size": [12, 12]}},
        "algo": {"total_steps": 64, "num_envs": 4, "num_steps": 8},
        "run": {"tensorboard": False, "lanes": 2}, "eval": {"num_envs": 4}}


def _config(path: pathlib.Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(TINY))
    return str(path)


def test_two_studies_best_configs_default_to_two_run_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_out("runs/tune_a/best_config.yaml") == str(pathlib.Path("runs/tune_a_best"))
    assert default_out("runs/tune_b/best_config.yaml") == str(pathlib.Path("runs/tune_b_best"))
    assert default_out("best_config.yaml") == str(pathlib.Path("runs") / f"{tmp_path.name}_best")
    assert default_out("../best_config.yaml") == str(
        pathlib.Path("runs") / f"{tmp_path.parent.name}_best")
    assert default_out("configs/train_gaussian.yaml") == str(pathlib.Path("runs/train_gaussian"))
    assert default_out("configs/best_config.yml") == str(pathlib.Path("runs/best_config"))


def test_train_help_says_where_a_best_config_trains(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    assert "runs/<DIR name>_best" in " ".join(capsys.readouterr().out.split())


def test_a_best_config_default_folder_that_holds_files_is_refused_as_any_other(tmp_path,
                                                                             monkeypatch,
                                                                             capsys):
    """The study-named folder follows train's folder rules unchanged: one
    that holds files is refused with the message any config gets, before
    anything is written or compiled."""
    monkeypatch.chdir(tmp_path)
    messages = []
    for config, out in (("tune_b/best_config.yaml", "runs/tune_b_best"),
                        ("configs/other.yaml", "runs/other")):
        _config(pathlib.Path(config))
        pathlib.Path(out).mkdir(parents=True)
        (pathlib.Path(out) / "notes.txt").write_text("mine")
        assert cli.main(["train", "--config", config, "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert f"--out='{pathlib.Path(out)}' is invalid" in err, err
        messages.append(err.replace(str(pathlib.Path(out)), "OUT"))
        assert sorted(p.name for p in pathlib.Path(out).iterdir()) == ["notes.txt"]
    assert messages[0] == messages[1] and "a new or empty folder" in messages[0]


@pytest.mark.slow
def test_train_best_config_writes_its_run_to_a_folder_named_after_its_study(tmp_path,
                                                                           monkeypatch,
                                                                           capsys):
    """One tiny train (2 updates, run.lanes 2, as a best_config sets it):
    the run goes to runs/tune_a_best/, and the closing lines say it trained
    2 copies and that its steps/s are one lane's."""
    monkeypatch.chdir(tmp_path)
    config = _config(pathlib.Path("runs/tune_a/best_config.yaml"))
    assert cli.main(["train", "--config", config, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "runs" / "tune_a_best" / "summary.json").is_file()
    assert not (tmp_path / "runs" / "best_config").exists()
    assert f"outputs in {pathlib.Path('runs/tune_a_best')}/" in out
    lanes = [line for line in out.splitlines() if line.startswith("trained as lane 0")]
    assert lanes == ["trained as lane 0 of 2 identical copies (run.lanes: 2; 2 x the compute "
                     "and memory of one run); the env steps and steps/s above are one lane's"]
