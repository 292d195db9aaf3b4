"""Issue 39, item 2: the board reports zoo recipes over seeds. Recipe rows
and their verdicts on small synthetic data (one seed gets no verdict; an
interval straddling the baseline gets no "beats"), the record schema for
them (older records stay readable), the page, and ``plume-jax bench
--recipes`` end to end on a tiny record and zoo."""

from __future__ import annotations

import copy
import json
import os
import shutil

import pytest

from agents import zoo
from plume_jax import ValidationError
from plume_jax.scoreboard import recipes, report
from plume_jax.scoreboard.record_schema import check_record

PRESET = "PlumeNav-Gaussian-v0"


def _baseline(label, rate, steps, preset=PRESET, status="ok"):
    row = {"family": "gaussian", "preset": preset, "label": label, "kind": "baseline",
           "agent": label, "status": status}
    if status != "ok":
        return {**row, "reason": "needs wind"}
    return {**row, "metrics": {"episodes": 1000, "successes": int(rate * 1000),
                               "success_rate": rate, "success_ci95": [rate, rate],
                               "mean_steps": steps, "sem_steps": 1.0, "median_steps": steps,
                               "p90_steps": steps, "path_efficiency": 0.5}}


def _seeds(rates, steps=None):
    steps = steps or [60.0] * len(rates)
    return [{"seed": k, "success_rate": r, "mean_steps": s, "episodes": 1000}
            for k, (r, s) in enumerate(zip(rates, steps))]


def _row(rates, baseline_rate=0.5, baseline_steps=100.0, steps=None):
    base = _baseline("klinotaxis", baseline_rate, baseline_steps)
    return recipes.recipe_row("gaussian", PRESET, "zoo:toy@1", _seeds(rates, steps), base,
                              recipes.FROM_BOARD)


def test_a_recipe_with_one_seed_is_marked_and_gets_no_verdict():
    row = _row([0.99])  # far above the baseline, but one run has no interval
    assert row["seeds"] == 1 and row["verdict"] == "one seed: no verdict"
    assert row["success"]["iqm"]["ci95"] is None and row["improvement"]["ci95"] is None


def test_an_interval_straddling_the_baseline_does_not_beat_it():
    row = _row([0.3, 0.45, 0.55, 0.7, 0.4, 0.6], baseline_steps=60.0)
    low, high = row["success"]["iqm"]["ci95"]
    assert low < 0.5 < high
    assert row["verdict"] == "no clear difference"
    imp = row["improvement"]
    assert imp["ci95"][0] < 0.5 < imp["ci95"][1]


def test_an_interval_wholly_above_the_baseline_beats_it_and_wholly_below_is_worse():
    above = _row([0.9, 0.92, 0.95, 0.97, 0.99])
    assert above["success"]["iqm"]["ci95"][0] > 0.5 and above["verdict"] == "beats"
    assert above["improvement"] == {"value": 1.0, "ci95": [1.0, 1.0]}
    below = _row([0.1, 0.12, 0.2, 0.3, 0.05])
    assert below["verdict"] == "worse" and below["improvement"]["value"] == 0.0


def test_a_tie_on_success_is_decided_by_the_steps_interval_or_not_at_all():
    faster = _row([1.0] * 5, baseline_rate=1.0, baseline_steps=66.0,
                  steps=[60.0, 61.0, 60.5, 59.8, 61.2])
    assert faster["verdict"] == "faster"
    assert faster["improvement"]["value"] == 0.5  # ties count half
    slower = _row([1.0] * 5, baseline_rate=1.0, baseline_steps=50.0,
                  steps=[60.0, 61.0, 60.5, 59.8, 61.2])
    assert slower["verdict"] == "worse"
    mixed = _row([1.0] * 5, baseline_rate=1.0, baseline_steps=61.0,
                 steps=[55.0, 70.0, 58.0, 66.0, 61.0])
    assert mixed["verdict"] == "no clear difference"


def test_a_seed_that_never_arrived_is_left_out_of_the_steps_only():
    row = _row([0.0, 0.2, 0.3], steps=[None, 80.0, 90.0])
    assert row["seeds"] == 3 and row["steps"]["seeds"] == 2
    assert row["per_seed"][0]["mean_steps"] is None
    assert row["steps"]["mean"]["value"] == pytest.approx(85.0)


def test_the_best_baseline_is_the_highest_success_then_the_fewest_steps():
    rows = [_baseline("random_walk", 0.07, 400.0), _baseline("klinotaxis", 1.0, 66.0),
            _baseline("chemotaxis", 1.0, 95.0), _baseline("cast_and_surge", 0, None, status="x"),
            _baseline("klinotaxis", 1.0, 10.0, preset="other")]
    assert recipes.best_baseline(rows, PRESET)["label"] == "klinotaxis"
    assert recipes.best_baseline(rows, "nowhere") is None
    row = recipes.recipe_row("gaussian", PRESET, "zoo:toy@1", _seeds([0.9, 0.8]), None,
                             recipes.FROM_BOARD)
    assert row["verdict"] == "no baseline ran" and row["improvement"] is None


def _record(section_extra=None):
    section = {"protocol": {"mode": "quick", "episodes": 4, "robustness_episodes": 4,
                            "map_stride": 16, "map_episodes": 2, "seed": 31000031},
               "rows": [_baseline("klinotaxis", 0.5, 100.0)], "verdicts": {},
               "wall_seconds": 1.0, "finished_at": "2026-11-28 00:00 UTC",
               "machine_text": "cpu", **(section_extra or {})}
    return {"format": report.RECORD_FORMAT, "families": {"gaussian": section}}


def test_recipe_rows_pass_the_record_schema_and_older_records_stay_readable():
    check_record(_record(), "old.json")  # a record made before issue 39: no recipes
    rows = [_row([0.9, 0.95, 0.99]), _row([0.99]),
            recipes.recipe_row("gaussian", PRESET, "zoo:x@1", _seeds([0.0, 0.1], [None, 50.0]),
                               None, recipes.FROM_SWEEP)]
    good = _record({"recipes": json.loads(json.dumps(rows)), "recipe_figure": "g.png",
                    "recipes_at": {"finished_at": "now", "machine_text": "cpu",
                                   "wall_seconds": 2.0, "git_revision": None}})
    check_record(good, "new.json")
    for path, value, says in [
            (("verdict",), "great", r"recipes\[0\]\.verdict: 'great' is not one of"),
            (("seeds",), 0, r"recipes\[0\]\.seeds: 0 is below 1"),
            (("seed_results",), "guess", r"recipes\[0\]\.seed_results"),
            (("success", "iqm", "ci95"), [0.1], r"recipes\[0\]\.success\.iqm\.ci95"),
            (("per_seed",), [], r"recipes\[0\]\.per_seed")]:
        bad = copy.deepcopy(good)
        target = bad["families"]["gaussian"]["recipes"][0]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(ValidationError, match=says):
            check_record(bad, "bad.json")


def test_the_page_shows_the_recipe_table_its_sources_and_figure():
    section = _record({"recipes": [_row([0.9, 0.95, 0.99]), _row([0.99])],
                       "recipe_figure": "gaussian_recipes.png"})["families"]["gaussian"]
    lines = "\n".join(report.family_markdown("gaussian", section, "fig"))
    assert "### Zoo recipes over seeds" in lines
    assert "| PlumeNav-Gaussian-v0 | zoo:toy@1 | 3 | 94.7 [" in lines
    assert "| beats | board |" in lines and "| one seed: no verdict | board |" in lines
    assert "klinotaxis: 50.0, 100.0" in lines
    assert "![gaussian recipes](fig/gaussian_recipes.png)" in lines
    assert recipes.SOURCES[recipes.FROM_BOARD] in lines
    # the page's verdicts are the recipes' (a headline row is one seed and carries none)
    assert "- PlumeNav-Gaussian-v0: zoo:toy@1 (3 seeds) **beats** klinotaxis" in lines
    assert "- PlumeNav-Gaussian-v0: zoo:toy@1 (1 seed) one seed: **no verdict**" in lines
    section["verdicts"] = {PRESET: {"best_zoo": "zoo:toy@1", "beats_all": True,
                                    "not_beaten": []}}
    assert "beats every baseline" not in "\n".join(
        report.family_markdown("gaussian", section, "fig"))


def test_profile_figure_draws_one_line_per_recipe():
    fig = recipes.profile_figure("gaussian", [_row([0.9, 0.95, 0.99]), _row([0.99])])
    assert len(fig.axes[0].lines) == 2 + 2  # two profiles, two baseline lines


@pytest.fixture
def tiny_board(tmp_path, monkeypatch):
    """A zoo with gaussian-mlp@1 keeping two seeds (copies of its shipped
    seeds 0 and 1) and gaussian-gru@1 keeping none, and a record of the
    gaussian family with a klinotaxis row (4 episodes)."""
    root = tmp_path / "zoo"
    for name in ("gaussian-mlp", "gaussian-gru"):
        shutil.copytree(zoo.ZOO_ROOT / name / "1", root / name / "1",
                        ignore=shutil.ignore_patterns("seeds"))
    shipped = zoo.resolve("zoo:gaussian-mlp@1")
    assert shipped.seeds[:2] == [0, 1]
    for k in (0, 1):
        shutil.copytree(shipped.folder / "seeds" / str(k),
                        root / "gaussian-mlp" / "1" / "seeds" / str(k))
    monkeypatch.setenv(zoo.ZOO_ENV, str(root))
    record = tmp_path / "board.json"
    record.write_text(report.dump_record(_record()))
    return tmp_path, record


def test_bench_recipes_runs_the_kept_seeds_and_writes_the_rows(tiny_board, capsys):
    from plume_jax import cli

    tmp_path, record = tiny_board
    args = ["bench", "--recipes", "--family", "gaussian", "--json", str(record),
            "--markdown", str(tmp_path / "board.md"), "--figures", str(tmp_path / "fig"),
            "--quiet"]
    assert cli.main(args) == 0
    section = json.loads(record.read_text())["families"]["gaussian"]
    by_label = {r["label"]: r for r in section["recipes"]}
    mlp = by_label["zoo:gaussian-mlp@1"]
    assert mlp["seeds"] == 2 and mlp["seed_results"] == "board"
    assert [s["episodes"] for s in mlp["per_seed"]] == [4, 4]  # the section's protocol
    assert mlp["baseline"]["label"] == "klinotaxis"
    gru = by_label["zoo:gaussian-gru@1"]  # no seeds kept: the stored sweep's evaluation
    assert gru["seed_results"] == "sweep" and gru["seeds"] == 8
    assert (tmp_path / "fig" / section["recipe_figure"]).is_file()
    assert "### Zoo recipes over seeds" in (tmp_path / "board.md").read_text()
    report.load_record(record)  # what it wrote reads back


def _memory_maps() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_recipe_seed_rollouts_do_not_pile_up_compiled_programs_until_the_map_limit(tiny_board):
    """`bench --recipes --family singh2023` crashed after 69 seed rollouts:
    every compiled program stayed mapped (hundreds of memory maps each) until
    Linux's per-process limit of 65,530 made the next compile fail ("LLVM
    compilation error: Cannot allocate memory") and the process segfaulted.
    Evaluating a recipe's seeds again must not add maps."""
    entry = zoo.resolve("zoo:gaussian-mlp@1")
    assert entry.seeds == [0, 1]
    protocol = {"episodes": 4, "seed": 31000031}
    recipes.evaluate_seeds(entry, protocol)
    after_one = _memory_maps()
    recipes.evaluate_seeds(entry, protocol)
    # without clearing, each of these 2 compiles added about 460 maps
    assert _memory_maps() - after_one < 200


@pytest.mark.parametrize("extra, says", [
    (["--render-only"], "one of --render-only, --recipes, not both"),
    (["--mode", "quick"], "no run options with --recipes"),
    (["--family", "swarm"], "a family on the record"),
    (["--family", "gausian"], "did you mean 'gaussian'"),
])
def test_bench_recipes_refuses_what_it_cannot_do_in_one_line(tiny_board, capsys, extra, says):
    from plume_jax import cli

    tmp_path, record = tiny_board
    before = record.read_text()
    assert cli.main(["bench", "--recipes", "--json", str(record), "--markdown",
                     str(tmp_path / "b.md"), "--figures", str(tmp_path / "f"), *extra]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert record.read_text() == before



def test_a_stored_sweep_over_more_settings_gives_the_entrys_own_members(tmp_path, monkeypatch):
    """The Farrell entry was picked from a seed x learning-rate sweep: its
    recipe's seeds are the members at the entry's own learning rate."""
    from plume_jax.train.config import load_train_config

    entry = zoo.resolve("zoo:gaussian-mlp@1")
    rate = load_train_config(entry.config_path).to_dict()["algo"]["learning_rate"]
    members = [{"run.seed": k, "algo.learning_rate": lr, "eval_success_rate": 0.5 + k / 10,
                "eval_mean_steps_to_goal": 70.0 if lr == rate else 1.0}
               for k in range(3) for lr in (rate, rate / 2)]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"grid": {"run.seed": [0, 1, 2], "algo.learning_rate": [rate]},
                                "eval": {"episodes": 1000}, "results": members}))
    assert recipes.stored_sweep_results(entry, tmp_path / "none") is None
    monkeypatch.setitem(recipes.OTHER_SWEEPS, entry.reference, path)
    found = recipes.stored_sweep_results(entry, tmp_path / "none")
    assert [r["seed"] for r in found] == [0, 1, 2]
    assert {r["mean_steps"] for r in found} == {70.0}
