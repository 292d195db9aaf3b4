"""The zoo (agents.zoo): shipped entries load by name in make_agent /
evaluate, the Gymnasium env and PettingZoo; bad names say what is known;
zoo_publish writes entries and versions."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

import plume_jax
from agents import make_agent, zoo
from agents.trained import TrainedAgent, TrainedPolicy
from plume_jax import ValidationError
from plume_jax.scoreboard import zoo_publish
from policy_folders import write_policy_folder

SHIPPED = zoo.entries()


def test_the_zoo_ships_entries_of_the_gaussian_and_filament_families():
    presets = {e.preset for e in SHIPPED}
    assert "PlumeNav-Gaussian-v0" in presets and "PlumeNav-Filament-v0" in presets


@pytest.mark.parametrize("entry", SHIPPED, ids=lambda e: e.reference)
def test_every_shipped_entry_is_small_documented_and_loads_by_name(entry):
    from plume_jax.train.config import load_train_config

    size = sum(f.stat().st_size for f in entry.policy_path.iterdir())
    assert size < zoo_publish.MAX_POLICY_BYTES
    info = entry.info
    assert info["name"] == entry.name and info["version"] == entry.version
    assert info["training"]["wall_seconds"] > 0 and info["training"]["env_steps"] > 0
    assert info["training"]["device"]
    config = load_train_config(entry.config_path)  # the config that produced it
    assert config.env["id"] == entry.preset and config.run["seed"] == info["seed"]
    env, _ = plume_jax.make(entry.preset, **entry.env_overrides)
    policy = make_agent(entry.reference, env)  # a swarm's: one policy per agent
    assert isinstance(getattr(policy, "policy", policy), TrainedPolicy)
    newest = zoo.resolve(f"zoo:{entry.name}")
    assert newest.version >= entry.version


def test_unknown_zoo_names_and_versions_say_what_is_known():
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0")
    with pytest.raises(ValidationError, match=r"did you mean 'zoo:gaussian-mlp'"):
        make_agent("zoo:gausian-mlp", env)
    with pytest.raises(ValidationError, match=r"a trained version of zoo entry 'gaussian-mlp'.*"
                                              r"zoo:gaussian-mlp@1"):
        make_agent("zoo:gaussian-mlp@99", env)
    with pytest.raises(ValidationError, match=r"a trained version"):
        zoo.resolve("zoo:gaussian-mlp@latest")
    with pytest.raises(ValidationError, match=r"did you mean 'klinotaxis'"):
        make_agent("klinotaxsi", env)
    with pytest.raises(ValidationError, match=r"agent.greedy"):
        make_agent("zoo:gaussian-mlp", env, greedy="yes")


def test_a_zoo_policy_on_an_env_it_was_not_trained_for_is_refused():
    env, _ = plume_jax.make("PlumeNav-Filament-v0")
    with pytest.raises(ValidationError, match=r"trained on PlumeNav-Gaussian-v0"):
        make_agent("zoo:gaussian-mlp", env)


def test_evaluate_takes_a_zoo_name_as_agent_and_label():
    from plume_jax.cli.evaluate import parse_agent_choices, plan_runs

    choices = parse_agent_choices(["zoo:gaussian-mlp@1"], ["greedy=false"])
    assert choices[0].label == "zoo:gaussian-mlp@1" and choices[0].params == {"greedy": False}
    with pytest.raises(ValidationError, match=r"did you mean 'zoo:gaussian-mlp'"):
        parse_agent_choices(["zoo:gaussian-mpl"], [])
    plans = plan_runs(["configs/scenarios/gaussian_klinotaxis.yaml"], choices, 2, None)
    assert isinstance(plans[0].policy, TrainedPolicy) and not plans[0].policy.greedy


def test_a_zoo_agent_loads_for_the_gymnasium_env_it_fits_and_no_other():
    """(docs/agents.md runs one through a Gymnasium episode.)"""
    import gymnasium

    agent = zoo.load_agent("zoo:gaussian-mlp", env=gymnasium.make("plume_jax/PlumeNav-Gaussian-v0"))
    assert isinstance(agent, TrainedAgent)
    filament = gymnasium.make("plume_jax/PlumeNav-Filament-v0")
    with pytest.raises(ValidationError, match=r"trained on PlumeNav-Gaussian-v0"):
        zoo.load_agent("zoo:gaussian-mlp", env=filament)


def _entry(root, name, env, params, preset, version=1, seed=0):
    """A zoo entry folder with a random-weight policy for ``env``."""
    folder = root / name / str(version)
    write_policy_folder(folder / "policy", env, params)
    (folder / "entry.yaml").write_text(yaml.safe_dump({
        "name": name, "version": version, "preset": preset, "seed": seed,
        "training": {"device": "test", "wall_seconds": 1.0, "env_steps": 1}}))
    return folder


def _drive_pettingzoo(env, params, reference, root=None, steps=2):
    """Each agent of the PettingZoo env acts with its own zoo agent."""
    from plume_jax.gym.pettingzoo_env import PlumeParallelEnv

    pz = PlumeParallelEnv(env, params)
    agents = {name: zoo.load_agent(reference, env=pz, root=root) for name in pz.possible_agents}
    observations, _ = pz.reset(seed=0)
    for agent in agents.values():
        agent.reset()
    for _ in range(steps):
        actions = {name: agents[name].act(observations[name]) for name in pz.agents}
        assert all(pz.action_space(n).contains(a) for n, a in actions.items())
        observations, *_ = pz.step(actions)


def test_a_zoo_agent_drives_each_agent_of_the_pettingzoo_env():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", num_agents=2)
    _drive_pettingzoo(env, params, "zoo:gaussian-mlp")


@pytest.mark.slow  # the swarm's filament plume: 3 s (load 3) to 19 s (load 15) on 2 cores
def test_the_swarm_entry_drives_each_agent_of_the_pettingzoo_swarm(tmp_path):
    env, params = plume_jax.make("PlumeNav-Swarm-v0", num_agents=2)
    shipped = [e for e in SHIPPED if e.preset == "PlumeNav-Swarm-v0"]
    if shipped:
        _drive_pettingzoo(env, params, shipped[-1].reference)
    else:  # before the swarm entry is trained: an entry of the same shapes
        _entry(tmp_path, "swarm-test", env, params, "PlumeNav-Swarm-v0")
        _drive_pettingzoo(env, params, "zoo:swarm-test", root=tmp_path)


def test_versions_resolve_newest_first_and_pending_configs_are_not_entries(tmp_path):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    _entry(tmp_path, "toy", env, params, "PlumeNav-Gaussian-v0", version=1)
    _entry(tmp_path, "toy", env, params, "PlumeNav-Gaussian-v0", version=2, seed=1)
    (tmp_path / "toy" / "3").mkdir()
    (tmp_path / "toy" / "3" / "config.yaml").write_text("env: {id: PlumeNav-Gaussian-v0}\n")
    (tmp_path / "pending").mkdir()
    assert zoo.resolve("zoo:toy", tmp_path).version == 2
    assert zoo.resolve("zoo:toy@1", tmp_path).info["seed"] == 0
    assert zoo.references(tmp_path) == ["zoo:toy", "zoo:toy@1", "zoo:toy@2"]
    with pytest.raises(ValidationError, match=r"zoo:toy@1.*zoo:toy@2"):
        zoo.resolve("zoo:toy@3", tmp_path)
    with pytest.raises(ValidationError, match=r"one of \['zoo:toy'\]"):
        zoo.resolve("zoo:pending", tmp_path)


def _fake_run(folder, config_text, env, params):
    """A finished run folder as plume-jax train leaves it (no training; the
    config written resolved, as train writes it)."""
    from plume_jax.train.config import dump_yaml, train_config

    write_policy_folder(folder / "policy", env, params)
    (folder / "config.yaml").write_text(dump_yaml(train_config(yaml.safe_load(config_text))
                                                  .to_dict()))
    (folder / "summary.json").write_text(json.dumps({
        "env": "PlumeNav-Gaussian-v0", "config": yaml.safe_load(config_text) | {
            "network": {"type": "mlp"}, "run": {"seed": 0}},
        "wall_seconds": 12.5, "compile_seconds": 2.0, "env_steps_total": 8192,
        "finished_at": "2026-11-26T16:00:00+00:00",
        "machine": {"backend": "cpu", "devices": ["cpu:0"], "cpu_count": 2, "jax": "x"},
        "evaluation": {"episodes": 10, "seed": 3, "success_rate": 0.5,
                       "mean_steps_to_goal": 40.0}}))
    return folder


CONFIG = ("env: {id: PlumeNav-Gaussian-v0}\n"
          "algo: {total_steps: 8192, num_envs: 64, num_steps: 128}\n"
          "network: {hidden_sizes: [8]}\nrun: {seed: 0}\n")


def test_publish_writes_an_entry_and_a_retrained_one_is_a_new_version(tmp_path):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    run = _fake_run(tmp_path / "run", CONFIG, env, params)
    root = tmp_path / "zoo"
    first = zoo_publish.publish(run, "toy", root=root, description="a toy")
    second = zoo_publish.publish(run, "toy", root=root, device="GPU (test)")
    assert (first.name, second.name) == ("1", "2")
    entry = zoo.resolve("zoo:toy", root)
    assert entry.version == 2 and entry.info["training"]["device"] == "GPU (test)"
    assert entry.info["training"]["env_steps"] == 8192 and entry.info["seed"] == 0
    assert (second / "config.yaml").read_text() == (run / "config.yaml").read_text()
    assert isinstance(TrainedPolicy.for_env(env, entry.policy_path), TrainedPolicy)


def test_a_run_of_a_newer_version_is_checked_on_the_keys_both_know(tmp_path):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    run = _fake_run(tmp_path / "run", CONFIG, env, params)
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    resolved["algo"]["a_setting_added_later"] = True
    (run / "config.yaml").write_text(yaml.safe_dump(resolved))
    root = tmp_path / "zoo"
    (root / "toy" / "1").mkdir(parents=True)
    (root / "toy" / "1" / "config.yaml").write_text(CONFIG)
    folder = zoo_publish.publish(run, "toy", root=root)
    assert yaml.safe_load((folder / "entry.yaml").read_text())["settings_not_checked"] == [
        "algo.a_setting_added_later"]
    assert (folder / "config.yaml").read_text() == CONFIG  # the committed config stays


def test_publish_refuses_a_run_of_another_config_and_writes_nothing(tmp_path):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    run = _fake_run(tmp_path / "run", CONFIG, env, params)
    root = tmp_path / "zoo"
    (root / "toy" / "1").mkdir(parents=True)
    (root / "toy" / "1" / "config.yaml").write_text(CONFIG.replace("seed: 0", "seed: 7"))
    with pytest.raises(ValidationError, match=r"\['run.seed'\] differ"):
        zoo_publish.publish(run, "toy", root=root)
    assert sorted(p.name for p in (root / "toy" / "1").iterdir()) == ["config.yaml"]
    with pytest.raises(ValidationError, match=r"lower-case letters"):
        zoo_publish.publish(run, "Bad Name", root=root)
    shutil.rmtree(run / "policy")
    with pytest.raises(ValidationError, match=r"policy/policy.json is missing"):
        zoo_publish.publish(run, "toy", root=root)
