"""Training and sweep configs are validated with clear errors; GAE on a
constructed example with termination and truncation; the shipped configs
load. Nothing here compiles a training program."""

from __future__ import annotations

import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from plume_jax.cli import main
from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms import networks
from plume_jax.train.config import load_train_config, train_config
from plume_jax.train.algorithms.epochs import resolve_gamma
from plume_jax.train.algorithms.returns import gae
from plume_jax.train.sweep import load_sweep_config, setup, sweep_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"

MINIMAL = {"env": {"id": "PlumeNav-Gaussian-v0"}, "algo": {"total_steps": 100_000}}


def _with(section: str, **values):
    data = {k: dict(v) for k, v in MINIMAL.items()}
    data.setdefault(section, {}).update(values)
    return data


def test_minimal_config_fills_every_default():
    cfg = train_config(MINIMAL)
    d = cfg.to_dict()
    assert d["algo"]["num_envs"] == 64 and d["algo"]["learning_rate"] == 3e-4
    assert d["network"]["type"] == "mlp" and d["network"]["hidden_sizes"] == [64, 64]
    assert cfg.num_updates == 100_000 // (64 * 128)
    assert train_config(d) == cfg  # the resolved form round-trips


@pytest.mark.parametrize("data, parameter", [
    (_with("algo", learning_rat=1e-3), "algo.learning_rat"),
    ({**MINIMAL, "optimiser": {}}, "optimiser"),
    (_with("network", kind="gru"), "network.kind"),
    (_with("algo", learning_rate=-1.0), "algo.learning_rate"),
    (_with("algo", learning_rate="fast"), "algo.learning_rate"),
    (_with("algo", num_envs=0), "algo.num_envs"),
    (_with("algo", num_envs=2.5), "algo.num_envs"),
    (_with("algo", anneal_lr="yes"), "algo.anneal_lr"),
    (_with("algo", gamma=1.5), "algo.gamma"),
    (_with("network", type="transformer"), "network.type"),
    (_with("network", hidden_sizes=[]), "network.hidden_sizes"),
    (_with("network", obs_transform="sqrt"), "network.obs_transform"),
    (_with("run", devices="all"), "run.devices"),
    (_with("run", lanes=0), "run.lanes"),
    (_with("run", lanes=2.5), "run.lanes"),
    ({"algo": {"total_steps": 1000}}, "env.id"),
    ({"env": {"id": "PlumeNav-Gaussian-v0"}}, "algo.total_steps"),
    (_with("algo", total_steps=100, num_envs=64, num_steps=128), "algo.total_steps"),
    (_with("algo", num_minibatches=3), "algo.num_minibatches"),
    (_with("network", type="gru", **{"hidden_sizes": [8]}) | {"algo": {"total_steps": 10**6,
                                                                      "num_minibatches": 5}},
     "algo.num_minibatches"),
    (_with("network", type="rnn", rnn_size=0), "network.rnn_size"),
    (_with("network", type="rnn", rnn_size=2.5), "network.rnn_size"),
    (_with("network", type="rnn", rnn_size=None), "network.rnn_size"),
    (_with("network", type="rnn", gru_size=32), "network.gru_size"),
    (_with("network", type="gru", rnn_size=32), "network.rnn_size"),
    (_with("network", type="rnn", **{"hidden_sizes": [8]}) | {"algo": {"total_steps": 10**6,
                                                                      "num_minibatches": 5}},
     "algo.num_minibatches"),
])
def test_bad_config_names_the_key(data, parameter):
    with pytest.raises(ValidationError) as info:
        train_config(data)
    assert info.value.parameter == parameter
    assert parameter in str(info.value)


def test_rnn_width_is_rnn_size_and_a_gru_width_on_an_rnn_is_refused_naming_rnn_size():
    """``network.type: rnn`` sizes its cell by ``rnn_size``; a ``gru_size``
    other than its default on an rnn (a GRU config with only its type
    changed) would size nothing, and the message names the setting to use;
    mlp and cnn ignore both widths, as they always ignored ``gru_size``."""
    cfg = train_config(_with("network", type="rnn", rnn_size=32))
    assert cfg.network.recurrent and cfg.network.rnn_size == 32
    assert train_config(cfg.to_dict()) == cfg  # the resolved form round-trips
    with pytest.raises(ValidationError) as info:
        train_config(_with("network", type="rnn", gru_size=128))
    message = str(info.value)
    assert "\n" not in message and "network.gru_size=128" in message
    assert "network.rnn_size" in message and "'gru' only" in message
    assert train_config(_with("network", type="mlp", gru_size=8, rnn_size=8)).network.type == "mlp"
    # a GRU against an RNN of another width: each type's width in a zip grid (docs/training.md)
    sweep = sweep_config({"base": MINIMAL, "mode": "zip", "grid": {
        "network.type": ["gru", "rnn"], "network.gru_size": [128, 64],
        "network.rnn_size": [64, 128]}})
    assert [networks.hidden_size(c.network) for c in sweep.configs] == [128, 128]


def test_scientific_notation_in_a_config_file_reads_as_numbers(tmp_path):
    # PyYAML follows YAML 1.1, where 3e-4 and 1e6 are strings; plume_jax's
    # reader takes them as numbers (YAML 1.2), for training and env files alike
    path = tmp_path / "train.yaml"
    path.write_text("env: {id: PlumeNav-Gaussian-v0, overrides: {sigma: 1.2e1}}\n"
                    "algo: {total_steps: 1e6, learning_rate: 3e-4, num_envs: 6.4E1}\n")
    cfg = load_train_config(path)
    assert cfg.algo["learning_rate"] == 3e-4 and cfg.algo["total_steps"] == 10**6
    assert cfg.algo["num_envs"] == 64 and isinstance(cfg.algo["num_envs"], int)
    assert cfg.env["overrides"]["sigma"] == 12.0


def test_a_number_written_as_a_string_is_refused_naming_the_yaml_reader():
    """One settings system: training settings are checked as component
    settings are, so a string is not a number; the message says why a
    YAML 1.1 reader made one."""
    data = yaml.safe_load("env: {id: PlumeNav-Gaussian-v0}\n"
                          "algo: {total_steps: 100000, learning_rate: 3e-4}")
    assert data["algo"]["learning_rate"] == "3e-4"
    with pytest.raises(ValidationError, match="yaml.safe_load reads 3e-4") as info:
        train_config(data)
    assert info.value.parameter == "algo.learning_rate"


def test_training_and_component_settings_share_their_checkers():
    """The training config's checkers are plume_jax.settings' (issue 25:
    one settings system): same classes, same messages."""
    from plume_jax.settings import Integer, OrNone, Real
    from plume_jax.train.config import schemas

    algo = schemas("ppo")["algo"]
    assert isinstance(algo["learning_rate"].check, Real)
    assert isinstance(algo["total_steps"].check, Integer) and algo["total_steps"].check.whole_floats
    assert isinstance(algo["gamma"].check, OrNone)
    with pytest.raises(ValidationError, match=r"as float32 too"):
        train_config({"env": {"id": "PlumeNav-Gaussian-v0"},
                      "algo": {"total_steps": 100_000, "learning_rate": 1e-50}})
    with pytest.raises(ValidationError, match=r"an integer in \[1, "):
        train_config({"env": {"id": "PlumeNav-Gaussian-v0"},
                      "algo": {"total_steps": 100_000, "num_envs": 2.5}})


def test_env_overrides_are_validated_by_make():
    cfg = train_config(_with("env", overrides={"sigmaa": 3.0}))
    with pytest.raises(ValidationError) as info:
        cfg.make_env()
    assert info.value.parameter == "sigmaa"


def test_gamma_defaults_to_the_shaping_discount_and_refuses_a_contradiction():
    import plume_jax

    env, params = plume_jax.make("PlumeNav-Gaussian-v0",
                                 reward={"type": "potential_shaping", "gamma": 0.97})
    assert resolve_gamma(env, params, None) == pytest.approx(0.97)
    with pytest.raises(ValidationError) as info:
        resolve_gamma(env, params, 0.99)
    assert info.value.parameter == "algo.gamma"
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    assert resolve_gamma(env, params, None) == pytest.approx(0.99)
    assert resolve_gamma(env, params, 0.9) == pytest.approx(0.9)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("train_*.yaml")), ids=lambda p: p.name)
def test_shipped_train_configs_validate_and_build_their_env(path):
    """Every shipped config validates; one on a recorded dataset that is not
    cached (no download here) is refused naming the download command
    (tests/plumes/test_recorded_plumes.py builds it on a file in the real layout)."""
    cfg = load_train_config(path)
    try:
        env, params = cfg.make_env()
    except ValidationError as exc:
        if "plume-jax data download" not in str(exc):
            raise
        return
    assert cfg.num_updates >= 1
    if "gamma" in cfg.algo:  # the algorithms that discount (belief_value_iteration counts steps)
        resolve_gamma(env, params, cfg.algo["gamma"])


def test_shipped_sweep_config_has_at_least_8_members_of_one_program():
    sweep = load_sweep_config(CONFIGS / "sweep_gaussian.yaml")
    assert len(sweep.members) >= 8
    s = setup(sweep)
    assert s.keys.shape == (len(sweep.members),)
    lrs = np.asarray(s.hp.learning_rate)
    scales = np.asarray(s.env_params.reward.scale)
    assert sorted(set(lrs.round(6))) == [0.0003, 0.001]
    assert sorted(set(scales.round(6))) == [0.05, 0.1]


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("sweep_*.yaml")), ids=lambda p: p.name)
def test_every_shipped_sweep_config_loads_as_one_program(path):
    """Every shipped sweep validates, has at least 5 members (a recipe's
    fewest seeds, issue 39; the Singh recipes' 5M-step members train 5 to a
    sweep) and its members share one compiled program (the grids vary
    dynamic settings only), so it runs as one vmapped job; the seed sweeps of
    an algorithm that trains one run at a time (not ``sweepable``: the Poisson
    searchers') are a program per member."""
    from plume_jax.train.algorithms.base import algorithm_class
    from plume_jax.train.sweep import program_groups

    sweep = load_sweep_config(path)
    assert len(sweep.members) >= 5
    groups = program_groups(sweep)
    if algorithm_class(sweep.configs[0].algo["algorithm"]).sweepable:
        assert len(groups) == 1
    else:
        assert set(sweep.grid) == {"run.seed"} and len(groups) == len(sweep.members)


SWEEP_BASE = {"env": {"id": "PlumeNav-Gaussian-v0"}, "algo": {"total_steps": 10_000}}


def test_sweep_product_and_zip():
    s = sweep_config({"base": SWEEP_BASE, "grid": {"run.seed": [0, 1, 2],
                                                   "algo.ent_coef": [0.0, 0.01]}})
    assert len(s.members) == 6
    z = sweep_config({"base": SWEEP_BASE, "mode": "zip",
                      "grid": {"run.seed": [0, 1], "env.sigma": [10.0, 20.0]}})
    assert z.members == [{"run.seed": 0, "env.sigma": 10.0}, {"run.seed": 1, "env.sigma": 20.0}]
    assert z.configs[1].env["overrides"]["sigma"] == 20.0


@pytest.mark.parametrize("grid, parameter", [
    ({"algo.learning_rate": 0.1}, "grid.algo.learning_rate"),
    ({"algo.learning_rate": [0.1, -1.0]}, "algo.learning_rate"),
    ({"algo.learning_rat": [0.1]}, "algo.learning_rat"),
    ({"seed": [0, 1]}, "grid.seed"),
    ({"network.hidden_sizes": [[8], []]}, "network.hidden_sizes"),
])
def test_sweep_refuses_bad_grid_keys_and_values(grid, parameter):
    with pytest.raises(ValidationError) as info:
        sweep_config({"base": SWEEP_BASE, "grid": grid})
    assert info.value.parameter == parameter


def test_sweep_members_share_a_program_unless_static_settings_or_env_structure_differ():
    from plume_jax.train.sweep import program_groups

    dynamic = sweep_config({"base": SWEEP_BASE, "grid": {
        "run.seed": [0, 1], "algo.learning_rate": [1e-3, 3e-3], "env.sigma": [10.0, 20.0]}})
    assert program_groups(dynamic) == [list(range(8))]
    static = sweep_config({"base": SWEEP_BASE, "grid": {
        "network.hidden_sizes": [[8], [16, 16]], "run.seed": [0, 1],
        "env.grid_size": [[32, 32], [48, 48]]}})
    # hidden sizes x grid size: four programs of two seeds each (the grid's product
    # order is hidden size, seed, grid size)
    assert program_groups(static) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert static.names[:2] == ["hidden_sizes-8_seed-0_grid_size-32x32",
                                "hidden_sizes-8_seed-0_grid_size-48x48"]


def test_sweep_setup_refuses_members_of_different_programs():
    sweep = sweep_config({"base": SWEEP_BASE, "grid": {"env.grid_size": [[32, 32], [64, 64]]}})
    with pytest.raises(ValidationError) as info:
        setup(sweep)
    assert info.value.parameter == "env.grid_size"
    assert setup(sweep, [1]).members == [1]


def test_run_lanes_trains_one_single_run_on_one_device_only():
    from plume_jax.train.loop import Member, build_program

    def member(**run):
        cfg = train_config(_with("run", **run))
        return Member(cfg, *cfg.make_env())

    assert build_program([member()], batched=False).lanes is None  # the default: no lanes
    from plume_jax.train.lane_schedule import LaneSchedule

    assert build_program([member(lanes=3)], batched=False).lanes == LaneSchedule(((0, 3),))
    for runs, batched, words in (([member(lanes=2, devices=2)], False, "run.devices 2"),
                                 ([member(), member(lanes=2)], True, "sweep or tune member")):
        with pytest.raises(ValidationError, match=words) as info:
            build_program(runs, batched=batched)
        assert info.value.parameter == "run.lanes"
    lookahead = train_config({**_with("run", lanes=2), "algo": {
        "algorithm": "lookahead_vi", "total_steps": 100_000}})
    with pytest.raises(ValidationError, match="trains one run at a time"):
        build_program([Member(lookahead, *lookahead.make_env())], batched=False)


def test_sweep_refuses_unknown_top_level_keys():
    with pytest.raises(ValidationError) as info:
        sweep_config({"base": SWEEP_BASE, "grid": {"run.seed": [0]}, "grids": {}})
    assert info.value.parameter == "grids"


# ------------------------------------------------------------------- GAE
def test_gae_on_a_constructed_example_with_truncation_and_termination():
    """γ = 0.5, λ = 1 (Monte-Carlo targets with bootstrap). Step 1 is
    truncated with V(final observation) = 10, step 3 terminates:

        G3 = 4                      (terminal: no bootstrap)
        G2 = 3 + 0.5 * G3 = 5
        G1 = 2 + 0.5 * 10 = 7       (bootstrap from the final observation,
                                     not from V(next obs) = 2 of the new episode)
        G0 = 1 + 0.5 * G1 = 4.5
    """
    rewards = jnp.asarray([1.0, 2.0, 3.0, 4.0])
    values = jnp.asarray([0.5, 1.0, 2.0, 3.0])
    terminated = jnp.asarray([False, False, False, True])
    truncated = jnp.asarray([False, True, False, False])
    final_values = jnp.asarray([-99.0, 10.0, -99.0, -99.0])  # read only where truncated
    adv, target = gae(rewards, values, terminated, truncated, final_values,
                      jnp.asarray(-99.0), 0.5, 1.0)
    np.testing.assert_allclose(target, [4.5, 7.0, 5.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(adv, [4.0, 6.0, 3.0, 1.0], rtol=1e-6)

    # λ = 0: one-step targets r + γ B with the same bootstraps
    _, target0 = gae(rewards, values, terminated, truncated, final_values,
                     jnp.asarray(-99.0), 0.5, 0.0)
    np.testing.assert_allclose(target0, [1.5, 7.0, 4.5, 4.0], rtol=1e-6)


def test_gae_bootstraps_the_last_step_from_last_value_and_batches():
    rewards = jnp.ones((3, 2))
    values = jnp.zeros((3, 2))
    false = jnp.zeros((3, 2), bool)
    adv, target = gae(rewards, values, false, false, jnp.zeros((3, 2)),
                      jnp.asarray([2.0, 0.0]), 0.5, 1.0)
    # env 0: 1 + .5(1 + .5(1 + .5 * 2)) = 2 ; env 1: 1 + .5 + .25 = 1.75
    np.testing.assert_allclose(target[0], [2.0, 1.75], rtol=1e-6)
    np.testing.assert_allclose(adv, target, rtol=1e-6)


# ------------------------------------------------------------------- CLI errors
def test_cli_train_reports_a_bad_config_with_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_with("algo", learning_rate=-3.0)))
    assert main(["train", "--config", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "algo.learning_rate=-3.0 is invalid" in err
    assert main(["train", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert main(["train", "--config", str(CONFIGS / "train_gaussian.yaml"),
                 "--total-steps", "0"]) == 2
    assert not (tmp_path / "out").exists()


def test_cli_sweep_reports_a_bad_grid_value_with_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "sweep.yaml"
    bad.write_text(yaml.safe_dump({"base": SWEEP_BASE, "grid": {"algo.num_steps": [8, 0]}}))
    assert main(["sweep", "--config", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert "sweep member 1 {'algo.num_steps': 0}: algo.num_steps=0" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_sweep_refuses_a_non_empty_out_folder_before_touching_it(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"base": SWEEP_BASE, "grid": {"run.seed": [0, 1]}}))
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}")
    assert main(["sweep", "--config", str(sweep), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--out=" in err and "--overwrite" in err
    assert [p.name for p in out.iterdir()] == ["results.json"]
    assert (out / "results.json").read_text() == "{}"


# ------------------------------------------------------------------- --set
def test_dotted_names_set_sections_env_overrides_and_slot_parameters():
    from plume_jax.train.config import with_overrides

    data = with_overrides(MINIMAL, {"algo.learning_rate": 3e-4, "env.overrides.sigma": 10,
                                    "env.reward.goal_reward": 2.0, "env.overrides.actions.type":
                                    "discrete_grid", "network.hidden_sizes": [8]})
    cfg = train_config(data)
    assert cfg.algo["learning_rate"] == 3e-4 and cfg.network.hidden_sizes == (8,)
    assert cfg.env["overrides"] == {"sigma": 10, "reward": {"goal_reward": 2.0},
                                    "actions": {"type": "discrete_grid"}}
    assert MINIMAL == {"env": {"id": "PlumeNav-Gaussian-v0"}, "algo": {"total_steps": 100_000}}
    env, params = cfg.make_env()
    assert float(params.reward.goal_reward) == 2.0


@pytest.mark.parametrize("item, message", [
    ("algo.learning_rat=1e-3", "algo.learning_rat=0.001 is invalid: expected a known algo "
                               "setting"),
    ("optimiser.lr=1", "optimiser="),
    ("algo.learning_rate=-1", "algo.learning_rate=-1"),
    ("learning_rate=1e-3", "--set='learning_rate' is invalid: expected a dotted name"),
    ("algo.learning_rate", "--set='algo.learning_rate' is invalid: expected NAME=VALUE"),
    ("algo.learning_rate=[1e-3", "--set='algo.learning_rate=[1e-3' is invalid: expected "
                                 "NAME=VALUE with VALUE in plain YAML syntax"),
    ("algo.learning_rate=!!python/object/apply:os.system ['echo owned']",
     "tags that build Python objects (!!python/...) are refused"),
    ("env.overrides.a.b.c=1", "env.overrides.NAME or env.overrides.SLOT.PARAM"),
])
def test_cli_set_errors_name_the_key_and_never_trace_back(item, message, tmp_path, capsys):
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(MINIMAL))
    out = tmp_path / "out"
    assert main(["train", "--config", str(config), "--out", str(out), "--set", item]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plume-jax: error: ") and message in err, err
    assert not out.exists()


def test_sweep_set_overrides_the_base_the_grid_and_the_mode():
    from plume_jax.train.sweep import _split_sweep_overrides

    data = {"base": SWEEP_BASE, "grid": {"run.seed": [0, 1], "algo.ent_coef": [0.0, 0.01]}}
    s = sweep_config(data, overrides={"algo.total_steps": 20_000, "grid.run.seed": [3, 4],
                                      "mode": "zip"})
    assert s.mode == "zip" and s.members == [{"run.seed": 3, "algo.ent_coef": 0.0},
                                             {"run.seed": 4, "algo.ent_coef": 0.01}]
    assert s.base.algo["total_steps"] == 20_000
    with pytest.raises(ValidationError) as info:
        _split_sweep_overrides({"grid": 1})
    assert info.value.parameter == "--set"


# ------------------------------------------------------------------- CLI inputs
@pytest.mark.parametrize("content, message", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "a readable text file"),
    (b"env: {id: [unclosed\n", "a YAML file ("),
    (b"", "a YAML file holding a mapping"),
    (b"- a list\n", "a YAML file holding a mapping"),
    (b"env: !!python/object/apply:os.system ['echo owned']\n", "a YAML file ("),
])
def test_cli_bad_config_files_are_clear_errors(content, message, tmp_path, capsys):
    """Regression: a binary or malformed YAML raised a traceback."""
    config = tmp_path / "train.yaml"
    config.write_bytes(content)
    for command in ("train", "sweep"):
        assert main([command, "--config", str(config), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("plume-jax: error: --config=") and message in err, err


@pytest.mark.parametrize("args, message", [
    (["--seed", str(2**63)], "run.seed=9223372036854775808 is invalid"),
    (["--seed", "-1"], "run.seed=-1 is invalid"),
    (["--total-steps", "0"], "algo.total_steps=0 is invalid"),
])
def test_cli_train_checks_seeds_and_budgets(args, message, tmp_path, capsys):
    """Regression: seeds >= 2**63 raised a traceback."""
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(MINIMAL))
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "o"), *args]) == 2
    assert message in capsys.readouterr().err


def test_cli_train_needs_a_config_or_a_run_to_resume(tmp_path, capsys):
    assert main(["train"]) == 2
    assert "--config=None is invalid" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "nothing")]) == 2
    assert "--resume=" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["train", "--resume", str(tmp_path / "empty")]) == 2
    assert "a run folder with a checkpoint/ folder" in capsys.readouterr().err


def test_wandb_asked_for_but_not_installed_is_refused(monkeypatch):
    import importlib.util

    from plume_jax.train.progress import check_wandb

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real(name, *a))
    check_wandb(None)
    with pytest.raises(ValidationError) as info:
        check_wandb("my-project")
    assert info.value.parameter == "run.wandb_project" and "pip install wandb" in str(info.value)


# ------------------------------------------------------------------- resume rules
def test_resume_differences_name_what_may_not_change():
    from plume_jax.train.config import resume_differences

    saved = train_config(_with("env", overrides={"sigma": 5.0})).to_dict()
    same_problem = train_config(saved).replace(
        algo={"total_steps": 10**7}, run={"log_every": 3, "checkpoint_minutes": None,
                                          "devices": 1, "tensorboard": False},
        eval={"num_envs": 10})
    assert resume_differences(saved, same_problem) == {}
    changed = train_config(saved).replace(algo={"learning_rate": 1e-3},
                                          env={"overrides": {"sigma": 6.0, "max_steps": 50}},
                                          run={"seed": 1})
    assert resume_differences(saved, changed) == {
        "algo.learning_rate": (3e-4, 1e-3), "env.overrides.max_steps": ("<unset>", 50),
        "env.overrides.sigma": (5.0, 6.0), "run.seed": (0, 1)}


def test_chunk_lengths_follow_the_budget_checkpoints_and_measured_speed():
    from plume_jax.train.loop import REPORT_SECONDS, next_chunk

    def chunk(done, spu, left=None, every=None, total=1000):
        return next_chunk(done, total, every=every, seconds_per_update=spu,
                          seconds_to_checkpoint=left, max_chunk=4096)

    assert chunk(0, None) == 1                                 # first: measure the speed
    assert chunk(1, 0.001) == 999                              # fast: to the end
    assert chunk(1, 1.0) == int(REPORT_SECONDS)                # slow: report every ~30 s
    assert chunk(1, 0.001, left=0.05) == 50                    # a timed checkpoint is due
    assert chunk(1, 0.001, left=-1.0) == 1                     # overdue: one more update
    assert chunk(10, 0.001, every=12) == 2                     # the next checkpoint_every
    assert chunk(12, 0.001, every=12) == 12
    assert chunk(990, 0.0001) == 10                            # never past the budget


# ------------------------------------------------------------------- metrics files
def test_metrics_files_tolerate_a_torn_last_line_and_name_a_damaged_one(tmp_path):
    from plume_jax.train.progress import read_jsonl, trim_jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"update": 1}\n{"update": 2}\n{"update": 3}\n{"upd')
    assert read_jsonl(path) == [{"update": 1}, {"update": 2}, {"update": 3}]
    assert trim_jsonl(path, 2) == [{"update": 1}, {"update": 2}]
    assert path.read_text() == '{"update": 1}\n{"update": 2}\n'
    path.write_text('{"update": 1}\n{"upd\n{"update": 3}\n')
    with pytest.raises(ValidationError) as info:
        read_jsonl(path)
    assert f"{path}:2" in str(info.value)


@pytest.mark.parametrize("data, field, suggestion", [
    ({**MINIMAL, "algo": {"total_steps": 100_000, "learning_rat": 1e-3}}, "algo.learning_rat",
     "learning_rate"),
    ({**MINIMAL, "netwrok": {}}, "netwrok", "network"),
    ({**MINIMAL, "env": {"id": "PlumeNav-Gaussian-v0",
                         "overrides": {"plume": {"type": "gaussian", "sigmaa": 5.0}}}},
     "plume.sigmaa", "sigma"),
])
def test_unknown_keys_get_one_did_you_mean_message_everywhere(data, field, suggestion):
    """Training-config keys, sections and component settings all go through
    plume_jax.settings.resolve_keys / unknown_setting (scenario files too)."""
    with pytest.raises(ValidationError, match=f"did you mean '{suggestion}'") as excinfo:
        train_config(data).make_env()
    assert excinfo.value.parameter == field
    assert "one of [" in str(excinfo.value)


def test_an_unknown_key_far_from_every_known_one_gets_no_suggestion():
    with pytest.raises(ValidationError) as excinfo:
        train_config({**MINIMAL, "run": {"zzzz": 1}})
    assert excinfo.value.parameter == "run.zzzz" and "did you mean" not in str(excinfo.value)


@pytest.mark.parametrize("content", ["zero", "huge", "folder", "not an id"])
def test_a_wandb_run_id_file_is_read_with_a_bound(tmp_path, content):
    """Issue 26: the W&B run id of a resumed run was read without bounds
    (``wandb_run_id`` as /dev/zero read gigabytes)."""
    from plume_jax.train.progress import wandb_run_id

    first = wandb_run_id(tmp_path)
    assert wandb_run_id(tmp_path) == first == (tmp_path / "wandb_run_id").read_text()
    (tmp_path / "wandb_run_id").unlink()
    if content == "zero":
        (tmp_path / "wandb_run_id").symlink_to("/dev/zero")
    elif content == "huge":
        (tmp_path / "wandb_run_id").write_text("a" * 5000)
    elif content == "folder":
        (tmp_path / "wandb_run_id").mkdir()
    else:
        (tmp_path / "wandb_run_id").write_text("../../etc\n")
    with pytest.raises(ValidationError, match="wandb_run_id") as excinfo:
        wandb_run_id(tmp_path)
    assert excinfo.value.parameter == "wandb_run_id"


def test_total_steps_that_are_not_whole_updates_get_a_note_saying_how_they_were_rounded():
    """Regression: total_steps 20,000 of 1,024-step updates trained 19,456
    env steps without a word. The whole updates that fit are still what
    trains (runs, checkpoints and shipped configs keep their update counts:
    3,000,000 = 366.2 updates of 8,192 stays 366), and a note says so and
    what to ask for one more."""
    small = {"num_envs": 16, "num_steps": 64}
    cfg = train_config(_with("algo", total_steps=20_000, **small))
    assert cfg.num_updates == 19
    assert cfg.steps_note() == ("algo.total_steps: 20,000 env steps are 19.53 updates of 1,024 "
                                "(num_envs x num_steps); training runs whole updates, 19 updates "
                                "= 19,456 env steps (for 20, set algo.total_steps to 20,480)")
    assert train_config(_with("algo", total_steps=3_000_000)).num_updates == 366
    assert train_config(_with("algo", total_steps=1500, **small)).steps_note().endswith(
        "1 update = 1,024 env steps (for 2, set algo.total_steps to 2,048)")
    exact = train_config(_with("algo", total_steps=20_480, **small))
    assert exact.num_updates == 20 and exact.steps_note() is None


def test_a_resume_says_nothing_of_anneal_lr_for_an_algorithm_that_does_not_anneal():
    """Regression: every algorithm's settings are in a resolved config, so
    `anneal_lr: true` (PPO's default) sat in a belief_value_iteration config
    too, and resuming it with a new budget printed a note about annealing
    that algorithm never does."""
    from plume_jax.train.folder import ResumePoint, resume_notes

    def note(algo):
        cfg = train_config({"env": {"id": "PlumeNav-Poisson-Iso19x19-v0"},
                            "algo": {"algorithm": algo, "total_steps": 64 * 128 * 20}})
        assert ("anneal_lr" in cfg.algo) == (algo == "ppo")  # only the algorithm's own settings
        point = ResumePoint(checkpoint=None, run_dir=None, update=5, num_updates=10,
                            config=None)
        return resume_notes(cfg, point)

    assert note("belief_value_iteration") == []
    (said,) = note("ppo")
    assert "algo.anneal_lr: the learning rate decays linearly" in said
