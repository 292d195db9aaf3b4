"""The state-machine contract of PlumeGymEnv: every transition and every error.

One test per transition or error condition (contracts/environment_state_machine.md),
plus the rule that an invalid action or bad reset argument changes nothing.
All envs share one small functional env, so reset/step compile once.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.core.errors import StateError, ValidationError
from plume_jax.gym import EnvironmentState, PlumeGymEnv

OVERRIDES = {"grid_size": [32, 32], "sigma": 6.0, "goal_radius": 2.0, "max_steps": 60}
GOAL = (15, 15)  # the source of a 32x32 grid: ((32 - 1) // 2, (32 - 1) // 2)
NEAR_GOAL = (18, 15)  # 3 cells east of the goal: one move west reaches it


@pytest.fixture(scope="module")
def core():
    return plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)


@pytest.fixture
def genv(core):
    env, params = core
    return PlumeGymEnv(env, params)


@pytest.fixture
def short_genv(core):
    """Episodes truncated after 3 steps (a params value: no recompilation)."""
    env, params = core
    return PlumeGymEnv(env, params.replace(max_steps=jnp.asarray(3, jnp.int32)))


def _ready(genv):
    genv.reset(seed=0)
    assert genv.lifecycle_state is EnvironmentState.READY
    return genv


def _terminated(genv):
    genv.reset(seed=0, options={"start_position": NEAR_GOAL})
    _, reward, terminated, truncated, info = genv.step(genv.action_ids["move_west"])
    assert terminated and not truncated and info["goal_reached"] and reward == 1.0
    assert genv.lifecycle_state is EnvironmentState.TERMINATED
    return genv


def _truncated(short_genv):
    short_genv.reset(seed=0, options={"start_position": (0, 0)})
    for _ in range(3):
        _, _, terminated, truncated, _ = short_genv.step(short_genv.action_ids["noop"])
    assert truncated and not terminated
    assert short_genv.lifecycle_state is EnvironmentState.TRUNCATED
    return short_genv


def _closed(genv):
    genv.close()
    assert genv.lifecycle_state is EnvironmentState.CLOSED
    return genv


# ------------------------------------------------------------- transitions
def test_init_is_created(genv):
    assert genv.lifecycle_state is EnvironmentState.CREATED
    assert genv.env_state is None


def test_reset_from_created_is_ready(genv):
    obs, info = genv.reset(seed=1)
    assert genv.lifecycle_state is EnvironmentState.READY
    assert genv.observation_space.contains(obs)
    assert info["step_count"] == 0 and info["episode_count"] == 1


def test_reset_from_ready_is_ready_with_a_new_episode(genv):
    _ready(genv)
    genv.step(genv.action_ids["move_north"])
    _, info = genv.reset()
    assert genv.lifecycle_state is EnvironmentState.READY
    assert info["step_count"] == 0 and info["episode_count"] == 2


def test_reset_from_terminated_is_ready(genv):
    _terminated(genv)
    genv.reset()
    assert genv.lifecycle_state is EnvironmentState.READY


def test_reset_from_truncated_is_ready(short_genv):
    _truncated(short_genv)
    short_genv.reset()
    assert short_genv.lifecycle_state is EnvironmentState.READY


def test_step_from_ready_non_terminal_stays_ready(genv):
    genv.reset(seed=0, options={"start_position": (0, 0)})
    _, reward, terminated, truncated, info = genv.step(genv.action_ids["move_north"])
    assert not terminated and not truncated and reward == 0.0
    assert genv.lifecycle_state is EnvironmentState.READY
    assert info["step_count"] == 1 and info["agent_xy"] == (0, 1)


def test_step_reaching_goal_is_terminated(genv):
    _terminated(genv)


def test_step_reaching_max_steps_is_truncated(short_genv):
    _truncated(short_genv)


@pytest.mark.parametrize("reach", ["created", "ready", "terminated", "truncated"])
def test_close_from_any_open_state_is_closed(genv, short_genv, reach):
    env = {"created": lambda: genv, "ready": lambda: _ready(genv),
           "terminated": lambda: _terminated(genv), "truncated": lambda: _truncated(short_genv)}[
        reach]()
    env.close()
    assert env.lifecycle_state is EnvironmentState.CLOSED
    assert env.env_state is None


def test_close_is_idempotent(genv):
    _closed(_ready(genv))
    genv.close()
    genv.close()
    assert genv.lifecycle_state is EnvironmentState.CLOSED


# ------------------------------------------------------------------ errors
def test_step_before_reset_raises_state_error(genv):
    with pytest.raises(StateError, match="before reset"):
        genv.step(0)
    assert genv.lifecycle_state is EnvironmentState.CREATED


def test_step_after_terminated_raises_state_error(genv):
    _terminated(genv)
    with pytest.raises(StateError, match="TERMINATED"):
        genv.step(0)
    assert genv.lifecycle_state is EnvironmentState.TERMINATED


def test_step_after_truncated_raises_state_error(short_genv):
    _truncated(short_genv)
    with pytest.raises(StateError, match="TRUNCATED"):
        short_genv.step(0)
    assert short_genv.lifecycle_state is EnvironmentState.TRUNCATED


def test_step_after_close_raises_state_error(genv):
    _closed(_ready(genv))
    with pytest.raises(StateError, match="closed"):
        genv.step(0)


def test_reset_after_close_raises_state_error(genv):
    _closed(_ready(genv))
    with pytest.raises(StateError, match="closed"):
        genv.reset(seed=0)
    assert genv.lifecycle_state is EnvironmentState.CLOSED


def test_lifecycle_error_comes_before_action_validation(genv):
    with pytest.raises(StateError):
        genv.step("not an action")


def test_render_before_reset_raises_state_error(genv):
    with pytest.raises(StateError, match="before reset"):
        genv.render("rgb_array")


def test_render_after_close_raises_state_error(genv):
    _closed(_ready(genv))
    with pytest.raises(StateError, match="closed"):
        genv.render("rgb_array")


def test_state_error_and_validation_error_types():
    assert issubclass(StateError, RuntimeError)
    assert issubclass(ValidationError, ValueError)


# -------------------------------------------- invalid input changes nothing
INVALID_ACTIONS = [-1, 5, 2**40, np.int64(-7), 2.0, np.float32(1.0), True, "move_north", None,
                   [1], np.array([1, 2]), {"a": 1}]


@pytest.mark.parametrize("action", INVALID_ACTIONS, ids=repr)
def test_invalid_action_raises_validation_error_and_changes_nothing(core, action):
    env, params = core
    tried, clean = PlumeGymEnv(env, params), PlumeGymEnv(env, params)
    tried.reset(seed=5)
    clean.reset(seed=5)
    tried.step(1)
    clean.step(1)
    before = (tried.lifecycle_state, tried.env_state, tried.trail.copy())
    with pytest.raises(ValidationError) as err:
        tried.step(action)
    assert err.value.parameter == "action"
    assert tried.lifecycle_state is before[0]
    assert tried.env_state is before[1]  # the very same state object: nothing committed
    np.testing.assert_array_equal(tried.trail, before[2])
    # The key stream did not advance either: both envs continue identically.
    for a in (3, 3, 2, 0, 4):
        got, want = tried.step(a), clean.step(a)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1:] == want[1:]


def test_invalid_action_message_names_the_allowed_values(genv):
    _ready(genv)
    with pytest.raises(ValidationError, match=r"integer in \[0, 5\)"):
        genv.step(7)


@pytest.mark.parametrize("options", [
    {"start_position": (40, 3)},            # outside the grid
    {"start_position": (-1, 3)},            # outside the grid
    {"start_position": (16, 15)},           # inside the goal region
    {"start_position": (3.5, 4)},           # not an integer cell (grid actions)
    {"start_position": (1, 2, 3)},          # not a pair
    {"start_position": ("a", "b")},         # not numbers
    {"start_position": (np.nan, 2)},        # not finite
    {"start_heading": 1.0},                 # heading without a position
    {"start_position": (3, 4), "start_heading": "east"},
    {"start_cell": (3, 4)},                 # unknown option
    ["start_position"],                     # not a dict
], ids=repr)
def test_bad_reset_options_raise_validation_error_and_change_nothing(genv, options):
    genv.reset(seed=3)
    genv.step(1)
    state, key = genv.env_state, genv._key
    with pytest.raises(ValidationError, match="options"):
        genv.reset(options=options)
    assert genv.lifecycle_state is EnvironmentState.READY
    assert genv.env_state is state and genv._key is key


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, "7", True])
def test_bad_seed_raises_validation_error_and_changes_nothing(genv, seed):
    with pytest.raises(ValidationError, match="seed"):
        genv.reset(seed=seed)
    assert genv.lifecycle_state is EnvironmentState.CREATED


def test_bad_render_mode_is_refused(core):
    env, params = core
    with pytest.raises(ValidationError, match="render_mode"):
        PlumeGymEnv(env, params, render_mode="ansi")
    genv = _ready(PlumeGymEnv(env, params))
    with pytest.raises(ValidationError, match="mode"):
        genv.render("ansi")
