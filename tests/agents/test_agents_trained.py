"""The ``trained`` agent is checked against the env it is built for (issue 13,
item 8): actions, observation size and labels, readable files and weights
that fit the network — all before any step, with a ValidationError."""

from __future__ import annotations

import json

import numpy as np
import pytest

import plume_jax
from agents import make_agent
from agents.trained import TrainedPolicy
from plume_jax import ValidationError, cli
from tests.policy_folders import write_policy_folder

GAUSSIAN = {"grid_size": [16, 16], "sigma": 4.0, "max_steps": 20}


@pytest.fixture(scope="module")
def gaussian_policy(tmp_path_factory):
    """A 5-action policy for the Gaussian preset (one concentration reading)."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **GAUSSIAN)
    return write_policy_folder(tmp_path_factory.mktemp("trained") / "policy", env, params)


def test_trained_policy_builds_for_the_env_it_was_trained_on(gaussian_policy):
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", **GAUSSIAN)
    policy = make_agent("trained", env, path=str(gaussian_policy))
    assert isinstance(policy, TrainedPolicy)
    # evaluation on a variation of the training env (other sizes, noise, plume width) is fine
    other, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[40, 30], sigma=9.0)
    assert isinstance(make_agent("trained", other, path=str(gaussian_policy)), TrainedPolicy)


def test_five_action_policy_on_a_four_action_poisson_preset_is_refused(gaussian_policy):
    env, _ = plume_jax.make("PlumeNav-Poisson-v0")
    with pytest.raises(ValidationError) as excinfo:
        make_agent("trained", env, path=str(gaussian_policy))
    assert excinfo.value.parameter == "actions"
    assert "5 discrete actions" in str(excinfo.value) and "4 actions" in str(excinfo.value)


def test_trained_policy_on_the_filament_preset_is_refused_not_a_jax_type_error(gaussian_policy):
    env, _ = plume_jax.make("PlumeNav-Filament-v0")
    with pytest.raises(ValidationError) as excinfo:
        make_agent("trained", env, path=str(gaussian_policy))
    assert excinfo.value.parameter in ("actions", "sensor")


def test_trained_policy_with_the_same_sizes_but_other_observation_labels_is_refused(
        gaussian_policy):
    """Binary detection has one value like the concentration sensor, but
    means something else."""
    env, _ = plume_jax.make("PlumeNav-GaussianBinary-v0")
    with pytest.raises(ValidationError, match="concentration") as excinfo:
        make_agent("trained", env, path=str(gaussian_policy))
    assert excinfo.value.parameter == "sensor"


def test_trained_policy_with_the_same_count_but_other_action_names_is_refused(tmp_path):
    """Oriented (noop/forward/turn) and compass (north/south/east/west) action
    models both have four actions."""
    oriented, params = plume_jax.make("PlumeNav-GaussianOriented-v0", grid_size=[16, 16],
                                      sensor="concentration")
    folder = write_policy_folder(tmp_path / "p", oriented, params)
    compass, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16],
                                actions={"include_noop": False})
    assert compass.num_actions == oriented.num_actions == 4
    with pytest.raises(ValidationError, match="forward") as excinfo:
        make_agent("trained", compass, path=str(folder))
    assert excinfo.value.parameter == "actions"


@pytest.mark.parametrize("damage", ["missing folder", "no npz", "bad json", "other format",
                                    "wrong weight shape"])
def test_unreadable_trained_policy_folders_are_refused_naming_the_path(gaussian_policy, tmp_path,
                                                                        damage):
    import shutil

    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", **GAUSSIAN)
    folder = tmp_path / "copy"
    if damage != "missing folder":
        shutil.copytree(gaussian_policy, folder)
    if damage == "no npz":
        (folder / "policy.npz").unlink()
    elif damage == "bad json":
        (folder / "policy.json").write_text("{not json")
    elif damage == "other format":
        spec = json.loads((folder / "policy.json").read_text())
        (folder / "policy.json").write_text(json.dumps({**spec, "format": "something/2"}))
    elif damage == "wrong weight shape":
        with np.load(folder / "policy.npz") as data:
            arrays = {k: data[k] for k in data.files}
        name = next(k for k in arrays if k.endswith("kernel"))
        arrays[name] = np.zeros((arrays[name].shape[0] + 3, arrays[name].shape[1]), np.float32)
        np.savez(folder / "policy.npz", **arrays)
    with pytest.raises(ValidationError) as excinfo:
        make_agent("trained", env, path=str(folder))
    assert excinfo.value.parameter == "path" and str(folder) in str(excinfo.value)


def test_evaluate_with_a_mismatched_trained_policy_exits_2_before_running(gaussian_policy,
                                                                          tmp_path, capsys):
    import yaml

    scenario = tmp_path / "poisson.yaml"
    scenario.write_text(yaml.safe_dump({"name": "poisson", "env": {"preset": "PlumeNav-Poisson-v0"},
                                        "agent": "random_walk", "episodes": 4}))
    code = cli.main(["evaluate", "--scenario", str(scenario), "--agent", "trained",
                     "--agent-param", f"path={gaussian_policy}", "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("plume-jax: error:") and "agent 'trained'" in err
    assert "5 discrete actions" in err
    assert not list((tmp_path / "o").iterdir())


def _with_weight(gaussian_policy, tmp_path, change):
    """A copy of the policy folder with one kernel replaced by ``change(kernel)``."""
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(gaussian_policy, folder)
    with np.load(folder / "policy.npz") as data:
        arrays = {k: data[k] for k in data.files}
    name = next(k for k in arrays if k.endswith("kernel"))
    arrays[name] = change(arrays[name])
    np.savez(folder / "policy.npz", **arrays)
    return folder, name


@pytest.mark.parametrize("dtype", [np.complex64, np.int8, np.bool_, np.int32])
def test_policy_weights_that_are_not_real_floating_point_are_refused_naming_the_array(
        gaussian_policy, tmp_path, dtype):
    """Defect 13 (issue 26): complex weights passed the pre-run check and then
    failed with a TypeError while lowering; int8 weights were accepted."""
    folder, name = _with_weight(gaussian_policy, tmp_path, lambda a: a.astype(dtype))
    with pytest.raises(ValidationError, match=f"array '{name}' has dtype") as excinfo:
        TrainedPolicy.load(folder)
    assert excinfo.value.parameter == "path" and "\n" not in str(excinfo.value)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_policy_weights_holding_nan_or_infinity_are_refused_naming_the_array(
        gaussian_policy, tmp_path, bad):
    """Defect 13 (issue 26): NaN weights were accepted (every action then argmax 0)."""
    def poison(a):
        a = a.copy()
        a.flat[0] = bad
        return a

    folder, name = _with_weight(gaussian_policy, tmp_path, poison)
    with pytest.raises(ValidationError, match=f"array '{name}' holds 1 NaN or infinite"):
        TrainedPolicy.load(folder)


def test_shipped_belief_policies_with_integer_index_tables_still_load():
    for folder in ("configs/policies/poisson_iso19x19_belief",
                   "configs/policies/poisson_iso19x19_searcher"):
        assert TrainedPolicy.load(folder).params


@pytest.mark.parametrize("damage", ["zip bomb", "truncated zip", "deep json", "huge json"])
def test_policy_files_are_read_with_bounds_and_refused_naming_the_path(gaussian_policy, tmp_path,
                                                                        damage):
    """Defect 6/13 (issue 26): policy.json and policy.npz were read unbounded: a
    deep policy.json raised RecursionError, a truncated npz BadZipFile, a zip
    bomb decompressed whatever it declared."""
    import shutil
    import zipfile

    folder = tmp_path / "copy"
    shutil.copytree(gaussian_policy, folder)
    if damage == "zip bomb":  # a member whose header declares 8 bytes, 64 MiB unpacked
        header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
        with zipfile.ZipFile(folder / "policy.npz", "w", zipfile.ZIP_DEFLATED) as archive:
            with archive.open("bomb.npy", "w", force_zip64=True) as fp:
                np.lib.format.write_array_header_1_0(fp, header)
                fp.write(bytes(64 << 20))
        match = "policy.npz"
    elif damage == "truncated zip":
        data = (folder / "policy.npz").read_bytes()
        (folder / "policy.npz").write_bytes(data[: len(data) // 2])
        match = "policy.npz.*cannot be read"
    elif damage == "deep json":
        (folder / "policy.json").write_text("[" * 100_000 + "]" * 100_000)
        match = "policy.json.*nested at most"
    else:
        (folder / "policy.json").write_text(" " * (2 << 20) + "{}")
        match = "policy.json.*at most 1 MiB"
    with pytest.raises(ValidationError, match=match) as excinfo:
        TrainedPolicy.load(folder)
    assert excinfo.value.parameter == "path" and "\n" not in str(excinfo.value)


@pytest.mark.parametrize("shape", [(3,), (2, 1), (0,)])
def test_trained_agent_act_on_a_wrong_shaped_observation_is_a_validation_error_not_a_jax_type_error(
        gaussian_policy, shape):
    """Issue 30 item 9: `TrainedAgent.act` / `TrainedPolicy.act` on an
    observation of the wrong shape raised JAX's `TypeError: sub got
    incompatible shapes`; the error now names the shape received and the one
    expected, on the host and under jit alike."""
    import jax
    import jax.numpy as jnp

    from agents.trained import TrainedAgent

    agent = TrainedAgent.load(gaussian_policy)
    agent.reset()
    assert isinstance(agent.act(np.zeros(1, np.float32)), int)  # the right shape still acts
    with pytest.raises(ValidationError, match=r"obs shape=\(.*\) is invalid: expected \(1,\)") \
            as raised:
        agent.act(np.zeros(shape, np.float32))
    assert str(shape) in str(raised.value)
    policy = agent.policy
    for act in (policy.act, jax.jit(policy.act)):
        with pytest.raises(ValidationError, match=r"obs shape=\(.*\) is invalid: expected \(1,\)"):
            act(policy.init(None), jnp.zeros(shape), jax.random.key(0))


def test_a_run_folder_given_as_path_names_its_policy_folder(tmp_path):
    """Regression: ``--agent trained --agent-param path=runs/NAME`` (the run
    folder, which ``bench --add`` takes) was refused as "path='runs/NAME/
    policy.json' is invalid: expected a JSON file ... (No such file or
    directory)". It now says it is a run folder and which path to give."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16])
    write_policy_folder(tmp_path / "run" / "policy", env, params)
    with pytest.raises(ValidationError) as caught:
        TrainedPolicy.load(tmp_path / "run")
    assert str(caught.value).endswith(
        "this is a run folder (or a sweep member's or tune trial's), which keeps its exported "
        f"policy in policy/: path={tmp_path / 'run' / 'policy'}")
    assert TrainedPolicy.load(tmp_path / "run" / "policy") is not None


def test_a_policy_with_a_negative_observation_variance_is_refused_naming_the_array(
        gaussian_policy, tmp_path):
    """Issue 54 item 12: a negative ``obs_var`` (a square root of it
    normalises every observation) was accepted."""
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(gaussian_policy, folder)
    with np.load(folder / "policy.npz") as data:
        arrays = {k: data[k] for k in data.files}
    if "obs_var" not in arrays:
        pytest.skip("this policy does not normalise observations")
    arrays["obs_var"] = -np.abs(arrays["obs_var"]) - 1.0
    np.savez(folder / "policy.npz", **arrays)
    with pytest.raises(ValidationError, match="'obs_var' .a variance. holds .* negative") as info:
        TrainedPolicy.load(folder)
    assert info.value.parameter == "path"
