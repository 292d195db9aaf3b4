"""Singh et al. (2023)'s 240-start evaluation (``protocol: singh240``), through
the scenario runner and ``plume-jax evaluate``."""

from __future__ import annotations

import json
import math
import pathlib

import jax
import numpy as np
import pytest
import yaml

import plume_jax
from plume_jax import cli
from plume_jax.core.types import AgentState
from plume_jax.evaluate import scenario as sc
from plume_jax.evaluate import singh_protocol as sp
from plume_jax.evaluate.rollout import rollout

SCENARIOS = pathlib.Path(__file__).resolve().parents[2] / "configs" / "scenarios"


@pytest.fixture(scope="module")
def constant():
    env, params = plume_jax.make("PlumeNav-Singh2023-Constant-v0", plume={"diffusion": 0.5})
    return env, params, sp.plan_starts(env, params, jax.random.key(0), 0)


def test_the_240_starts_are_their_grid(constant):
    env, params, (plumes, agents, groups) = constant
    xy = np.asarray(agents.position)
    heading = np.asarray(agents.heading)
    assert xy.shape == (240, 2) and np.bincount(groups).tolist() == [40] * 6
    # 4, 6 and 8 m downwind of the source at (2, 10); eight headings 45 degrees apart
    assert sorted(set(xy[:, 0].round(5))) == [6.0, 8.0, 10.0]
    np.testing.assert_allclose(np.unique(heading.round(6)),
                               np.round(np.arange(8) * math.pi / 4, 6))
    for g in range(6):
        rows = np.flatnonzero(groups == g)
        assert len(set(xy[rows, 0])) == 1
        ys = xy[rows[:5], 1]  # heading 0: the five cross-wind starts
        np.testing.assert_array_equal(heading[rows[:5]], 0.0)
        # constant wind: y_min - 0.5, y_min, the middle, y_max, y_max + 0.5
        np.testing.assert_allclose(np.diff(ys)[[0, 3]], [0.5, 0.5], atol=1e-5)
        np.testing.assert_allclose(ys[2], (ys[1] + ys[3]) / 2, atol=1e-5)
        assert ys[1] < 10.0 < ys[3]
        # the same five for every heading
        np.testing.assert_allclose(xy[rows, 1].reshape(8, 5), np.tile(ys, (8, 1)), atol=1e-6)
    # the second start time is the first plume 1 s (25 steps, 100 puff steps) later
    assert np.asarray(plumes.clock).tolist() == [0, 100]


def test_switching_winds_spread_the_five_starts_evenly_inside_the_plume():
    env, params = plume_jax.make("PlumeNav-Singh2023-SwitchMany-v0", plume={"diffusion": 0.5})
    _, agents, groups = sp.plan_starts(env, params, jax.random.key(3), 3)
    for g in range(6):
        ys = np.asarray(agents.position)[np.flatnonzero(groups == g)[:5], 1]
        np.testing.assert_allclose(np.diff(ys), np.full(4, (ys[4] - ys[0]) / 4), atol=1e-5)


def test_an_episode_ended_by_straying_is_not_counted_as_a_homing():
    """Regression: the rollout counted every terminated episode as a success;
    with a stray limit, an agent 3.5 m off the plume ended its first step
    "successfully"."""
    env, params = plume_jax.make(
        "PlumeNav-Singh2023-Constant-v0",
        start={"type": "fixed", "position": [8.0, 13.5], "heading": 0.0})

    class Hover:
        def init(self, key):
            return ()

        def act(self, carry, obs, key):
            return jax.numpy.zeros(2), carry

    result = rollout(env, params, Hover(), jax.random.key(0), 4, 20, until_done=True)
    assert np.all(np.asarray(result.finished)) and not np.any(np.asarray(result.success))
    np.testing.assert_array_equal(np.asarray(result.episode_length), 1)


def test_the_shipped_singh_scenarios_name_the_protocol_and_their_regimes():
    """Each regime ships twice: as their evaluation code ran it (singh240:
    diffusion 1.0, the widened arena, on switch-many their wind history) and
    in the paper's reading (singh240_paper: halved diffusion)."""
    files = sorted(SCENARIOS.glob("singh2023_*.yaml"))
    regimes = ["constant", "sparse20", "sparse40", "sparse60", "sparse80", "switch_many",
               "switch_once"]
    assert [f.stem for f in files] == sorted(
        [f"singh2023_{r}" for r in regimes] + [f"singh2023_paper_{r}" for r in regimes])
    best = {}
    for path in files:
        scenario = sc.load_scenario(path)
        overrides = scenario["env"]["overrides"]
        assert scenario["episodes"] == 240
        if "paper" in path.stem:
            assert scenario["protocol"] == "singh240_paper"
            assert overrides["plume"] == {"diffusion": 0.5}
            continue
        assert scenario["protocol"] == "singh240" and scenario["normalisation"] == "saved"
        assert overrides["grid_size"] == [19, 27]
        plume = {"source": [5.0, 13.0]}
        if path.stem == "singh2023_switch_many":
            plume.update(wind_record="singh2023_switch_many", warmup_steps=1500)
        assert overrides["plume"] == plume  # diffusion: the preset's 1.0
        best[path.stem] = sp.paper_best(scenario["env"]["preset"])
    assert best == {"singh2023_constant": 176, "singh2023_switch_once": 160,
                    "singh2023_switch_many": 86, "singh2023_sparse40": 130,
                    "singh2023_sparse80": None, "singh2023_sparse60": None,
                    "singh2023_sparse20": None}


def test_plume_jax_evaluate_reports_homings_out_of_240_beside_their_best(tmp_path, capsys):
    """End to end through the CLI on a tiny run (30 steps per episode)."""
    spec = yaml.safe_load((SCENARIOS / "singh2023_constant.yaml").read_text())
    spec["max_steps"] = 30
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    assert cli.main(["evaluate", "--scenario", str(path), "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    (report,) = [json.loads(p.read_text()) for p in out.glob("singh2023-constant__*.json")]
    protocol = report["metrics"]["protocol"]
    assert report["metrics"]["episodes"] == 240 and protocol["episodes"] == 240
    assert protocol["homings"] == report["metrics"]["successes"]
    assert sum(protocol["homings_by_start"].values()) == protocol["homings"]
    assert protocol["paper_best"] == 176 and len(protocol["start_positions"]) == 240
    assert (f"cast_and_surge: {protocol['homings']}/240 homings (singh240; Singh et al.'s best "
            "176/240)") in text


def test_the_protocol_refuses_other_plumes_and_captures(tmp_path, capsys):
    spec = {"name": "wrong", "env": {"preset": "PlumeNav-Gaussian-v0"},
            "agent": "klinotaxis", "protocol": "singh240"}
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert cli.main(["evaluate", "--scenario", str(path), "--quiet",
                     "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "protocol='singh240' is invalid: expected a single-agent env with the singh plume" in err
    assert "Traceback" not in err
    bad = {**spec, "protocol": "singh24"}
    path.write_text(yaml.safe_dump(bad))
    assert cli.main(["evaluate", "--scenario", str(path), "--quiet",
                     "--out", str(tmp_path / "b")]) == 2
    assert "singh240" in capsys.readouterr().err
    spec = yaml.safe_load((SCENARIOS / "singh2023_constant.yaml").read_text())
    spec["max_steps"] = 2
    path.write_text(yaml.safe_dump(spec))
    assert cli.main(["evaluate", "--scenario", str(path), "--quiet", "--out",
                     str(tmp_path / "c"), "--capture", str(tmp_path / "cap")]) == 2
    assert "no capture with protocol singh240" in capsys.readouterr().err


@pytest.mark.slow
def test_fixed_start_rollout_matches_stepping_one_env_by_hand(constant):
    env, params, (plumes, agents, groups) = constant
    from agents.registry import make_agent

    policy = make_agent("cast_and_surge", env, obs_label="odour", threshold=0.0)
    key = jax.random.key(5)
    plumes = jax.tree.map(lambda a: a[groups % 2], plumes)
    result = sp.fixed_start_rollout(env, params, policy, key, plumes, agents, 12)
    i = 17
    k_sensor, k_policy, k_run = jax.random.split(key, 3)
    plume = jax.tree.map(lambda a: a[i], plumes)
    agent = AgentState(position=agents.position[i], heading=agents.heading[i])
    obs, sensor = env.sensor.init(jax.random.split(k_sensor, 240)[i], agent,
                                  env.probe(plume, params), params.sensor)
    _, state = env.reset(jax.random.key(0), params)
    state = state.replace(agent=agent, plume=plume, sensor=sensor)
    carry = policy.init(jax.random.split(k_policy, 240)[i])
    act, env_step = jax.jit(policy.act), jax.jit(env.step)
    path = 0.0
    for step in range(12):
        k_act, k_step = jax.random.split(jax.random.fold_in(k_run, step))
        action, carry = act(carry, obs, jax.random.split(k_act, 240)[i])
        before = np.asarray(state.agent.position)
        obs, state, _, terminated, truncated, info = env_step(
            jax.random.split(k_step, 240)[i], state, action, params)
        path += float(np.linalg.norm(np.asarray(info["agent_xy"]) - before))
        if terminated or truncated:
            break
    np.testing.assert_allclose(float(result.path_length[i]), path, rtol=1e-4)


@pytest.mark.slow
def test_evaluate_episodes_on_a_singh240_scenario_runs_that_many_starts_not_240(tmp_path,
                                                                               capsys):
    """Regression: ``plume-jax evaluate --episodes 8`` on a singh240 scenario
    ran all 240 starts without a word. Now it runs 8 of them, evenly spread
    (as ``bench --episodes`` does), and the homings line says it is a quick
    look, with their best still out of 240; more than 240 is refused
    before anything runs, naming the range."""
    spec = yaml.safe_load((SCENARIOS / "singh2023_constant.yaml").read_text())
    spec["max_steps"] = 5
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    assert cli.main(["evaluate", "--scenario", str(path), "--quiet", "--out", str(out),
                     "--episodes", "8"]) == 0
    text = capsys.readouterr().out
    (report,) = [json.loads(p.read_text()) for p in out.glob("singh2023-constant__*.json")]
    protocol = report["metrics"]["protocol"]
    assert report["metrics"]["episodes"] == 8 and protocol["episodes"] == 8
    assert protocol["starts"] == sp.subset(8).tolist()
    assert (f"cast_and_surge: {protocol['homings']}/8 homings (singh240, 8 of the 240 starts, "
            "evenly spread: a quick look, not the protocol's figure; Singh et al.'s best "
            "176/240)") in text
    assert cli.main(["evaluate", "--scenario", str(path), "--quiet", "--out",
                     str(tmp_path / "b"), "--episodes", "241"]) == 2
    err = capsys.readouterr().err
    assert "episodes=241 is invalid: expected an integer in [1, 240] (protocol singh240" in err
    assert "Traceback" not in err
    assert not any((tmp_path / "b").iterdir())  # made by the --out check, left empty


def test_a_trained_policy_on_a_singh240_scenario_is_not_told_to_use_env_from_run(tmp_path):
    """Regression: a policy trained on a Singh preset and evaluated as
    docs/singh2023.md says got a warning that ended "--env-from-run
    evaluates it on its own training env", a remedy that leaves the
    protocol's evaluation env. The warning now says the difference is the
    protocol's; it names only real differences (a setting added since the
    policy was trained reads as its preset's value: the zoo's warning listed
    ``episode_keep_min: trained None, here 1.0``) and stays short."""
    from tests.policy_folders import write_policy_folder

    env, params = plume_jax.make("PlumeNav-Singh2023-Constant-v0")
    policy = write_policy_folder(tmp_path / "policy", env, params)
    spec = json.loads((policy / "policy.json").read_text())
    del spec["env"]["plume"]["episode_keep_min"]  # as recorded before the setting existed
    (policy / "policy.json").write_text(json.dumps(spec))
    scenario = sc.load_scenario(SCENARIOS / "singh2023_constant.yaml")
    run = sc.plan_run(scenario, sc.AgentChoice("trained", params={"path": str(policy)}))
    assert "grid_size: trained [13, 21], here [19, 27]" in run.env_note
    assert "sensor.sensors.odour.gain_low: trained 0.5, here 1.0" in run.env_note
    assert "episode_keep_min" not in run.env_note and "wind_record" not in run.env_note
    assert run.env_note.endswith("expected: protocol singh240 evaluates on its scenario's env "
                                 "(docs/singh2023.md)")
    assert len(run.env_note) < 450
    plain = {**scenario, "protocol": None}
    note = sc.plan_run(plain, sc.AgentChoice("trained", params={"path": str(policy)})).env_note
    assert note.endswith("--env-from-run evaluates it on its own training env")
