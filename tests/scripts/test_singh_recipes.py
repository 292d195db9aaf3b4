"""benchmarks/singh_recipes: the published table of Singh et al.'s regimes as
recipes over seeds is what the stored sweeps and evaluations give, each
stored sweep is its regime's seed-sweep config with only the seed swept, and
the script refuses anything else before it evaluates or writes anything."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest
import yaml

from plume_jax.core.errors import ValidationError
from scripts.bench import singh_recipes as recipes

ROOT = pathlib.Path(__file__).resolve().parents[2]
STORED = sorted(p for p in recipes.OUT.iterdir() if (p / "evaluations.json").is_file()) \
    if recipes.OUT.is_dir() else []


def test_published_table_json_and_doc_are_what_the_stored_files_give():
    assert STORED, "no stored Singh recipe"
    rows = recipes.build()
    assert json.loads((recipes.OUT / "singh_recipes.json").read_text())["rows"] == \
        json.loads(json.dumps(rows))
    assert f"{recipes.BEGIN}\n{recipes.table(rows)}{recipes.END}" in recipes.DOC.read_text()
    assert recipes.FIGURE.is_file()
    for row in rows:
        assert row["seeds"] >= 5
        assert row["min"] <= row["recipe"]["iqm"]["value"] <= row["max"] <= 240
        assert row["paper_best"] in (176, 160, 86, 130)


@pytest.mark.parametrize("folder", STORED, ids=[p.name for p in STORED])
def test_each_stored_recipe_is_its_regimes_seed_sweep(folder, tmp_path):
    results = recipes.check(folder.name, _as_sweep(folder, tmp_path))
    regime, net, *variant = folder.name.split("-")
    # a regime's own recipe, or (a variant: the curriculum) the sweep that says how it trained
    stem = f"{variant[0] if variant else regime}-{net}"
    stages = [(f"sweep_seeds_singh2023-{stem}.yaml", results)]
    if (folder / recipes.STAGE1).is_file():
        stages.insert(0, (f"sweep_seeds_singh2023-{stem}-stage1.yaml",
                          json.loads((folder / recipes.STAGE1).read_text())))
    for sweep_file, stored in stages:
        config = yaml.safe_load((ROOT / "configs" / sweep_file).read_text())
        assert config["grid"] == {"run.seed": [int(s) for s in sorted(
            json.loads((folder / "evaluations.json").read_text())["members"], key=int)]}
        base = yaml.safe_load((ROOT / "configs" / config["base"]).read_text())
        assert base["env"]["id"] == stored["base_config"]["env"]["id"]
        # the stored sweep trained the committed config (its recipe settings)
        for section in ("algo", "network"):
            for key, value in {**base.get(section, {}), **{
                    k.split(".", 1)[1]: v for k, v in (config.get("set") or {}).items()
                    if k.startswith(f"{section}.")}}.items():
                assert stored["base_config"][section][key] == value, f"{section}.{key}"
        for key, value in ((base["env"].get("overrides") or {}).get("start") or {}).items():
            assert stored["base_config"]["env"]["overrides"]["start"][key] == value
    if not variant:
        assert results["base_config"]["env"]["id"] == recipes.REGIMES[regime][0]
    assert sum(r["env_steps_per_member"] for _, r in stages) >= 4_990_000  # their 5M steps


def _as_sweep(folder: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    """A stored recipe folder as the sweep folder it came from: its
    ``results.json`` and a stand-in ``policy.json`` per member (the members'
    policies are kept in the zoo, not here)."""
    results = json.loads((folder / "results.json").read_text())
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    shutil.copyfile(folder / "results.json", sweep / "results.json")
    for member in results["results"]:
        policy = sweep / "members" / member["name"] / "policy"
        policy.mkdir(parents=True)
        (policy / "policy.json").write_text("{}")
    return sweep


def _fake_sweep(tmp_path: pathlib.Path, env_id: str = "PlumeNav-Singh2023-Constant-v0",
                grid: dict | None = None) -> pathlib.Path:
    sweep = tmp_path / "sweep"
    (sweep / "members" / "seed-0" / "policy").mkdir(parents=True)
    (sweep / "members" / "seed-0" / "policy" / "policy.json").write_text("{}")
    (sweep / "results.json").write_text(json.dumps({
        "grid": grid or {"run.seed": [0]}, "base_config": {"env": {"id": env_id}},
        "results": [{"name": "seed-0", "run.seed": 0}]}))
    return sweep


def test_a_sweep_of_another_regime_or_of_more_than_the_seed_is_refused(tmp_path):
    with pytest.raises(ValidationError, match="it trained PlumeNav-Singh2023-SwitchMany-v0"):
        recipes.check("constant-gru", _fake_sweep(tmp_path / "a",
                                                  "PlumeNav-Singh2023-SwitchMany-v0"))
    # another regime's sweep is evaluated only under a label that says how it trained
    assert recipes.check("constant-gru-curriculum", _fake_sweep(
        tmp_path / "a2", "PlumeNav-Singh2023-SwitchMany-v0"))["grid"] == {"run.seed": [0]}
    with pytest.raises(ValidationError, match="it trained PlumeNav-Gaussian-v0"):
        recipes.check("constant-gru-curriculum", _fake_sweep(tmp_path / "a3",
                                                             "PlumeNav-Gaussian-v0"))
    with pytest.raises(ValidationError, match=r"only run.seed swept; it swept \['run.seed', "):
        recipes.check("constant-gru", _fake_sweep(
            tmp_path / "b", grid={"run.seed": [0], "algo.learning_rate": [1e-3]}))
    with pytest.raises(ValidationError, match="no results.json"):
        recipes.check("constant-gru", tmp_path / "missing")
    sweep = _fake_sweep(tmp_path / "c")
    shutil.rmtree(sweep / "members" / "seed-0" / "policy")
    with pytest.raises(ValidationError, match="member seed-0 has no policy"):
        recipes.check("constant-gru", sweep)


def test_a_label_must_start_with_a_regime(tmp_path, capsys):
    for label in ("calm-gru", "constant/../x", ""):
        with pytest.raises(ValidationError, match="its regime one of"):
            recipes.regime_of(label)
    doc = tmp_path / "doc.md"
    doc.write_text("x")
    good = _fake_sweep(tmp_path / "good")
    rc = recipes.main(["--add", f"constant-gru={good}", "--add", f"calm-gru={good}",
                       "--out", str(tmp_path / "out"), "--doc", str(doc),
                       "--figure", str(tmp_path / "fig.png")])
    assert rc == 2 and "its regime one of" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and doc.read_text() == "x"  # nothing evaluated
    assert not (tmp_path / "fig.png").exists()


@pytest.mark.slow
def test_a_tiny_sweep_is_evaluated_on_the_240_starts_and_tabulated(tmp_path):
    """End to end as the docs say: a 2-seed sweep of 2 updates, then --add."""
    from plume_jax.cli import main as cli

    (tmp_path / "sweep.yaml").write_text(
        f"base: {ROOT / 'configs' / 'train_singh2023_constant_gru.yaml'}\n"
        "grid:\n  run.seed: [0, 1]\n")
    assert cli(["sweep", "--config", str(tmp_path / "sweep.yaml"), "--out",
                str(tmp_path / "run"), "--quiet", "--set", "algo.total_steps=16384",
                "--set", "eval.num_envs=16"]) == 0
    doc = tmp_path / "doc.md"
    doc.write_text(f"head\n{recipes.BEGIN}\nold\n{recipes.END}\ntail\n")
    out = tmp_path / "out"
    assert recipes.main(["--add", f"constant-gru={tmp_path / 'run'}", "--out", str(out),
                         "--doc", str(doc), "--figure", str(tmp_path / "fig.png")]) == 0
    (row,) = recipes.build(out)
    ev = json.loads((out / "constant-gru" / "evaluations.json").read_text())
    assert set(ev["members"]) == {"0", "1"} and ev["baseline"]["agent"] == "cast_and_surge"
    assert row["homings_by_seed"] == {int(s): m["homings"] for s, m in ev["members"].items()}
    for member in ev["members"].values():
        assert sum(member["homings_by_start"].values()) == member["homings"] <= 240
    assert doc.read_text() == f"head\n{recipes.BEGIN}\n{recipes.table([row])}{recipes.END}\ntail\n"
    assert (tmp_path / "fig.png").is_file()


def test_figure_legend_is_not_cut_off_at_the_right_edge(tmp_path):
    """The legend above the axes ran off the picture's right edge ("Singh et
    al.'s best age...") once the recipe labels grew long: nothing may touch
    the picture's right-most pixel columns."""
    import matplotlib.image

    rows = recipes.build()
    rows[0] = {**rows[0], "label": "a-very-long-recipe-label-" * 2}
    recipes.figure(rows, tmp_path / "fig.png")
    pixels = matplotlib.image.imread(tmp_path / "fig.png")[..., :3]
    assert pixels[:, -3:].min() > 0.9, "something is drawn on the picture's right edge"
