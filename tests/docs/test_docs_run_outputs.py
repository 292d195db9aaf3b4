"""The outputs of ``train`` and ``sweep`` are listed once, in
``plume_jax.train.folder`` (``RUN_FILES``, ``SWEEP_FILES``): docs/training.md's
two tables list the same entries, and the CLI's closing line and ``--overwrite``
are made from them (issue 41: the run folder's list was written in three places,
and the docs' table lacked ``evaluations.jsonl``, ``best/`` and ``wandb/``)."""

from __future__ import annotations

import pathlib
import re

import pytest

from plume_jax.train.config import train_config
from plume_jax.train.folder import RUN_FILES, RUN_OUTPUTS, SWEEP_FILES, SWEEP_OUTPUTS, \
    clear_outputs, outputs_line

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINING = ROOT / "docs" / "training.md"

TINY = {"env": {"id": "PlumeNav-Gaussian-v0", "overrides": {"grid_size": [12, 12]}},
        "algo": {"total_steps": 64, "num_envs": 4, "num_steps": 8},
        "run": {"tensorboard": False}, "eval": {"num_envs": 4}}


def table_entries(text: str, heading_line: str) -> set[str]:
    """The backticked names in the first column of the first table after
    ``heading_line``, a folder's name cut after its first ``/``
    (``members/<grid values>/`` -> ``members/``)."""
    rest = text[text.index(heading_line):]
    rows = re.search(r"\n\| file \| what \|\n\|---\|---\|\n((?:\|.*\n)+)", rest)
    assert rows is not None, f"no table after {heading_line!r}"
    names = set()
    for row in rows.group(1).splitlines():
        first = row.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first):
            names.add(name.split("/")[0] + "/" if "/" in name else name)
    return names


@pytest.mark.parametrize("heading, files", [
    ("It writes a *run folder*", RUN_FILES),
    ("**Outputs** (`--out`, default `runs/<sweep name>/`", SWEEP_FILES),
])
def test_the_docs_tables_list_exactly_the_outputs_the_code_states(heading, files):
    assert table_entries(TRAINING.read_text(), heading) == {f.name for f in files}


def test_the_cli_line_names_what_a_run_of_this_config_writes():
    line = outputs_line(pathlib.Path("runs/x"), RUN_FILES, train_config(TINY))
    assert line.startswith("outputs in runs/x/ (config.yaml, metrics.jsonl")
    assert "tensorboard/" not in line and "best/" not in line and "checkpoint/" in line
    line = outputs_line(pathlib.Path("runs/x"), RUN_FILES, train_config(
        {**TINY, "run": {"tensorboard": True}, "eval": {"num_envs": 4, "every": 2}}))
    assert "tensorboard/" in line and "evaluations.jsonl" in line and "best/" in line
    assert outputs_line(pathlib.Path("s"), SWEEP_FILES).endswith("members/, programs/)")


def test_overwrite_deletes_every_listed_output_and_nothing_else(tmp_path):
    for files, outputs in ((RUN_FILES, RUN_OUTPUTS), (SWEEP_FILES, SWEEP_OUTPUTS)):
        folder = tmp_path / files[0].name
        folder.mkdir()
        for f in files:
            (folder / f.name).mkdir() if f.name.endswith("/") else (folder / f.name).touch()
        (folder / "notes.txt").touch()
        clear_outputs(folder, outputs)
        assert [p.name for p in folder.iterdir()] == ["notes.txt"]


def test_the_tune_table_names_the_trial_folders_as_tune_writes_them():
    """Regression: docs/training.md's tune outputs table said trial folders
    are ``trials/<number>/``; tune writes them zero-padded
    (``trials/00003/``), which the table now says."""
    from plume_jax.train.tune import trial_folder

    rest = TRAINING.read_text().split("**Outputs** (`--out`, default `runs/tune_<config name>/`",
                                      1)[1]
    row = next(line for line in rest.splitlines() if line.startswith("| `trials/"))
    assert str(trial_folder(3)) == "trials/00003"
    assert f"(`{trial_folder(3)}/` for trial 3)" in row and "zero-padded to 5 digits" in row
