"""Scenario runner and `plume-jax evaluate`, used as a user would."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import plume_jax
from plume_jax import ValidationError, cli
from plume_jax.evaluate import scenario as sc
from plume_jax.evaluate.rollout import host_rollout, rollout
from tests.evaluate.constant_action import ConstantHostAgent, ConstantPolicy

SMALL_ENV = {"preset": "PlumeNav-Gaussian-v0",
             "overrides": {"grid_size": [24, 24], "sigma": 5.0, "max_steps": 80}}


def _write(tmp_path, name, agent, expect=None, episodes=64):
    path = tmp_path / f"{name}.yaml"
    spec = {"name": name, "env": SMALL_ENV, "agent": {"name": agent}, "episodes": episodes,
            "seed": 1}
    if expect:
        spec["expect"] = expect
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.slow
def test_chemotaxis_beats_random_walk_and_outputs_are_written(tmp_path, capsys):
    k = _write(tmp_path, "small_klino", "klinotaxis", {"min_success_rate": 0.9})
    r = _write(tmp_path, "small_random", "random_walk")
    out = tmp_path / "out"
    assert cli.main(["evaluate", "--scenario", str(k), str(r), "--out", str(out),
                     "--quiet"]) == 0
    klino = json.loads((out / "small_klino__klinotaxis.json").read_text())
    rand = json.loads((out / "small_random__random_walk.json").read_text())
    assert klino["metrics"]["success_rate"] > rand["metrics"]["success_rate"] + 0.3
    assert klino["metrics"]["success_ci95"][0] <= klino["metrics"]["success_rate"] <= \
        klino["metrics"]["success_ci95"][1]
    assert 0 < klino["metrics"]["path_efficiency"] <= 1.0
    assert (out / "small_klino.png").read_bytes()[:4] == b"\x89PNG"
    assert "### small_klino" in (out / "summary.md").read_text()
    printed = capsys.readouterr().out
    assert "### small_random" in printed and "| random_walk | 64 |" in printed


def test_failed_expectation_exits_non_zero(tmp_path):
    path = _write(tmp_path, "impossible", "random_walk", {"min_success_rate": 0.99})
    assert cli.main(["evaluate", "--scenario", str(path), "--out", str(tmp_path / "o"),
                     "--quiet"]) == 1
    report = json.loads((tmp_path / "o" / "impossible__random_walk.json").read_text())
    assert report["failures"] and "min_success_rate" in report["failures"][0]
    assert report["expectations"]["status"] == "failed"


def test_regression_against_a_saved_baseline_is_flagged(tmp_path):
    path = _write(tmp_path, "base", "klinotaxis")
    baseline = tmp_path / "baseline.json"
    run = ["evaluate", "--scenario", str(path), "--quiet"]
    assert cli.main([*run, "--out", str(tmp_path / "a"), "--save-baseline", str(baseline)]) == 0
    # same scenario and seed against itself: no regression
    assert cli.main([*run, "--out", str(tmp_path / "b"), "--baseline", str(baseline)]) == 0
    assert json.loads((tmp_path / "b" / "base__klinotaxis.json").read_text())["baseline"] == \
        {"status": "matched"}
    # a random walk under the same scenario name regresses against klinotaxis
    saved = json.loads(baseline.read_text())
    saved["reports"][0]["agent"].update(name="random_walk", label="random_walk")
    baseline.write_text(json.dumps(saved))
    assert cli.main([*run, "--agent", "random_walk", "--out", str(tmp_path / "c"),
                     "--baseline", str(baseline)]) == 1


def test_evaluation_is_deterministic_for_a_seed(tmp_path):
    scenario = sc.load_scenario(_write(tmp_path, "det", "klinotaxis"))
    a = sc.run_scenario(scenario)["metrics"]
    b = sc.run_scenario(scenario)["metrics"]
    for key in ("success_rate", "mean_steps", "median_steps", "path_efficiency", "mean_return"):
        assert a[key] == b[key]
    c = sc.run_scenario(scenario, seed=99)["metrics"]
    assert (c["mean_steps"], c["path_efficiency"]) != (a["mean_steps"], a["path_efficiency"])


@pytest.mark.parametrize("spec, field", [
    ({"env": SMALL_ENV, "agent": "klinotaxis", "bogus": 1}, "bogus"),
    ({"env": {"overrides": {}}, "agent": "klinotaxis"}, "env"),
    ({"env": SMALL_ENV, "agent": {"params": {}}}, "agent"),
    ({"env": SMALL_ENV, "agent": "klinotaxis", "episodes": 0}, "episodes"),
    ({"env": SMALL_ENV, "agent": "klinotaxis", "expect": {"min_sucess_rate": 0.5}},
     "expect.min_sucess_rate"),
])
def test_bad_scenarios_are_rejected_naming_the_field(spec, field):
    with pytest.raises(ValidationError) as excinfo:
        sc.validate_scenario(spec)
    assert excinfo.value.parameter == field


def test_bad_scenario_file_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("env: {preset: PlumeNav-Gaussian-v0}\nagent: nope\n")
    assert cli.main(["evaluate", "--scenario", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "agent='nope'" in capsys.readouterr().err
    assert not list((tmp_path / "o").iterdir())  # nothing ran, nothing written


def test_wilson_interval_known_values():
    low, high = sc.wilson_interval(50, 100)
    assert low == pytest.approx(0.4038, abs=1e-4) and high == pytest.approx(0.5962, abs=1e-4)
    assert sc.wilson_interval(0, 10)[0] == 0.0
    assert sc.wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert sc.wilson_interval(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 5000), data=st.data())
def test_wilson_interval_holds_its_point_and_stays_in_the_unit_interval(n, data):
    k = data.draw(st.sampled_from([0, n]) | st.integers(0, n), label="successes")
    low, high = sc.wilson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0


@pytest.mark.parametrize("n", [4, 10, 14, 19, 24, 29, 33, 1000, 4999])
def test_wilson_interval_upper_bound_is_one_at_all_successes(n):
    # the closed form gave 0.9999999999999999 here, a point outside its own
    # interval and a negative error bar that crashed `plume-jax evaluate`
    assert sc.wilson_interval(n, n)[1] == 1.0
    assert sc.wilson_interval(0, n)[0] == 0.0


def test_scenario_figure_draws_a_run_with_every_episode_successful(klino_runs):
    from plume_jax.evaluate.figures import scenario_figure

    env, params, _, _, full, _ = klino_runs
    metrics = dict(sc.summarise(full, float(params.goal_radius)), episodes=10, successes=10,
                   success_rate=1.0, success_ci95=list(sc.wilson_interval(10, 10)))
    report = {"scenario": "all", "preset": "PlumeNav-Gaussian-v0", "seed": 3,
              "agent": {"name": "klinotaxis"}, "metrics": metrics,
              "_rollout": full, "_env": env, "_params": params}
    scenario_figure([report])  # raised "'yerr' must not contain negative values"


def test_a_failing_figure_loses_no_results(tmp_path, capsys, monkeypatch):
    from plume_jax.evaluate import figures

    def broken(reports):
        raise RuntimeError("no figure today")

    monkeypatch.setattr(figures, "scenario_figure", broken)
    # the other tests' 64 episodes: their compiled rollout serves (an equal one is reused)
    path = _write(tmp_path, "fig", "klinotaxis")
    out = tmp_path / "out"
    assert cli.main(["evaluate", "--scenario", str(path), "--out", str(out),
                     "--save-baseline", str(tmp_path / "base.json"), "--quiet"]) == 0
    assert json.loads((out / "fig__klinotaxis.json").read_text())["metrics"]["episodes"] == 64
    assert "### fig" in (out / "summary.md").read_text()
    assert json.loads((tmp_path / "base.json").read_text())["reports"]
    assert sorted(p.name for p in out.iterdir()) == ["fig__klinotaxis.json", "summary.md"]
    err = capsys.readouterr().err
    assert "warning: figure" in err and "fig.png" in err and "no figure today" in err
    with pytest.warns(RuntimeWarning, match="no figure today"):
        sc.write_outputs([json.loads((out / "fig__klinotaxis.json").read_text())],
                         str(tmp_path / "again"))
    assert (tmp_path / "again" / "summary.md").exists()


def test_host_and_functional_rollouts_agree_for_the_same_policy():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0, max_steps=30)
    east = env.action_ids["move_east"]
    key = jax.random.key(4)
    f = rollout(env, params, ConstantPolicy(east), key, 8, 30)
    h = host_rollout(env, params, ConstantHostAgent(east), key, 8, 30)
    for name in ("success", "episode_length", "path_length", "start_distance"):
        np.testing.assert_array_equal(np.asarray(getattr(f, name)), np.asarray(getattr(h, name)))


@pytest.fixture(scope="module")
def klino_runs():
    """Klinotaxis on a small Gaussian: the full 200-step rollout and the one
    that stops when every first episode has ended (same key)."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                                 max_steps=200)
    from agents import make_agent

    policy = make_agent("klinotaxis", env)
    key = jax.random.key(3)
    full = rollout(env, params, policy, key, 16, 200)
    early = rollout(env, params, policy, key, 16, 200, until_done=True)
    return env, params, policy, key, full, early


def test_until_done_rollouts_stop_early_and_report_the_same_episodes(klino_runs):
    """``until_done`` (used by the scenario runner, so that a long horizon such
    as the windy Poisson preset's 10 000 steps costs only the longest
    episode) stops the loop once every first episode has ended and reports
    bit-identical first episodes; the host driver does the same."""
    env, params, policy, key, full, early = klino_runs
    assert bool(jnp.all(full.finished)) and int(full.steps_run) == 200
    assert int(early.steps_run) == int(jnp.max(full.episode_length)) < 200
    for name in ("success", "finished", "episode_length", "episode_return", "path_length",
                 "start_distance", "trajectories_valid"):
        np.testing.assert_array_equal(np.asarray(getattr(early, name)),
                                      np.asarray(getattr(full, name)), err_msg=name)
    valid = np.asarray(full.trajectories_valid)
    np.testing.assert_array_equal(np.asarray(early.trajectories)[valid],
                                  np.asarray(full.trajectories)[valid])

    east = ConstantHostAgent(env.action_ids["move_east"])
    h_full = host_rollout(env, params, east, key, 4, 60)
    h_early = host_rollout(env, params, east, key, 4, 60, until_done=True)
    assert int(h_early.steps_run) == int(np.max(np.asarray(h_full.episode_length)))
    assert h_early.trajectories.shape == (4, int(h_early.steps_run) + 1, 2)
    np.testing.assert_array_equal(np.asarray(h_early.episode_length),
                                  np.asarray(h_full.episode_length))


def test_rollouts_record_the_first_episode_of_several_envs(klino_runs):
    """The recorded paths (several envs, not only env 0) agree with the
    per-env outcomes: one entry per step of the first episode plus the start,
    unit grid moves summing to the path length, ending in the goal region
    when the episode succeeded."""
    env, params, _, _, full, _ = klino_runs
    paths = np.asarray(full.trajectories)
    valid = np.asarray(full.trajectories_valid)
    assert paths.shape == (4, 201, 2) and valid.shape == (4, 201)
    goal = np.asarray(env.goal_location(full.final_plume, params))
    for k in range(4):
        xy = paths[k][valid[k]]
        assert len(xy) == int(full.episode_length[k]) + 1
        moves = np.linalg.norm(np.diff(xy, axis=0), axis=1)
        assert np.all(moves <= 1.0 + 1e-6)
        assert np.sum(moves) == pytest.approx(float(full.path_length[k]), rel=1e-5)
        if bool(full.success[k]):
            assert np.linalg.norm(xy[-1] - goal) <= float(params.goal_radius) + 1e-6
    assert len({tuple(paths[k][0]) for k in range(4)}) > 1  # distinct envs, distinct starts


def test_progress_callback_reports_and_changes_no_result(klino_runs):
    """The progress callback sees the steps advance and every first episode
    end, and the results are bit-identical to the run without it."""
    env, params, policy, key, _, early = klino_runs
    calls = []

    def progress(steps, finished):
        calls.append((int(steps), int(finished)))

    watched = jax.block_until_ready(rollout(env, params, policy, key, 16, 200, until_done=True,
                                            progress=progress, progress_every=10))
    for x, y in zip(jax.tree.leaves(watched), jax.tree.leaves(early)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    steps = [c[0] for c in calls]
    assert steps == sorted(steps) and steps[-1] == int(early.steps_run)
    assert all(s % 10 == 0 for s in steps[:-1])
    assert calls[-1][1] == 16 and [c[1] for c in calls] == sorted(c[1] for c in calls)


def test_run_figure_has_a_title_a_colour_bar_and_several_episodes(klino_runs):
    from plume_jax.evaluate.figures import outcome_text, run_figure

    env, params, _, _, full, _ = klino_runs
    metrics = sc.summarise(full, float(params.goal_radius))
    fig = run_figure(env, params, full, f"small — klinotaxis\n{outcome_text(metrics)}")
    ax, colour_bar = fig.axes
    assert "klinotaxis" in ax.get_title() and "success 100.0%" in ax.get_title()
    assert "concentration" in colour_bar.get_ylabel()
    entries = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum(e.startswith("episode ") for e in entries) == 4
    assert all("reached in" in e for e in entries if e.startswith("episode "))


def test_scenario_figure_puts_agents_side_by_side(klino_runs):
    """Success with its interval and mean steps ± SE per agent, then a
    trajectory panel (with colour bar) per agent."""
    from plume_jax.evaluate.figures import scenario_figure

    env, params, _, _, full, _ = klino_runs
    metrics = sc.summarise(full, float(params.goal_radius))
    reports = [{"scenario": "small", "preset": "PlumeNav-Gaussian-v0", "seed": 3,
                "agent": {"name": "klinotaxis", "label": label}, "metrics": metrics,
                "_rollout": full, "_env": env, "_params": params} for label in ("a", "b")]
    fig = scenario_figure(reports)
    titles = [ax.get_title() for ax in fig.axes]
    assert any("small — a" in t for t in titles) and any("small — b" in t for t in titles)
    success_ax = next(ax for ax in fig.axes if "success rate" in ax.get_ylabel())
    assert [t.get_text() for t in success_ax.get_xticklabels()] == ["a", "b"]
    assert any("mean steps" in ax.get_ylabel() for ax in fig.axes)
    assert sum("concentration" in ax.get_ylabel() for ax in fig.axes) == 2


def test_shipped_scenarios_are_valid():
    import pathlib

    folder = pathlib.Path(__file__).resolve().parents[2] / "configs" / "scenarios"
    files = sorted(folder.glob("*.yaml"))
    assert files
    for path in files:
        scenario = sc.load_scenario(path)
        assert scenario["env"]["preset"] in plume_jax.PRESETS


def _known_outcome(lengths, success):
    """A RolloutResult with the given first-episode lengths and successes
    (nothing else matters to the tail)."""
    from plume_jax.evaluate.rollout import RolloutResult

    n = len(lengths)
    zeros = np.zeros(n, np.float32)
    return RolloutResult(success=np.asarray(success), finished=np.asarray(success),
                         episode_length=np.asarray(lengths, np.int32), episode_return=zeros,
                         path_length=zeros + 1.0, start_distance=zeros, trajectories=None,
                         trajectories_valid=None, steps_run=np.int32(max(lengths)),
                         final_agent=None, final_plume=None)


def test_summary_reports_the_tail_of_steps_and_of_episode_length():
    """Issue 16 asks for the full distribution: p90 and p99 of the steps to
    success (successful episodes) and of the episode length (all, the
    unfinished at num_steps), by linear interpolation between order
    statistics."""
    # successes take 1..100 steps; 100 failures ran out at 500 steps
    lengths = list(range(1, 101)) + [500] * 100
    m = sc.summarise(_known_outcome(lengths, [True] * 100 + [False] * 100), goal_radius=0.0)
    assert m["median_steps"] == 50.5
    assert m["p90_steps"] == pytest.approx(90.1)  # 1 + 0.9 * 99
    assert m["p99_steps"] == pytest.approx(99.01)
    assert m["p90_episode_length"] == 500.0 and m["p99_episode_length"] == 500.0
    table = sc.markdown_table([{"scenario": "s", "preset": "P", "seed": 0, "metrics": m,
                                "agent": {"name": "a", "label": "a"}, "failures": [],
                                "expectations": {"status": "skipped", "reason": "-"}}])
    assert "| p90 / p99 steps | episode length p90 / p99 |" in table
    assert "| 50 | 90 / 99 | 500 / 500 |" in table


def test_summary_tail_without_successes_is_none():
    m = sc.summarise(_known_outcome([7, 9], [False, False]), goal_radius=0.0)
    assert m["p90_steps"] is None and m["p99_steps"] is None
    assert m["p90_episode_length"] == pytest.approx(8.8)


@pytest.mark.parametrize("spec, field, suggestion", [
    ({"env": SMALL_ENV, "agent": "klinotaxis", "episods": 10}, "episods", "episodes"),
    ({"env": {**SMALL_ENV, "overide": {}}, "agent": "klinotaxis"}, "env.overide", "overrides"),
    ({"env": SMALL_ENV, "agent": {"name": "klinotaxis", "param": {}}}, "agent.param", "params"),
])
def test_misspelt_scenario_key_gets_the_train_configs_did_you_mean(spec, field, suggestion):
    """Scenario files are resolved by plume_jax.settings.resolve_keys, as training
    configs and component settings are: one message for an unknown key."""
    with pytest.raises(ValidationError, match=f"did you mean '{suggestion}'") as excinfo:
        sc.validate_scenario(spec)
    assert excinfo.value.parameter == field
    assert "expected a known scenario" in str(excinfo.value)


def test_scenario_keys_are_declared_settings_with_docs():
    for section, table in sc.SCENARIO_SCHEMA.items():
        for key, setting in table.items():
            assert setting.doc, f"{section}.{key}"
    assert sc.SCENARIO_KEYS == set(sc.SCENARIO_SETTINGS)
    with pytest.raises(ValidationError, match=r"expect.min_success_rate=1.5 is invalid"):
        sc.validate_scenario({"env": SMALL_ENV, "agent": "klinotaxis",
                              "expect": {"min_success_rate": 1.5}})


def test_evaluate_into_a_folder_with_earlier_reports_is_refused_unless_overwrite(tmp_path, capsys):
    """Issue 30 item 6: a second `evaluate` into one --out left the first
    run's reports of other agents beside the new ones. A folder that is not
    empty is now refused (one line, nothing run); --overwrite replaces the
    earlier evaluate's outputs (reports, summary.md, figure, a baseline saved
    there) once the new rollouts are done and leaves other files alone."""
    path = _write(tmp_path, "stale", "klinotaxis")  # 64 episodes: the compiled rollouts above
    out = tmp_path / "out"
    assert cli.main(["evaluate", "--scenario", str(path), "--agent", "klinotaxis",
                     "random_walk", "--out", str(out), "--save-baseline",
                     str(out / "base.json"), "--quiet"]) in (0, 1)
    first = sorted(p.name for p in out.iterdir())
    assert first == ["base.json", "stale.png", "stale__klinotaxis.json",
                     "stale__random_walk.json", "summary.md"]
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()

    again = ["evaluate", "--scenario", str(path), "--agent", "klinotaxis", "--out", str(out),
             "--quiet"]
    assert cli.main(again) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("plume-jax: error: --out")
    assert "--overwrite" in err
    assert sorted(p.name for p in out.iterdir()) == sorted([*first, "notes.txt"])  # untouched

    assert cli.main([*again, "--overwrite"]) in (0, 1)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "stale.png",
                                                     "stale__klinotaxis.json", "summary.md"]
    assert (out / "notes.txt").read_text() == "mine"
    assert "random_walk" not in (out / "summary.md").read_text()


@pytest.mark.slow
def test_a_policy_trained_on_another_grid_is_warned_and_env_from_run_uses_its_own(tmp_path,
                                                                                capsys):
    """Regression: a policy trained on a 32 x 32 grid ran on a 128 x 128
    scenario without a word (only the spaces were checked). Now the
    differing settings are named in a warning, and --env-from-run runs the
    policy on the env its policy.json records."""
    from tests.policy_folders import write_policy_folder

    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[32, 32], goal_radius=3.0)
    policy = write_policy_folder(tmp_path / "policy", env, params)
    scenario = tmp_path / "big.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "big", "env": {"preset": "PlumeNav-Gaussian-v0"}, "max_steps": 40,
        "agent": {"name": "klinotaxis"}, "episodes": 2, "seed": 1}))
    args = ["evaluate", "--scenario", str(scenario), "--agent", "trained", "--agent-param",
            f"path={policy}", "--quiet", "--episodes", "2"]
    assert cli.main([*args, "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "warning: scenario 'big': agent 'trained' was trained on PlumeNav-Gaussian-v0 with " \
        "other settings than this env (grid_size: trained [32, 32], here [128, 128]; " \
        "goal_radius: trained 3.0, here 5.0; plume.source: trained [15.0, 15.0], here " \
        "[63.0, 63.0]); --env-from-run" in err
    assert cli.main([*args, "--out", str(tmp_path / "b"), "--env-from-run"]) == 0
    assert "warning" not in capsys.readouterr().err
    (report,) = [json.loads(p.read_text()) for p in (tmp_path / "b").glob("big__*.json")]
    assert report["overrides"]["grid_size"] == [32, 32] and report["max_steps"] == 1000
    assert report["overrides"]["goal_radius"] == 3.0  # the policy's own env, budget included
    assert report["preset"] == "PlumeNav-Gaussian-v0"
    # the scenario's own agent is no trained policy: nothing to take the env from
    assert cli.main(["evaluate", "--scenario", str(scenario), "--env-from-run", "--quiet",
                     "--out", str(tmp_path / "c")]) == 2
    assert "--env-from-run='klinotaxis' is invalid: expected trained agents only" in \
        capsys.readouterr().err


def test_env_differences_name_settings_and_skip_the_reward_and_budget():
    trained = {"id": "P", "grid_size": [32, 32], "max_steps": 200,
               "reward": {"type": "sparse"}, "plume": {"type": "gaussian", "sigma": 5.0},
               "sensor": {"type": "concentration"}}
    here = {"id": "P", "grid_size": [32, 32], "max_steps": 1000,
            "reward": {"type": "potential_shaping"}, "plume": {"type": "gaussian", "sigma": 9.0},
            "sensor": {"type": "binary", "threshold": 0.1}}
    assert sc.env_differences(trained, here) == [
        "plume.sigma: trained 5.0, here 9.0", "sensor: trained 'concentration', here 'binary'"]
    assert sc.env_differences(trained, trained) == []
    assert sc.env_differences({"plume": {"type": "g", "source": [1.0, 2.0]}},
                              {"plume": {"type": "g", "source": (1.0, np.float32(2.0))}}) == []
