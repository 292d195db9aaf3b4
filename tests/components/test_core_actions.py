"""DiscreteGridActions: pinned action names/ids, metadata, invalid actions.

Property tests over every action model live in test_components_contract.py."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from plume_jax.actions import DiscreteGridActions
from plume_jax.core.types import AgentState, Grid, NoParams

GRID = Grid(10, 10)


@pytest.mark.parametrize("include_noop, diagonals, names", [
    (True, False, ["noop", "move_north", "move_south", "move_east", "move_west"]),
    (True, True, ["noop", "move_north", "move_south", "move_east", "move_west",
                  "move_northeast", "move_northwest", "move_southeast", "move_southwest"]),
    (False, False, ["move_north", "move_south", "move_east", "move_west"]),
    (False, True, ["move_north", "move_south", "move_east", "move_west",
                   "move_northeast", "move_northwest", "move_southeast", "move_southwest"]),
])
def test_action_names_and_ids_are_pinned(include_noop, diagonals, names):
    model = DiscreteGridActions(include_noop=include_noop, diagonals=diagonals)
    assert model.action_names == names
    assert model.action_ids == {n: i for i, n in enumerate(names)}
    assert model.action_space.n == len(names)
    assert model.action_space is model.action_space  # stable object


@pytest.mark.parametrize("name, delta", [
    ("move_north", (0, 1)), ("move_south", (0, -1)), ("move_east", (1, 0)), ("move_west", (-1, 0)),
    ("move_northeast", (1, 1)), ("move_southwest", (-1, -1)), ("noop", (0, 0)),
])
def test_each_named_move_goes_where_its_name_says(name, delta):
    model = DiscreteGridActions(diagonals=True, step_size=2)
    agent = AgentState.at([5, 5], 0.0)
    out = model.process_action(jax.random.key(0), model.action_ids[name], agent, GRID, NoParams())
    np.testing.assert_array_equal(np.asarray(out.position), [5 + 2 * delta[0], 5 + 2 * delta[1]])
    if delta != (0, 0):
        assert float(out.heading) == pytest.approx(np.arctan2(delta[1], delta[0]))


@pytest.mark.parametrize("include_noop, diagonals", [(True, False), (False, True)])
def test_grid_moves_are_where_the_action_model_moves(include_noop, diagonals):
    """``grid_moves`` (the move table of the infotaxis agents and of
    ``lookahead_vi``): every move but noop, in action order, with the
    displacement ``process_action`` applies, step size included."""
    from plume_jax.actions.discrete_grid import grid_moves

    model = DiscreteGridActions(include_noop=include_noop, diagonals=diagonals, step_size=2)
    ids, deltas = grid_moves(model.action_names, model.action_ids, 2)
    assert ids == tuple(i for n, i in model.action_ids.items() if n != "noop")
    agent = AgentState.at([5, 5], 0.0)
    for action, delta in zip(ids, deltas):
        out = model.process_action(jax.random.key(0), action, agent, GRID, NoParams())
        np.testing.assert_array_equal(np.asarray(out.position), [5 + delta[0], 5 + delta[1]])
    assert grid_moves(["noop", "turn_left"], {"noop": 0, "turn_left": 1}) == ((), ())


def test_metadata_is_json_and_complete():
    meta = DiscreteGridActions().get_metadata()
    json.dumps(meta)
    assert meta["type"] == "discrete_grid" and meta["modality"] == "absolute_cardinal"
    assert meta["orientation_dependent"] is False
    assert meta["parameters"]["num_actions"] == 5 and meta["parameters"]["step_size"] == 1


@pytest.mark.parametrize("action, valid", [
    (0, True), (4, True), (5, False), (-1, False), (np.int64(2), True), (np.int32(9), False),
    (2.0, False), (True, False), (np.asarray([1]), False), (jnp.asarray(3), True),
])
def test_validate_action_agrees_with_the_space(action, valid):
    model = DiscreteGridActions()
    assert bool(model.validate_action(action)) is valid
    assert bool(model.action_space.contains(action)) is valid


def test_without_noop_an_invalid_action_still_does_not_move():
    model = DiscreteGridActions(include_noop=False)
    agent = AgentState.at([3, 3], 1.0)
    out = model.process_action(jax.random.key(0), 42, agent, GRID, NoParams())
    np.testing.assert_array_equal(np.asarray(out.position), [3, 3])
    assert float(out.heading) == 1.0
    assert int(model.executed_action(42)) == -1
