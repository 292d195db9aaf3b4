"""Helpers shared by the Gymnasium, vector, SB3 and PettingZoo adapters (layer 3).

Nothing here holds state: space conversion, seed and action checks, the
rule that decides whether positions are reported as integer cells, and the
compiled reset/step/render functions. The compiled functions take the
``PlumeEnv`` as a *static* argument, so every adapter instance built on an
equal env (``PlumeEnv`` hashes by its static configuration) shares one
compilation per function, whatever the params values.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import Any, NamedTuple

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core import spaces as pj_spaces
from plume_jax.core.errors import ValidationError
from plume_jax.render.frames import check_frame_size, render_frame
from plume_jax.core.seeding import (SEED_LIMIT, check_seed, fresh_seed,  # noqa: F401  (the adapters' seeds)
                               keys_from_seeds, seed_key)
from plume_jax.settings import angle, grid_position
from plume_jax.starts import FixedStart, FixedStartParams

#: Keys of the option dict accepted by ``reset(options=...)``.
RESET_OPTIONS = ("start_position", "start_heading")

_INT32 = np.iinfo(np.int32)


# --------------------------------------------------------------------- spaces
def to_gymnasium_space(space: Any) -> gymnasium.spaces.Space:
    """Convert a :mod:`plume_jax.core.spaces` space to the Gymnasium equivalent.

    ``Discrete(n)`` becomes ``gymnasium.spaces.Discrete(n)``; ``Box`` becomes
    a float32 ``gymnasium.spaces.Box`` with the same bounds and shape;
    ``Dict`` becomes ``gymnasium.spaces.Dict`` of the converted sub-spaces.
    """
    if isinstance(space, pj_spaces.Discrete):
        return gymnasium.spaces.Discrete(space.n)
    if isinstance(space, pj_spaces.Box):
        return gymnasium.spaces.Box(low=space.low_array, high=space.high_array,
                                    shape=space.shape, dtype=np.float32)
    if isinstance(space, pj_spaces.Dict):
        return gymnasium.spaces.Dict({k: to_gymnasium_space(v) for k, v in space.items()})
    raise TypeError(f"the Gymnasium layer cannot convert space {space!r}: "
                    "supported are plume_jax.core.spaces.Discrete, Box and Dict")


def batch_gymnasium_space(space: gymnasium.spaces.Space, n: int) -> gymnasium.spaces.Space:
    """The space of ``n`` stacked elements of ``space`` (Gymnasium's own rule)."""
    return gymnasium.vector.utils.batch_space(space, n)


# ---------------------------------------------------------------- positions
def integer_positions(env: Any) -> bool:
    """Whether the env's action model keeps the agent on integer cells.

    Read from the action model's ``on_grid`` (``ActionModel``, default
    False). Decides whether ``agent_xy`` is reported as ints and whether a
    start position given in ``reset(options=...)`` must be an integer cell.
    """
    return bool(env.actions.on_grid)


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


# ------------------------------------------------------------------ actions
def action_template(space: gymnasium.spaces.Space) -> tuple[tuple[int, ...], str]:
    """``(shape, description)`` of one action of ``space``, for messages."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return (), f"an integer in [0, {int(space.n)})"
    shape = tuple(space.shape or ())
    return shape, f"a float array of shape {shape} inside {space}"


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
    """``env`` with a ``FixedStart`` start distribution (``dataclasses.replace``).

    Used to start an episode at a position given in ``reset(options=...)``
    with the env's own ``reset_env`` (same plume, sensor and key use). Its
    default params are a fixed placeholder so that every copy of an equal env
    is equal too and shares one compilation.
    """
    return _fixed_start_env(env)


@functools.lru_cache(maxsize=64)
def _fixed_start_env(env: Any) -> Any:
    # NumPy placeholders: this may run while a compiled reset is traced
    params = env.default_params.replace(start=FixedStartParams(
        position=np.zeros(2, np.float32), heading=np.zeros((), np.float32)))  # type: ignore[arg-type]
    return dataclasses.replace(env, start=FixedStart(), default_params=params,
                               settings={**env.settings, "start": {"type": FixedStart.type_name}})


def parse_reset_options(options: Any, env: Any) -> dict[str, Any]:
    """Check ``reset`` options as settings are checked; returns ``{}`` or
    ``{"start_position": (x, y), "start_heading": float | None}``.

    ``start_position``: an ``(x, y)`` pair of real numbers (not strings, not
    bools) inside the grid, on an integer cell for action models that keep
    the agent on cells. ``start_heading``: a finite real number of radians
    (the settings' ``angle`` check: very large values are wrapped into
    ``[-pi, pi]``, so any finite value gives a finite float32 heading). The check that needs the episode (outside the goal region) is
    :func:`check_start_outside_goal`.
    """
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValidationError.for_parameter("options", options,
                                            f"None or a dict with keys among {list(RESET_OPTIONS)}")
    unknown = sorted(set(options) - set(RESET_OPTIONS), key=repr)
    if unknown:
        raise ValidationError.for_parameter(f"options[{unknown[0]!r}]", options[unknown[0]],
                                            f"a known option: one of {list(RESET_OPTIONS)}")
    if "start_heading" in options and "start_position" not in options:
        raise ValidationError.for_parameter(
            "options['start_heading']", options["start_heading"],
            "to be given together with options['start_position']")
    if "start_position" not in options:
        return {}
    name = "options['start_position']"
    position = options["start_position"]
    if not isinstance(position, (tuple, list, np.ndarray)):
        raise ValidationError.for_parameter(name, position,
                                            "an (x, y) pair (a tuple, list or array)")
    x, y = grid_position()(name, position, env.grid)
    if integer_positions(env) and not (x.is_integer() and y.is_integer()):
        raise ValidationError.for_parameter(
            name, options["start_position"],
            "integer cell coordinates (this action model keeps the agent on cells)")
    heading = options.get("start_heading")
    if heading is not None:
        heading = angle()("options['start_heading']", heading, env.grid)
    return {"start_position": (x, y), "start_heading": heading}


def check_start_outside_goal(position: tuple[float, float], goal: Any,
                             goal_radius: float) -> None:
    """``ValidationError`` unless ``position`` is farther than
    ``goal_radius`` from ``goal`` (a start inside the goal region would end
    the episode before its first step)."""
    x, y = position
    gx, gy = (float(v) for v in np.asarray(goal).reshape(2))
    if math.hypot(x - gx, y - gy) <= goal_radius:
        raise ValidationError.for_parameter(
            "options['start_position']", position,
            f"a cell farther than goal_radius={goal_radius:g} from the goal ({gx:g}, {gy:g})")


# --------------------------------------------------------- compiled functions
class ActionNames:
    """Mixin of the Gymnasium, vector, SB3 and PettingZoo adapters: the action
    names and ids of the functional env they wrap (``self.env``)."""

    env: Any

    @property
    def action_names(self) -> list[str]:
        """Action names in id order (the action model's, fixed)."""
        return self.env.action_names

    @property
    def action_ids(self) -> dict[str, int]:
        """``name -> id``."""
        return self.env.action_ids


class StartView(NamedTuple):
    """Where an episode starts: the agent's position (f32[2], or f32[A, 2]
    for several agents), the goal and the source (f32[2] each)."""

    agent_xy: jax.Array
    goal_location: jax.Array
    source_location: jax.Array


class EpisodeView(NamedTuple):
    """The episode's counters after a step (per agent where the state is):
    ``step_count`` and ``episode_count`` i32, ``total_reward`` f32,
    ``goal_reached`` bool, ``agent_xy`` f32[..., 2], ``distance_to_goal`` f32."""

    step_count: jax.Array
    episode_count: jax.Array
    total_reward: jax.Array
    goal_reached: jax.Array
    agent_xy: jax.Array
    distance_to_goal: jax.Array


class ResetOutput(NamedTuple):
    """What :func:`compiled_reset` returns: the advanced key, the first
    observation and state of the episode, and its :class:`StartView`."""

    key: jax.Array
    obs: Any
    state: Any
    start: StartView


class StepOutput(NamedTuple):
    """What :func:`compiled_step` returns (one ``step_env``, no reset):
    the advanced key, the observation and state after the step, its reward
    and flags, ``done`` (whether the episode ended: ``env.episode_done``),
    ``action_valid`` and the :class:`EpisodeView` after the step."""

    key: jax.Array
    obs: Any
    state: Any
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    done: jax.Array
    action_valid: jax.Array
    view: EpisodeView


def start_view(env: Any, state: Any, params: Any) -> StartView:
    """The :class:`StartView` of an episode's first state."""
    return StartView(agent_xy=state.agent.position,
                     goal_location=env.goal_location(state.plume, params),
                     source_location=env.plume.source_location(state.plume, params.plume))


def episode_view(info: dict[str, Any]) -> EpisodeView:
    """The :class:`EpisodeView` of a step, from the step's info."""
    return EpisodeView(step_count=info["step_count"], episode_count=info["episode_count"],
                       total_reward=info["total_reward"], goal_reached=info["goal_reached"],
                       agent_xy=info["agent_xy"], distance_to_goal=info["distance_to_goal"])


def state_view(env: Any, state: Any, params: Any) -> EpisodeView:
    """The :class:`EpisodeView` of a (single-agent) state."""
    goal = env.goal_location(state.plume, params)
    return EpisodeView(
        step_count=state.step_count, episode_count=state.episode_count,
        total_reward=state.total_reward, goal_reached=state.goal_reached,
        agent_xy=state.agent.position,
        distance_to_goal=jnp.linalg.norm(state.agent.position - goal).astype(jnp.float32))


def pack_for_host(tree: Any) -> tuple[jax.Array, jax.Array]:
    """Inside ``jit``: every leaf of ``tree`` raveled, in leaf order, into one
    f32 buffer (floating leaves) and one i32 buffer (integer and bool leaves),
    so that the host fetches two buffers whatever the tree."""
    leaves = jax.tree.leaves(tree)
    floats = [jnp.ravel(x).astype(jnp.float32) for x in leaves
              if jnp.issubdtype(x.dtype, jnp.floating)]
    ints = [jnp.ravel(x).astype(jnp.int32) for x in leaves
            if not jnp.issubdtype(x.dtype, jnp.floating)]
    return (jnp.concatenate(floats) if floats else jnp.zeros(0, jnp.float32),
            jnp.concatenate(ints) if ints else jnp.zeros(0, jnp.int32))


class HostLayout(NamedTuple):
    """Where each leaf of a tree packed by :func:`pack_for_host` lies:
    ``slots[i] = (is_float, start, stop, shape, dtype)`` for leaf ``i``, and
    the two buffers' sizes."""

    treedef: Any
    slots: tuple
    num_floats: int
    num_ints: int

    @classmethod
    def of(cls, like: Any) -> "HostLayout":
        """The layout of a tree of ``jax.ShapeDtypeStruct`` (``jax.eval_shape``)."""
        leaves, treedef = jax.tree.flatten(like)
        slots, sizes = [], {True: 0, False: 0}
        for leaf in leaves:
            is_float = bool(jnp.issubdtype(leaf.dtype, jnp.floating))
            size = math.prod(leaf.shape)
            slots.append((is_float, sizes[is_float], sizes[is_float] + size, leaf.shape,
                          np.dtype(leaf.dtype)))
            sizes[is_float] += size
        return cls(treedef, tuple(slots), sizes[True], sizes[False])

    def unpack(self, floats: np.ndarray, ints: np.ndarray) -> Any:
        """The packed tree as writable NumPy arrays, each its own copy."""
        return jax.tree.unflatten(self.treedef, [
            (floats if is_float else ints)[start:stop].reshape(shape).astype(dtype)
            for is_float, start, stop, shape, dtype in self.slots])


class HostCall:
    """A jitted function of a ``PlumeEnv`` whose results the host reads.

    ``parts(env, *arrays, **statics)`` returns a ``NamedTuple``; the fields
    named in ``device_fields`` (keys, states) stay on the device, the others
    (observations, rewards, flags, counters) come back as NumPy arrays,
    fetched as two buffers (:func:`pack_for_host`): XLA's CPU client spends
    tens of microseconds per fetched buffer, which would otherwise dominate
    a one-env step. ``env`` and the keyword ``statics`` are static (an equal
    env shares the compilation); calling returns the same ``NamedTuple``
    type with device arrays and NumPy arrays in their fields.

    The layout of the host fields is traced once (``jax.eval_shape``) per
    env, statics and shape of the first array (a key, or a batch of keys),
    and traced again if the packed sizes ever disagree with it.
    """

    def __init__(self, parts: Any, device_fields: tuple[str, ...]) -> None:
        self.parts = parts
        self.device_fields = device_fields
        statics = tuple(name for name, p in inspect.signature(parts).parameters.items()
                        if p.kind is inspect.Parameter.KEYWORD_ONLY)

        @functools.wraps(parts)
        def split(env, *arrays, **kwargs):
            out = parts(env, *arrays, **kwargs)
            return ({name: getattr(out, name) for name in device_fields},
                    pack_for_host(self._host_part(out)))

        self.compiled = jax.jit(split, static_argnums=0, static_argnames=statics)
        self._layouts: dict[tuple, HostLayout] = {}

    def _host_part(self, out: Any) -> Any:
        return out._replace(**{name: None for name in self.device_fields})

    def layout(self, env: Any, *arrays: Any, **statics: Any) -> HostLayout:
        """The :class:`HostLayout` of the host fields for these arguments."""
        key = (env, np.shape(arrays[0]), tuple(sorted(statics.items())))
        if key not in self._layouts:
            self._layouts[key] = self._traced_layout(env, *arrays, **statics)
        return self._layouts[key]

    def _traced_layout(self, env: Any, *arrays: Any, **statics: Any) -> HostLayout:
        if len(self._layouts) >= 64:
            self._layouts.clear()
        return HostLayout.of(self._host_part(jax.eval_shape(
            functools.partial(self.parts, env, **statics), *arrays)))

    def __call__(self, env: Any, *arrays: Any, **statics: Any) -> Any:
        device, packed = self.compiled(env, *arrays, **statics)
        floats, ints = jax.device_get(packed)
        layout = self.layout(env, *arrays, **statics)
        if (floats.size, ints.size) != (layout.num_floats, layout.num_ints):
            layout = self._traced_layout(env, *arrays, **statics)
        return layout.unpack(floats, ints)._replace(**device)


def reset_parts(env: Any, key: jax.Array, params: Any, episode_count: jax.Array) -> ResetOutput:
    """Advance the key stream once and start an episode with ``reset_env``."""
    key, sub = jax.random.split(key)
    obs, state = env.reset_env(sub, params)
    state = state.replace(episode_count=jnp.asarray(episode_count, jnp.int32))
    return ResetOutput(key, obs, state, start_view(env, state, params))


def reset_at_parts(env: Any, key: jax.Array, params: Any, episode_count: jax.Array,
              position: jax.Array, heading: jax.Array, use_drawn_heading: jax.Array
              ) -> ResetOutput:
    """:func:`reset_parts` with the start position given (see ``compiled_reset_at``)."""
    key, sub = jax.random.split(key)
    _, drawn = env.reset_env(sub, params)
    heading = jnp.where(use_drawn_heading, drawn.agent.heading, heading).astype(jnp.float32)
    fixed = params.replace(start=FixedStartParams(position=position.astype(jnp.float32),
                                                  heading=heading))
    obs, state = fixed_start_env(env).reset_env(sub, fixed)
    state = state.replace(episode_count=jnp.asarray(episode_count, jnp.int32))
    return ResetOutput(key, obs, state, start_view(env, state, params))


def step_parts(env: Any, key: jax.Array, state: Any, action: Any, params: Any) -> StepOutput:
    """Advance the key stream once and take one ``step_env`` (no auto-reset)."""
    key, sub = jax.random.split(key)
    obs, new_state, reward, terminated, truncated, info = env.step_env(sub, state, action, params)
    return StepOutput(key=key, obs=obs, state=new_state, reward=reward, terminated=terminated,
                      truncated=truncated, done=env.episode_done(terminated, truncated, info),
                      action_valid=info["action_valid"], view=episode_view(info))


#: ``compiled_reset(env, key, params, episode_count) -> ResetOutput``: advance
#: the key stream once and start an episode with ``reset_env``.
compiled_reset = HostCall(reset_parts, ("key", "state"))

#: ``compiled_reset_at(env, key, params, episode_count, position, heading,
#: use_drawn_heading) -> ResetOutput``: like ``compiled_reset`` with the start
#: position given (``fixed_start_env``). The same subkey as an ordinary reset
#: is used, so the plume, the sensor and the rest of the key stream are those
#: of ``reset`` with the same seed; the heading is the one the env's own start
#: distribution would have drawn when ``use_drawn_heading`` is True.
compiled_reset_at = HostCall(reset_at_parts, ("key", "state"))

#: ``compiled_step(env, key, state, action, params) -> StepOutput``: advance
#: the key stream once and take one ``step_env`` (no auto-reset).
compiled_step = HostCall(step_parts, ("key", "state"))


@functools.partial(jax.jit, static_argnames=("env", "scale"))
def compiled_render(env: Any, scale: int, plume_state: Any, agent: Any, params: Any,
                    trail: jax.Array, trail_valid: jax.Array) -> jax.Array:
    """``render_frame`` of one state with a fixed-size trail buffer."""
    return render_frame(env, plume_state, agent, params, trail=trail, trail_valid=trail_valid,
                        scale=scale)


@functools.partial(jax.jit, static_argnames=("env", "scale"))
def compiled_render_batch(env: Any, scale: int, plume_state: Any, agent: Any, params: Any,
                          trail: jax.Array, trail_valid: jax.Array) -> jax.Array:
    """``render_frame`` vmapped over a batch of states and trails (all
    frames together at most :data:`~plume_jax.render.frames.MAX_FRAME_PIXELS`)."""
    check_frame_size(env.grid, scale, frames=trail.shape[0], name="render_scale")
    return jax.vmap(lambda p, a, t, v: render_frame(env, p, a, params, trail=t, trail_valid=v,
                                                    scale=scale))(plume_state, agent, trail,
                                                                  trail_valid)


def check_scale(scale: Any) -> int:
    """A render scale (pixels per cell): an integer in [1, 64]."""
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, np.integer)) \
            or not 1 <= int(scale) <= 64:
        raise ValidationError.for_parameter("render_scale", scale, "an integer in [1, 64]")
    return int(scale)


def check_render(env: Any, render_mode: str | None, scale: Any) -> int:
    """The render scale checked (:func:`check_scale`) and, when the env will
    render (``render_mode`` not None), the frame it gives checked against
    :data:`plume_jax.render.frames.MAX_FRAME_PIXELS` before anything is drawn."""
    scale = check_scale(scale)
    if render_mode is not None:
        check_frame_size(env.grid, scale, name="render_scale")
    return scale


def check_trail_length(length: Any) -> int:
    """A trail length (recent positions drawn): an integer in [0, 100000]."""
    if isinstance(length, (bool, np.bool_)) or not isinstance(length, (int, np.integer)) \
            or not 0 <= int(length) <= 100_000:
        raise ValidationError.for_parameter("trail_length", length, "an integer in [0, 100000]")
    return int(length)
