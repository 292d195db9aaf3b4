"""One contract suite over every registered component.

Every entry of ``ACTIONS``, ``SENSORS``, ``REWARDS`` and ``STARTS`` is
covered automatically (with its default settings, plus the variants listed
below), so a new component must pass the same contracts:

- action models: boundary safety, no mutation, determinism, space
  consistency (``validate_action`` vs ``action_space.contains`` vs an
  independent oracle, for ints, huge ints, floats, bools, arrays, junk),
  invalid actions are no-ops, metadata JSON and enough to rebuild;
- sensors: observations inside ``observation_space``, determinism given the
  key, shapes under ``vmap`` (over agents and over params), state structure
  stable across steps, labels for every index;
- rewards: finite f32 scalars; for every reward that declares itself
  ``potential_based``, potential-based shaping (the residual after
  removing ``γΦ(s') - Φ(s)`` depends only on the goal flag, and discounted
  returns of two paths with the same ends are equal);
- start distributions: in bounds, on cells, outside the goal region for any
  goal ``make`` accepts, determinism, plus per-type distribution sanity.

The second half checks each component's documented semantics. Everything
runs eagerly on a 16x16 grid except the few tests that are about ``jit`` and
the statistical tests' batches of 2048 draws (jitted: cheaper than op by op).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
from types import SimpleNamespace

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import plume_jax
from plume_jax.actions import ACTIONS
from plume_jax.core.errors import ValidationError
from plume_jax.envs.interfaces import INTERFACES, check_component
from plume_jax.plumes import Plume
from plume_jax.plumes.gaussian import GaussianPlume
from plume_jax.envs.presets import COMPONENTS
from plume_jax.rewards import REWARDS
from plume_jax.sensors import SENSORS
from plume_jax.settings import real, setting, type_table
from plume_jax.settings.schema import ROLE, SETTING
from plume_jax.core.spaces import Box, Dict, Discrete
from plume_jax.starts import STARTS
from plume_jax.core.types import AgentState, Grid, PlumeProbe

GRID = Grid(width=16, height=16)
SOURCE = (7.0, 7.0)
WIND_SPEED, WIND_DIRECTION = 0.8, 0.7
PLUME, PLUME_PARAMS, _ = GaussianPlume.build(
    {"source": list(SOURCE), "sigma": 4.0, "wind_speed": WIND_SPEED,
     "wind_direction": WIND_DIRECTION}, GRID, "plume")


#: Puffs for the probe (``puff_quantile`` places starts by them): a train of 40
#: slots down the wind from the source, spreading across it, the last 8 not live.
_ALONG = np.linspace(0.5, 7.5, 40)
PUFF_POSITIONS = jnp.asarray(np.stack(
    [SOURCE[0] + _ALONG * np.cos(WIND_DIRECTION) - 0.3 * np.sin(_ALONG) * np.sin(WIND_DIRECTION),
     SOURCE[1] + _ALONG * np.sin(WIND_DIRECTION) + 0.3 * np.sin(_ALONG) * np.cos(WIND_DIRECTION)],
    axis=1), jnp.float32)
PUFF_LIVE = jnp.arange(40) < 32


def make_probe(plume_params=PLUME_PARAMS) -> PlumeProbe:
    return PlumeProbe(
        concentration=lambda p: PLUME.concentration((), p, GRID, plume_params),
        wind=lambda p: PLUME.wind((), p, plume_params),
        puffs=lambda: (PUFF_POSITIONS, PUFF_LIVE),
        strayed=lambda p: _nearest_live_puff(p) > 3.0,
    )


def _nearest_live_puff(points):
    d2 = jnp.sum((jnp.asarray(points, jnp.float32)[..., None, :] - PUFF_POSITIONS) ** 2, -1)
    return jnp.sqrt(jnp.min(jnp.where(PUFF_LIVE, d2, jnp.inf), axis=-1))


PROBE = make_probe()


def cases(table: dict, extra: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    """Every table entry with default settings, plus listed variants."""
    out = [(name, {}) for name in sorted(table)]
    for name, configs in extra.items():
        assert name in table, f"variant for unknown component {name!r}"
        out += [(name, cfg) for cfg in configs]
    return out


def case_id(case) -> str:
    name, cfg = case
    return name + ("" if not cfg else "-" + "-".join(f"{k}={v}" for k, v in sorted(cfg.items())
                                                     if not isinstance(v, (list, dict))))


ACTION_CASES = cases(ACTIONS, {
    "discrete_grid": [{"diagonals": True, "step_size": 2}, {"include_noop": False}],
    "oriented_grid": [{"include_noop": False, "turn_angle_deg": 45.0, "step_size": 2}],
    "run_tumble": [{"include_noop": False, "run_length": 2.5}],
    "continuous": [{"min_speed": -1.0, "max_speed": 2.0, "max_turn_rate": 0.5}],
    "surge_cast": [{"include_noop": False, "step_size": 3}],
})
SENSOR_CASES = cases(SENSORS, {
    "antennae": [{"count": 5, "length": 3.0, "spacing_deg": 30.0, "offset_deg": 20.0}],
    "wind": [{"frame": "world", "noise_std": 0.3, "max_speed": 1.0}],
    "patch": [{"size": 3, "frame": "body", "spacing": 2.0}],
    "poisson": [{"max_hits": 2, "rate": 3.0}],
    "noise": [{"sensor": {"type": "antennae", "count": 3}, "std": 0.2}],
    "history": [{"sensor": {"type": "wind", "noise_std": 0.1}, "length": 3}],
    "belief": [{"sensor": {"type": "hits", "h_max": 3, "nonzero_first": True},
                "window": [5, 3], "goal_radius": 1.0}, {"centred": False}],
    "composite": [
        {"sensors": [{"type": "antennae"}, {"type": "wind", "noise_std": 0.1},
                     {"type": "history", "sensor": "poisson"}, "binary"]},
        {"sensors": [{"type": "concentration", "name": "c"}, {"type": "wind"},
                     {"type": "patch", "size": 3}], "form": "dict"},
    ],
})
REWARD_CASES = cases(REWARDS, {
    "potential_shaping": [{"gamma": 0.9, "scale": 0.5, "goal_reward": 2.0}],
    "weighted_sum": [{"components": [{"type": "sparse"},
                                     {"type": "potential_shaping", "gamma": 0.8, "scale": 1.0},
                                     {"type": "step_penalty", "step_penalty": 0.1}],
                      "weights": [2.0, 0.5, -1.0]},
                     {"components": [{"type": "step_penalty", "goal_reward": 101.0},
                                     {"type": "odour_gated_shaping", "threshold": 0.05}]}],
})
#: Start configs that fit the 16x16 grid (defaults for types not listed).
START_CONFIGS = {
    "fixed": {"position": [1, 2]},
    "annulus": {"r_min": 3.0, "r_max": 6.0},
    "downwind": {"min_distance": 2.0, "max_distance": 6.0, "half_width": 2.0},
}
START_CASES = [(name, START_CONFIGS.get(name, {})) for name in sorted(STARTS)] + [
    ("downwind", {"use_plume_wind": False, "direction": 2.0, "min_distance": 1.0,
                  "max_distance": 5.0, "half_width": 0.0}),
]


def build(table: dict, name: str, cfg: dict, prefix: str):
    component, params, _ = table[name].build(cfg, GRID, prefix)
    return component, params


def agent_batch(rows) -> AgentState:
    arr = np.asarray(rows, np.float64)
    return AgentState(position=jnp.asarray(arr[:, :2], jnp.float32),
                      heading=jnp.asarray(arr[:, 2], jnp.float32))


#: Batch size of the vmapped property tests. Fixed, so that eager op-by-op
#: execution compiles each primitive once instead of once per batch shape.
BATCH = 16


def agents(on_grid: bool, size: int = BATCH):
    """Hypothesis strategy: ``size`` rows (x, y, heading) inside the grid."""
    if on_grid:
        xs, ys = st.integers(0, GRID.width - 1), st.integers(0, GRID.height - 1)
    else:
        xs = st.floats(0, GRID.width - 1, allow_nan=False, width=32)
        ys = st.floats(0, GRID.height - 1, allow_nan=False, width=32)
    headings = st.sampled_from([0.0, math.pi / 2, math.pi, 1.5 * math.pi]) | \
        st.floats(-10.0, 10.0, allow_nan=False, width=32)
    return st.lists(st.tuples(xs, ys, headings), min_size=size, max_size=size)


def leaves_equal(a, b) -> bool:
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    return ta == tb and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))


def test_tables_are_consistent():
    for table in COMPONENTS.values():
        assert table, "a component table is empty"
        for name, cls in table.items():
            assert cls.type_name == name
            assert all(s.doc for s in cls.SETTINGS.values()), f"{name}: undocumented setting"
            assert cls.__doc__ and len(cls.__doc__) > 40, f"{name}: no docstring"


# ---------------------------------------------------------------------------
# Interfaces and settings declarations (every registered class of every slot)
# ---------------------------------------------------------------------------

ALL_CLASSES = [(slot, name) for slot, table in COMPONENTS.items() for name in sorted(table)]


@pytest.mark.parametrize("slot, name", ALL_CLASSES, ids=lambda v: str(v))
def test_every_component_class_satisfies_its_interface(slot, name):
    cls = COMPONENTS[slot][name]
    assert issubclass(cls, INTERFACES[slot]) and not inspect.isabstract(cls)
    assert check_component(cls, slot) == []


def declarations(field) -> list[str]:
    """What a dataclass field declares, read from its metadata."""
    return [kind for kind, key in (("setting", SETTING), ("role", ROLE)) if key in field.metadata]


@pytest.mark.parametrize("slot, name", ALL_CLASSES, ids=lambda v: str(v))
def test_every_params_field_has_exactly_one_declared_setting(slot, name):
    """Each Params field is a dynamic setting, or the params of the nested
    setting of the same name, or a derived value — exactly one of them;
    every dynamic setting is a Params field; no setting is declared twice."""
    cls = COMPONENTS[slot][name]
    component_fields = {f.name: f for f in dataclasses.fields(cls)}
    static = {n for n, f in component_fields.items() if SETTING in f.metadata}
    nested_static = {n for n in static if component_fields[n].metadata[SETTING].build is not None}
    dynamic = []
    for f in dataclasses.fields(cls.Params):
        sources = declarations(f)
        if f.name in nested_static:
            sources.append("nested setting")
        elif f.name in static:
            sources.append("static setting")
        assert len(sources) == 1 + (f.metadata.get(ROLE) == "nested_params"), (f.name, sources)
        if SETTING in f.metadata:
            dynamic.append(f.name)
    for f in dataclasses.fields(cls):
        assert len(declarations(f)) == 1, (f.name, declarations(f))
    assert [n for n, s in cls.SETTINGS.items() if not s.static] == dynamic
    assert [n for n, s in cls.SETTINGS.items() if s.static] == [
        n for n in component_fields if n in static]
    assert nested_static <= {f.name for f in dataclasses.fields(cls.Params)}


class _Almost(Plume):
    """A plume with a mistake (each test below adds one to a copy)."""

    def init(self, key, params):
        return ()

    def advance(self, key, plume_state, params):
        return plume_state

    def concentration(self, plume_state, points, grid, params):
        return jnp.zeros(jnp.shape(points)[:-1], jnp.float32)

    def source_location(self, plume_state, params):
        return jnp.zeros(2, jnp.float32)


@chex.dataclass(frozen=True)
class _GoodParams:
    width: jax.Array = setting(1.0, real(low=0.1, high=10.0), doc="width, cells, in [0.1, 10]")


def _plume_class(params=_GoodParams, drop=(), **attrs):
    """A frozen dataclass plume built from ``_Almost``, ``params`` and extra class attributes."""
    namespace = {"type_name": "almost", "Params": params, **attrs}
    body = {k: v for k, v in vars(_Almost).items() if k not in drop and not k.startswith("__")}
    cls = type("Almost", (Plume,), {**body, **namespace})
    return dataclasses.dataclass(frozen=True)(cls)


def test_check_component_accepts_a_well_formed_plume_and_finds_each_mistake():
    assert check_component(_plume_class(), "plume") == []
    assert check_component(_plume_class(), "sensor")[0].endswith("not a subclass of Sensor")
    assert "advance" in check_component(_plume_class(drop=("advance",)), "plume")[0]
    assert "type_name" in check_component(_plume_class(type_name=""), "plume")[0]

    def wind(self, state, where, params):  # parameter names differ from the interface's
        return where

    assert "wind" in check_component(_plume_class(wind=wind), "plume")[0]

    @chex.dataclass(frozen=True)
    class Undeclared:
        width: jax.Array = 1.0

    assert "exactly one" in check_component(_plume_class(Undeclared), "plume")[0]

    @chex.dataclass(frozen=True)
    class Unbounded:
        width: jax.Array = setting(1.0, real(low=0.0), doc="width")

    assert "finite bounds" in check_component(_plume_class(Unbounded), "plume")[0]
    twice = _plume_class(__annotations__={"width": "float"},
                         width=setting(1.0, real(low=0.1, high=10.0), doc="width"))
    assert "declared twice" in check_component(twice, "plume")[0]

    @chex.dataclass(frozen=True)
    class BadOrder:
        width: jax.Array = setting(1.0, real(low=0.1, high=10.0), doc="width", at_most="hight")

    assert "'hight'" in check_component(_plume_class(BadOrder), "plume")[0]


def test_a_type_name_is_registered_once():
    with pytest.raises(ValueError, match="'sparse'"):
        type_table(REWARDS["sparse"], REWARDS["step_penalty"], REWARDS["sparse"])


# ---------------------------------------------------------------------------
# Action models
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module", params=ACTION_CASES, ids=case_id)
def action_case(request):
    """The model, its params, and one jitted batched ``process_action``
    (compiled once per case and shared by the tests)."""
    name, cfg = request.param
    model, params = build(ACTIONS, name, cfg, "actions")
    batch = jax.jit(jax.vmap(
        lambda k, a, ag, p: model.process_action(k, a, ag, GRID, p, probe=PROBE),
        in_axes=(0, 0, 0, None)))
    return SimpleNamespace(name=name, model=model, params=params, batch=batch)


def action_values(model):
    """Hypothesis strategy of valid actions for ``model``."""
    space = model.action_space
    if isinstance(space, Discrete):
        return st.integers(0, space.n - 1)
    lows, highs = space.low_array.reshape(-1), space.high_array.reshape(-1)
    return st.tuples(*[st.floats(float(lo), float(hi), width=32) for lo, hi in zip(lows, highs)])


def as_action_batch(model, actions) -> jax.Array:
    dtype = jnp.int32 if isinstance(model.action_space, Discrete) else jnp.float32
    return jnp.asarray(actions, dtype)


def test_action_space_is_stable_and_names_match(action_case):
    model = action_case.model
    assert model.action_space is model.action_space
    assert model.type_name == action_case.name
    names, ids = model.action_names, model.action_ids
    assert ids == {n: i for i, n in enumerate(names)}
    assert len(set(names)) == len(names)
    if isinstance(model.action_space, Discrete):
        assert model.action_space.n == len(names) >= 2
        assert model.noop_id == (0 if "noop" in names else -1)
        assert "noop" not in names or names[0] == "noop"
    else:
        assert isinstance(model.action_space, Box) and names == [] and ids == {}
    assert isinstance(model.on_grid, bool)


@given(data=st.data())
def test_action_boundary_safety_determinism_no_mutation(action_case, data):
    """In-bounds agents stay in bounds for every action, valid or not
    (invalid integers and out-of-box vectors included); grid models stay on
    integer cells; equal inputs give equal outputs; inputs are unchanged."""
    model, params = action_case.model, action_case.params
    rows = data.draw(agents(model.on_grid))
    if isinstance(model.action_space, Discrete):
        acts = data.draw(st.lists(st.integers(-3, model.action_space.n + 3),
                                  min_size=BATCH, max_size=BATCH))
    else:
        acts = data.draw(st.lists(action_values(model) | st.tuples(
            st.floats(-50, 50, width=32), st.floats(-50, 50, width=32)),
            min_size=BATCH, max_size=BATCH))
    agent, actions = agent_batch(rows), as_action_batch(model, acts)
    keys = jax.random.split(jax.random.key(data.draw(st.integers(0, 2**30))), BATCH)
    copies = jax.tree.map(lambda x: np.asarray(x).copy(), (agent, actions, params))
    out = action_case.batch(keys, actions, agent, params)
    again = action_case.batch(keys, actions, agent, params)
    assert leaves_equal(out, again)
    assert leaves_equal((agent, actions, params), copies)
    pos = np.asarray(out.position)
    assert out.position.dtype == jnp.float32 and out.heading.dtype == jnp.float32
    assert pos.shape == (BATCH, 2) and np.asarray(out.heading).shape == (BATCH,)
    assert np.all(np.asarray(GRID.contains(out.position))), pos
    assert np.all(np.isfinite(np.asarray(out.heading)))
    if model.on_grid:
        np.testing.assert_array_equal(pos, np.round(pos))


def oracle_contains(space, x) -> bool:
    """An independent statement of what each space contains."""
    if isinstance(space, Discrete):
        if isinstance(x, (bool, np.bool_)):
            return False
        if isinstance(x, (int, np.integer)):
            return 0 <= int(x) < space.n
        if isinstance(x, (np.ndarray, jax.Array)) and np.shape(x) == () and \
                np.issubdtype(np.asarray(x).dtype, np.integer):
            return 0 <= int(x) < space.n
        return False
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError, OverflowError):
        return False
    if arr.dtype.kind not in "iuf" or arr.shape != space.shape:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        arr = arr.astype(np.float32)
    return bool(np.all(np.isfinite(arr) & (arr >= space.low_array) & (arr <= space.high_array)))


ANY_ACTION = st.one_of(
    st.integers(-3, 12),
    st.integers(-(2**70), 2**70),
    st.integers(-3, 12).map(np.int64),
    st.integers(2**31, 2**40).map(np.int64),
    st.integers(0, 2**64 - 1).map(np.uint64),
    st.integers(-128, 127).map(np.int8),
    st.integers(-3, 12).map(lambda v: jnp.asarray(v, jnp.int32)),
    st.integers(-3, 12).map(lambda v: np.asarray(v)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(0, 5).map(lambda v: jnp.asarray(v, jnp.float32)),
    st.booleans(),
    st.booleans().map(np.bool_),
    st.none(),
    st.text(max_size=3),
    st.lists(st.integers(-3, 12), min_size=0, max_size=3),
    st.lists(st.integers(-3, 12), min_size=1, max_size=3).map(lambda v: np.asarray(v, np.int32)),
    st.lists(st.floats(-4, 4, width=32), min_size=2, max_size=2),
    st.lists(st.floats(-4, 4, width=32), min_size=2, max_size=2).map(
        lambda v: jnp.asarray(v, jnp.float32)),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2, max_size=2).map(
        lambda v: np.asarray(v, np.float64)),
    st.lists(st.booleans(), min_size=2, max_size=2).map(np.asarray),
    st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=3).map(
        lambda v: np.asarray(v, np.float32)),
    st.just([1.0, "a"]),
    st.just({"a": 1}),
)


@given(action=ANY_ACTION)
def test_validate_action_agrees_with_space_and_invalid_is_noop(action_case, action):
    """validate_action never raises and agrees with action_space.contains
    and with an independent oracle; an invalid action leaves the agent
    unchanged and reports the noop id (-1 without noop). Eager, with the
    concrete Python / NumPy / JAX values a user may pass."""
    model, params = action_case.model, action_case.params
    valid = model.validate_action(action)
    assert np.asarray(valid).dtype == np.bool_ and np.shape(valid) == ()
    assert bool(valid) == bool(model.action_space.contains(action)) == \
        oracle_contains(model.action_space, action)
    executed = int(model.executed_action(action))
    agent = AgentState.at([5.0, 6.0], math.pi / 2)
    out = model.process_action(jax.random.key(0), action, agent, GRID, params, probe=PROBE)
    if not bool(valid):
        assert executed == model.noop_id
        assert leaves_equal(out, agent)
    elif isinstance(model.action_space, Discrete):
        assert executed == int(action)
    else:
        assert executed == 0


def test_named_actions_eager_agree_with_jit(action_case):
    """Valid ids are executed as themselves; noop moves nothing; some action
    moves the agent; eager results equal the jitted batch's; the result is
    a new object and the input agent is unchanged."""
    model, params = action_case.model, action_case.params
    agent = AgentState.at([5.0, 6.0], 0.0)
    if isinstance(model.action_space, Box):
        acts = [np.zeros(2, np.float32), model.action_space.high_array * 0.5]
    else:
        acts = list(range(model.action_space.n))
    eager = [model.process_action(jax.random.key(i), a, agent, GRID, params, probe=PROBE)
             for i, a in enumerate(acts)]
    assert all(out is not agent for out in eager)
    assert leaves_equal(agent, AgentState.at([5.0, 6.0], 0.0))
    rows = [(5.0, 6.0, 0.0)] * BATCH
    padded = (acts * BATCH)[:BATCH]
    keys = jnp.stack([jax.random.key(i % len(acts)) for i in range(BATCH)])
    jitted = action_case.batch(keys, as_action_batch(model, padded), agent_batch(rows), params)
    for i, out in enumerate(eager):
        np.testing.assert_allclose(np.asarray(jitted.position[i]), np.asarray(out.position),
                                   atol=1e-5)
        np.testing.assert_allclose(np.asarray(jitted.heading[i]), np.asarray(out.heading),
                                   atol=1e-5)
    moved = [not np.array_equal(np.asarray(out.position), [5.0, 6.0]) for out in eager]
    assert any(moved)
    if isinstance(model.action_space, Discrete):
        for name, i in model.action_ids.items():
            assert int(model.executed_action(i)) == i
            if name == "noop":
                assert leaves_equal(eager[i], agent)
    elif getattr(model, "carried_by_wind", False):
        # a flier at rest keeps its heading and only drifts with the wind
        rest = model.process_action(jax.random.key(0), np.asarray(model.rest_action, np.float32),
                                    agent, GRID, params, probe=PROBE)
        drift = np.asarray(PROBE.wind(agent.position))
        assert np.any(drift != 0.0)
        np.testing.assert_allclose(np.asarray(rest.position),
                                   np.asarray(GRID.clamp(agent.position + drift)), atol=1e-6)
        assert float(rest.heading) == float(agent.heading)
    else:
        assert leaves_equal(eager[0], agent)  # the zero action is a no-op


def test_action_metadata_is_json_and_rebuilds(action_case):
    model, name = action_case.model, action_case.name
    meta = model.get_metadata()
    text = json.dumps(meta)
    assert json.loads(text) == meta
    assert meta["type"] == name
    assert isinstance(meta["modality"], str) and meta["modality"]
    assert isinstance(meta["parameters"], dict)
    assert isinstance(meta["orientation_dependent"], bool)
    cls = ACTIONS[name]
    static = {k: v for k, v in meta["parameters"].items() if k in cls.SETTINGS}
    rebuilt, _, _ = cls.build(static, GRID, "actions")
    assert rebuilt == model and hash(rebuilt) == hash(model)


# ---------------------------------------------------------------------------
# Sensors
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module", params=SENSOR_CASES, ids=case_id)
def sensor_case(request):
    """The sensor, its params, and one jitted batched ``init`` then
    ``observe`` (compiled once per case and shared by the tests)."""
    name, cfg = request.param
    sensor, params = build(SENSORS, name, cfg, "sensor")

    def two_readings(keys, agent, params):
        obs0, state0 = jax.vmap(lambda k, a: sensor.init(
            jax.random.fold_in(k, 0), a, PROBE, params))(keys, agent)
        obs1, state1 = jax.vmap(lambda k, a, s: sensor.observe(
            jax.random.fold_in(k, 1), a, PROBE, s, params))(keys, agent, state0)
        return obs0, state0, obs1, state1

    return SimpleNamespace(name=name, sensor=sensor, params=params,
                           run=jax.jit(two_readings))


def flat_size(space) -> int:
    if isinstance(space, Dict):
        return sum(flat_size(s) for _, s in space.items())
    return int(np.prod(space.shape))


def assert_batch_in_space(space, obs, batch: int) -> None:
    """Every element of a batch of observations lies in ``space``."""
    if isinstance(space, Dict):
        assert isinstance(obs, dict) and set(obs) == set(space.keys())
        for k, sub in space.items():
            assert_batch_in_space(sub, obs[k], batch)
        return
    obs = np.asarray(obs)
    assert obs.dtype == np.float32 and obs.shape == (batch, *space.shape)
    assert np.all(np.isfinite(obs))
    assert np.all(obs >= space.low_array) and np.all(obs <= space.high_array)


@given(rows=agents(on_grid=False), seed=st.integers(0, 2**30))
def test_sensor_observation_in_space_and_deterministic(sensor_case, rows, seed):
    """Agents anywhere in the grid, on the border included (antenna tips and
    patch samples then fall outside): every observation lies in the space,
    and the same keys give the same observations and states."""
    sensor, params = sensor_case.sensor, sensor_case.params
    space = sensor.observation_space(params)
    keys = jax.random.split(jax.random.key(seed), BATCH)
    out = sensor_case.run(keys, agent_batch(rows), params)
    assert leaves_equal(out, sensor_case.run(keys, agent_batch(rows), params))
    obs0, _, obs1, _ = out
    assert_batch_in_space(space, obs0, BATCH)
    assert_batch_in_space(space, obs1, BATCH)
    assert bool(space.contains(jax.tree.map(lambda x: x[0], obs1)))


def test_sensor_shapes_under_vmap_and_state_structure(sensor_case):
    """A batch adds one leading axis to every leaf (over agents and over
    params); observe keeps the state's structure, shapes and dtypes, as
    lax.scan and the env's auto-reset need (shapes by ``jax.eval_shape``:
    nothing extra is compiled)."""
    sensor, params = sensor_case.sensor, sensor_case.params
    rows = [(1.0 + i % 15, 2.0, 0.3 * i) for i in range(BATCH)]
    keys = jax.random.split(jax.random.key(0), BATCH)
    obs0, state0, obs1, state1 = sensor_case.run(keys, agent_batch(rows), params)
    agent = AgentState.at(rows[0][:2], rows[0][2])
    single_obs, single_state = jax.eval_shape(
        lambda k: sensor.init(jax.random.fold_in(k, 0), agent, PROBE, params), keys[0])
    for batched, single in ((obs0, single_obs), (state0, single_state), (obs1, single_obs),
                            (state1, single_state)):
        assert jax.tree.structure(batched) == jax.tree.structure(single)
        for b, s in zip(jax.tree.leaves(batched), jax.tree.leaves(single)):
            assert b.shape == (BATCH, *s.shape) and b.dtype == s.dtype
    params_batch = jax.tree.map(lambda x: jnp.stack([jnp.asarray(x)] * 3), params)
    shapes = jax.eval_shape(jax.vmap(lambda k, p: sensor.init(k, agent, PROBE, p)),
                            keys[:3], params_batch)
    for b, s in zip(jax.tree.leaves(shapes), jax.tree.leaves((single_obs, single_state))):
        assert b.shape == (3, *s.shape) and b.dtype == s.dtype


def test_sensor_metadata_labels_and_rebuild(sensor_case):
    sensor, params, name = sensor_case.sensor, sensor_case.params, sensor_case.name
    meta = sensor.get_metadata()
    assert json.loads(json.dumps(meta)) == meta
    assert meta["type"] == name
    labels = sensor.observation_labels()
    assert meta["observation_labels"] == labels
    assert len(labels) == flat_size(sensor.observation_space(params)) == len(set(labels))
    cls = SENSORS[name]
    static = {k: v for k, v in meta["parameters"].items() if k in cls.SETTINGS}
    rebuilt, _, _ = cls.build(static, GRID, "sensor")
    assert rebuilt == sensor and hash(rebuilt) == hash(sensor)


# ---------------------------------------------------------------------------
# Rewards
# ---------------------------------------------------------------------------

GOAL = jnp.asarray([8.0, 8.0], jnp.float32)
GOAL_RADIUS = 1.5


def _reward_case(name: str, cfg: dict) -> SimpleNamespace:
    """The reward, its params, and jitted ``compute`` / ``potential``
    (``compute`` reads :data:`PROBE` when the reward reads the plume)."""
    reward, params = build(REWARDS, name, cfg, "reward")
    compute = jax.jit(lambda p, q, reached, params: reward_of(reward, params, p, q, reached))
    potential = jax.jit(lambda p, params: reward.potential(AgentState.at(p), GOAL, params))
    return SimpleNamespace(name=name, reward=reward, params=params, compute=compute,
                           potential=potential)


@pytest.fixture(scope="module", params=REWARD_CASES, ids=case_id)
def reward_case(request):
    return _reward_case(*request.param)


#: The rewards that declare themselves a goal reward plus potential-based
#: shaping (``potential_based``): the two telescoping contracts hold for them.
POTENTIAL_REWARD_CASES = [c for c in REWARD_CASES
                          if build(REWARDS, c[0], c[1], "reward")[0].potential_based]


@pytest.fixture(scope="module", params=POTENTIAL_REWARD_CASES, ids=case_id)
def potential_reward_case(request):
    return _reward_case(*request.param)


POINTS = st.tuples(st.floats(0, 15, width=32), st.floats(0, 15, width=32))


def far_points(n: int):
    """n points outside the goal region."""
    return st.lists(POINTS.filter(lambda p: math.dist(p, (8.0, 8.0)) > GOAL_RADIUS + 0.01),
                    min_size=n, max_size=n)


def reward_of(reward, params, p, q, reached):
    seen = {"probe": PROBE} if reward.reads_plume else {}
    return reward.compute(AgentState.at(p), AgentState.at(q), GOAL, jnp.asarray(reached), params,
                          **seen)


def discounted_return(compute, params, path, gamma) -> float:
    """Σ γ^t r_t along ``path``; the goal flag of each step from its end point."""
    total = 0.0
    for t in range(len(path) - 1):
        reached = math.dist(path[t + 1], (8.0, 8.0)) <= GOAL_RADIUS
        r = compute(jnp.asarray(path[t], jnp.float32), jnp.asarray(path[t + 1], jnp.float32),
                    jnp.asarray(reached), params)
        total += gamma**t * float(r)
    return total


def reward_scale(reward, params, p, q, reached) -> float:
    """The magnitude float32 rounding of ``reward`` is relative to: ``|r|``, or
    for a weighted sum the sum of its weighted terms' magnitudes (a goal
    reward of 101 and a stray penalty of -100 sum to about 1, and each term
    may round differently eager and jitted)."""
    if hasattr(reward, "components") and hasattr(params, "weights"):
        return sum(abs(float(w)) * reward_scale(c, cp, p, q, reached) for c, cp, w in
                   zip(reward.components, params.components, params.weights))
    return abs(float(reward_of(reward, params, p, q, reached)))


def assert_eager_and_jitted_agree(case, p, q, reached) -> None:
    """Eager and jitted ``compute`` agree to float32 rounding (a stray penalty
    is tens of units): within 1e-5, or 1e-6 of :func:`reward_scale`."""
    eager = float(reward_of(case.reward, case.params, p, q, reached))
    jitted = float(case.compute(jnp.asarray(p, jnp.float32), jnp.asarray(q, jnp.float32),
                                jnp.asarray(reached), case.params))
    tolerance = max(1e-5, 1e-6 * abs(eager))
    if abs(eager - jitted) > tolerance:  # (the terms' scale only where needed: eager is slow)
        tolerance = max(1e-5, 1e-6 * reward_scale(case.reward, case.params, p, q, reached))
    assert abs(eager - jitted) <= tolerance, (eager, jitted, tolerance)


@given(p=POINTS, q=POINTS, reached=st.booleans())
def test_reward_is_a_finite_f32_scalar(reward_case, p, q, reached):
    reward, params = reward_case.reward, reward_case.params
    r = reward_of(reward, params, p, q, reached)
    assert r.shape == () and r.dtype == jnp.float32 and np.isfinite(float(r))
    assert_eager_and_jitted_agree(reward_case, p, q, reached)
    assert np.isfinite(float(reward.potential(AgentState.at(p), GOAL, params)))
    gamma = float(reward.discount(params))
    assert 0.0 < gamma <= 1.0


@given(pairs=st.lists(st.tuples(POINTS, POINTS), min_size=2, max_size=6), reached=st.booleans())
def test_reward_minus_shaping_depends_only_on_goal_flag(potential_reward_case, pairs, reached):
    """r(s, s') - (γ Φ(s') [not terminal] - Φ(s)) is the same for every
    transition with the same goal flag: the reward is a base reward plus
    potential-based shaping with the declared Φ and γ."""
    params = potential_reward_case.params
    gamma = float(potential_reward_case.reward.discount(params))
    residuals = []
    for p, q in pairs:
        p, q = jnp.asarray(p, jnp.float32), jnp.asarray(q, jnp.float32)
        phi_p = float(potential_reward_case.potential(p, params))
        phi_q = 0.0 if reached else float(potential_reward_case.potential(q, params))
        r = float(potential_reward_case.compute(p, q, jnp.asarray(reached), params))
        residuals.append(r - (gamma * phi_q - phi_p))
    np.testing.assert_allclose(residuals, residuals[0], atol=1e-4)


@given(data=st.data())
def test_discounted_returns_of_paths_with_same_ends_are_equal(potential_reward_case, data):
    """Shaping telescopes: two paths with the same start, end and length
    (same goal flags) have the same discounted return, so shaping changes
    returns by a constant and leaves the optimal policy unchanged. Uses only
    ``compute`` and ``discount``: a non-potential reward fails it."""
    params = potential_reward_case.params
    length = data.draw(st.integers(1, 8))
    start = data.draw(far_points(1))[0]
    end = data.draw(st.sampled_from([(8.0, 8.5), (7.5, 7.0)]) | far_points(1).map(lambda v: v[0]))
    mids_a = data.draw(far_points(length - 1))
    mids_b = data.draw(far_points(length - 1))
    gamma = float(potential_reward_case.reward.discount(params))
    g_a = discounted_return(potential_reward_case.compute, params, [start, *mids_a, end], gamma)
    g_b = discounted_return(potential_reward_case.compute, params, [start, *mids_b, end], gamma)
    assert g_a == pytest.approx(g_b, abs=1e-4)


def test_eager_and_jitted_weighted_sum_agree_where_its_terms_cancel():
    """Regression: a goal reward of 101 plus the odour-gated stray penalty
    (-100.13 at q) sums to 0.868; eager and jitted differed by 2.3e-5 (a few
    float32 ulps of the terms), more than 1e-6 of the sum, and the property
    test above failed on this example."""
    cfg = next(c for n, c in REWARD_CASES if n == "weighted_sum" and "odour_gated_shaping" in
               [k["type"] for k in c.get("components", [])])
    case = _reward_case("weighted_sum", cfg)
    p, q = (0.0, 0.0), (float(np.float32(1.9)), float(np.float32(0.95)))
    assert float(reward_of(case.reward, case.params, p, q, True)) == pytest.approx(0.868,
                                                                                  abs=1e-3)
    assert reward_scale(case.reward, case.params, p, q, True) > 200.0
    assert_eager_and_jitted_agree(case, p, q, True)


def test_reward_metadata_is_json_and_rebuilds(reward_case):
    reward, name = reward_case.reward, reward_case.name
    meta = reward.get_metadata()
    assert json.loads(json.dumps(meta)) == meta and meta["type"] == name
    cls = REWARDS[name]
    static = {k: v for k, v in meta["parameters"].items() if k in cls.SETTINGS}
    assert cls.build(static, GRID, "reward")[0] == reward


# ---------------------------------------------------------------------------
# Start distributions
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def sampler(start, n: int):
    """Jitted: ``n`` samples of ``start`` for (seed key, goal, radius, params,
    plume params of the probe, whether to pass the probe)."""

    def run(key, goal, radius, params, plume_params, with_probe):
        probe = make_probe(plume_params) if with_probe else None
        return jax.vmap(lambda k: start.sample(k, GRID, goal, radius, params, probe=probe))(
            jax.random.split(key, n))

    return jax.jit(run, static_argnums=5)


def sample_many(start, params, goal, radius, n=256, seed=0, plume_params=PLUME_PARAMS,
                with_probe=True):
    return sampler(start, n)(jax.random.key(seed), jnp.asarray(goal, jnp.float32),
                             jnp.asarray(radius, jnp.float32), params, plume_params, with_probe)


@pytest.fixture(scope="module", params=START_CASES, ids=case_id)
def start_case(request):
    name, cfg = request.param
    start, params, resolved = STARTS[name].build(cfg, GRID, "start")
    return SimpleNamespace(name=name, start=start, params=params, resolved=resolved)


@given(goal=st.tuples(st.integers(0, 15), st.integers(0, 15)),
       radius=st.floats(0.0, 6.0, width=32), seed=st.integers(0, 2**30))
def test_start_in_bounds_on_cells_and_outside_goal(start_case, goal, radius, seed):
    """For any goal and radius that make would accept for this start."""
    start, params = start_case.start, start_case.params
    try:
        STARTS[start.type_name].check_compatible(GRID, tuple(map(float, goal)), float(radius),
                                                 start_case.resolved, True)
    except ValidationError:
        assume(False)
    agents_ = sample_many(start, params, goal, radius, seed=seed)
    pos = np.asarray(agents_.position)
    assert agents_.position.dtype == jnp.float32 and pos.shape == (256, 2)
    assert agents_.heading.shape == (256,) and np.all(np.isfinite(np.asarray(agents_.heading)))
    assert np.all(np.asarray(GRID.contains(agents_.position)))
    np.testing.assert_array_equal(pos, np.round(pos))
    dist = np.linalg.norm(pos - np.asarray(goal, np.float32), axis=1)
    assert np.all(dist > np.float32(radius)), dist.min()


def test_start_determinism_eager_and_metadata(start_case):
    start, params, name = start_case.start, start_case.params, start_case.name
    key = jax.random.key(3)
    a = start.sample(key, GRID, jnp.asarray(SOURCE), jnp.asarray(1.0), params, probe=PROBE)
    b = start.sample(key, GRID, jnp.asarray(SOURCE), jnp.asarray(1.0), params, probe=PROBE)
    assert leaves_equal(a, b)
    batch = sample_many(start, params, SOURCE, 1.0, seed=3)
    keys = jax.random.split(jax.random.key(3), 256)
    first = start.sample(keys[0], GRID, jnp.asarray(SOURCE), jnp.asarray(1.0), params,
                         probe=PROBE)
    np.testing.assert_array_equal(np.asarray(first.position), np.asarray(batch.position[0]))
    meta = start.get_metadata()
    assert json.loads(json.dumps(meta)) == meta and meta["type"] == name
    static = {k: v for k, v in meta["parameters"].items() if k in STARTS[name].SETTINGS}
    assert STARTS[name].build({**START_CONFIGS.get(name, {}), **static}, GRID,
                              "start")[0] == start


def test_uniform_start_covers_the_grid_evenly():
    start, params = build(STARTS, "uniform", {}, "start")
    pos = np.asarray(sample_many(start, params, SOURCE, 2.0, n=8192).position)
    counts = np.zeros((16, 16))
    np.add.at(counts, (pos[:, 1].astype(int), pos[:, 0].astype(int)), 1)
    ys, xs = np.mgrid[0:16, 0:16]
    allowed = np.hypot(xs - 7, ys - 7) > 2.0
    assert np.all(counts[~allowed] == 0)
    expected = 8192 / allowed.sum()
    # every allowed cell is hit, and no cell is far from the uniform rate
    assert counts[allowed].min() > 0.4 * expected and counts[allowed].max() < 1.8 * expected


def test_annulus_start_distances_and_angles():
    start, params = build(STARTS, "annulus", {"r_min": 3.0, "r_max": 6.0}, "start")
    pos = np.asarray(sample_many(start, params, SOURCE, 1.0, n=8192).position)
    d = np.linalg.norm(pos - np.asarray(SOURCE), axis=1)
    half_diag = math.sqrt(2) / 2
    assert d.min() >= 3.0 - half_diag - 1e-6 and d.max() <= 6.0 + half_diag + 1e-6
    # uniform by area: E[d²] = (r_min² + r_max²) / 2 (rounding adds ~1/6)
    assert np.mean(d**2) == pytest.approx((9 + 36) / 2 + 1 / 6, rel=0.05)
    angles = np.arctan2(pos[:, 1] - SOURCE[1], pos[:, 0] - SOURCE[0])
    quadrant = np.histogram(angles, bins=4, range=(-math.pi, math.pi))[0]
    assert quadrant.min() > 0.2 * 8192


def test_downwind_start_follows_the_plume_wind_and_its_own_direction():
    start, params = build(STARTS, "downwind", START_CONFIGS["downwind"], "start")
    tol = math.sqrt(2) / 2 + 1e-5
    for direction in (0.0, 2.0, -2.5):
        plume_params = PLUME_PARAMS.replace(wind_direction=jnp.asarray(direction, jnp.float32))
        pos = np.asarray(sample_many(start, params, SOURCE, 1.0,
                                     plume_params=plume_params).position)
        rel = pos - np.asarray(SOURCE)
        along = rel @ np.asarray([math.cos(direction), math.sin(direction)])
        cross = rel @ np.asarray([-math.sin(direction), math.cos(direction)])
        assert along.min() >= 2.0 - tol and along.max() <= 6.0 + tol
        assert np.abs(cross).max() <= 2.0 + tol
    # in a calm, without a probe, or with use_plume_wind=False: its own direction (west)
    calm = PLUME_PARAMS.replace(wind_speed=jnp.asarray(0.0))
    for cfg, kwargs in (({}, {"plume_params": calm}), ({}, {"with_probe": False}),
                        ({"use_plume_wind": False}, {})):
        own, own_params = build(STARTS, "downwind",
                                {**START_CONFIGS["downwind"], "direction": math.pi, **cfg},
                                "start")
        pos = np.asarray(sample_many(own, own_params, SOURCE, 1.0, **kwargs).position)
        assert np.all(pos[:, 0] <= SOURCE[0] - 2.0 + tol), cfg


def test_fixed_start_is_fixed():
    start, params = build(STARTS, "fixed", {"position": [1, 2], "heading": 0.5}, "start")
    agents_ = sample_many(start, params, SOURCE, 1.0)
    np.testing.assert_array_equal(np.asarray(agents_.position), np.tile([1.0, 2.0], (256, 1)))
    np.testing.assert_allclose(np.asarray(agents_.heading), 0.5)


# ---------------------------------------------------------------------------
# Every component inside the env (eager reset_env / step_env)
# ---------------------------------------------------------------------------

def small_env(**overrides):
    base = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.0, "max_steps": 10}
    return plume_jax.make("PlumeNav-Gaussian-v0", **{**base, **overrides})


ENV_CASES = (
    [("actions", name) for name in sorted(ACTIONS)]
    + [("sensor", name) for name in sorted(SENSORS)]
    + [("reward", name) for name in sorted(REWARDS)]
    + [("start", name) for name in sorted(STARTS)]
)


@pytest.mark.parametrize("slot, name", ENV_CASES, ids=lambda v: str(v))
def test_every_component_works_inside_the_env(slot, name):
    cfg = {"type": name, **(START_CONFIGS.get(name, {}) if slot == "start" else {})}
    if slot == "start" and STARTS[name].needs_puffs:
        env, params = plume_jax.make("PlumeNav-Filament-v0", grid_size=[16, 16], source=[2, 8],
                                     goal_radius=1.0, max_steps=10, start=cfg)
    else:
        env, params = small_env(**{slot: cfg})
    assert getattr(env, {"actions": "actions", "sensor": "sensor", "reward": "reward",
                         "start": "start"}[slot]).type_name == name
    obs, state = env.reset_env(jax.random.key(0), params)
    space = env.sensor.observation_space(params.sensor)
    assert bool(space.contains(obs))
    action = env.actions.action_space.sample(jax.random.key(1))
    obs, state, reward, terminated, truncated, info = env.step_env(
        jax.random.key(2), state, action, params)
    assert bool(space.contains(obs)) and np.isfinite(float(reward))
    assert bool(info["action_valid"])
    assert bool(GRID.contains(state.agent.position))
    json.dumps(env.get_metadata())


def test_dict_observation_env_under_jit_with_auto_reset():
    env, params = small_env(
        sensor={"type": "composite", "form": "dict",
                "sensors": [{"type": "concentration", "name": "odour"}, {"type": "wind"}]},
        max_steps=2, wind_speed=0.5)
    space = env.observation_space(params)
    assert set(space.spaces) == {"odour", "wind"}
    obs, state = env.reset(jax.random.key(0), params)
    for i in range(3):  # the third step crosses an auto-reset
        obs, state, reward, terminated, truncated, info = env.step(
            jax.random.key(i + 1), state, 0, params)
        assert set(obs) == {"odour", "wind"} and obs["wind"].shape == (2,)
        assert bool(env.sensor.observation_space(params.sensor).contains(obs))
    assert int(state.episode_count) == 2


# ---------------------------------------------------------------------------
# Semantics of each component
# ---------------------------------------------------------------------------

def act(name, cfg, action, position, heading=0.0, probe=PROBE, key=0):
    model, params = build(ACTIONS, name, cfg, "actions")
    if isinstance(action, str):
        action = model.action_ids[action]
    return model.process_action(jax.random.key(key), action, AgentState.at(position, heading),
                                GRID, params, probe=probe)


def test_discrete_grid_moves_and_clamps():
    out = act("discrete_grid", {"diagonals": True, "step_size": 2}, "move_northeast", [14, 3])
    np.testing.assert_array_equal(np.asarray(out.position), [15, 5])


def test_oriented_grid_forward_and_turns():
    out = act("oriented_grid", {}, "forward", [5, 5], 0.0)
    np.testing.assert_array_equal(np.asarray(out.position), [6, 5])
    out = act("oriented_grid", {}, "forward", [5, 5], math.pi / 2)
    np.testing.assert_array_equal(np.asarray(out.position), [5, 6])
    left = act("oriented_grid", {}, "turn_left", [5, 5], 0.0)
    assert float(left.heading) == pytest.approx(math.pi / 2)
    np.testing.assert_array_equal(np.asarray(left.position), [5, 5])
    right = act("oriented_grid", {}, "turn_right", [5, 5], 0.0)
    assert float(right.heading) == pytest.approx(1.5 * math.pi)
    diag = act("oriented_grid", {"turn_angle_deg": 45.0}, "turn_left", [5, 5], 0.0)
    out = act("oriented_grid", {"step_size": 2}, "forward", [5, 5], float(diag.heading))
    np.testing.assert_array_equal(np.asarray(out.position), [6, 6])  # 2*(0.71, 0.71) rounded
    edge = act("oriented_grid", {}, "forward", [15, 5], 0.0)
    np.testing.assert_array_equal(np.asarray(edge.position), [15, 5])


def test_oriented_grid_four_left_turns_return_to_the_start_heading():
    model, params = build(ACTIONS, "oriented_grid", {}, "actions")
    agent = AgentState.at([5, 5], math.pi)
    for _ in range(4):
        agent = model.process_action(jax.random.key(0), model.action_ids["turn_left"], agent,
                                     GRID, params)
    assert math.cos(float(agent.heading)) == pytest.approx(-1.0, abs=1e-5)
    assert 0.0 <= float(agent.heading) < 2 * math.pi


def test_run_tumble_runs_straight_and_tumbles_from_the_key():
    out = act("run_tumble", {"run_length": 2.5}, "run", [5, 5], math.pi / 2)
    np.testing.assert_allclose(np.asarray(out.position), [5, 7.5], atol=1e-5)
    model, params = build(ACTIONS, "run_tumble", {}, "actions")
    keys = jax.random.split(jax.random.key(0), 2048)
    # jitted, as the other statistical draws below: a batch op by op costs more
    out = jax.jit(jax.vmap(lambda k: model.process_action(k, model.action_ids["tumble"],
                                                          AgentState.at([5, 5], 0.3), GRID,
                                                          params)))(keys)
    headings = np.asarray(out.heading)
    np.testing.assert_array_equal(np.asarray(out.position), np.tile([5.0, 5.0], (2048, 1)))
    assert np.all((headings >= 0) & (headings < 2 * math.pi))
    counts = np.histogram(headings, bins=8, range=(0, 2 * math.pi))[0]
    assert counts.min() > 0.7 * 256 and counts.max() < 1.3 * 256


def test_continuous_turns_then_moves_and_rejects_out_of_box():
    out = act("continuous", {}, np.asarray([1.0, 0.5], np.float32), [5, 5], 0.0)
    np.testing.assert_allclose(np.asarray(out.position), [5 + math.cos(0.5), 5 + math.sin(0.5)],
                               atol=1e-5)
    assert float(out.heading) == pytest.approx(0.5)
    clamped = act("continuous", {}, jnp.asarray([1.0, 0.0]), [15, 3], 0.0)
    np.testing.assert_allclose(np.asarray(clamped.position), [15, 3])
    rejected = act("continuous", {}, np.asarray([1.5, 0.0], np.float32), [5, 5], 0.0)
    np.testing.assert_allclose(np.asarray(rejected.position), [5, 5])
    reverse = act("continuous", {"min_speed": -1.0}, [-1.0, 0.0], [5, 5], 0.0)
    np.testing.assert_allclose(np.asarray(reverse.position), [4, 5], atol=1e-6)


def wind_probe(direction, speed=1.0):
    return make_probe(PLUME_PARAMS.replace(wind_direction=jnp.asarray(direction, jnp.float32),
                                           wind_speed=jnp.asarray(speed, jnp.float32)))


def test_surge_cast_is_relative_to_the_wind():
    east = wind_probe(0.0)  # air moves east: upwind is west
    cases_ = {"surge": [4, 5], "cast_left": [5, 4], "cast_right": [5, 6]}
    for action, expected in cases_.items():
        out = act("surge_cast", {}, action, [5, 5], 0.0, probe=east)
        np.testing.assert_array_equal(np.asarray(out.position), expected, err_msg=action)
    north = wind_probe(math.pi / 2)  # upwind is south
    out = act("surge_cast", {"step_size": 2}, "surge", [5, 5], 0.0, probe=north)
    np.testing.assert_array_equal(np.asarray(out.position), [5, 3])
    assert float(out.heading) == pytest.approx(1.5 * math.pi)
    calm = wind_probe(0.0, speed=0.0)  # no upwind: heading is the reference
    out = act("surge_cast", {}, "surge", [5, 5], math.pi / 2, probe=calm)
    np.testing.assert_array_equal(np.asarray(out.position), [5, 6])
    with pytest.raises(ValidationError, match="probe"):
        act("surge_cast", {}, "surge", [5, 5], 0.0, probe=None)


def test_surge_cast_reads_the_plume_wind_inside_the_env():
    env, params = small_env(actions="surge_cast", wind_speed=1.0, wind_direction=math.pi / 2,
                            start={"type": "fixed", "position": [3, 10]})
    _, state = env.reset_env(jax.random.key(0), params)
    _, state, *_ = env.step_env(jax.random.key(1), state, env.action_ids["surge"], params)
    np.testing.assert_array_equal(np.asarray(state.agent.position), [3, 9])


def observe(name, cfg, position, heading=0.0, probe=PROBE, key=0):
    sensor, params = build(SENSORS, name, cfg, "sensor")
    return sensor.init(jax.random.key(key), AgentState.at(position, heading), probe, params)[0]


def test_binary_detector_threshold():
    assert float(observe("binary", {"threshold": 0.5}, SOURCE)[0]) == 1.0
    assert float(observe("binary", {"threshold": 0.5}, [0, 0])[0]) == 0.0
    c = float(observe("concentration", {}, [10, 7])[0])  # exp(-9/32)
    assert float(observe("binary", {"threshold": c}, [10, 7])[0]) == 1.0
    assert float(observe("binary", {"threshold": min(1.0, c + 1e-3)}, [10, 7])[0]) == 0.0


def test_poisson_hits_have_the_right_mean_and_cap():
    sensor, params = build(SENSORS, "poisson", {"rate": 3.0, "max_hits": 50}, "sensor")
    keys = jax.random.split(jax.random.key(0), 2048)
    # jitted: Poisson sampling is a loop, slow op by op
    hits = np.asarray(jax.jit(jax.vmap(lambda k: sensor.init(k, AgentState.at([9, 7]), PROBE,
                                                            params)[0]))(keys))[:, 0]
    mean = 3.0 * math.exp(-4 / 32)
    assert hits.mean() == pytest.approx(mean, abs=4 * math.sqrt(mean / 2048))
    assert hits.var() == pytest.approx(mean, rel=0.15)
    capped, cparams = build(SENSORS, "poisson", {"rate": 50.0, "max_hits": 2}, "sensor")
    assert float(capped.init(jax.random.key(0), AgentState.at(SOURCE), PROBE, cparams)[0][0]) == 2.0


def test_antennae_left_first_and_symmetric():
    # agent south of the source facing east: the source is to its left
    left, right = np.asarray(observe("antennae", {}, [7, 4], 0.0))
    assert left > right
    # facing the source: both antennae read the same
    left, right = np.asarray(observe("antennae", {}, [3, 7], 0.0))
    assert left == pytest.approx(right, abs=1e-6)
    # tips at (7 + 2 cos ±45°, ...) exactly
    sensor, params = build(SENSORS, "antennae", {}, "sensor")
    tips = np.asarray(sensor.tips(AgentState.at([5, 5], 0.0), params))
    np.testing.assert_allclose(tips, [[5 + math.sqrt(2), 5 + math.sqrt(2)],
                                      [5 + math.sqrt(2), 5 - math.sqrt(2)]], atol=1e-5)


def test_wind_sensor_frames_and_noise():
    east = wind_probe(0.0, 1.0)
    np.testing.assert_allclose(np.asarray(observe("wind", {}, [5, 5], 0.0, probe=east)), [1, 0],
                               atol=1e-6)
    # facing north, an east wind blows toward the agent's right
    np.testing.assert_allclose(np.asarray(observe("wind", {}, [5, 5], math.pi / 2, probe=east)),
                               [0, -1], atol=1e-6)
    np.testing.assert_allclose(np.asarray(observe("wind", {"frame": "world"}, [5, 5], 2.0,
                                                  probe=east)), [1, 0], atol=1e-6)
    fast = wind_probe(0.0, 9.0)
    np.testing.assert_allclose(np.asarray(observe("wind", {"max_speed": 2.0}, [5, 5], probe=fast)),
                               [2, 0])
    sensor, params = build(SENSORS, "wind", {"noise_std": 0.2}, "sensor")
    keys = jax.random.split(jax.random.key(0), 2048)
    obs = np.asarray(jax.jit(jax.vmap(lambda k: sensor.init(k, AgentState.at([5, 5]), east,
                                                            params)[0]))(keys))
    assert obs.mean(0) == pytest.approx([1.0, 0.0], abs=0.03)
    assert obs.std(0) == pytest.approx([0.2, 0.2], rel=0.1)


def test_patch_layout_and_frames():
    sensor, params = build(SENSORS, "patch", {"size": 3}, "sensor")
    # source straight north of the agent: the top-centre sample reads most
    obs = np.asarray(observe("patch", {"size": 3}, [7, 5])).reshape(3, 3)
    assert obs[1, 1] == pytest.approx(float(observe("concentration", {}, [7, 5])[0]))
    assert obs[0, 1] > obs[1, 1] > obs[2, 1]
    assert obs[1, 0] == pytest.approx(obs[1, 2])
    # body frame facing west, source to the west: the top row is ahead
    body = np.asarray(observe("patch", {"size": 3, "frame": "body"}, [9, 7], math.pi)).reshape(3, 3)
    assert body[0, 1] > body[1, 1] > body[2, 1]
    points = np.asarray(sensor.points(AgentState.at([4, 4], 0.0), params))
    np.testing.assert_allclose(points[0, 0], [3, 5])  # top-left: north-west
    np.testing.assert_allclose(points[2, 2], [5, 3])


def test_noise_sensor_statistics_and_clipping():
    sensor, params = build(SENSORS, "noise", {"std": 0.05}, "sensor")
    keys = jax.random.split(jax.random.key(0), 2048)
    obs = np.asarray(jax.jit(jax.vmap(lambda k: sensor.init(k, AgentState.at([10, 7]), PROBE,
                                                            params)[0]))(keys))[:, 0]
    c = math.exp(-9 / 32)
    assert obs.mean() == pytest.approx(c, abs=0.005)
    assert obs.std() == pytest.approx(0.05, rel=0.1)
    at_source = np.asarray(jax.jit(jax.vmap(lambda k: sensor.init(k, AgentState.at(SOURCE), PROBE,
                                                                  params)[0]))(keys))
    assert at_source.max() <= 1.0 and np.mean(at_source == 1.0) > 0.3


def test_history_buffer_order():
    sensor, params = build(SENSORS, "history", {"length": 3}, "sensor")
    path = [[0, 7], [3, 7], [5, 7], [7, 7]]
    readings = [float(observe("concentration", {}, p)[0]) for p in path]
    obs, state = sensor.init(jax.random.key(0), AgentState.at(path[0]), PROBE, params)
    np.testing.assert_allclose(np.asarray(obs), [readings[0]] * 3)
    for p in path[1:]:
        obs, state = sensor.observe(jax.random.key(0), AgentState.at(p), PROBE, state, params)
    np.testing.assert_allclose(np.asarray(obs), readings[1:])  # oldest first, current last
    assert sensor.observation_labels() == ["t-2.concentration", "t-1.concentration",
                                           "t-0.concentration"]


def test_composite_concatenates_in_order_and_dict_form_matches():
    cfg = {"sensors": [{"type": "antennae"}, {"type": "wind", "noise_std": 0.1}, "poisson"]}
    sensor, params = build(SENSORS, "composite", cfg, "sensor")
    agent, key = AgentState.at([4, 6], 0.3), jax.random.key(5)
    obs, _ = sensor.init(key, agent, PROBE, params)
    parts = [s.init(jax.random.fold_in(key, i), agent, PROBE, p)[0]
             for i, (s, p) in enumerate(zip(sensor.sensors, params.sensors))]
    np.testing.assert_array_equal(np.asarray(obs), np.concatenate([np.asarray(p) for p in parts]))
    assert sensor.layout() == {"antennae": (0, 2), "wind": (2, 4), "poisson": (4, 5)}
    dict_sensor, dict_params = build(SENSORS, "composite", {**cfg, "form": "dict"}, "sensor")
    dict_obs, _ = dict_sensor.init(key, agent, PROBE, dict_params)
    for name, (lo, hi) in sensor.layout().items():
        np.testing.assert_array_equal(np.asarray(dict_obs[name]), np.asarray(obs)[lo:hi])


def eager(reward):
    """``compute`` with the signature ``discounted_return`` expects."""
    return lambda p, q, reached, params: reward.compute(AgentState.at(p), AgentState.at(q), GOAL,
                                                        reached, params)


def test_potential_shaping_return_is_sparse_return_plus_potential_difference():
    shaped, sp = build(REWARDS, "potential_shaping", {"gamma": 0.9, "scale": 0.5}, "reward")
    sparse, sparse_p = build(REWARDS, "sparse", {}, "reward")
    path = [(1.0, 1.0), (2.0, 1.0), (2.0, 2.0), (3.0, 5.0), (8.0, 8.5)]
    g_shaped = discounted_return(eager(shaped), sp, path, 0.9)
    g_sparse = discounted_return(eager(sparse), sparse_p, path, 0.9)
    phi0 = -0.5 * math.dist(path[0], (8.0, 8.0))
    assert g_shaped - g_sparse == pytest.approx(-phi0, abs=1e-5)  # Φ(terminal) = 0
    unfinished = path[:-1]
    phi_t = -0.5 * math.dist(unfinished[-1], (8.0, 8.0))
    assert discounted_return(eager(shaped), sp, unfinished, 0.9) == pytest.approx(
        0.9**3 * phi_t - phi0, abs=1e-5)
    # moving toward the goal pays, moving away costs (γ = 1)
    s1, p1 = build(REWARDS, "potential_shaping", {"gamma": 1.0, "scale": 1.0}, "reward")
    assert float(reward_of(s1, p1, (1.0, 8.0), (2.0, 8.0), False)) == pytest.approx(1.0)
    assert float(reward_of(s1, p1, (2.0, 8.0), (1.0, 8.0), False)) == pytest.approx(-1.0)


@pytest.mark.parametrize("cfg", [c for n, c in REWARD_CASES if n == "weighted_sum" and c],
                         ids=["shaped", "reads the plume"])
def test_weighted_sum_is_the_weighted_sum_of_its_components(cfg):
    total, params = build(REWARDS, "weighted_sum", cfg, "reward")
    for p, q, reached in [((1.0, 1.0), (2.0, 3.0), False), ((8.0, 6.0), (8.0, 7.0), True),
                          ((12.0, 2.0), (13.0, 1.0), False)]:
        expected = sum(float(w) * float(reward_of(c, cp, p, q, reached)) for c, cp, w in
                       zip(total.components, params.components, params.weights))
        assert float(reward_of(total, params, p, q, reached)) == pytest.approx(expected, abs=1e-5)
    # the discount of its shaped component (gamma 0.8), else 1
    assert float(total.discount(params)) == pytest.approx(0.8 if total.shaped else 1.0)
