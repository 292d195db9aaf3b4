"""Config files: exact round trip (settings, env identity, params, trajectories),
the preset files in configs/presets, overrides, and bad configuration."""

from __future__ import annotations

import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

import plume_jax
from plume_jax import ValidationError
from plume_jax.envs.config_files import PRESET_DIR, config_text, load_config

#: The presets of the component library (a trajectory is compared for each).
COMPONENT_PRESETS = ("PlumeNav-Gaussian-v0", "PlumeNav-GaussianOriented-v0",
                     "PlumeNav-GaussianBinary-v0")

#: A configuration that exercises nested components and every slot.
RICH_OVERRIDES = {
    "grid_size": [24, 20],
    "goal_radius": 1.5,
    "max_steps": 40,
    "plume": {"type": "gaussian", "source": [12, 10], "sigma": 5.0, "wind_speed": 0.7,
              "wind_direction": 2.5},
    "sensor": {"type": "composite", "sensors": [
        {"type": "antennae", "count": 3, "spacing_deg": 45.0},
        {"type": "noise", "sensor": {"type": "wind", "frame": "world"}, "std": 0.1,
         "name": "noisy_wind"},
        {"type": "history", "sensor": {"type": "binary", "threshold": 0.3}, "length": 3}]},
    "actions": {"type": "surge_cast", "step_size": 1},
    "reward": {"type": "weighted_sum", "components": [
        {"type": "step_penalty", "step_penalty": 0.05},
        {"type": "potential_shaping", "gamma": 0.95, "scale": 0.2, "goal_reward": 0.0}],
        "weights": [1.0, 0.5]},
    "start": {"type": "downwind", "min_distance": 3.0, "max_distance": 9.0, "half_width": 2.0},
}


def leaves_equal(a, b) -> bool:
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    return ta == tb and all(
        np.asarray(x).dtype == np.asarray(y).dtype and np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(la, lb))


def rollout(env, params, steps: int = 40, seed: int = 0):
    """Observations, rewards, dones and positions of a fixed action sequence
    (every action id in turn, or a fixed sweep of continuous actions)."""
    obs, state = env.reset(jax.random.key(seed), params)
    n = env.actions.action_space.n
    out = []
    for t in range(steps):
        obs, state, reward, terminated, truncated, _ = env.step(
            jax.random.key(seed * 1000 + t + 1), state, (t * 7 + t // 3) % n, params)
        out.append((obs, reward, terminated, truncated, state.agent.position, state.agent.heading))
    return jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *out)


@pytest.mark.parametrize("preset", sorted(plume_jax.PRESETS))
def test_every_preset_round_trips_to_an_identical_env(preset, tmp_path):
    env, params = plume_jax.make(preset)
    path = plume_jax.save_config(env, tmp_path / "env.yaml")
    env2, params2 = plume_jax.make_from_config(path)
    assert env2.settings == env.settings
    assert env2 == env and hash(env2) == hash(env)
    assert leaves_equal(params2, params)
    # saving the loaded env again writes the same text
    assert plume_jax.save_config(env2, tmp_path / "again.yaml").read_text() == path.read_text()


@pytest.mark.parametrize("preset", COMPONENT_PRESETS)
def test_preset_round_trip_gives_identical_trajectories(preset, tmp_path):
    env, params = plume_jax.make(preset)
    env2, params2 = plume_jax.make_from_config(plume_jax.save_config(env, tmp_path / "p.yaml"))
    assert leaves_equal(rollout(env2, params2), rollout(env, params))


def test_rich_config_round_trips_with_identical_trajectories(tmp_path):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **RICH_OVERRIDES)
    path = plume_jax.save_config(env, tmp_path / "rich.yaml", description="many components")
    data = yaml.safe_load(path.read_text())
    assert data["description"] == "many components"
    assert data["sensor"]["sensors"][1]["name"] == "noisy_wind"
    assert data["sensor"]["sensors"][1]["sensor"] == {"type": "wind", "frame": "world",
                                                      "max_speed": 5.0, "noise_std": 0.0}
    env2, params2 = plume_jax.make_from_config(path)
    assert env2.settings == env.settings and env2 == env
    assert leaves_equal(params2, params)
    assert leaves_equal(rollout(env2, params2, steps=30), rollout(env, params, steps=30))
    # a different dynamic value changes the trajectory (the comparison can fail);
    # the params go to the same compiled env
    _, params3 = plume_jax.make_from_config(path, wind_direction=0.0)
    assert not leaves_equal(rollout(env, params3, steps=30), rollout(env, params, steps=30))


REGENERATE = 'python -c "import plume_jax.envs.config_files as c; c.write_preset_configs()"'


def test_preset_files_exist_and_are_in_sync():
    """configs/presets holds exactly one file per preset, each exactly what
    ``write_preset_configs`` writes, each loading to the preset's env."""
    files = {p.stem: p for p in PRESET_DIR.glob("*.yaml")}
    assert set(files) == set(plume_jax.PRESETS), f"preset files out of date: run {REGENERATE}"
    for preset, path in files.items():
        env, _ = plume_jax.make(preset)
        expected = config_text(env, description=plume_jax.PRESETS[preset]["description"])
        assert path.read_text() == expected, f"{path.name} is stale: run {REGENERATE}"
        env2, _ = plume_jax.make_from_config(path)
        assert env2 == env


def test_preset_file_is_readable_yaml_with_every_setting():
    data = load_config(PRESET_DIR / "PlumeNav-GaussianOriented-v0.yaml")
    assert data["id"] == "PlumeNav-GaussianOriented-v0"
    assert data["description"] == plume_jax.PRESETS["PlumeNav-GaussianOriented-v0"]["description"]
    assert data["sensor"] == {"type": "antennae", "count": 2, "length": 2.0, "spacing_deg": 90.0,
                              "offset_deg": 0.0}
    assert data["actions"]["type"] == "oriented_grid"
    assert data["plume"]["source"] == [63.0, 63.0]


def test_make_from_config_accepts_overrides(tmp_path):
    env, _ = plume_jax.make("PlumeNav-GaussianBinary-v0")
    path = plume_jax.save_config(env, tmp_path / "b.yaml")
    env2, params2 = plume_jax.make_from_config(path, threshold=0.5, max_steps=10,
                                               actions={"diagonals": True})
    assert float(params2.sensor.threshold) == 0.5 and int(params2.max_steps) == 10
    assert "move_northeast" in env2.action_names
    direct, _ = plume_jax.make("PlumeNav-GaussianBinary-v0", threshold=0.5, max_steps=10,
                               actions={"diagonals": True})
    assert env2 == direct


def test_save_config_refuses_an_env_without_settings():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    bare = plume_jax.PlumeEnv(env.grid, env.plume, env.sensor, env.actions, env.reward, env.start,
                              params)
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.save_config(bare, "/tmp/never_written.yaml")
    assert excinfo.value.parameter == "env"
    assert not pathlib.Path("/tmp/never_written.yaml").exists()


def write(tmp_path, spec) -> pathlib.Path:
    path = tmp_path / "bad.yaml"
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec))
    return path


def base_spec(**changes):
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0")
    spec = yaml.safe_load(config_text(env))
    for key, value in changes.items():
        same_type = isinstance(value, dict) and isinstance(spec.get(key), dict) and \
            value.get("type", spec[key].get("type")) == spec[key].get("type")
        if same_type:
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    return spec


BAD_CONFIGS = [
    ({"sensor": {"type": "nope"}}, "sensor.type"),
    ({"actions": {"type": "teleport"}}, "actions.type"),
    ({"plume": {"sigma": -1.0}}, "plume.sigma"),
    ({"sensor": {"type": "binary", "threshold": 0.0}}, "sensor.threshold"),
    ({"sensor": {"type": "binary", "threshold": 1.5}}, "sensor.threshold"),
    ({"sensor": {"type": "binary", "threshold": "high"}}, "sensor.threshold"),
    ({"grid_size": [8, 8], "plume": {"type": "gaussian", "source": [3, 3]},
      "goal_radius": 1.0, "sensor": {"type": "patch", "size": 9}}, "sensor.size"),
    ({"sensor": {"type": "patch", "size": 4}}, "sensor.size"),
    ({"sensor": {"type": "poisson", "rate": 0.0}}, "sensor.rate"),
    ({"sensor": {"type": "antennae", "count": 0}}, "sensor.count"),
    ({"sensor": {"type": "wind", "frame": "sideways"}}, "sensor.frame"),
    ({"sensor": {"type": "noise", "std": -0.1}}, "sensor.std"),
    ({"sensor": {"type": "history", "sensor": {"type": "binary", "threshold": 2.0}}},
     "sensor.sensor.threshold"),
    ({"sensor": {"type": "history", "sensor": "nope"}}, "sensor.sensor.type"),
    ({"sensor": {"type": "composite", "sensors": [{"type": "concentration"},
                                                  {"type": "binary", "threshold": -1}]}},
     "sensor.sensors[1].threshold"),
    ({"sensor": {"type": "composite", "sensors": []}}, "sensor.sensors"),
    ({"sensor": {"type": "composite", "sensors": [{"type": "wind", "name": "a"},
                                                  {"type": "binary", "name": "a"}]}},
     "sensor.sensors[1].name"),
    ({"sensor": {"type": "history", "sensor": {"type": "composite", "form": "dict"}}},
     "sensor.sensor"),
    ({"actions": {"type": "oriented_grid", "turn_angle_deg": 0.0}}, "actions.turn_angle_deg"),
    ({"actions": {"type": "continuous", "min_speed": 2.0, "max_speed": 1.0}},
     "actions.min_speed"),
    ({"actions": {"type": "run_tumble", "run_length": -1.0}}, "actions.run_length"),
    ({"reward": {"type": "potential_shaping", "gamma": 1.5}}, "reward.gamma"),
    ({"reward": {"type": "weighted_sum", "weights": [1.0]}}, "reward.weights"),
    ({"reward": {"type": "weighted_sum", "components": [{"type": "sparse", "bonus": 1}]}},
     "reward.components[0].bonus"),
    ({"start": {"type": "annulus", "r_min": 20.0, "r_max": 10.0}}, "start.r_min"),
    ({"start": {"type": "annulus", "r_min": 1.0, "r_max": 4.0}}, "start.r_max"),
    ({"start": {"type": "annulus", "r_min": 95.0, "r_max": 100.0}}, "start.r_min"),
    ({"start": {"type": "downwind", "min_distance": 9.0, "max_distance": 3.0}},
     "start.min_distance"),
    ({"start": {"type": "downwind", "min_distance": 0.0, "max_distance": 2.0, "half_width": 0.0}},
     "start.max_distance"),
    ({"start": {"type": "fixed", "position": [3.5, 4]}, "actions": {"type": "oriented_grid"}},
     "start.position"),
    ({"not_a_setting": 3}, "not_a_setting"),
    ({"max_steps": 0}, "max_steps"),
]


@pytest.mark.parametrize("changes, field", BAD_CONFIGS, ids=[f for _, f in BAD_CONFIGS])
def test_bad_config_raises_validation_error_naming_the_field(tmp_path, changes, field):
    path = write(tmp_path, base_spec(**changes))
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make_from_config(path)
    assert excinfo.value.parameter == field
    message = str(excinfo.value)
    assert field in message and "expected" in message


def test_continuous_start_off_cells_is_fine(tmp_path):
    """Positions off cells are refused only for models that stay on cells."""
    path = write(tmp_path, base_spec(start={"type": "fixed", "position": [3.5, 4]},
                                     actions={"type": "continuous"}))
    env, params = plume_jax.make_from_config(path)
    assert env.actions.type_name == "continuous"


@pytest.mark.parametrize("text, field", [
    ("grid_size: [8, 8\n", "path"),
    ("- just\n- a list\n", "config"),
    ("", "config"),
])
def test_unreadable_config_files(tmp_path, text, field):
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make_from_config(write(tmp_path, text))
    assert excinfo.value.parameter == field


def test_binary_config_file_is_refused_with_a_validation_error_not_a_decode_error(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make_from_config(path)
    assert excinfo.value.parameter == "path"


def test_missing_file_and_missing_slot(tmp_path):
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make_from_config(tmp_path / "nope.yaml")
    assert excinfo.value.parameter == "path"
    spec = base_spec()
    del spec["sensor"]
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make_from_config(write(tmp_path, spec))
    assert excinfo.value.parameter == "sensor"
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make_from_config(write(tmp_path, spec), sigma=3.0)
    assert excinfo.value.parameter == "sensor"


@pytest.mark.parametrize("overrides, field", [
    ({"actions": "nope"}, "actions.type"),
    ({"sensor": {"type": "binary", "threshold": 0.0}}, "sensor.threshold"),
    ({"grid_size": [8, 8], "source": [3, 3], "goal_radius": 1.0, "sensor": {"type": "patch",
                                                                           "size": 11}},
     "sensor.size"),
    ({"reward": {"type": "weighted_sum", "components": [
        {"type": "potential_shaping", "gamma": 0.9}, {"type": "potential_shaping"}]}},
     "reward.components"),
])
def test_make_rejects_bad_component_overrides(overrides, field):
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make("PlumeNav-Gaussian-v0", **overrides)
    assert excinfo.value.parameter == field and "expected" in str(excinfo.value)


def test_components_swap_by_name_with_defaults():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", actions="oriented_grid",
                                 sensor="antennae", reward="potential_shaping", start="annulus")
    assert env.action_names == ["noop", "forward", "turn_left", "turn_right"]
    assert env.observation_space(params).shape == (2,)
    assert float(params.reward.gamma) == pytest.approx(0.99)
    assert env.settings["start"] == {"type": "annulus", "candidates": 8, "r_min": 10.0,
                                     "r_max": 30.0}
    assert math.isclose(float(params.actions.turn_angle_deg), 90.0)
    assert jnp.asarray(params.start.r_max).dtype == jnp.float32


def test_docs_components_example_runs(tmp_path, monkeypatch):
    """The example of docs/components.md ("Config files") runs as written."""
    from tests.docs_blocks import tagged

    monkeypatch.chdir(tmp_path)
    code = tagged("components-example")[0]
    namespace: dict = {}
    exec(compile(code, "docs/components.md example", "exec"), namespace)
    assert namespace["env2"] == namespace["env"]
    assert len(namespace["env"].sensor.observation_labels()) == 8
