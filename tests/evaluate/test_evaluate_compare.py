"""`plume-jax evaluate` comparing agents in one call, used as a user would
(issue 14 "one command to compare agents"; issue 13 items 16 and 17):
per-agent parameters, every pair checked before any rollout, expectations
checked or skipped with the reason, missing baselines said, one table and
one figure per scenario, safe output names, progress on stderr."""

from __future__ import annotations

import json

import hypothesis.strategies as st
import pytest
import yaml
from hypothesis import given

import plume_jax
from plume_jax import ValidationError, cli
from plume_jax.cli.evaluate import parse_agent_choices
from plume_jax.evaluate import scenario as sc
from tests.policy_folders import write_policy_folder

#: A small Gaussian plume with a wind sensor, so that klinotaxis,
#: cast_and_surge, random_walk and a trained policy all run on it.
WINDY = {"preset": "PlumeNav-Gaussian-v0",
         "overrides": {"grid_size": [24, 24], "sigma": 5.0, "max_steps": 60,
                       "wind_speed": 1.0, "wind_direction": 0.0,
                       "sensor": {"type": "composite", "sensors": [
                           {"type": "concentration"}, {"type": "wind", "frame": "world"}]}}}
#: A name that would escape the output folder if used as a path.
ESCAPING_NAME = "../escaped/windy run"


def _scenario(folder, name, agent, expect=None, episodes=32, seed=1):
    path = folder / f"{sc.safe_name(name)}.yaml"
    spec = {"name": name, "env": WINDY, "agent": agent, "episodes": episodes, "seed": seed}
    if expect:
        spec["expect"] = expect
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """One `evaluate` call: a scenario whose own agent is klinotaxis with an
    expectation it cannot meet, run with klinotaxis (its own, with a default
    parameter given explicitly), cast_and_surge with its own threshold and a
    trained policy with its path; a baseline holding only klinotaxis;
    progress lines on stderr."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("compare")
    scenarios = root / "scenarios"
    scenarios.mkdir()
    _scenario(scenarios, ESCAPING_NAME, "klinotaxis", {"max_mean_steps": 1})
    env, params = plume_jax.make(WINDY["preset"], **WINDY["overrides"])
    policy = write_policy_folder(root / "policy", env, params)
    baseline = root / "baseline.json"
    baseline.write_text(json.dumps({"reports": [{
        "scenario": ESCAPING_NAME, "agent": {"name": "klinotaxis", "label": "klinotaxis"},
        "metrics": {"success_rate": 0.5, "success_ci95": [0.4, 0.6], "mean_steps": 100.0,
                    "sem_steps": 1.0}}]}))
    out = root / "deep" / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main([
            "evaluate", "--scenario", str(scenarios),
            "--agent", "klinotaxis", "cast_and_surge", "--agent", "trained",
            "--agent-param", "cast_and_surge.threshold=0.2",
            "--agent-param", f"trained.path={policy}",
            "--agent-param", "klinotaxis.obs_label=concentration",
            "--baseline", str(baseline), "--save-baseline", str(root / "saved.json"),
            "--out", str(out)])
    reports = {json.loads(p.read_text())["agent"]["label"]: json.loads(p.read_text())
               for p in out.glob("*.json")}
    return {"code": code, "out": out, "root": root, "reports": reports, "policy": policy,
            "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}


AGENTS = ("klinotaxis", "cast_and_surge", "trained")


def test_each_agent_runs_with_its_own_parameters(compared):
    reports = compared["reports"]
    assert sorted(reports) == sorted(AGENTS)
    assert reports["cast_and_surge"]["agent"]["params"] == {"threshold": 0.2}
    assert reports["trained"]["agent"]["params"] == {"path": str(compared["policy"])}
    assert reports["klinotaxis"]["agent"]["params"] == {"obs_label": "concentration"}
    for report in reports.values():
        assert report["metrics"]["episodes"] == 32
    # klinotaxis finds a sigma-5 plume far more often than random weights do
    assert reports["klinotaxis"]["metrics"]["success_rate"] > \
        reports["trained"]["metrics"]["success_rate"]


def test_expectations_are_checked_for_the_scenarios_agent_and_skipped_with_a_reason(compared):
    """`--agent` once dropped the scenario's expectations and printed "ok"."""
    reports = compared["reports"]
    own = reports["klinotaxis"]  # its explicit parameter is its default: still its own agent
    assert own["expectations"]["status"] == "failed"
    assert own["failures"] and "max_mean_steps" in own["failures"][0]
    assert compared["code"] == 1
    for label in ("cast_and_surge", "trained"):
        skipped = reports[label]["expectations"]
        assert skipped["status"] == "skipped", label
        assert "'klinotaxis'" in skipped["reason"] and f"'{label}'" in skipped["reason"]
        assert reports[label]["failures"] == []
    table = compared["stdout"]
    assert "| cast_and_surge |" in table and "expectations skipped" in table
    assert "FAIL: mean steps" in table
    assert "| ok" not in table


def test_a_pair_without_a_baseline_is_said_not_printed_as_ok(compared):
    reports = compared["reports"]
    assert reports["klinotaxis"]["baseline"]["status"] in ("matched", "regressed")
    for label in ("cast_and_surge", "trained"):
        assert reports[label]["baseline"]["status"] == "missing"
    assert compared["stdout"].count("NO BASELINE") == 2
    assert "2 of 3 runs have no baseline" in compared["stderr"]
    saved = json.loads((compared["root"] / "saved.json").read_text())
    assert {r["agent"]["label"] for r in saved["reports"]} == set(reports)


def test_one_table_and_one_figure_per_scenario(compared):
    out = compared["out"]
    summary = (out / "summary.md").read_text()
    assert summary.count("### ") == 1 and summary.count("| agent |") == 1
    assert "| median steps | p90 / p99 steps | episode length p90 / p99 | path efficiency |" \
        in summary
    for label in AGENTS:
        assert f"| {label} | 32 |" in summary
        m = compared["reports"][label]["metrics"]
        assert m["p90_episode_length"] <= m["p99_episode_length"]
        assert m["p99_steps"] is None or m["median_steps"] <= m["p90_steps"] <= m["p99_steps"]
    figures = list(out.glob("*.png"))
    assert len(figures) == 1 and figures[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scenario_names_that_look_like_paths_stay_inside_out(compared):
    """A scenario `name: ../escaped/windy run` once wrote its files outside
    --out (and `a/b` crashed)."""
    out, root = compared["out"], compared["root"]
    written = sorted(p.name for p in out.iterdir())
    assert all("/" not in n and not n.startswith(".") for n in written)
    assert not (root / "deep" / "escaped").exists() and not (root / "escaped").exists()
    assert "escaped_windy_run.png" in written
    assert compared["reports"]["trained"]["scenario"] == ESCAPING_NAME  # shown as written


def test_progress_lines_go_to_stderr(compared):
    lines = [line for line in compared["stderr"].splitlines() if line.startswith("[evaluate]")]
    assert lines and "episodes" in lines[-1] and "96/96" in lines[-1]
    assert "[evaluate]" not in compared["stdout"]


@given(st.text(max_size=200))
def test_safe_names_are_plain_file_names(text):
    name = sc.safe_name(text)
    assert name and name not in (".", "..") and len(name) <= 80
    assert not name.startswith(".") and "/" not in name and "\\" not in name
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in name)


def test_distinct_scenarios_with_the_same_safe_name_get_distinct_files():
    reports = [{"scenario": "a/b", "agent": {"name": "x"}, "_group": 0},
               {"scenario": "a_b", "agent": {"name": "x"}, "_group": 1},
               {"scenario": "a_b", "agent": {"name": "y", "label": "x"}, "_group": 1}]
    runs, groups = sc.output_stems(reports)
    assert groups == ["a_b", "a_b-2"]
    assert len(set(runs)) == 3


# -- everything is checked before anything runs --------------------------------

@pytest.fixture()
def no_rollouts(monkeypatch):
    """Fail the test if a rollout starts."""
    def refuse(*args, **kwargs):
        raise AssertionError("a rollout started before every input was checked")

    monkeypatch.setattr(sc, "execute_run", refuse)


@pytest.fixture()
def scenario_file(tmp_path):
    return _scenario(tmp_path, "windy", "klinotaxis", {"min_success_rate": 0.5})


@pytest.mark.parametrize("extra, message", [
    (["--agent", "klinotaxis", "trained", "--agent-param", "trained.path=/nonexistent/policy"],
     "agent 'trained': path='/nonexistent/policy' is invalid"),
    (["--agent", "klinotaxis", "sb3", "--agent-param", "sb3.path=/nonexistent/model.zip"],
     "agent 'sb3'"),
    (["--agent", "klinotaxis", "chemotaxis"], "agent 'chemotaxis': sensor="),
    (["--agent", "klinotaxis", "cast_and_surge", "--agent-param", "threshold=0.1"],
     "several agents are named"),
    (["--agent", "klinotaxis", "--agent-param", "cast.threshold=0.1"], "LABEL one of"),
    (["--agent", "klinotaxis", "klinotaxis"], "used twice"),
    (["--agent", "klinotaxis", "--agent-param", "klinotaxis.speed=2"], "agent.speed=2"),
    (["--agent", "cast_and_surge", "--agent-param", "threshold=abc"], "agent.params="),
    (["--agent", "nope"], "--agent='nope'"),
    (["--agent", "a.b=klinotaxis"], "LABEL made of"),
    (["--agent-param", "path=x"], "together with --agent"),
    (["--seed", "-1"], "--seed=-1"),
    (["--seed", str(2**63)], "--seed=9223372036854775808"),
    (["--episodes", "0"], "--episodes=0"),
    (["--agent", "klinotaxis", "--agent-param", "klinotaxis.obs_label=!!python/name:os.system"],
     "--agent-param"),
])
def test_bad_evaluate_inputs_exit_2_before_any_rollout(scenario_file, tmp_path, capsys,
                                                       no_rollouts, extra, message):
    out = tmp_path / "o"
    assert cli.main(["evaluate", "--scenario", str(scenario_file), "--out", str(out),
                     *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plume-jax: error:") and message in err, err
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize("agent, params", [
    ("trained", ["path=/nonexistent/policy", "greedy=maybe"]),
    ("random_walk", ["include_noop=maybe"]),
    ("random_walk", ["include_noop=1"]),
    ("sb3", ["path=/nonexistent/model.zip", "deterministic=[true]"]),
])
def test_agent_param_greedy_maybe_is_refused_as_not_boolean(agent, params, scenario_file,
                                                            tmp_path, capsys, no_rollouts):
    key, _, value = params[-1].partition("=")
    extra = [a for p in params for a in ("--agent-param", p)]
    assert cli.main(["evaluate", "--scenario", str(scenario_file), "--agent", agent, *extra,
                     "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"agent.{key}=" in err and "expected true or false (a boolean parameter of agent " \
        f"{agent!r})" in err, err


def test_boolean_agent_params_take_yaml_1_2_booleans_and_refuse_yes_no(no_rollouts):
    """``--agent-param`` values are read as YAML 1.2 (issue 42): ``true`` and
    ``False`` are booleans; YAML 1.1's ``no`` is text, which the boolean
    parameter refuses in one line."""
    from agents.registry import make_agent

    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[8, 8])
    for value in ("true", "False"):
        choice = parse_agent_choices(["random_walk"], [f"include_noop={value}"])[0]
        assert isinstance(choice.params["include_noop"], bool)
        make_agent("random_walk", env, **choice.params)
    choice = parse_agent_choices(["random_walk"], ["include_noop=no"])[0]
    assert choice.params["include_noop"] == "no"
    with pytest.raises(ValidationError, match="expected true or false"):
        make_agent("random_walk", env, **choice.params)


def test_every_bad_pair_is_reported_at_once(tmp_path, capsys, no_rollouts):
    a = _scenario(tmp_path, "first", "klinotaxis")
    b = _scenario(tmp_path, "second", "klinotaxis")
    assert cli.main(["evaluate", "--scenario", str(a), str(b), "--agent", "klinotaxis",
                     "chemotaxis", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s)" in err and "nothing was run" in err
    assert "(scenario 'first'), agent 'chemotaxis'" in err
    assert "(scenario 'second'), agent 'chemotaxis'" in err


@pytest.mark.parametrize("content, message", [
    (b"env: {preset: PlumeNav-Gaussian-v0\nagent: [", "a YAML file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary", "a YAML file"),
    (b"- just\n- a list\n", "a YAML mapping"),
    (b"env: {preset: PlumeNav-Gaussian-v0, overrides: [1, 2]}\nagent: klinotaxis\n",
     "env.overrides=[1, 2]"),
    (b"env: {preset: PlumeNav-Gaussian-v0}\nagent: {name: klinotaxis, params: [1]}\n",
     "agent.params=[1]"),
    (b"env: {preset: PlumeNav-Gaussian-v0}\nagent: klinotaxis\nexpect: [1]\n", "expect=[1]"),
    (b"env: {preset: PlumeNav-Gaussian-v0}\nagent: klinotaxis\nseed: 9223372036854775808\n",
     "seed=9223372036854775808"),
    (b"env: {preset: PlumeNav-Gaussian-v0}\nagent: klinotaxis\nseed: -3\n", "seed=-3"),
    (b"env: {preset: PlumeNav-Gaussian-v0}\nagent: klinotaxis\nname: [a]\n", "name=['a']"),
    (b"env: {preset: PlumeNav-Gaussian-v0}\nagent: klinotaxis\nexpect: {min_success_rate: .nan}\n",
     "expect.min_success_rate=nan"),
    (b"env: {preset: PlumeNav-Gaussian-v0}\nagent: {name: sb3, params: {path: /no/model.zip}}\n",
     "agent 'sb3'"),
    (b"env: {preset: PlumeNav-Gaussian-v0}\nagent: {name: trained, params: {path: /no/pol}}\n",
     "path='/no/pol' is invalid"),
])
def test_malformed_scenario_files_exit_2_with_a_message(tmp_path, capsys, no_rollouts, content,
                                                        message):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    assert cli.main(["evaluate", "--scenario", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plume-jax: error:") and message in err, err


@pytest.mark.parametrize("option", ["--out", "--save-baseline", "--baseline"])
def test_unusable_output_and_baseline_paths_exit_2_before_any_rollout(scenario_file, tmp_path,
                                                                      capsys, no_rollouts,
                                                                      option):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder, not a baseline")
    value = {"--out": str(blocker), "--save-baseline": str(tmp_path / "missing" / "b.json"),
             "--baseline": str(blocker)}[option]
    args = ["evaluate", "--scenario", str(scenario_file)]
    if option != "--out":
        args += ["--out", str(tmp_path / "o")]
    assert cli.main([*args, option, value]) == 2
    assert f"{option}=" in capsys.readouterr().err


def test_an_empty_scenario_folder_exits_2(tmp_path, capsys, no_rollouts):
    (tmp_path / "empty").mkdir()
    assert cli.main(["evaluate", "--scenario", str(tmp_path / "empty")]) == 2
    assert "--scenario=" in capsys.readouterr().err


# -- which agent and parameters a run uses, and whether `expect` applies --------

@pytest.fixture(scope="module")
def windy_scenario():
    scenario = sc.validate_scenario({"name": "w", "env": WINDY, "episodes": 8,
                                     "agent": {"name": "cast_and_surge",
                                               "params": {"threshold": 0.2}},
                                     "expect": {"min_success_rate": 0.5}})
    return scenario, sc.scenario_env(scenario)


@pytest.mark.parametrize("choice, params, checked", [
    (None, {"threshold": 0.2}, True),
    (sc.AgentChoice("cast_and_surge"), {"threshold": 0.2}, True),
    (sc.AgentChoice("cast_and_surge", params={"threshold": 0.2}), {"threshold": 0.2}, True),
    (sc.AgentChoice("cast_and_surge", params={"surge_steps": 5}),
     {"threshold": 0.2, "surge_steps": 5}, False),
    (sc.AgentChoice("cast_and_surge", params={"threshold": 0.1}), {"threshold": 0.1}, False),
    (sc.AgentChoice("klinotaxis"), {}, False),
    (sc.AgentChoice("cast_and_surge", label="tuned", params={"threshold": 0.2}),
     {"threshold": 0.2}, True),
])
def test_expectations_apply_to_the_scenarios_own_agent_and_parameters(windy_scenario, choice,
                                                                      params, checked):
    scenario, built = windy_scenario
    plan = sc.plan_run(scenario, choice, built_env=built)
    assert dict(plan.agent_params) == params
    if checked:
        assert plan.expect == {"min_success_rate": 0.5} and plan.expect_skipped is None
    else:
        assert plan.expect == {} and "'cast_and_surge' with parameters" in plan.expect_skipped


class _WrongShapePolicy:
    """Acts with a float vector where the env wants one integer."""

    def init(self, key):
        return ()

    def act(self, carry, obs, key):
        return obs * 2.0, carry


class _UntraceablePolicy:
    """Reads an observation entry the env does not have."""

    def init(self, key):
        return ()

    def act(self, carry, obs, key):
        return obs.reshape(-1)[("no", "such", "index")], carry


@pytest.mark.parametrize("policy, message", [(_WrongShapePolicy(), "action fits"),
                                             (_UntraceablePolicy(), "can act on")])
def test_agents_that_cannot_act_on_the_env_are_refused_when_planned(windy_scenario, monkeypatch,
                                                                    policy, message):
    """Found by an abstract trace at planning time, not while a rollout
    compiles after other runs."""
    from agents import registry

    monkeypatch.setitem(registry.FUNCTIONAL_AGENTS, "odd", lambda env: policy)
    scenario, built = windy_scenario
    with pytest.raises(ValidationError, match=message) as excinfo:
        sc.plan_run(scenario, sc.AgentChoice("odd"), built_env=built)
    assert excinfo.value.parameter == "agent" and excinfo.value.value == "odd"


def test_run_scenario_keeps_its_keyword_form(windy_scenario):
    scenario, _ = windy_scenario
    with pytest.raises(ValidationError, match="seed"):
        sc.run_scenario(scenario, seed=2**63)


def test_an_agent_label_ending_in_a_newline_is_refused():
    """``_LABEL.match`` with ``$`` took ``"a\\n"`` (``$`` matches before a final
    newline), so the label went into file names and the table with it."""
    with pytest.raises(ValidationError, match="LABEL made of letters"):
        parse_agent_choices(["a\n=random_walk"], [])
    assert parse_agent_choices(["a-1=random_walk"], [])[0].label == "a-1"
