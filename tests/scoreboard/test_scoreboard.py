"""The scoreboard (plume_jax.scoreboard, plume-jax bench): families cover the
presets, agents that do not apply are listed with the reason, user agents
in every form, the verdict rule, bad input refused before anything runs,
and the command end to end on a tiny run."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

import plume_jax
from plume_jax import ValidationError, cli
from plume_jax.scoreboard import board, contenders, families, protocol, report, robustness
from plume_jax.scoreboard.contenders import Contender
from tests.policy_folders import write_policy_folder


def test_every_preset_is_on_one_board_or_left_out_with_a_reason():
    placed = [p for f in families.FAMILIES.values() for p in f.presets]
    assert len(placed) == len(set(placed))
    assert set(placed) | set(families.LEFT_OUT) == set(plume_jax.PRESETS)
    assert not set(placed) & set(families.LEFT_OUT)


def test_an_agent_that_does_not_apply_is_a_row_with_the_reason():
    planned, reason = board.plan("PlumeNav-Gaussian-v0",
                                 Contender("cast_and_surge", "baseline", "cast_and_surge"), 2, 0)
    assert planned is None and "wind" in reason
    row = board.row("PlumeNav-Gaussian-v0", "gaussian",
                    Contender("cast_and_surge", "baseline", "cast_and_surge"), None, reason)
    assert row["status"] == "not applicable" and row["reason"] == reason
    other = {**row, "preset": "PlumeNav-GaussianBinary-v0"}
    ran = {**row, "preset": "PlumeNav-GaussianOriented-v0", "label": "k", "status": "ok"}
    assert report.not_applicable([row, other, ran]) == [
        f"- cast_and_surge: {reason} — on PlumeNav-Gaussian-v0, PlumeNav-GaussianBinary-v0"]


def test_a_zoo_policy_on_another_family_is_not_applicable_with_the_reason():
    planned, reason = board.plan("PlumeNav-Filament-v0",
                                 Contender("zoo:gaussian-mlp", "zoo", "zoo:gaussian-mlp"), 2, 0)
    assert planned is None and "trained on PlumeNav-Gaussian-v0" in reason


def test_user_agents_in_every_form(tmp_path, monkeypatch):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    write_policy_folder(tmp_path / "run" / "policy", env, params)
    run = contenders.user_contender(f"mine={tmp_path / 'run'}")
    assert (run.agent, run.params["path"]) == ("trained", str(tmp_path / "run" / "policy"))
    assert contenders.user_contender(str(tmp_path / "run" / "policy")).label == "policy"
    (tmp_path / "my_agents.py").write_text(
        "from agents.klinotaxis import KlinotaxisPolicy\n"
        "def build(env):\n    return KlinotaxisPolicy.for_env(env)\n"
        "def broken(env):\n    raise RuntimeError('no such sensor')\n")
    monkeypatch.chdir(tmp_path)
    mine = contenders.user_contender("k=my_agents:build")
    assert mine.agent == "python:my_agents:build" and hasattr(mine.build(env), "act")
    broken = contenders.user_contender("b=my_agents:broken")
    assert "no such sensor" in board.plan("PlumeNav-Gaussian-v0", broken, 2, 0)[1]
    assert contenders.user_contender("zoo:gaussian-mlp").kind == "yours"
    with pytest.raises(ValidationError, match=r"did you mean 'klinotaxis'"):
        contenders.user_contender("x=klinotaxsi")
    with pytest.raises(ValidationError, match=r"no file"):
        contenders.user_contender("x=missing.zip")
    with pytest.raises(ValidationError, match=r"importable module"):
        contenders.user_contender("x=no_such_module_here:build")
    with pytest.raises(ValidationError, match=r"holds no policy.json"):
        contenders.user_contender(f"x={tmp_path}")
    with pytest.raises(ValidationError, match=r"a label no other agent"):
        contenders.board_contenders(added=["klinotaxis=klinotaxis"])


@pytest.mark.parametrize("label", ["mine\n", "a|b", "<script>"])
def test_a_contender_label_ending_in_a_newline_or_holding_markup_is_refused(label):
    """Issue 54 item 15 (the ``$`` class): ``--add 'mine\n=klinotaxis'``
    passed the label check, whose pattern ended in ``$``."""
    with pytest.raises(ValidationError, match="LABEL made of letters") as info:
        contenders.user_contender(f"{label}=klinotaxis")
    assert info.value.parameter == "--add"


def test_unknown_family_and_mode_say_what_is_known():
    with pytest.raises(ValidationError, match=r"did you mean 'gaussian'"):
        families.get_family("gausian")
    with pytest.raises(ValidationError, match=r"one of \['quick', 'full'\]"):
        protocol.get_protocol("fast")
    with pytest.raises(ValidationError, match=r"--episodes"):
        protocol.get_protocol("quick", 0)


def _metrics(rate, n, steps):
    from plume_jax.evaluate.scenario import wilson_interval

    return {"success_rate": rate, "success_ci95": list(wilson_interval(round(rate * n), n)),
            "mean_steps": steps}


@pytest.mark.parametrize("candidate, baseline, expected", [
    (_metrics(1.0, 100, 70.0), _metrics(1.0, 100, 75.0), True),    # equal success, fewer steps
    (_metrics(1.0, 100, 80.0), _metrics(1.0, 100, 75.0), False),   # equal success, more steps
    (_metrics(0.98, 1000, 67.0), _metrics(0.81, 1000, 182.0), True),  # much better success
    (_metrics(0.95, 1000, 300.0), _metrics(0.15, 1000, 240.0), True),  # better success, slower
    (_metrics(0.5, 1000, 20.0), _metrics(0.9, 1000, 90.0), False),  # worse success, faster
    (_metrics(0.0, 100, None), _metrics(0.0, 100, None), False),
])
def test_the_verdict_rule(candidate, baseline, expected):
    assert board.beats(candidate, baseline) is expected


def test_verdicts_name_the_baselines_a_zoo_agent_does_not_beat():
    def r(label, kind, m):
        return {"preset": "P", "label": label, "kind": kind, "status": "ok", "metrics": m}

    rows = [r("klinotaxis", "baseline", _metrics(1.0, 100, 60.0)),
            r("random_walk", "baseline", _metrics(0.05, 100, 80.0)),
            r("zoo:a@1", "zoo", _metrics(1.0, 100, 70.0))]
    assert board.verdicts(rows)["P"] == {"best_zoo": "zoo:a@1", "beats_all": False,
                                         "not_beaten": ["klinotaxis"]}


@pytest.mark.slow
@pytest.mark.skipif(not pathlib.Path("/proc/self/maps").exists(), reason="needs Linux's /proc")
def test_a_family_run_does_not_pile_up_compiled_programs_run_after_run():
    """Each (preset, agent) pair compiles a rollout that the next preset
    does not reuse, and XLA's CPU backend keeps every compiled program
    mapped: a run of every family would reach Linux's 65,530 memory maps,
    as the recipes of one family did. Running a family again adds none."""
    def maps():
        return len(pathlib.Path("/proc/self/maps").read_text().splitlines())

    gaussian = families.FAMILIES["gaussian"]
    family = dataclasses.replace(gaussian, presets=gaussian.presets[:1])
    # trained policies: each run loads them afresh, so their rollouts compile again
    agents = [c for c in contenders.zoo_contenders()
              if c.label in ("zoo:gaussian-mlp@1", "zoo:gaussian-gru@1")]
    assert len(agents) == 2
    tiny = protocol.get_protocol("quick", 4)
    board.run_family(family, agents, tiny)
    after_one = maps()
    board.run_family(family, agents, tiny)
    assert maps() - after_one < 200  # without clearing, about 950 more


def test_noisy_sensor_keeps_the_observation_labels_trained_policies_check():
    from agents.base import describe

    for preset in ("PlumeNav-Gaussian-v0", "PlumeNav-Filament-v0"):
        sensor = robustness.noisy_sensor(plume_jax.PRESETS[preset]["sensor"], 0.01)
        noisy, _ = plume_jax.make(preset, sensor=sensor)
        plain, _ = plume_jax.make(preset)
        assert describe(noisy)["observation_labels"] == describe(plain)["observation_labels"]
        assert describe(noisy)["sensor_type"] != "concentration"


def test_each_robustness_axis_is_run_or_says_why_not():
    gaussian = {v.axis for v in robustness.variations("PlumeNav-Gaussian-v0")}
    filament = robustness.variations("PlumeNav-Filament-v0")
    wanted = {"nominal", "source strength", "plume scale", "wind", "sensor noise"}
    assert gaussian == wanted and {v.axis for v in filament} == wanted
    assert all(v.not_applicable is None for v in filament)
    for v in filament + robustness.variations("PlumeNav-Gaussian-v0"):
        if v.not_applicable is None:
            plume_jax.make("PlumeNav-Filament-v0" if v in filament else "PlumeNav-Gaussian-v0",
                           **v.overrides)  # every variation is a valid env


def test_bench_refuses_bad_input_before_running(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["bench", "--family", "gausian", "--out", str(out)]) == 2
    assert "did you mean 'gaussian'" in capsys.readouterr().err
    assert cli.main(["bench", "--add", "x=nowhere.zip", "--out", str(out)]) == 2
    (tmp_path / "bad.json").write_text("{}")
    assert cli.main(["bench", "--from", str(tmp_path / "bad.json"), "--out", str(out)]) == 2
    assert "--from=" in (err := capsys.readouterr().err) and "a scoreboard record" in err
    assert not out.exists()


def test_a_run_refuses_the_published_boards_paths_and_publish_refuses_run_options(
        tmp_path, capsys):
    """The published board's paths belong to --publish / --render-only; a
    run's options to a run: neither is silently ignored."""
    assert cli.main(["bench", "--force", "--out", str(tmp_path / "run")]) == 2
    assert "--force only with --publish" in capsys.readouterr().err
    assert cli.main(["bench", "--publish", str(tmp_path), "--mode", "quick"]) == 2
    assert "no run options with --publish" in capsys.readouterr().err
    assert cli.main(["bench", "--markdown", str(tmp_path / "x.md"), "--no-zoo",
                     "--family", "nothing"]) == 2  # (--family: a bad run stops even so)
    assert "--markdown only with --publish, --render-only or --recipes" in capsys.readouterr().err
    assert cli.main(["bench", "--agent", "klinotaxis", "--out", str(tmp_path / "run")]) == 2
    assert "--from RECORD too" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_run_into_a_folder_that_holds_files_is_refused_so_out_docs_cannot_replace_the_board(
        tmp_path, capsys):
    """Regression (review): `bench --out docs` wrote docs/scoreboard.md and
    docs/scoreboard/ over the published board, since only a run.json was
    looked for; a run's folder must be new or empty."""
    docs = tmp_path / "docs"
    (docs / "scoreboard").mkdir(parents=True)
    (docs / "scoreboard.md").write_text("published")
    assert cli.main(["bench", "--mode", "quick", "--family", "gaussian", "--no-zoo",
                     "--out", str(docs)]) == 2
    assert "a new or empty folder for this run" in capsys.readouterr().err
    assert (docs / "scoreboard.md").read_text() == "published"


def test_publish_refuses_figure_names_that_leave_the_figures_folder_and_linked_figures(
        tmp_path):
    """Regression (review): a run folder's record named its figures by any
    string, joined onto the published figures folder: '../x.png' or an
    absolute path wrote outside it, and a linked figure copied another file."""
    from plume_jax.scoreboard import runs

    board_json, page, figures = tmp_path / "b.json", tmp_path / "b.md", tmp_path / "figs"
    board_json.write_text(report.dump_record({"format": report.RECORD_FORMAT, "families": {}}))
    row = _shown_row("PlumeNav-Gaussian-v0", "k")
    for name in ("../escape.png", str(tmp_path / "abs.png"), "ok.png\n"):
        section = {**_section([row]), "figure": name, "protocol": protocol.FULL.as_dict()}
        folder = tmp_path / f"run{abs(hash(name))}"
        (folder / "scoreboard").mkdir(parents=True)
        (folder / "scoreboard.json").write_text(report.dump_record(
            {"format": report.RECORD_FORMAT, "families": {"gaussian": section}}))
        runs.write_run_info(folder, {"families": ["gaussian"], "done": ["gaussian"],
                                     "baselines": True, "zoo": True, "robustness": True,
                                     "added": [], "bases": None})
        with pytest.raises(ValidationError, match="plain .png file name"):
            runs.publish(folder, board_json, page, figures)
    secret = tmp_path / "secret.txt"
    secret.write_text("not a figure")
    linked = _run_folder(tmp_path / "linked", {"gaussian": {
        **_section([row]), "figure": "g.png", "protocol": protocol.FULL.as_dict()}})
    (linked / "scoreboard" / "g.png").unlink()
    (linked / "scoreboard" / "g.png").symlink_to(secret)
    with pytest.raises(ValidationError, match="figures are files, not links"):
        runs.publish(linked, board_json, page, figures)
    assert not figures.exists() and not (tmp_path / "escape.png").exists()


def test_publish_refuses_a_run_json_bench_did_not_write(tmp_path):
    from plume_jax.scoreboard import runs

    folder = _run_folder(tmp_path / "r", {"gaussian": {
        **_section([_shown_row("PlumeNav-Gaussian-v0", "k")]), "figure": "g.png",
        "protocol": protocol.FULL.as_dict()}})
    info = json.loads((folder / "run.json").read_text())
    for broken in ({"families": None}, {"added": [1]}, {"bases": [1]}, {"zoo": "yes"}):
        (folder / "run.json").write_text(json.dumps({**info, **broken}))
        with pytest.raises(ValidationError, match="run.json is not one bench wrote"):
            runs.read_run(folder)


def _tiny_bench(out, *extra):
    args = ["bench", "--mode", "quick", "--family", "gaussian", "--episodes", "2",
            "--no-baselines", "--no-zoo", "--quiet", *extra]
    if out is not None:
        args += ["--out", str(out)]
    assert cli.main(args) == 0
    if out is None:
        (out,) = (pathlib.Path("logs") / "bench").iterdir()
    return out, json.loads((out / "scoreboard.json").read_text())


def test_a_bench_run_writes_its_own_folder_and_never_the_published_board(tmp_path, monkeypatch):
    """Regression: `plume-jax bench` wrote docs/scoreboard.md,
    benchmarks/scoreboard.json and docs/scoreboard/*.png in the current
    folder, so a quick run replaced the published board; a run now goes to
    logs/bench/<date-time>/ and publishing is a separate, checked step."""
    monkeypatch.chdir(tmp_path)
    out, record = _tiny_bench(None, "--add", "klinotaxis", "--add", "surge=cast_and_surge",
                              "--no-robustness")
    assert out.parent == pathlib.Path("logs", "bench")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]  # no docs/, no benchmarks/
    assert sorted(p.name for p in out.iterdir()) == ["run.json", "scoreboard",
                                                      "scoreboard.json", "scoreboard.md"]
    info = json.loads((out / "run.json").read_text())
    assert info["done"] == info["families"] == ["gaussian"] and info["finished_at"]
    section = record["families"]["gaussian"]
    assert section["protocol"]["mode"] == "quick, 2 episodes"
    ok = [r for r in section["rows"] if r["status"] == "ok"]
    assert [(r["preset"], r["label"]) for r in ok] == [("PlumeNav-Gaussian-v0", "klinotaxis")]
    assert ok[0]["metrics"]["episodes"] == 2
    skipped = [r for r in section["rows"] if r["status"] == "not applicable"]
    assert len(skipped) == 5 and all(r["reason"].startswith("needs ") for r in skipped)
    markdown = (out / "scoreboard.md").read_text()
    assert "Mode **quick, 2 episodes**" in markdown
    assert "| PlumeNav-Gaussian-v0 | klinotaxis | yours |" in markdown
    assert "- surge: needs a sensor whose observation includes 'wind_east'" in markdown
    assert "Not run yet: filament" in markdown
    assert (out / "scoreboard" / "gaussian.png").stat().st_size > 1000
    assert "](scoreboard/gaussian.png)" in markdown and "## The zoo" in markdown
    again = tmp_path / "again.md"  # --render-only: the same page from the record
    assert cli.main(["bench", "--render-only", "--json", str(out / "scoreboard.json"),
                     "--markdown", str(again), "--figures", str(out / "scoreboard")]) == 0
    assert again.read_text().replace("](logs/bench/" + out.name + "/scoreboard/",
                                     "](scoreboard/") == markdown
    # --publish: a quick, partial run only when asked; it lands on the board named
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks").mkdir()
    assert cli.main(["bench", "--publish", str(out)]) == 2
    assert cli.main(["bench", "--publish", str(out), "--allow-quick", "--force"]) == 0
    published = json.loads((tmp_path / "benchmarks" / "scoreboard.json").read_text())
    assert published["families"] == record["families"]
    assert (tmp_path / "docs" / "scoreboard" / "gaussian.png").read_bytes() == \
        (out / "scoreboard" / "gaussian.png").read_bytes()
    assert (tmp_path / "docs" / "scoreboard.md").read_text() == markdown
    # --agent: only surge's rows rerun and merged into the published section (--from)
    rerun_out, merged = _tiny_bench(tmp_path / "rerun", "--add", "klinotaxis", "--add",
                                    "surge=cast_and_surge", "--no-robustness", "--agent",
                                    "surge", "--from", "benchmarks/scoreboard.json")
    rerun = merged["families"]["gaussian"]
    assert rerun["rows"] == section["rows"] and rerun["finished_at"] == section["finished_at"]
    assert [r["agents"] for r in rerun["reruns"]] == [["surge"]]
    assert "The rows of surge were rerun" in (rerun_out / "scoreboard.md").read_text()


@pytest.mark.slow  # two vmapped robustness programs and a start-cell map: 7 s to a minute on 2 cores, with the load
def test_bench_robustness_and_start_cell_map_on_a_tiny_run(tmp_path):
    out, record = _tiny_bench(tmp_path / "run", "--add", "klinotaxis")
    section = record["families"]["gaussian"]
    cells = {(r["axis"], r["level"]): r for r in section["robustness"]}
    assert cells[("plume scale", "50 %")]["status"] == "ok"
    assert cells[("sensor noise", "std 0.01")]["metrics"]["episodes"] == 2
    assert "Gaussian plume's peak" in cells[("source strength", "50–200 %")]["reason"]
    (grid,) = [m for m in section["maps"] if m["status"] == "ok"]
    values = [v for row in grid["success"] for v in row if v is not None]
    assert len(values) == 64 and all(0.0 <= v <= 1.0 for v in values)
    assert (out / "scoreboard" / "gaussian_start_cells.png").is_file()
    assert "### Robustness on PlumeNav-Gaussian-v0" in (out / "scoreboard.md").read_text()
    assert [r["label"] for r in section["robustness"]] == ["klinotaxis"] * len(
        robustness.variations("PlumeNav-Gaussian-v0"))


@pytest.mark.slow  # builds and traces the belief look-ahead policy: ~3 s on 2 busy cores
def test_a_zoo_entry_with_its_own_sensor_runs_with_it():
    (belief,) = [c for c in contenders.zoo_contenders()
                 if c.label.startswith("zoo:poisson-iso19x19-belief@")]
    planned, reason = board.plan("PlumeNav-Poisson-Iso19x19-v0", belief, 2, 0)
    assert reason is None and planned.env.describe()["sensor_type"] == "belief"
    assert planned.overrides == dict(belief.env_overrides)
    row = board.row("PlumeNav-Poisson-Iso19x19-v0", "poisson", belief, None, "x")
    assert row["own_settings"] == ["sensor"]


def test_a_zoo_entry_may_bring_its_own_sensor_and_nothing_else(tmp_path):
    from agents import zoo

    own = [c.env_overrides.keys() for c in contenders.zoo_contenders() if c.env_overrides]
    assert own and all(keys == {"sensor"} for keys in own)
    folder = tmp_path / "odd" / "1"
    (folder / "policy").mkdir(parents=True)
    (folder / "entry.yaml").write_text("preset: PlumeNav-Gaussian-v0\n"
                                       "env_overrides: {goal_radius: 50}\n")
    with pytest.raises(ValidationError, match=r"env_overrides with the key sensor only"):
        zoo.resolve("zoo:odd", tmp_path)


# --------------------------------------------------------------------------- rerun some agents

def _row(preset, label, kind="baseline", rate=1.0, steps=50.0):
    return {"family": "f", "preset": preset, "label": label, "kind": kind, "status": "ok",
            "metrics": _metrics(rate, 100, steps)}


def _section(rows, mode="quick", robustness=(), maps=()):
    return {"protocol": {**protocol.QUICK.as_dict(), "mode": mode}, "rows": rows,
            "verdicts": board.verdicts(rows), "robustness": list(robustness),
            "maps": list(maps), "wall_seconds": 60.0, "finished_at": "then",
            "machine_text": "cpu", "git_revision": "abc", "figure": "f.png"}


def test_a_rerun_zoo_version_replaces_its_older_rows_in_board_order():
    """zoo:x@2's rows replace zoo:x@1's (and only those), each in its preset's
    place and the board's agent order; verdicts follow the new rows; the
    robustness rows of an agent not rerun there stay as measured."""
    from plume_jax.scoreboard import rerun

    family = families.Family("f", "F", ("P1", "P2"), robustness_preset="P1")
    old_rob = [{**_row("P1", "k"), "axis": "nominal", "level": "preset"},
               {**_row("P1", "zoo:x@1", "zoo"), "axis": "nominal", "level": "preset"}]
    old = _section([_row("P1", "k", steps=60.0), _row("P1", "zoo:x@1", "zoo", steps=70.0),
                    _row("P2", "k"), _row("P2", "zoo:x@1", "zoo")], robustness=old_rob)
    board_order = ["k", "zoo:x@2", "mine"]
    x2 = Contender("zoo:x@2", "zoo", "zoo:x@2")
    partial = {**_section([_row("P1", "zoo:x@2", "zoo", steps=40.0),
                           {**_row("P2", "zoo:x@2", "zoo"), "status": "not applicable",
                            "reason": "needs y"}]), "finished_at": "now"}
    merged = rerun.merge_section(old, partial, family, [x2], board_order,
                                 with_robustness=False)
    assert [(r["preset"], r["label"]) for r in merged["rows"]] == [
        ("P1", "k"), ("P1", "zoo:x@2"), ("P2", "k"), ("P2", "zoo:x@2")]
    assert merged["verdicts"]["P1"] == {"best_zoo": "zoo:x@2", "beats_all": True,
                                        "not_beaten": []}
    assert merged["verdicts"]["P2"]["best_zoo"] is None
    assert merged["robustness"] == old_rob and "figure" not in merged
    assert merged["finished_at"] == "then" and merged["reruns"] == [
        {"agents": ["zoo:x@2"], "robustness": False, "wall_seconds": 60.0,
         "finished_at": "now", "machine_text": "cpu", "git_revision": "abc"}]
    assert "--agent zoo:x --no-robustness`" in "\n".join(report.rerun_lines("f", merged))


def test_a_rerun_names_agents_of_the_board_and_keeps_the_section_protocol():
    from plume_jax.scoreboard import rerun

    board_ = [Contender("k", "baseline", "k"), Contender("zoo:x@2", "zoo", "zoo:x@2")]
    assert [c.label for c in rerun.pick_contenders(board_, ["zoo:x", "k"])] == ["k", "zoo:x@2"]
    with pytest.raises(ValidationError, match=r"did you mean 'zoo:x@2'"):
        rerun.pick_contenders(board_, ["zoo:x@1"])
    gaussian = families.get_family("gaussian")
    record = {"families": {"gaussian": _section([])}}
    rerun.check_rerun(record, [gaussian], protocol.QUICK)
    with pytest.raises(ValidationError, match=r"mode 'quick', 100 episodes; this run: mode "
                                              r"'full', 1000"):
        rerun.check_rerun(record, [gaussian], protocol.FULL)
    with pytest.raises(ValidationError, match=r"run `plume-jax bench --family poisson` whole"):
        rerun.check_rerun(record, [families.get_family("poisson")], protocol.QUICK)


def test_bench_refuses_a_rerun_under_another_protocol_before_writing(tmp_path, capsys):
    """``plume-jax bench --agent`` on a family recorded in quick mode, asked in
    full mode, is refused before any run, and the record stays as it was."""
    from plume_jax.scoreboard import report

    record_path = tmp_path / "board.json"
    record = {"format": report.load_record(tmp_path / "none.json")["format"],
              "families": {"gaussian": _section([])}}
    record_path.write_text(report.dump_record(record), encoding="utf-8")
    before = record_path.read_bytes()
    out = tmp_path / "run"
    assert cli.main(["bench", "--family", "gaussian", "--mode", "full", "--agent", "klinotaxis",
                     "--from", str(record_path), "--out", str(out)]) == 2
    assert "this run: mode 'full'" in capsys.readouterr().err
    assert record_path.read_bytes() == before and not out.exists()


def test_the_not_applicable_list_is_one_line_per_agent():
    """Regression: the board listed every (agent, reason) pair on a line of
    its own, dozens of lines per family; now one line per agent, and a
    reason that holds on all the family's presets says so."""
    rows = [_row(p, "k") for p in ("A", "B", "C")]
    for preset, reason in (("A", "needs x"), ("B", "needs y"), ("C", "needs y")):
        rows.append({**_row(preset, "surge"), "status": "not applicable", "reason": reason})
    rows += [{**_row(p, "zoo:z@1", "zoo"), "status": "not applicable", "reason": "needs 4 "
              "actions"} for p in ("A", "B", "C")]
    assert report.not_applicable(rows) == [
        "- surge: needs x — on A; needs y — on B, C",
        "- zoo:z@1: needs 4 actions — on every preset"]
    shipped = json.loads((pathlib.Path(__file__).parents[2] / "benchmarks" /
                          "scoreboard.json").read_text())["families"]
    for section in shipped.values():
        agents = {r["label"] for r in section["rows"] if r["status"] == "not applicable"}
        assert len(report.not_applicable(section["rows"])) == len(agents)


def test_bench_progress_counts_the_familys_runs_with_an_eta(capsys):
    """Regression: bench's progress lines named the pair running but had no
    count or ETA; each family now shows runs done of its total, elapsed
    time and ETA (plume_jax.progress.ProgressBar, rich on a terminal)."""
    import io

    from plume_jax.scoreboard.bench import FamilyProgress

    stream = io.StringIO()
    family = families.Family("f", "F", ("P1", "P2"), robustness_preset="P1")
    progress = FamilyProgress(family, 3, with_robustness=True, stream=stream)
    progress.bar.min_interval_s = 0.0
    assert progress.bar.total == 2 * 3 + 2 * 3  # pairs, then a robustness run and map per agent
    for i in range(12):
        progress(f"run {i}")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[f] 0/12 runs (0.0%)") and lines[0].endswith("| run 0")
    assert lines[5].startswith("[f] 5/12 runs") and "| ETA " in lines[5]
    assert lines[-1].startswith("[f] 12/12 runs (100.0%)")
    quiet = io.StringIO()
    silent = FamilyProgress(family, 3, with_robustness=False, quiet=True, stream=quiet)
    assert silent.bar.total == 6
    silent("x")
    silent.close()
    assert quiet.getvalue() == ""


def _shown_row(preset, label):
    """A row the page can render (every metric of its table)."""
    row = _row(preset, label)
    row["metrics"].update(episodes=100, successes=100, sem_steps=1.0, median_steps=50,
                          p90_steps=60, path_efficiency=0.5)
    return row


def _run_folder(folder, sections, **info):
    """A bench run folder as `plume-jax bench --out` leaves it (no jit)."""
    from plume_jax.scoreboard import runs

    (folder / "scoreboard").mkdir(parents=True)
    for name, section in sections.items():
        (folder / "scoreboard" / section["figure"]).write_bytes(b"png of " + name.encode())
    record = {"format": report.RECORD_FORMAT, "families": sections}
    (folder / "scoreboard.json").write_text(report.dump_record(record))
    runs.write_run_info(folder, {"families": list(sections), "done": list(sections),
                                 "baselines": True, "zoo": True, "robustness": True,
                                 "added": [], "bases": None, **info})
    return folder


def test_publish_refuses_a_quick_or_partial_run_and_writes_nothing_then(tmp_path):
    from plume_jax.scoreboard import runs

    board_json, page, figures = (tmp_path / "board.json", tmp_path / "board.md",
                                 tmp_path / "figs")
    old = {"format": report.RECORD_FORMAT, "families": {
        "movie": {**_section([_shown_row("PlumeNav-Movie-v0", "k")]), "figure": "m.png"},
        "gaussian": {**_section([]), "finished_at": "before"}}}
    old["families"]["movie"]["protocol"] = protocol.FULL.as_dict()
    board_json.write_text(report.dump_record(old))
    before = board_json.read_bytes()
    full = {**_section([_shown_row("PlumeNav-Gaussian-v0", "k")]), "figure": "gaussian.png",
            "protocol": protocol.FULL.as_dict()}

    def publish(folder, **flags):
        return runs.publish(folder, board_json, page, figures, **flags)

    quick = _run_folder(tmp_path / "quick", {"gaussian": {**full,
                                                          "protocol": protocol.QUICK.as_dict()}})
    with pytest.raises(ValidationError, match=r"ran gaussian \(mode 'quick'\): pass "
                                              r"--allow-quick"):
        publish(quick)
    stopped = _run_folder(tmp_path / "stopped", {"gaussian": full},
                          families=["gaussian", "filament"])
    with pytest.raises(ValidationError, match=r"stopped before finishing filament: pass --force"):
        publish(stopped)
    stale = _run_folder(tmp_path / "stale", {"gaussian": full},
                        bases={"gaussian": {"finished_at": "earlier", "reruns": 0}})
    with pytest.raises(ValidationError, match=r"rerun of gaussian merged into a section that is "
                                              r"no longer the published one"):
        publish(stale)
    lean = _run_folder(tmp_path / "lean", {"gaussian": full}, zoo=False, added=["mine"])
    with pytest.raises(ValidationError, match=r"without the zoo agents \(--no-zoo\); it has "
                                              r"agents of your own \(--add mine\)"):
        publish(lean)
    with pytest.raises(ValidationError, match=r"a bench run folder"):
        publish(tmp_path)
    assert board_json.read_bytes() == before and not page.exists() and not figures.exists()
    assert publish(quick, allow_quick=True) == ["gaussian"]
    assert publish(stale, force=True) == ["gaussian"]  # --force: published as asked
    record = json.loads(board_json.read_text())
    assert record["families"]["movie"] == old["families"]["movie"]  # other families kept
    assert record["families"]["gaussian"] == full
    assert (figures / "gaussian.png").read_bytes() == b"png of gaussian"
    assert "Mode **full**" in page.read_text() and "## Movie plume" in page.read_text()
    fresh = _run_folder(tmp_path / "fresh", {"gaussian": full}, bases={
        "gaussian": runs.base_fingerprint(record["families"]["gaussian"])})
    assert publish(fresh) == ["gaussian"]  # a rerun of the section now published


def test_publish_never_silently_drops_the_published_sections_rows(tmp_path, capsys):
    """Issue 55 claim 2: ``bench --publish DIR --allow-quick --force`` of a
    quick gaussian run replaced the published section whole, dropping its
    recipe rows, zoo verdicts, robustness table and start-cell maps without
    a word. It is now refused, naming what would go, unless
    --drop-unmeasured, which says what it removed."""
    import copy

    from plume_jax.scoreboard import runs

    published = copy.deepcopy(json.loads(pathlib.Path("benchmarks/scoreboard.json").read_text(
        encoding="utf-8"))["families"]["gaussian"])
    board_json, page, figures = tmp_path / "board.json", tmp_path / "board.md", tmp_path / "figs"
    board_json.write_text(report.dump_record({"format": report.RECORD_FORMAT,
                                              "families": {"gaussian": published}}))
    before = board_json.read_bytes()
    row = _shown_row("PlumeNav-Gaussian-v0", "klinotaxis")
    quick = _run_folder(tmp_path / "quick", {"gaussian": {**_section([row]),
                                                          "figure": "gaussian.png"}},
                        zoo=False, robustness=False)
    with pytest.raises(ValidationError, match="pass --drop-unmeasured") as info:
        runs.publish(quick, board_json, page, figures, allow_quick=True, force=True)
    message = str(info.value)
    for lost in ("rows of", "the zoo verdicts on", "robustness cells", "start-cell maps of",
                 f"{len(published['recipes'])} zoo recipe rows"):
        assert lost in message, (lost, message)
    assert "\n" not in message and len(message) < 1500
    assert board_json.read_bytes() == before and not page.exists() and not figures.exists()
    # the same through the command line: one line, exit 2
    assert cli.main(["bench", "--publish", str(quick), "--allow-quick", "--force", "--json",
                     str(board_json), "--markdown", str(page), "--figures", str(figures)]) == 2
    assert "--drop-unmeasured" in capsys.readouterr().err
    # asked for: published, and what went is said
    said = []
    assert runs.publish(quick, board_json, page, figures, allow_quick=True, force=True,
                        drop_unmeasured=True, say=said.append) == ["gaussian"]
    assert len(said) == 1 and said[0].startswith(
        "removed from the published board (--drop-unmeasured): gaussian: ")
    assert json.loads(board_json.read_text())["families"]["gaussian"]["rows"] == [row]
    # a run that measures again everything the section holds needs no flag
    again = _run_folder(tmp_path / "again", {"gaussian": {
        **copy.deepcopy(published), "figure": "gaussian.png", "finished_at": "later"}})
    (again / "scoreboard" / published["map_figure"]).write_bytes(b"png")
    board_json.write_text(report.dump_record({"format": report.RECORD_FORMAT,
                                              "families": {"gaussian": published}}))
    assert runs.publish(again, board_json, page, figures) == ["gaussian"]
    assert runs.unmeasured("gaussian", published, published) is None


def test_drop_unmeasured_is_only_taken_with_publish(capsys):
    assert cli.main(["bench", "--family", "gaussian", "--drop-unmeasured"]) == 2
    assert "--drop-unmeasured only with --publish" in capsys.readouterr().err
