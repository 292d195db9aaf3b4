"""benchmarks/zoo_seed_spread: the published seed spread of zoo entries is
what the stored sweep files give, each stored sweep is its entry's own config
with only the seed swept, and the script refuses anything else, copying
nothing."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest
import yaml

from scripts.bench import zoo_seed_spread as spread

ROOT = pathlib.Path(__file__).resolve().parents[2]
STORED = sorted(p for p in spread.OUT.iterdir() if (p / "entry.txt").is_file())


def test_published_table_and_json_are_what_the_stored_sweeps_give():
    assert STORED, "no stored seed sweep"
    rows = spread.build()
    assert json.loads((spread.OUT / "seed_spread.json").read_text())["rows"] == \
        json.loads(json.dumps(rows))
    readme = (spread.OUT / "README.md").read_text()
    assert f"{spread.BEGIN}\n{spread.table(rows)}{spread.END}" in readme
    for row in rows:  # figures of the sweep config's seeds (5 or more), 1000 episodes each
        name = row["entry"].removeprefix("zoo:").split("@")[0]
        grid = yaml.safe_load((ROOT / "configs" / f"sweep_seeds_{name}.yaml").read_text())["grid"]
        assert row["seeds"] == len(grid["run.seed"]) >= 5
        assert row["episodes"] == 1000 and row["eval_seed"] == 1000003
        assert row["success_min"] <= row["success_mean"] <= row["success_max"]


@pytest.mark.parametrize("folder", STORED, ids=[p.name for p in STORED])
def test_each_stored_sweep_is_its_entrys_config_with_only_the_seed_swept(folder):
    entry = spread.check((folder / "entry.txt").read_text().strip(), folder)
    config = yaml.safe_load((ROOT / "configs" / f"sweep_seeds_{entry.name}.yaml").read_text())
    assert (ROOT / "configs" / config["base"]).resolve() == entry.config_path.resolve()
    seeds = config["grid"]["run.seed"]
    assert config["grid"] == {"run.seed": list(range(len(seeds)))} and len(seeds) >= 5


def test_a_sweep_of_another_config_is_refused_and_nothing_is_copied(tmp_path, capsys):
    good = STORED[0]
    entry = (good / "entry.txt").read_text().strip()
    other = "zoo:movie-gru@1" if "movie" not in entry else "zoo:gaussian-gru@1"
    out = tmp_path / "out"
    rc = spread.main(["--add", f"{entry}={good}", "--add", f"{other}={good}", "--out", str(out)])
    assert rc == 2
    assert "own config (it differs in" in capsys.readouterr().err
    assert not out.exists()  # the first, valid sweep was not copied either


def test_a_sweep_that_swept_more_than_the_seed_is_refused(tmp_path):
    folder = tmp_path / "sweep"
    shutil.copytree(STORED[0], folder)
    results = json.loads((folder / "results.json").read_text())
    results["grid"] = {**results["grid"], "algo.learning_rate": [1e-3]}
    (folder / "results.json").write_text(json.dumps(results))
    from plume_jax.core.errors import ValidationError

    with pytest.raises(ValidationError, match="a sweep of run.seed only"):
        spread.check((folder / "entry.txt").read_text().strip(), folder)
    with pytest.raises(ValidationError, match="the version spelled out"):
        spread.check("zoo:gaussian-gru", folder)
    (folder / "train_success.png").unlink()  # a sweep whose figure failed: not finished
    with pytest.raises(ValidationError, match=r"it has no \['train_success.png'\]"):
        spread.check((folder / "entry.txt").read_text().strip(), folder)
