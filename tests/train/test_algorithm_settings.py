"""Each algorithm owns its settings (issue 41, item 2): a config's ``algo``
section is the shared settings plus the chosen algorithm's own, and nothing
else; a run folder written by 0.1.x (whose config carries every algorithm's
settings) still resumes."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest
import yaml

from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms.base import ALGORITHMS, Algorithm, algorithm_class
from plume_jax.train.algorithms.ppo import PPO_SETTINGS
from plume_jax.train.algorithms.value_iteration import VALUE_ITERATION_SETTINGS
from plume_jax.train.config import ALGO_KEYS_0_1, COMMON_ALGO, current_form, train_config
from plume_jax.train.progress import hparams
from tests.train.test_algorithm_interface import CONFIG
from tests.train.test_belief_training import TINY

#: A PPO run folder written by plume_jax 0.1.x (commit 799cb07), two files from
#: its checkpoint and its config.yaml among them.
OLD_RUN = pathlib.Path(__file__).parent / "data" / "ppo_run_0.1"
GAUSSIAN = {"env": {"id": "PlumeNav-Gaussian-v0"}, "algo": {"total_steps": 10**6}}
SEARCHER = {"env": {"id": "PlumeNav-Poisson-Iso19x19-v0", "overrides": TINY},
            "algo": {"algorithm": "belief_value_iteration", "total_steps": 192 * 10,
                     "num_envs": 192, "num_steps": 1, "memory_size": 1000},
            "network": {"hidden_sizes": [16], "activation": "relu"}}


def test_a_ppo_config_holds_only_the_shared_and_ppo_settings():
    """Regression: a PPO run's resolved config.yaml and its TensorBoard hparams
    carried value iteration's memory_size, epsilon_start, ... (35 algo keys)."""
    resolved = train_config(GAUSSIAN).to_dict()
    assert list(resolved["algo"]) == [*COMMON_ALGO, *PPO_SETTINGS]
    table = hparams(resolved)
    assert "algo.learning_rate" in table and "algo.memory_size" not in table
    assert not any(k.startswith("algo.eval") for k in table)
    vi = train_config(SEARCHER).to_dict()["algo"]
    assert list(vi) == [*COMMON_ALGO, *VALUE_ITERATION_SETTINGS]


def test_the_config_reference_lists_each_algorithms_settings_under_it():
    from scripts.docs.settings_reference import algo_section

    text = "\n".join(algo_section())
    for name in ALGORITHMS:
        own = text.split(f"#### `algorithm: {name}`")[1].split("####")[0]
        assert {line.split("`")[1] for line in own.splitlines() if line.startswith("| `")} \
            == set(algorithm_class(name).SETTINGS)


@pytest.mark.parametrize("key,value,owner", [("memory_size", 500, "belief_value_iteration"),
                                             ("epsilon", 0.1, "lookahead_vi"),
                                             ("eval_every", 1000, None)])
def test_another_algorithms_setting_is_refused_with_did_you_mean(key, value, owner):
    """Even at its default (0.1.x let a default pass): the config would hold a
    setting its algorithm ignores. 0.1.x's algo.eval_every is nobody's now."""
    with pytest.raises(ValidationError, match=rf"^algo\.{key}=") as info:
        train_config({**GAUSSIAN, "algo": {**GAUSSIAN["algo"], key: value}})
    message = str(info.value)
    assert "\n" not in message
    if owner:
        assert f"did you mean algo.algorithm: {owner}?" in message


def test_value_iteration_reads_its_evaluation_period_from_eval_every():
    """One name per idea: belief_value_iteration's evaluations run every
    eval.every iterations (null: never), not algo.eval_every."""
    from plume_jax.train.algorithms.value_iteration import BeliefValueIteration

    with pytest.raises(ValidationError, match=r"^algo\.eval_every="):
        train_config({**SEARCHER, "algo": {**SEARCHER["algo"], "eval_every": 5}})
    for every, expected in ((5, 5), (None, 0)):
        cfg = train_config({**SEARCHER, "eval": {"every": every}})
        env, params = cfg.make_env()
        algo = BeliefValueIteration.from_config(cfg, env, params)
        assert algo.eval_every == expected and algo.settings()["eval_every"] == expected
        assert algo.static.memory_size == 1000 and algo.walkers == 192


def test_value_iteration_states_each_setting_once():
    """Its constructor reads the declarations (defaults, checks, names):
    built with no settings it has every declared default; an unknown one is
    refused naming the closest."""
    import plume_jax
    from plume_jax.train.algorithms.value_iteration import BeliefValueIteration

    env, params = plume_jax.make("PlumeNav-Poisson-Iso19x19-v0", **TINY)
    algo = BeliefValueIteration(env, params, walkers=4)
    declared = {k: s.default for k, s in VALUE_ITERATION_SETTINGS.items()}
    assert algo.own_settings == declared
    held = {k: getattr(algo.static if s.static else algo.hp, k)
            for k, s in VALUE_ITERATION_SETTINGS.items()}
    assert held == pytest.approx(declared)  # the learning rate: an f32[] leaf of algo.hp
    assert algo.max_episode_steps == TINY["max_steps"]  # null: the env's
    with pytest.raises(ValidationError, match=r"^memory_siz=.*did you mean 'memory_size'"):
        BeliefValueIteration(env, params, walkers=4, memory_siz=10)


def test_a_user_algorithm_declares_its_own_learning_rate():
    """Regression: an algorithm outside the library could not declare
    learning_rate ("share its declaration"): PPO's would be in every config."""
    cfg = train_config({**CONFIG, "algo": {k: v for k, v in CONFIG["algo"].items()
                                           if k != "learning_rate"}})
    assert cfg.algo["learning_rate"] == 0.01  # its own default, not PPO's 3e-4
    assert set(cfg.algo) == {*COMMON_ALGO, "learning_rate", "gamma", "baseline_decay"}
    with pytest.raises(ValidationError, match=r"^algo\.num_minibatches="):
        train_config({**CONFIG, "algo": {**CONFIG["algo"], "num_minibatches": 4}})


class Redeclares(Algorithm):
    """Declares a shared setting (refused)."""

    name = "tests.train.test_algorithm_settings:Redeclares"
    SETTINGS = {"num_envs": PPO_SETTINGS["update_epochs"]}
    from_config = hparams = init = update = policy = None  # type: ignore[assignment]


def test_an_algorithm_that_redeclares_a_shared_setting_is_refused():
    with pytest.raises(ValidationError, match=r"^algo\.algorithm=.*declares algo\.num_envs"):
        train_config({**CONFIG, "algo": {"algorithm": Redeclares.name, "total_steps": 512}})


def test_a_config_written_by_0_1_is_read_in_the_current_form():
    """The stored config.yaml of a 0.1.x PPO run (35 algo keys) loses the
    other algorithms' settings and gains the settings added since
    (network.rnn_size, run.lanes and run.init_from, at their defaults), nothing else; a
    0.1.x belief_value_iteration config's algo.eval_every becomes
    eval.every. Regression: without run.lanes filled in, a sweep folder
    written before run.lanes refused to resume (its checkpoint's configs
    differed from sweep.yaml's, test_a_sweep_folder_written_by_0_1_resumes)."""
    saved = yaml.safe_load((OLD_RUN / "config.yaml").read_text())
    assert set(ALGO_KEYS_0_1) <= set(saved["algo"])
    with pytest.raises(ValidationError, match=r"^algo\.epsilon="):
        train_config(saved)
    current = current_form(saved)
    # the settings PPO gained since (algo.weight_decay, algo.normalize_rewards): at their
    # defaults, the values the run trained with
    assert current["algo"] == {k: saved["algo"][k] if k in saved["algo"] else
                               PPO_SETTINGS[k].default for k in [*COMMON_ALGO, *PPO_SETTINGS]}
    assert {"weight_decay", "normalize_rewards"} <= set(current["algo"]) - set(saved["algo"])
    expected = {k: v for k, v in saved.items() if k != "algo"}
    expected["network"] = {**saved["network"], "rnn_size": 64}  # added since, at its default
    run = list(saved["run"])
    expected["run"] = {k: saved["run"].get(k)
                       for k in [*run[:5], "lanes", run[5], "init_from", *run[6:]]}
    assert {k: v for k, v in current.items() if k != "algo"} == expected
    for section in ("network", "run"):  # in the resolved form's order
        assert list(current[section]) == list(train_config(current).to_dict()[section])
    assert train_config(current).to_dict() == current
    old_vi = {**saved, "algo": {**saved["algo"], "algorithm": "belief_value_iteration",
                                "eval_every": 250}}
    assert current_form(old_vi)["eval"]["every"] == 250
    assert "eval_every" not in current_form(old_vi)["algo"]
    never = {**old_vi, "algo": {**old_vi["algo"], "eval_every": 0}}
    assert current_form(never)["eval"]["every"] is None


def test_a_run_folder_written_by_0_1_resumes(tmp_path):
    """A PPO run folder (config.yaml and checkpoint metadata with every
    algorithm's settings) written by 0.1.x resumes with plume-jax train
    --resume, from its own config.yaml and from its checkpoint's config."""
    from plume_jax.cli import main

    run = tmp_path / "run"
    shutil.copytree(OLD_RUN, run)
    assert main(["train", "--resume", str(run), "--total-steps", "512", "--quiet",
                 "--set", "run.tensorboard=false"]) == 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2]
    written = yaml.safe_load((run / "config.yaml").read_text())
    assert list(written["algo"]) == [*COMMON_ALGO, *PPO_SETTINGS]


OLD_SWEEP = pathlib.Path(__file__).resolve().parent / "data" / "ppo_sweep_0.1"


def test_a_sweep_folder_written_by_0_1_resumes(tmp_path):
    """A finished 2-member PPO sweep written by 0.1.x (commit 799cb07: its
    sweep.yaml, its members' config.yaml and its program checkpoint carry
    every algorithm's algo.* settings) resumes with plume-jax sweep --resume:
    it was refused for value iteration's settings in its own sweep.yaml, then
    for its checkpoint's configs differing from sweep.yaml's."""
    from plume_jax.cli import main

    sweep = tmp_path / "sweep"
    shutil.copytree(OLD_SWEEP, sweep)
    assert "memory_size" in (sweep / "sweep.yaml").read_text()
    assert main(["sweep", "--resume", str(sweep), "--quiet"]) == 0
    results = json.loads((sweep / "results.json").read_text())
    assert sorted(m["run.seed"] for m in results["results"]) == [0, 1]
    for member in ("seed-0", "seed-1"):
        rows = [json.loads(x) for x in
                (sweep / "members" / member / "metrics.jsonl").read_text().splitlines()]
        assert [r["update"] for r in rows] == [1]
