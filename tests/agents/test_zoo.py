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
from tests.policy_folders import write_policy_folder

SHIPPED = zoo.entries()


def test_the_zoo_ships_entries_of_the_gaussian_and_filament_families():
    presets = {e.preset for e in SHIPPED}
    assert "PlumeNav-Gaussian-v0" in presets and "PlumeNav-Filament-v0" in presets


@pytest.mark.parametrize("entry", SHIPPED, ids=lambda e: e.reference)
def test_every_shipped_entry_is_small_documented_and_loads_by_name(entry):
    from plume_jax.train.config import load_train_config

    size = sum(f.stat().st_size for f in entry.policy_path.iterdir())
    assert size <= zoo_publish.POLICY_BYTES_CEILING
    info = entry.info
    assert info["name"] == entry.name and info["version"] == entry.version
    assert info["training"]["wall_seconds"] > 0 and info["training"]["env_steps"] > 0
    assert info["training"]["device"]
    assert str(info.get("reproducibility", "")).strip(), (
        f"{entry.reference}: entry.yaml says nothing of how its config reproduces it (re-train "
        f"it and write the outcome as `reproducibility`)")
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


# --------------------------------------------------------------------------- the issue-27 searcher

SEARCHER = "configs/policies/poisson_iso19x19_searcher"  # the shipped policy (trained on a GPU)
SEARCHER_CONFIG = "configs/train_iso19x19_searcher.yaml"


@pytest.fixture(scope="module")
def searcher_env():
    entry = zoo.resolve("zoo:poisson-iso19x19-searcher")
    return (entry, *plume_jax.make(entry.preset, **entry.env_overrides))


def test_the_learned_searcher_entry_is_the_shipped_policy_and_acts(searcher_env):
    """zoo:poisson-iso19x19-searcher@1 is configs/policies/poisson_iso19x19_searcher
    byte for byte (which test_value_iteration checks against the training
    code's look-ahead), loads by name on its preset with its own (belief)
    sensor, and the functional policy and the stateful (Gymnasium) agent
    take the same move on a first belief."""
    import pathlib

    import jax

    entry, env, params = searcher_env
    root = pathlib.Path(zoo.ZOO_ROOT).parent.parent
    for part in ("policy.json", "policy.npz"):
        assert (entry.policy_path / part).read_bytes() == (root / SEARCHER / part).read_bytes()
    assert entry.info["algorithm"] == "belief_value_iteration" and entry.env_overrides["sensor"][
        "type"] == "belief"
    policy = make_agent("zoo:poisson-iso19x19-searcher", env)
    obs, _ = env.reset(jax.random.key(5), params)
    action, _ = jax.jit(policy.act)(policy.init(None), obs, jax.random.key(0))
    assert 0 <= int(action) < env.num_actions
    agent = zoo.load_agent("zoo:poisson-iso19x19-searcher", env)
    assert int(agent.act(obs)) == int(action)


@pytest.mark.slow  # the belief sensor's step compiles in 3-7 s on 2 busy cores
def test_the_learned_searcher_entry_searches_a_few_steps(searcher_env):
    import jax

    entry, env, params = searcher_env
    policy = make_agent(entry.reference, env)
    act, step = jax.jit(policy.act), jax.jit(env.step)
    obs, state = env.reset(jax.random.key(5), params)
    carry = policy.init(None)
    for t in range(4):
        action, carry = act(carry, obs, jax.random.key(t))
        assert 0 <= int(action) < env.num_actions
        obs, state, *_ = step(jax.random.key(t), state, action, params)
    assert int(state.step_count) == 4 or int(state.episode_count) == 1


def _searcher_run(folder, config_text=None):
    """A finished belief_value_iteration run folder as plume-jax train leaves
    it, holding the shipped searcher's policy (no training)."""
    from plume_jax.train.config import dump_yaml, load_train_config

    shutil.copytree(SEARCHER, folder / "policy")
    resolved = load_train_config(SEARCHER_CONFIG).to_dict()
    (folder / "config.yaml").write_text(dump_yaml(resolved))
    (folder / "summary.json").write_text(json.dumps({
        "env": "PlumeNav-Poisson-Iso19x19-v0", "config": resolved, "wall_seconds": 404.0,
        "env_steps_total": 192 * 74000, "finished_at": "2026-11-26T13:00:00+00:00",
        "machine": {"backend": "gpu", "devices": ["cuda:0"], "cpu_count": 16, "jax": "x"},
        "evaluation": {"episodes": 200, "seed": 11, "success_rate": 1.0,
                       "mean_steps_to_goal": 13.0}}))
    return folder


def test_publish_gives_a_belief_value_iteration_run_its_own_sensor(tmp_path):
    """A run that read its preset through a belief sensor (env.overrides.sensor)
    becomes an entry with env_overrides.sensor as its policy records it, so
    it loads by name on plume_jax.make(preset, **env_overrides); its 4.8 MB
    policy needs --max-policy-bytes, and without it nothing is written."""
    run = _searcher_run(tmp_path / "run")
    root = tmp_path / "zoo"
    with pytest.raises(ValidationError, match=r"--max-policy-bytes allows up to"):
        zoo_publish.publish(run, "searcher", root=root)
    assert not root.exists()
    folder = zoo_publish.publish(run, "searcher", root=root, max_policy_bytes=5_000_000)
    entry = zoo.resolve("zoo:searcher", root)
    spec = json.loads((run / "policy" / "policy.json").read_text())
    assert entry.env_overrides == {"sensor": spec["env"]["sensor"]}
    assert entry.info["algorithm"] == "belief_value_iteration"
    assert entry.info["training"]["env_steps"] == 192 * 74000
    env, _ = plume_jax.make(entry.preset, **entry.env_overrides)
    assert isinstance(TrainedPolicy.for_env(env, entry.policy_path), TrainedPolicy)
    assert (folder / "config.yaml").read_text() == (run / "config.yaml").read_text()
    with pytest.raises(ValidationError, match=r"--max-policy-bytes"):
        zoo_publish.publish(run, "searcher", root=root, max_policy_bytes=64 << 20)


FACTS = {"training": {"device": "gpu (test)", "wall_seconds": 404, "env_steps": 14208000,
                      "finished_at": "2026-11-26", "iterations": 74000},
         "evaluation": {"episodes": 10240, "seed": 20261126, "success_rate": 1.0,
                        "mean_steps_to_goal": 13.36},
         "reproducibility": "a second seed scored the same"}


def test_an_exported_policy_is_published_with_its_config_and_measured_facts(tmp_path, capsys):
    """zoo_publish POLICY NAME --config --facts: the config copied as written,
    the facts as given; bad facts, a config whose env the policy was not
    trained on, or a missing --facts are refused and write nothing."""
    root = tmp_path / "zoo"
    with pytest.raises(ValidationError, match=r"training.wall_seconds: a measured positive"):
        zoo_publish.publish_policy(SEARCHER, "s", config=SEARCHER_CONFIG, root=root,
                                   facts={"training": {**FACTS["training"], "wall_seconds": 0}},
                                   max_policy_bytes=5_000_000)
    with pytest.raises(ValidationError, match=r"trained on PlumeNav-Poisson-Iso19x19-v0"):
        zoo_publish.publish_policy(SEARCHER, "s", config="configs/zoo/gaussian-mlp/1/config.yaml",
                                   facts=FACTS, root=root, max_policy_bytes=5_000_000)
    assert not root.exists()
    folder = zoo_publish.publish_policy(SEARCHER, "s", config=SEARCHER_CONFIG, facts=FACTS,
                                        root=root, max_policy_bytes=5_000_000)
    info = yaml.safe_load((folder / "entry.yaml").read_text())
    assert info["training"] == FACTS["training"] and info["evaluation"] == FACTS["evaluation"]
    assert info["reproducibility"] == FACTS["reproducibility"] and info["seed"] == 0
    assert info["env_overrides"]["sensor"]["type"] == "belief"
    assert (folder / "config.yaml").read_text() == open(SEARCHER_CONFIG).read()
    from plume_jax import cli

    assert cli.main(["zoo", "publish", SEARCHER, "s", "--config", SEARCHER_CONFIG]) == 2
    assert "--config and --facts" in capsys.readouterr().err
    assert sorted(p.name for p in (root / "s").iterdir()) == ["1"]


def test_a_zoo_outside_the_checkout_is_found_by_plume_jax_zoo_or_named_in_the_error(
        tmp_path, monkeypatch):
    """Issue 31: the zoo is read from the checkout's configs/zoo; an install
    without it (a wheel) gets an error saying where the zoo comes from, and
    PLUME_JAX_ZOO points at a copy."""
    import shutil

    from agents import zoo
    from plume_jax.core.errors import ValidationError

    monkeypatch.setenv(zoo.ZOO_ENV, str(tmp_path / "missing"))
    with pytest.raises(ValidationError, match="PLUME_JAX_ZOO") as info:
        zoo.resolve("zoo:gaussian-mlp")
    assert "does not exist" in str(info.value)
    copy = tmp_path / "zoo"
    shutil.copytree(zoo.ZOO_ROOT / "gaussian-mlp", copy / "gaussian-mlp")
    monkeypatch.setenv(zoo.ZOO_ENV, str(copy))
    entry = zoo.resolve("zoo:gaussian-mlp")
    assert entry.folder.parent.parent == copy
    assert [e.name for e in zoo.entries()] == ["gaussian-mlp"] * len(zoo.entries())


def test_a_missing_zoo_named_by_plume_jax_zoo_says_to_fix_that_variable(tmp_path, monkeypatch,
                                                                         capsys):
    """Regression: with ``PLUME_JAX_ZOO`` pointing at a folder that does not
    exist, ``plume-jax list --zoo`` and ``zoo:`` agents said "... or set
    PLUME_JAX_ZOO to a copy of its configs/zoo", the variable already set."""
    from plume_jax import cli

    missing = tmp_path / "nozoo"
    monkeypatch.setenv(zoo.ZOO_ENV, str(missing))
    assert cli.main(["list", "--zoo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.endswith(f"the zoo folder {missing} named by PLUME_JAX_ZOO does not exist: point "
                        f"PLUME_JAX_ZOO at a copy of configs/zoo, or unset it to use the "
                        f"shipped one ({zoo.ZOO_ROOT})")
    with pytest.raises(ValidationError, match="named by PLUME_JAX_ZOO does not exist"):
        zoo.resolve("zoo:gaussian-gru@1#3")
    monkeypatch.delenv(zoo.ZOO_ENV)
    assert zoo.missing_zoo(missing) == f"the zoo folder {missing} does not exist"


def test_a_zoo_name_ending_in_a_newline_is_neither_listed_nor_published(tmp_path):
    """Issue 54 item 15: ENTRY_NAME ended in ``$``, which also matches before
    a trailing newline: a folder ``e\\n`` was listed as ``zoo:e\\n`` and
    publishing took such a name."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    _entry(tmp_path, "e\n", env, params, "PlumeNav-Gaussian-v0")
    _entry(tmp_path, "e", env, params, "PlumeNav-Gaussian-v0")
    assert zoo.references(tmp_path) == ["zoo:e", "zoo:e@1"]
    with pytest.raises(ValidationError, match=r"one of \['zoo:e'\]"):
        zoo.resolve("zoo:e\n", tmp_path)
    run = _fake_run(tmp_path / "run", CONFIG, env, params)
    for name in ("toy\n", "toy\n\n"):
        with pytest.raises(ValidationError, match="lower-case letters") as info:
            zoo_publish.publish(run, name, root=tmp_path / "zoo")
        assert info.value.parameter == "name"
    assert not (tmp_path / "zoo").exists()
