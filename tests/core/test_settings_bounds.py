"""Settings are validated as the env holds them (float32 / int32) and within
bounds that keep every computation finite: regression tests for values
that used to pass validation and then break (issue 13, items 4 and 5), a
check of every real and integer setting of every component, and a property
test that every preset stays finite with extreme-but-accepted settings."""

from __future__ import annotations

import copy
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import plume_jax
from plume_jax import ValidationError
from tests.preset_sets import per_preset
from plume_jax.envs.presets import COMPONENTS, build_env
from plume_jax.settings import ANGLE_WRAP, MAX_GRID_SIDE, Angle, Integer, OrNone, Real, real
from plume_jax.core.types import Grid

SMALL = {"grid_size": [16, 16], "goal_radius": 1.0, "max_steps": 20}


def finite(tree) -> bool:
    return all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(tree)
               if np.issubdtype(np.asarray(x).dtype, np.floating))


# -- regressions: issue 13.4 and 13.5 -------------------------------------------

def test_filament_wind_speed_beyond_float32_is_refused_instead_of_nan_observations():
    with pytest.raises(ValidationError, match=r"plume\.wind_speed"):
        plume_jax.make("PlumeNav-Filament-v0", wind_speed=1e39)


def test_goal_reward_beyond_float32_is_refused_instead_of_infinite_rewards():
    with pytest.raises(ValidationError, match=r"reward\.goal_reward"):
        plume_jax.make("PlumeNav-Gaussian-v0", reward={"type": "sparse", "goal_reward": 1e39})


def test_huge_fixed_start_heading_is_wrapped_instead_of_nan_positions():
    env, params = plume_jax.make("PlumeNav-GaussianOriented-v0", **SMALL, sigma=4.0,
                                 start={"type": "fixed", "position": [3, 4], "heading": 1e300})
    held = math.remainder(1e300, 2 * math.pi)
    assert env.settings["start"]["heading"] == held and -math.pi <= held <= math.pi
    assert float(params.start.heading) == np.float32(held)
    obs, state = env.reset(jax.random.key(0), params)
    for t in range(3):
        obs, state, reward, *_ = env.step(jax.random.key(t), state, env.action_ids["forward"],
                                          params)
        assert finite((obs, reward, state.agent))


def test_discrete_grid_step_size_beyond_int32_is_refused_instead_of_overflow_on_first_step():
    with pytest.raises(ValidationError, match=r"actions\.step_size"):
        plume_jax.make("PlumeNav-Gaussian-v0",
                       actions={"type": "discrete_grid", "step_size": 2**31})
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL, sigma=4.0,
                                 actions={"type": "discrete_grid", "step_size": MAX_GRID_SIDE})
    _, state = env.reset(jax.random.key(0), params)
    _, state, *_ = env.step(jax.random.key(1), state, env.action_ids["move_east"], params)
    assert float(state.agent.position[0]) == 15.0


# -- every real and integer setting of every component ---------------------------

def real_checks():
    """``(slot, type, setting, Real)`` for every bounded real setting."""
    out = []
    for slot, table in COMPONENTS.items():
        for name, cls in sorted(table.items()):
            for setting_name, s in cls.SETTINGS.items():
                check = s.check.check if isinstance(s.check, OrNone) else s.check
                if isinstance(check, (Real, Angle, Integer)):
                    out.append((slot, name, setting_name, check))
    return out


CHECKS = real_checks()


def test_the_checked_settings_include_every_kind():
    kinds = {type(c) for *_, c in CHECKS}
    assert kinds == {Real, Angle, Integer} and len(CHECKS) > 60


@pytest.mark.parametrize("slot, name, setting_name, check", CHECKS,
                         ids=[f"{s}.{n}.{k}" for s, n, k, _ in CHECKS])
def test_values_the_env_cannot_hold_are_refused_and_huge_angles_wrapped(slot, name, setting_name,
                                                                        check):
    """Reals: finite in float64 but not in float32, outside the bounds, or
    rounding to a refused bound as float32; integers: outside int32 and the
    setting's bounds. Angles are never refused for size: they are wrapped."""
    qualified = f"{slot}.{setting_name}"
    grid = Grid(16, 16)
    if isinstance(check, Angle):
        for value in (1e39, -1e300, 3 * ANGLE_WRAP):
            held = check(qualified, value, grid)
            assert -math.pi <= held <= math.pi and np.isfinite(np.float32(held))
        assert check(qualified, 2.5, grid) == 2.5
        return
    if isinstance(check, Integer):
        refused = [2**31, -(2**31) - 1, check.high + 1, check.low - 1, 1.0, True]
    else:
        assert check.low is not None and check.high is not None, "a real setting needs bounds"
        refused = [1e39, -1e39, math.inf, math.nan, check.high * (1 + 1e-6) + 1e-6,
                   check.low - abs(check.low) * 1e-6 - 1e-6]
        if not check.low_inclusive:
            refused.append(check.low + 1e-50)  # float32 rounds it to the refused bound
    for value in refused:
        with pytest.raises(ValidationError) as caught:
            check(qualified, value, grid)
        assert caught.value.parameter == qualified


def test_real_checks_the_float32_value_too():
    positive = real(low=0.0, high=1.0, low_inclusive=False)
    with pytest.raises(ValidationError, match="as float32"):
        positive("x", 1e-50, None)
    assert positive("x", 1e-30, None) == 1e-30
    assert real(low=-1.0, high=1.0)("x", 0.1, None) == 0.1  # the value as given is recorded


# -- every preset stays finite with extreme-but-accepted settings -------------------

def extremes(check) -> list:
    """Accepted values at the edges of a checker's range."""
    if isinstance(check, OrNone):
        return extremes(check.check)
    if isinstance(check, Angle):
        return [1e300, -1e300, ANGLE_WRAP, -math.pi, 0.0]
    if isinstance(check, Real):
        low = check.low if check.low_inclusive else float(np.nextafter(np.float32(check.low),
                                                                       np.float32(np.inf)))
        high = check.high if check.high_inclusive else float(
            np.nextafter(np.float32(check.high), np.float32(-np.inf)))
        return [low, high, (low + high) / 2]
    return []


def real_paths(table: dict, cls, config: dict, path: tuple) -> list[tuple[tuple, object]]:
    """``(path, checker)`` of every dynamic real setting of a resolved
    component config, nested components (from the same ``table``) included."""
    out = []
    for name, s in cls.SETTINGS.items():
        value = config[name]
        if s.nested:
            entries = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
            for i, entry in entries:
                key = (name,) if i is None else (name, i)
                out += real_paths(table, table[entry["type"]], entry, path + key)
        elif not s.static and extremes(s.check):
            out.append((path + (name,), s.check))
    return out


@functools.lru_cache(maxsize=None)
def compiled_rollout(preset: str):
    """``(env, run)``: ``run(params, key)`` resets and takes 6 steps (fixed
    actions) with params of the preset's structure; compiled once."""
    env, params = plume_jax.make(preset)
    num_agents = getattr(env, "num_agents", None)

    def run(params, key):
        obs, state = env.reset(key, params)

        def body(carry, t):
            obs, state = carry
            n = env.num_actions
            action = jnp.full((num_agents,) if num_agents else (), t % n, jnp.int32)
            obs, state, reward, *_ = env.step(jax.random.fold_in(key, t), state, action, params)
            return (obs, state), (obs, reward, state.agent.position, state.agent.heading)

        return jax.lax.scan(body, (obs, state), jnp.arange(6))[1]

    return env, jax.jit(run)


def assign(spec: dict, path: tuple, value) -> None:
    target = spec
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


@pytest.mark.parametrize("preset", per_preset(sorted(plume_jax.PRESETS)))
# (most extreme combinations on the gust-field presets break the field's stability
# rule and are refused at build time: filtered, and cheap to filter)
@settings(max_examples=4, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_every_preset_stays_finite_with_extreme_accepted_settings(preset, data):
    env, run = compiled_rollout(preset)
    spec = copy.deepcopy(env.settings)
    for slot, table in COMPONENTS.items():
        for path, check in real_paths(table, table[spec[slot]["type"]], spec[slot], (slot,)):
            value = data.draw(st.sampled_from([None, *extremes(check)]), label=".".join(
                map(str, path)))
            if value is not None:
                assign(spec, path, value)
    try:
        _, params = build_env(spec)
    except ValidationError:
        assume(False)
    out = run(params, jax.random.key(data.draw(st.integers(0, 2**30), label="seed")))
    assert finite(out), jax.tree.map(lambda x: np.asarray(x), out)


@pytest.mark.parametrize("position", [{3, 4}, {3: 4, 5: 6}, frozenset({3, 4})],
                         ids=["set", "dict", "frozenset"])
def test_position_given_as_a_set_or_mapping_is_a_validation_error_not_a_type_error(position):
    """A set or dict of two numbers has a length of 2 but no pair order:
    ``grid_position`` used to index it and raise ``TypeError``."""
    import plume_jax

    with pytest.raises(plume_jax.ValidationError, match="start.position"):
        plume_jax.make("PlumeNav-Gaussian-v0", start={"type": "fixed", "position": position})


def test_counts_may_be_written_as_whole_floats_and_components_stay_strict():
    """``count`` (training config counts) takes ``1e6`` read as a float; an
    ``integer`` (component settings) refuses any float, as before."""
    from plume_jax.settings import count, integer, integer_list

    assert count(low=1, high=10**7)("algo.total_steps", 1e6, None) == 10**6
    for bad in (2.5, math.inf, math.nan, True, "7"):
        with pytest.raises(ValidationError):
            count(low=1, high=10)("n", bad, None)
    with pytest.raises(ValidationError):
        integer(low=1, high=10)("n", 2.0, None)
    assert integer_list(low=1, high=9, lengths=(2, 3), whole_floats=True)(
        "s", [3.0, 4], None) == (3, 4)
    for bad in ([], [1], [1, 2, 3, 4], [0, 1], "12", [1.5, 2]):
        with pytest.raises(ValidationError):
            integer_list(low=1, high=9, lengths=(2, 3))("s", bad, None)
