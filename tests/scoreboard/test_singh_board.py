"""The singh2023 family: Singh et al. (2023)'s four regimes on the board,
measured by their own protocol (240 fixed starts, ``protocol: singh240``)
on the env of each preset's scenario file, homings out of the starts run
beside their best, cross-regime rows labelled, recipe rows with a verdict
against their best, and publishing only the whole 240."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np
import pytest
import yaml
from scipy.stats import trim_mean

import plume_jax
from plume_jax import ValidationError, cli
from plume_jax.evaluate import scenario as sc
from plume_jax.evaluate import singh_protocol as sp
from plume_jax.scoreboard import board, families, recipes, report, runs
from plume_jax.scoreboard.contenders import Contender
from plume_jax.scoreboard.fixed_starts import (family_protocol, full_protocol,
                                               protocol_contender, scenario_for)
from plume_jax.scoreboard.protocol import FULL, QUICK, get_protocol
from plume_jax.scoreboard.record_schema import FIXED_STARTS, check_record
from tests.policy_folders import write_policy_folder

SINGH = families.FAMILIES["singh2023"]
CONSTANT, SWITCH_ONCE = "PlumeNav-Singh2023-Constant-v0", "PlumeNav-Singh2023-SwitchOnce-v0"
SURGE = Contender("cast_and_surge", "baseline", "cast_and_surge")


def test_the_family_is_their_tables_four_regimes_and_the_sparsity_series_is_left_out():
    assert SINGH.fixed_starts == "singh240" and SINGH.robustness_preset is None
    assert [sp.paper_best(p) for p in SINGH.presets] == [176, 160, 86, 130]
    for name in ("Sparse80", "Sparse60", "Sparse20"):
        reason = families.LEFT_OUT[f"PlumeNav-Singh2023-{name}-v0"]
        assert "sparse column is 0.4" in reason
        assert f"configs/scenarios/singh2023_{name.lower()}.yaml" in reason
    assert set(FIXED_STARTS) <= set(sc.PROTOCOLS)  # the record names the evaluation layer's


def test_the_family_protocol_is_all_240_starts_under_the_full_board_and_a_subset_else():
    full = family_protocol(SINGH, FULL)
    assert full == full_protocol(SINGH)
    assert full.as_dict() == {"mode": "full", "episodes": 240, "robustness_episodes": 0,
                              "map_stride": 0, "map_episodes": 0, "seed": FULL.seed,
                              "fixed_starts": "singh240"}
    quick = family_protocol(SINGH, QUICK)
    assert (quick.mode, quick.episodes) == ("quick, 100 of the 240 starts", 100)
    assert family_protocol(SINGH, get_protocol("quick", 500)).as_dict() == full.as_dict()
    # other families are unchanged, and their records keep their old form
    assert family_protocol(families.FAMILIES["gaussian"], QUICK) is QUICK
    assert "fixed_starts" not in FULL.as_dict()


def test_a_subset_of_the_starts_is_spread_evenly_and_nothing_outside_1_to_240():
    assert sp.subset(240).tolist() == list(range(240))
    assert sp.subset(3).tolist() == [0, 120, 239]
    for bad in (0, 241, 2.0, True):
        with pytest.raises(ValidationError, match=r"an integer in \[1, 240\]"):
            sp.subset(bad)


@pytest.mark.slow
def test_a_pair_runs_on_the_scenario_files_env_with_its_baselines_parameters():
    own = scenario_for(CONSTANT, "singh240")
    planned, reason = board.plan(CONSTANT, SURGE, 2, 5, fixed_starts="singh240")
    assert reason is None
    assert planned.overrides == own["env"]["overrides"]  # halved diffusion, unit gain
    assert dict(planned.agent_params) == own["agent"]["params"]
    assert planned.scenario["protocol"] == "singh240"
    # without the protocol the board's default cast_and_surge cannot read these presets
    assert board.plan(CONSTANT, SURGE, 2, 5)[0] is None
    row = board.row(CONSTANT, "singh2023", SURGE, sc.execute_run(planned), None)
    assert row["metrics"]["episodes"] == 2 and "trained_on" not in row
    assert row["homings"]["episodes"] == 2 and row["homings"]["paper_best"] == 176
    assert row["homings"]["homings"] == row["metrics"]["successes"]


def test_an_agent_the_protocol_cannot_run_is_not_applicable_with_the_reason():
    own = scenario_for(CONSTANT, "singh240")
    sb3 = Contender("mine", "yours", "sb3", params={"path": "model.zip"})
    assert "functional agent" in protocol_contender(sb3, own)[1]
    sensor = Contender("zoo:x@1", "zoo", "zoo:x@1",
                       env_overrides={"sensor": {"type": "concentration"}})
    planned, reason = board.plan(CONSTANT, sensor, 2, 0, fixed_starts="singh240")
    assert planned is None and "needs its own sensor, which protocol singh240 sets" in reason
    grid = Contender("zoo:gaussian-mlp@1", "zoo", "zoo:gaussian-mlp@1")
    planned, reason = board.plan(CONSTANT, grid, 2, 0, fixed_starts="singh240")
    assert planned is None and reason.startswith("needs ")


def _section(rows, recipes_rows=None, episodes=240):
    protocol = dataclasses.replace(full_protocol(SINGH), episodes=episodes).as_dict()
    section = {"protocol": protocol, "rows": rows, "verdicts": board.verdicts(rows),
               "robustness": [], "maps": [], "wall_seconds": 1.0,
               "finished_at": "2026-12-01 00:00 UTC", "machine_text": "cpu"}
    if recipes_rows is not None:
        section["recipes"] = recipes_rows
    return section


def _ran(preset, label, kind, homings, trained_on=None, episodes=240):
    rate = homings / episodes
    row = {"family": "singh2023", "preset": preset, "label": label, "kind": kind,
           "status": "ok", "own_settings": [],
           "metrics": {"episodes": episodes, "successes": homings, "success_rate": rate,
                       "success_ci95": list(sc.wilson_interval(homings, episodes)),
                       "mean_steps": 150.0, "sem_steps": 2.0, "median_steps": 140.0,
                       "p90_steps": 250.0, "path_efficiency": 0.5},
           "homings": {"protocol": "singh240", "homings": homings, "episodes": episodes,
                       "by_start": {"x4_t0": homings}, "paper_best": sp.paper_best(preset)}}
    if trained_on:
        row["trained_on"] = trained_on
    return row


def test_the_table_shows_homings_their_best_and_labels_cross_regime_rows():
    rows = [_ran(CONSTANT, "cast_and_surge", "baseline", 97),
            _ran(CONSTANT, "zoo:singh2023-constant-gru@1", "zoo", 150, CONSTANT),
            _ran(SWITCH_ONCE, "zoo:singh2023-constant-gru@1", "zoo", 40, CONSTANT)]
    record = {"format": report.RECORD_FORMAT, "families": {"singh2023": _section(rows)}}
    page = report.render(record, "intro", "fig")
    assert ("| PlumeNav-Singh2023-Constant-v0 | Singh et al. 2023, their best agent | paper | — "
            "| 176/240 | 0.733 |") in page
    assert "| PlumeNav-Singh2023-Constant-v0 | cast_and_surge | baseline | — | 97/240 |" in page
    assert ("| PlumeNav-Singh2023-Constant-v0 | zoo:singh2023-constant-gru@1 | zoo | own preset "
            "| 150/240 |") in page
    assert ("| PlumeNav-Singh2023-SwitchOnce-v0 | zoo:singh2023-constant-gru@1 | zoo | "
            "Singh2023-Constant (cross-regime) | 40/240 |") in page
    assert "protocol **singh240**, 240 of its fixed starts" in page
    fig = report.family_figure("singh2023", record["families"]["singh2023"])
    assert any("(cross-regime)" in t.get_text() for t in fig.axes[2].get_yticklabels())


def _recipe(rates, preset=CONSTANT):
    per_seed = [{"seed": k, "success_rate": r, "mean_steps": 120.0, "episodes": 240}
                for k, r in enumerate(rates)]
    section = _section([_ran(preset, "cast_and_surge", "baseline", 97)])
    return recipes.recipe_row("singh2023", preset, "zoo:singh2023-constant-gru@1", per_seed,
                              recipes.best_baseline(section["rows"], preset), "board",
                              paper_best=recipes.published_best(section, preset))


def test_a_recipe_is_compared_with_their_best_on_its_iqm_interval():
    above, spans, below = (_recipe([0.80, 0.82, 0.84, 0.86, 0.88]),
                           _recipe([0.6, 0.7, 0.73, 0.8, 0.9]), _recipe([0.2, 0.25, 0.3]))
    assert above["paper"] == {"homings": 176, "episodes": 240, "verdict": "above"}
    assert spans["paper"]["verdict"] == "includes" and below["paper"]["verdict"] == "below"
    assert _recipe([0.9])["paper"]["verdict"] == "one seed: no verdict"
    # a section of seeded episodes has no published best
    assert recipes.published_best({"protocol": FULL.as_dict()}, CONSTANT) is None
    rows = [_ran(CONSTANT, "cast_and_surge", "baseline", 97)]
    record = {"format": report.RECORD_FORMAT,
              "families": {"singh2023": _section(rows, [above, _recipe([0.9])])}}
    page = report.render(record, "intro", "fig")
    assert "| homings of 240: IQM [95 % CI] |" in page
    assert "| 176/240 | IQM interval lies above it | board |" in page
    assert "against Singh et al.'s best 176/240: IQM interval lies above it" in page
    assert "against Singh et al.'s best 176/240: one seed: no verdict" in page
    fig = recipes.profile_figure("singh2023", [above, below])
    assert fig.axes[0].get_xlim() == (0.0, 240.0)
    assert len(fig.axes[0].lines) == 2 + 2 + 2  # profiles, baselines, their best
    check_record(json.loads(report.dump_record(record)), "<test>")  # it reads back


@dataclasses.dataclass
class _Entry:
    """What family_recipes reads of a zoo entry."""
    name: str
    preset: str
    seeds: list
    version: int = 1
    info: dict = dataclasses.field(default_factory=dict)

    @property
    def reference(self):
        return f"zoo:{self.name}@{self.version}"


def test_recipes_run_on_every_regime_their_policies_run_on_as_the_paper_evaluated(monkeypatch):
    """In a section of Singh et al.'s protocol a recipe with kept seeds also
    runs on the family's other presets (their best on a regime may be an
    agent trained on another); rows go by preset, own recipes first, each
    saying where it was trained; a preset its policies cannot run on is left
    out, and a recipe without kept seeds stays on its own preset."""
    switch_many = "PlumeNav-Singh2023-SwitchMany-v0"
    ran = []

    def evaluate(entry, protocol, progress=lambda text: None, preset=None):
        preset = entry.preset if preset is None else preset
        ran.append((entry.name, preset))
        return [{"seed": k, "success_rate": 0.5 + 0.1 * k, "mean_steps": 100.0,
                 "episodes": 240} for k in entry.seeds]

    monkeypatch.setattr(recipes, "evaluate_seeds", evaluate)
    monkeypatch.setattr(recipes, "runs_on", lambda entry, preset, protocol: (
        "needs something" if preset == "PlumeNav-Singh2023-Sparse40-v0" else None))
    monkeypatch.setattr(recipes, "stored_sweep_results", lambda entry, spread_dir=None: None)
    curriculum = _Entry("singh2023-curriculum-rnn", switch_many, [0, 1, 2])
    constant = _Entry("singh2023-constant-gru", CONSTANT, [0, 1])
    headline_only = _Entry("singh2023-switchonce-gru", SWITCH_ONCE, [])
    baseline_rows = [_ran(p, "cast_and_surge", "baseline", 50) for p in SINGH.presets]
    section = _section(baseline_rows + [_ran(SWITCH_ONCE, headline_only.reference, "zoo", 90,
                                             SWITCH_ONCE)])
    rows = recipes.family_recipes(SINGH, section, [curriculum, constant, headline_only])
    assert [(r["preset"], r["label"], r["trained_on"]) for r in rows] == [
        (CONSTANT, constant.reference, CONSTANT),
        (CONSTANT, curriculum.reference, switch_many),
        (SWITCH_ONCE, headline_only.reference, SWITCH_ONCE),
        (SWITCH_ONCE, constant.reference, CONSTANT),
        (SWITCH_ONCE, curriculum.reference, switch_many),
        (switch_many, curriculum.reference, switch_many),
        (switch_many, constant.reference, CONSTANT)]
    assert ("singh2023-constant-gru", "PlumeNav-Singh2023-Sparse40-v0") not in ran
    cross = rows[1]
    assert cross["seeds"] == 3 and cross["paper"]["homings"] == 176
    assert cross["baseline"]["label"] == "cast_and_surge" and cross["seed_results"] == "board"

    record = {"format": report.RECORD_FORMAT, "families": {"singh2023": {**section,
                                                                         "recipes": rows}}}
    check_record(json.loads(report.dump_record(record)), "<test>")
    page = report.render(record, "intro", "fig")
    assert "| recipe | trained on | seeds | homings of 240" in page
    assert (f"| {CONSTANT} | {curriculum.reference} | Singh2023-SwitchMany (cross-regime) | 3 |"
            in page)
    assert f"| {CONSTANT} | {constant.reference} | own preset | 2 |" in page
    assert f"{curriculum.reference} (3 seeds, trained on Singh2023-SwitchMany)" in page
    assert "on every regime it runs on" in page
    fig = recipes.profile_figure("singh2023", rows)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == [
        "Singh2023-Constant", "Singh2023-SwitchOnce", "Singh2023-SwitchMany"]
    assert len(shown[0].lines) == 2 * 3  # two recipes: profile, baseline, their best
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [  # one per recipe, not per panel
        f"{constant.reference} (trained on Singh2023-Constant), 2 seeds",
        f"{curriculum.reference} (trained on Singh2023-SwitchMany), 3 seeds",
        f"{headline_only.reference} (trained on Singh2023-SwitchOnce), 1 seed"]

    # a section of seeded episodes keeps its recipes on their own presets, as before
    seeded = {**section, "protocol": FULL.as_dict()}
    own = recipes.family_recipes(SINGH, seeded, [curriculum, constant])
    assert [(r["preset"], "trained_on" in r) for r in own] == [(CONSTANT, False),
                                                               (switch_many, False)]


def test_publish_refuses_a_subset_of_the_starts_unless_allowed(tmp_path):
    folder = tmp_path / "run"
    section = _section([_ran(CONSTANT, "cast_and_surge", "baseline", 2, episodes=4)],
                       episodes=4)
    section["protocol"]["mode"] = "quick, 4 of the 240 starts"
    folder.mkdir()
    (folder / "scoreboard.json").write_text(report.dump_record(
        {"format": report.RECORD_FORMAT, "families": {"singh2023": section}}))
    runs.write_run_info(folder, {"families": ["singh2023"], "done": ["singh2023"]})
    target = [tmp_path / "board.json", tmp_path / "board.md", tmp_path / "fig"]
    with pytest.raises(ValidationError, match="singh2023 .mode 'quick, 4 of the 240 starts'"):
        runs.publish(folder, *target)
    assert not target[0].exists()
    assert runs.publish(folder, *target, allow_quick=True) == ["singh2023"]
    whole = _section([_ran(CONSTANT, "cast_and_surge", "baseline", 97)])
    (folder / "scoreboard.json").write_text(report.dump_record(
        {"format": report.RECORD_FORMAT, "families": {"singh2023": whole}}))
    assert runs.publish(folder, *target) == ["singh2023"]  # all 240: the full protocol


def _zoo(root: pathlib.Path, name: str, preset: str, seeds=()):
    """A zoo entry of untrained policies of the right spaces (no training)."""
    env, params = plume_jax.make(preset)
    folder = root / name / "1"
    write_policy_folder(folder / "policy", env, params, seed=9)
    (folder / "entry.yaml").write_text(yaml.safe_dump(
        {"description": "test", "preset": preset, "seed": 0, "network": "mlp"}))
    for k in seeds:
        write_policy_folder(folder / "seeds" / str(k) / "policy", env, params, seed=k)
        (folder / "seeds" / str(k) / "seed.yaml").write_text(yaml.safe_dump({"seed": k}))


def test_a_recipe_over_evaluation_seeds_reports_its_iqm_and_best_seed_with_ranges():
    """Their table is a maximum over agents: the page puts the recipe's IQM
    of its seeds' evaluation-seed means and its best seed (each with the
    range over evaluation seeds) beside their best agent."""
    table = [[0.70, 0.74, 0.72], [0.60, 0.62, 0.58], [0.80, 0.78, 0.76], [0.50, 0.52, 0.54],
             [0.66, 0.70, 0.68]]  # [training seed, evaluation seed] success rates
    per_seed = [{"seed": k, "success_rate": float(np.mean(r)), "mean_steps": 100.0,
                 "episodes": 240, "per_eval": r} for k, r in enumerate(table)]
    section = _section([_ran(CONSTANT, "cast_and_surge", "baseline", 97)])
    row = recipes.recipe_row("singh2023", CONSTANT, "zoo:singh2023-constant-gru@1", per_seed,
                             recipes.best_baseline(section["rows"], CONSTANT), "board",
                             paper_best=recipes.published_best(section, CONSTANT))
    means = np.mean(table, axis=1)
    assert row["success"]["iqm"]["value"] == pytest.approx(float(trim_mean(means, 0.25)))
    iqms = [trim_mean(np.asarray(table)[:, e], 0.25) for e in range(3)]
    assert row["eval_seeds"] == {
        "seeds": 3, "iqm_range": [pytest.approx(min(iqms)), pytest.approx(max(iqms))],
        "best_seed": {"seed": 2, "mean": pytest.approx(0.78), "range": [0.76, 0.80]}}
    assert row["per_seed"][2]["per_eval"] == table[2]
    lines = recipes.homings_recipe_lines([row])
    assert f"| Singh2023-Constant | zoo:singh2023-constant-gru@1 | own preset | " \
        f"{240 * float(trim_mean(means, 0.25)):.1f} [{240 * min(iqms):.1f}, " \
        f"{240 * max(iqms):.1f}] | #2: 187.2 [182, 192] | 176 | no | yes |" in lines
    assert recipes.eval_seeds({"seed": 7, "fixed_starts": "singh240"}) == [7, 8, 9]
    assert recipes.eval_seeds({"seed": 7}) == [7]
    assert recipes.over_eval_seeds([{k: v for k, v in r.items() if k != "per_eval"}
                                    for r in per_seed]) is None


@pytest.mark.slow  # 4 presets x 2 agents x 3 starts, 2 recipe seeds on each preset: about 2 min
def test_bench_runs_the_family_then_its_recipes_on_a_tiny_zoo(tmp_path, monkeypatch):
    from agents import zoo

    _zoo(tmp_path / "zoo", "singh2023-constant-gru", CONSTANT, seeds=(0, 1))
    monkeypatch.setenv(zoo.ZOO_ENV, str(tmp_path / "zoo"))
    out = tmp_path / "run"
    # without the protocol-variant table (tests/scoreboard/test_singh_variants.py), which
    # would run each agent 24 more times
    assert cli.main(["bench", "--family", "singh2023", "--episodes", "3", "--quiet",
                     "--no-robustness", "--out", str(out)]) == 0
    section = json.loads((out / "scoreboard.json").read_text())["families"]["singh2023"]
    assert section["protocol"]["mode"] == "quick, 3 of the 240 starts"
    ok = [(r["preset"], r["label"]) for r in section["rows"] if r["status"] == "ok"]
    assert ok == [(p, a) for p in SINGH.presets
                  for a in ("cast_and_surge", "zoo:singh2023-constant-gru@1")]
    assert all(r["homings"]["episodes"] == 3 for r in section["rows"] if r["status"] == "ok")
    page = (out / "scoreboard.md").read_text()
    assert "Singh2023-Constant (cross-regime)" in page and "| own preset |" in page
    assert cli.main(["bench", "--publish", str(out)]) == 2  # a subset: refused
    board_json, md, fig = tmp_path / "b.json", tmp_path / "b.md", tmp_path / "fig"
    assert cli.main(["bench", "--publish", str(out), "--allow-quick", "--force",
                     "--json", str(board_json),
                     "--markdown", str(md), "--figures", str(fig)]) == 0
    assert cli.main(["bench", "--recipes", "--family", "singh2023", "--json", str(board_json),
                     "--markdown", str(md), "--figures", str(fig), "--quiet"]) == 0
    rows = json.loads(board_json.read_text())["families"]["singh2023"]["recipes"]
    # its own preset, then the other three regimes, as Singh et al. evaluated every agent
    assert [(r["preset"], r["trained_on"]) for r in rows] == [(p, CONSTANT) for p in SINGH.presets]
    for row in rows:
        assert (row["seeds"], row["seed_results"]) == (2, "board")
        assert [s["episodes"] for s in row["per_seed"]] == [3, 3]
        assert row["eval_seeds"]["seeds"] == 3  # each seed under three evaluation seeds
        assert row["baseline"]["label"] == "cast_and_surge"
        assert row["paper"]["homings"] == sp.paper_best(row["preset"]) and \
            row["paper"]["verdict"] in ("above", "includes", "below")
    assert (fig / "singh2023_recipes.png").is_file() and "against their best" in md.read_text()


def test_a_rerun_of_the_family_compares_its_own_protocol_and_other_families_theirs():
    from plume_jax.scoreboard.rerun import check_rerun

    gaussian = families.FAMILIES["gaussian"]
    record = {"families": {"singh2023": _section([]),
                           "gaussian": {"protocol": FULL.as_dict()}}}  # recorded as before
    check_rerun(record, [SINGH, gaussian], FULL)
    with pytest.raises(ValidationError, match="mode 'full', 240 episodes; this run: mode "
                                              "'quick, 100 of the 240 starts', 100"):
        check_rerun(record, [SINGH], QUICK)


def test_a_sections_command_line_repeats_the_episodes_it_ran_not_mode_quick():
    """Regression: a section made by ``plume-jax bench --family singh2023
    --episodes 8`` (or ``--episodes 8`` on a seeded family) said it was made
    by `` --mode quick``, which runs 100 starts (episodes), not 8."""
    subset = {**full_protocol(SINGH).as_dict(), "mode": "quick, 8 of the 240 starts",
              "episodes": 8}
    assert report.mode_options(subset) == " --episodes 8"
    assert report.mode_options(full_protocol(SINGH).as_dict()) == ""
    assert report.mode_options(QUICK.as_dict()) == " --mode quick"
    assert report.mode_options(FULL.as_dict()) == ""
    assert report.mode_options(get_protocol("full", 8).as_dict()) == " --episodes 8"
    assert report.mode_options(get_protocol("quick", 8).as_dict()) == " --mode quick --episodes 8"
    section = _section([_ran(CONSTANT, "cast_and_surge", "baseline", 4, episodes=8)], episodes=8)
    section["protocol"]["mode"] = "quick, 8 of the 240 starts"
    page = "\n".join(report.family_markdown("singh2023", section, "fig"))
    assert "(`plume-jax bench --family singh2023 --episodes 8`)" in page


def test_the_end_of_a_quick_or_partial_run_names_the_publish_flags_it_needs(tmp_path):
    """Regression: every run ended "put it on the published board with
    `plume-jax bench --publish DIR`", a command ``--publish`` refuses for a
    quick run (--allow-quick) or one with --add (--force)."""
    whole = {"format": report.RECORD_FORMAT, "families": {"singh2023": _section([])}}
    info = {"families": ["singh2023"], "done": ["singh2023"], "added": []}
    assert runs.publish_command("run", info, whole) == (
        "put it on the published board with `plume-jax bench --publish run`")
    section = _section([], episodes=8)
    section["protocol"]["mode"] = "quick, 8 of the 240 starts"
    quick = {"format": report.RECORD_FORMAT, "families": {"singh2023": section}}
    text = runs.publish_command("run", {**info, "added": ["mine=runs/x"]}, quick)
    assert "`plume-jax bench --publish run --allow-quick --force`" in text
    assert "it ran singh2023 in quick mode or with --episodes" in text
    assert "it has agents of your own (--add mine=runs/x)" in text


def test_recipes_of_a_family_without_zoo_entries_say_why_there_are_none(tmp_path, monkeypatch):
    """Regression: ``plume-jax bench --recipes --family singh2023`` said only
    "family singh2023: 0 recipes in 0 s" (no Singh entry is in the zoo)."""
    from agents import zoo
    from plume_jax.scoreboard.bench import run_recipes

    (tmp_path / "zoo").mkdir()
    monkeypatch.setenv(zoo.ZOO_ENV, str(tmp_path / "zoo"))
    record = {"format": report.RECORD_FORMAT, "families": {"singh2023": _section([])}}
    said = []
    assert run_recipes(record, [SINGH], tmp_path / "fig", said.append) == ["singh2023"]
    assert said[-1].startswith("family singh2023: 0 recipes (no zoo entry is trained on its "
                               f"presets, {', '.join(SINGH.presets)}) in ")
