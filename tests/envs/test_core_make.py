"""plume_jax.make: preset defaults and validation of every override."""

from __future__ import annotations

import json

import numpy as np
import pytest

import plume_jax
from plume_jax import ValidationError


def test_gaussian_preset_defaults(default_env):
    env, params = default_env
    assert (env.grid.width, env.grid.height) == (128, 128)
    np.testing.assert_array_equal(np.asarray(params.plume.source), [63.0, 63.0])
    assert float(params.plume.sigma) == 20.0
    assert float(params.goal_radius) == 5.0
    assert int(params.max_steps) == 1000
    assert env.start.type_name == "uniform"
    assert env.settings["id"] == "PlumeNav-Gaussian-v0"


def test_settings_are_json_serialisable(default_env):
    env, _ = default_env
    text = json.dumps(env.get_metadata())
    assert "discrete_grid" in text and "gaussian" in text


def test_overrides_flat_and_nested_agree():
    env_a, params_a = plume_jax.make("PlumeNav-Gaussian-v0", sigma=7.5, max_steps=10)
    env_b, params_b = plume_jax.make("PlumeNav-Gaussian-v0", plume={"sigma": 7.5}, max_steps=10)
    assert env_a == env_b and hash(env_a) == hash(env_b)
    assert float(params_a.plume.sigma) == float(params_b.plume.sigma) == 7.5


def test_equal_configuration_gives_equal_envs_and_different_defaults_differ():
    a, _ = plume_jax.make("PlumeNav-Gaussian-v0")
    b, _ = plume_jax.make("PlumeNav-Gaussian-v0")
    c, _ = plume_jax.make("PlumeNav-Gaussian-v0", sigma=3.0)
    assert a == b and hash(a) == hash(b)
    # default params are baked into jit traces when params=None, so they are part of identity
    assert a != c


def test_component_swap_by_name():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", start={"type": "fixed", "position": [3, 4]})
    assert env.start.type_name == "fixed"
    np.testing.assert_array_equal(np.asarray(params.start.position), [3.0, 4.0])


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"not_a_setting": 1}, "not_a_setting"),
        ({"sigma": -1.0}, "plume.sigma"),
        ({"sigma": 0.0}, "plume.sigma"),
        ({"sigma": float("nan")}, "plume.sigma"),
        ({"sigma": "wide"}, "plume.sigma"),
        ({"sigma": True}, "plume.sigma"),
        ({"source": (200, 3)}, "plume.source"),
        ({"source": (-1, 3)}, "plume.source"),
        ({"source": (1, 2, 3)}, "plume.source"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_steps": 1.5}, "max_steps"),
        ({"goal_radius": -0.5}, "goal_radius"),
        ({"goal_radius": 1e6}, "goal_radius"),
        ({"grid_size": (1, 10)}, "grid_size"),
        ({"grid_size": (10.0, 10)}, "grid_size"),
        ({"grid_size": 10}, "grid_size"),
        ({"step_size": 0}, "actions.step_size"),
        ({"include_noop": 1}, "actions.include_noop"),
        ({"plume": "no_such_plume"}, "plume.type"),
        ({"plume": 3}, "plume"),
        ({"plume": {"sigma": 5.0, "bogus": 1}}, "plume.bogus"),
        ({"start": {"type": "fixed", "position": [63, 64]}}, "start.position"),
        ({"start": {"type": "fixed", "position": [3.5, 4]}}, "start.position"),
    ],
)
def test_bad_override_raises_validation_error_naming_field(overrides, field):
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make("PlumeNav-Gaussian-v0", **overrides)
    assert excinfo.value.parameter == field
    assert field in str(excinfo.value)
    assert "expected" in str(excinfo.value)


def test_source_outside_a_smaller_grid_is_rejected():
    with pytest.raises(ValidationError, match="plume.source"):
        plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], source=[20, 5])


def test_unknown_preset():
    with pytest.raises(ValidationError, match="PlumeNav-Gaussian-v0"):
        plume_jax.make("PlumeNav-Nope-v0")


def test_validation_error_is_a_value_error_and_state_error_a_runtime_error():
    assert issubclass(plume_jax.ValidationError, ValueError)
    assert issubclass(plume_jax.StateError, RuntimeError)


def test_list_presets_describes_every_preset():
    presets = plume_jax.list_presets()
    assert "PlumeNav-Gaussian-v0" in presets
    assert all(isinstance(d, str) and d for d in presets.values())


def test_namespaced_gymnasium_id_is_accepted():
    env, params = plume_jax.make("plume_jax/PlumeNav-Gaussian-v0", grid_size=[16, 16])
    assert env == plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16])[0]
    assert env.settings["id"] == "PlumeNav-Gaussian-v0"


@pytest.mark.parametrize("typo,suggested", [
    ("PlumeNav-Gausian-v0", "PlumeNav-Gaussian-v0"),
    ("plume_jax/PlumeNav-Filamnt-v0", "PlumeNav-Filament-v0"),
    ("plumenav-poisson-v0", "PlumeNav-Poisson-v0"),
])
def test_misspelt_preset_id_gets_a_did_you_mean(typo, suggested):
    with pytest.raises(ValidationError, match=f"did you mean '{suggested}'"):
        plume_jax.make(typo)


def test_non_string_preset_id_is_refused_without_a_suggestion():
    with pytest.raises(ValidationError, match="env_id=3") as caught:
        plume_jax.make(3)
    assert "did you mean" not in str(caught.value)
