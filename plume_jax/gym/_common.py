"""Helpers shared by the Gymnasium, vector and SB3 adapters (layer 3).

Nothing here holds state: space conversion, seed and action checks, the
rule that decides whether positions are reported as integer cells, and the
compiled reset/step/render functions. The compiled functions take the
``PlumeEnv`` as a *static* argument, so every adapter instance built on an
equal env (``PlumeEnv`` hashes by its static configuration) shares one
compilation per function, whatever the params values.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax import spaces as pj_spaces
from plume_jax.actions import DiscreteGridActions
from plume_jax.errors import ValidationError
from plume_jax.render import render_frame
from plume_jax.starts import FixedStart, FixedStartParams

#: Largest seed accepted (exclusive). ``jax.random.key`` takes a 64-bit
#: signed integer; Gymnasium's own seeding wants a non-negative one.
SEED_LIMIT = 2**63

#: Keys of the option dict accepted by ``reset(options=...)``.
RESET_OPTIONS = ("start_position", "start_heading")

_INT32 = np.iinfo(np.int32)


# --------------------------------------------------------------------- spaces
def to_gymnasium_space(space: Any) -> gymnasium.spaces.Space:
    """Convert a :mod:`plume_jax.spaces` space to the Gymnasium equivalent.

    ``Discrete(n)`` becomes ``gymnasium.spaces.Discrete(n)``; ``Box`` becomes
    a float32 ``gymnasium.spaces.Box`` with the same bounds and shape;
    ``Dict`` becomes ``gymnasium.spaces.Dict`` of the converted sub-spaces.
    """
    if isinstance(space, pj_spaces.Discrete):
        return gymnasium.spaces.Discrete(space.n)
    if isinstance(space, pj_spaces.Box):
        return gymnasium.spaces.Box(low=space.low_array, high=space.high_array,
                                    shape=space.shape, dtype=np.float32)
    dict_space = getattr(pj_spaces, "Dict", None)
    if dict_space is not None and isinstance(space, dict_space):
        return gymnasium.spaces.Dict({k: to_gymnasium_space(v) for k, v in space.items()})
    raise TypeError(f"the Gymnasium layer cannot convert space {space!r}: "
                    "supported are plume_jax.spaces.Discrete, Box and Dict")


def to_numpy(tree: Any) -> Any:
    """Writable NumPy copies of every leaf of a (host) pytree."""
    return jax.tree.map(np.array, tree)


def batch_gymnasium_space(space: gymnasium.spaces.Space, n: int) -> gymnasium.spaces.Space:
    """The space of ``n`` stacked elements of ``space`` (Gymnasium's own rule)."""
    return gymnasium.vector.utils.batch_space(space, n)


# ---------------------------------------------------------------- positions
def integer_positions(env: Any) -> bool:
    """Whether the env's action model keeps the agent on integer cells.

    Read from the action model's boolean ``on_grid`` attribute (part of the
    action-model protocol); a model without one counts as on-grid only if it
    is a ``DiscreteGridActions``. Decides whether ``agent_xy`` is reported as
    ints and whether a start position given in ``reset(options=...)`` must
    be an integer cell.
    """
    flag = getattr(env.actions, "on_grid", None)
    if flag is not None:
        return bool(flag)
    return isinstance(env.actions, DiscreteGridActions)


def xy_tuple(xy: Any, as_int: bool) -> tuple:
    """``(x, y)`` as Python ints (rounded) or floats."""
    x, y = (float(v) for v in np.asarray(xy).reshape(2))
    if as_int:
        return (int(round(x)), int(round(y)))
    return (x, y)


def location_tuple(xy: Any) -> tuple:
    """A fixed location (source, goal): ints when both coordinates are whole
    numbers, floats otherwise."""
    x, y = (float(v) for v in np.asarray(xy).reshape(2))
    if x.is_integer() and y.is_integer():
        return (int(x), int(y))
    return (x, y)


# -------------------------------------------------------------------- seeds
def check_seed(seed: Any, name: str = "seed") -> int:
    """A valid reset seed as a Python int, or ``ValidationError``."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValidationError.for_parameter(name, seed, f"None or an integer in [0, {SEED_LIMIT})")
    seed = int(seed)
    if not 0 <= seed < SEED_LIMIT:
        raise ValidationError.for_parameter(name, seed, f"None or an integer in [0, {SEED_LIMIT})")
    return seed


def fresh_seed() -> int:
    """A seed drawn from OS entropy, for a first reset without one."""
    return int(np.random.SeedSequence().generate_state(1, np.uint32)[0])


# ------------------------------------------------------------------ actions
def action_template(space: gymnasium.spaces.Space) -> tuple[tuple[int, ...], str]:
    """``(shape, description)`` of one action of ``space``, for messages."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return (), f"an integer in [0, {int(space.n)})"
    return tuple(space.shape), f"a float array of shape {tuple(space.shape)} inside {space}"


def as_action_array(action: Any, shape: tuple[int, ...], allowed: str,
                    name: str = "action") -> np.ndarray:
    """Host-side normalisation of actions before they enter a compiled call.

    Checks what a compiled function cannot be given safely (non-numeric
    values, a wrong shape, integers beyond int32) and casts integers to int32
    and floats to float32, so each env compiles its step once. Whether the
    value is *allowed* is then decided by the action model's own
    ``validate_action`` inside the compiled step.
    """
    try:
        arr = np.asarray(action)
    except Exception:  # noqa: BLE001 - anything numpy cannot hold is invalid
        raise ValidationError.for_parameter(name, action, allowed) from None
    if arr.dtype.kind not in "biuf" or arr.shape != shape:
        raise ValidationError.for_parameter(name, action, allowed)
    if arr.dtype.kind in "iu":
        if arr.size and (arr.min() < _INT32.min or arr.max() > _INT32.max):
            raise ValidationError.for_parameter(name, action, allowed)
        return arr.astype(np.int32)
    if arr.dtype.kind == "f":
        return arr.astype(np.float32)
    return arr


# -------------------------------------------------------------- start option
def fixed_start_env(env: Any) -> Any:
    """A copy of ``env`` whose start distribution is ``FixedStart``.

    Used to start an episode at a position given in ``reset(options=...)``
    with the env's own ``reset_env`` (same plume, sensor and key use). Its
    default params are a fixed placeholder so that every copy of an equal env
    is equal too and shares one compilation.
    """
    return _fixed_start_env(env)


@functools.lru_cache(maxsize=64)
def _fixed_start_env(env: Any) -> Any:
    params = env.default_params.replace(start=FixedStartParams(
        position=jnp.zeros(2, jnp.float32), heading=jnp.zeros((), jnp.float32)))
    settings = {**env.settings, "start": {"type": FixedStart.type_name}}
    return type(env)(env.grid, env.plume, env.sensor, env.actions, env.reward, FixedStart(),
                     params, settings)


def parse_reset_options(options: Any, env: Any) -> dict[str, Any]:
    """Check the *form* of ``reset`` options; returns ``{}`` or
    ``{"start_position": (x, y), "start_heading": float | None}``.

    The checks that need the episode (inside the grid, outside the goal
    region, integer cells) are made by :func:`check_start_position`.
    """
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValidationError.for_parameter("options", options,
                                            f"None or a dict with keys among {list(RESET_OPTIONS)}")
    unknown = sorted(set(options) - set(RESET_OPTIONS))
    if unknown:
        raise ValidationError.for_parameter(f"options[{unknown[0]!r}]", options[unknown[0]],
                                            f"a known option: one of {list(RESET_OPTIONS)}")
    if "start_heading" in options and "start_position" not in options:
        raise ValidationError.for_parameter(
            "options['start_heading']", options["start_heading"],
            "to be given together with options['start_position']")
    if "start_position" not in options:
        return {}
    position = options["start_position"]
    allowed = "an (x, y) pair of finite numbers"
    try:
        xy = np.asarray(position, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError.for_parameter("options['start_position']", position, allowed) from None
    if xy.shape != (2,) or not np.all(np.isfinite(xy)) or np.asarray(position).dtype.kind == "b":
        raise ValidationError.for_parameter("options['start_position']", position, allowed)
    heading = options.get("start_heading")
    if heading is not None:
        if isinstance(heading, (bool, np.bool_)) or not isinstance(
                heading, (int, float, np.integer, np.floating)) or not math.isfinite(float(heading)):
            raise ValidationError.for_parameter("options['start_heading']", heading,
                                                "None or a finite number (radians)")
        heading = float(heading)
    return {"start_position": (float(xy[0]), float(xy[1])), "start_heading": heading}


def check_start_position(position: tuple[float, float], env: Any, goal: Any,
                         goal_radius: float) -> None:
    """``ValidationError`` unless ``position`` is a legal start: inside the
    grid, farther than ``goal_radius`` from the goal, on an integer cell when
    the action model keeps the agent on cells."""
    name = "options['start_position']"
    x, y = position
    w, h = env.grid.width, env.grid.height
    if not (0.0 <= x <= w - 1 and 0.0 <= y <= h - 1):
        raise ValidationError.for_parameter(
            name, position, f"a position inside the grid, 0 <= x <= {w - 1}, 0 <= y <= {h - 1}")
    if integer_positions(env) and not (x.is_integer() and y.is_integer()):
        raise ValidationError.for_parameter(
            name, position, "integer cell coordinates (this action model keeps the agent on cells)")
    gx, gy = (float(v) for v in np.asarray(goal).reshape(2))
    if math.hypot(x - gx, y - gy) <= goal_radius:
        raise ValidationError.for_parameter(
            name, position,
            f"a cell farther than goal_radius={goal_radius:g} from the goal ({gx:g}, {gy:g})")


# --------------------------------------------------------- compiled functions
def _start_summary(env: Any, state: Any, params: Any) -> jax.Array:
    """f32[6]: agent position, goal location, source location (one array, so
    that the host fetches one buffer instead of three)."""
    goal = env.goal_location(state.plume, params)
    source = env.plume.source_location(state.plume, params.plume)
    return jnp.concatenate([state.agent.position, goal, source]).astype(jnp.float32)


@functools.partial(jax.jit, static_argnames=("env",))
def compiled_reset(env: Any, key: jax.Array, params: Any, episode_count: jax.Array):
    """Advance the key stream once and start an episode with ``reset_env``.

    Returns ``(next_key, obs, state, summary)``, ``summary`` f32[6]: agent
    position, goal location, source location.
    """
    key, sub = jax.random.split(key)
    obs, state = env.reset_env(sub, params)
    state = state.replace(episode_count=jnp.asarray(episode_count, jnp.int32))
    return key, obs, state, _start_summary(env, state, params)


@functools.partial(jax.jit, static_argnames=("env", "fixed_env"))
def compiled_reset_at(env: Any, fixed_env: Any, key: jax.Array, params: Any,
                      episode_count: jax.Array, position: jax.Array, heading: jax.Array,
                      use_drawn_heading: jax.Array):
    """Like :func:`compiled_reset` with the start position given.

    The same subkey as an ordinary reset is used, so the plume, the sensor
    and the rest of the key stream are those of ``reset`` with the same
    seed; the heading is the one the env's own start distribution would have
    drawn when ``use_drawn_heading`` is True.
    """
    key, sub = jax.random.split(key)
    _, drawn = env.reset_env(sub, params)
    heading = jnp.where(use_drawn_heading, drawn.agent.heading, heading).astype(jnp.float32)
    fixed = params.replace(start=FixedStartParams(position=position.astype(jnp.float32),
                                                  heading=heading))
    obs, state = fixed_env.reset_env(sub, fixed)
    state = state.replace(episode_count=jnp.asarray(episode_count, jnp.int32))
    return key, obs, state, _start_summary(env, state, params)


@functools.partial(jax.jit, static_argnames=("env",))
def compiled_step(env: Any, key: jax.Array, state: Any, action: Any, params: Any):
    """Advance the key stream once and take one ``step_env`` (no auto-reset).

    Returns ``(next_key, obs, next_state, floats, ints)``: ``floats`` f32[5]
    is reward, total_reward, distance_to_goal, agent x, agent y; ``ints``
    i32[5] is terminated, truncated, action_valid, goal_reached,
    step_count (packed so that the host fetches two small buffers).
    """
    key, sub = jax.random.split(key)
    obs, new_state, reward, terminated, truncated, info = env.step_env(sub, state, action, params)
    return (key, obs, new_state) + pack_step(reward, terminated, truncated, info)


def pack_step(reward: Any, terminated: Any, truncated: Any, info: dict) -> tuple:
    """``(floats f32[5], ints i32[5])`` of one step (see :func:`compiled_step`)."""
    floats = jnp.stack([jnp.asarray(reward, jnp.float32),
                        jnp.asarray(info["total_reward"], jnp.float32),
                        jnp.asarray(info["distance_to_goal"], jnp.float32),
                        info["agent_xy"][0].astype(jnp.float32),
                        info["agent_xy"][1].astype(jnp.float32)])
    ints = jnp.stack([jnp.asarray(terminated, jnp.int32), jnp.asarray(truncated, jnp.int32),
                      jnp.asarray(info["action_valid"], jnp.int32),
                      jnp.asarray(info["goal_reached"], jnp.int32),
                      jnp.asarray(info["step_count"], jnp.int32)])
    return floats, ints


@functools.partial(jax.jit, static_argnames=("env", "scale"))
def compiled_render(env: Any, scale: int, plume_state: Any, agent: Any, params: Any,
                    trail: jax.Array, trail_valid: jax.Array) -> jax.Array:
    """``render_frame`` of one state with a fixed-size trail buffer."""
    return render_frame(env, plume_state, agent, params, trail=trail, trail_valid=trail_valid,
                        scale=scale)


@functools.partial(jax.jit, static_argnames=("env", "scale"))
def compiled_render_batch(env: Any, scale: int, plume_state: Any, agent: Any, params: Any,
                          trail: jax.Array, trail_valid: jax.Array) -> jax.Array:
    """``render_frame`` vmapped over a batch of states and trails."""
    return jax.vmap(lambda p, a, t, v: render_frame(env, p, a, params, trail=t, trail_valid=v,
                                                    scale=scale))(plume_state, agent, trail,
                                                                  trail_valid)


def check_scale(scale: Any) -> int:
    """A render scale (pixels per cell): an integer in [1, 64]."""
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, np.integer)) \
            or not 1 <= int(scale) <= 64:
        raise ValidationError.for_parameter("render_scale", scale, "an integer in [1, 64]")
    return int(scale)


def check_trail_length(length: Any) -> int:
    """A trail length (recent positions drawn): an integer in [0, 100000]."""
    if isinstance(length, (bool, np.bool_)) or not isinstance(length, (int, np.integer)) \
            or not 0 <= int(length) <= 100_000:
        raise ValidationError.for_parameter("trail_length", length, "an integer in [0, 100000]")
    return int(length)
