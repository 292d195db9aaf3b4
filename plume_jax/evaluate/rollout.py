"""Batch rollouts: ``num_envs`` seeded episodes of a policy over vmapped ``env.step``
(as ``env.step_batch``, which returns the same and resets only the envs that ended).

Two drivers share one piece of bookkeeping (:func:`track`):

- :func:`rollout` — a functional policy, the whole run one jitted
  ``lax.scan``;
- :func:`host_rollout` — a host-side agent with ``act_batch(obs[N]) ->
  actions[N]`` (e.g. an SB3 model), one jitted batched env step per call.

Success and episode lengths come from the env's own step outputs
(``terminated``, ``truncated``, ``info["step_count"]``), never from a
re-implementation of the goal test. Each env runs ``num_steps`` steps; the
*first* episode of each env is the one reported (later auto-reset episodes
still count towards throughput). With ``until_done=True`` the run stops as
soon as every env's first episode has ended (``steps_run`` says when): the
reported episodes are the same, and a long horizon (e.g. otto-benchmark's
10 000 steps) costs only as many steps as the longest episode. Policy memory
is re-initialised whenever an episode ends.

The paths of the first ``num_tracked`` envs' first episodes are recorded in
the same program (for trajectory plots), and an optional host ``progress``
function is called every ``progress_every`` steps through
``jax.debug.callback`` (it returns nothing to the program, so it cannot
change results; without it the program has no callback at all).
"""

from __future__ import annotations

import functools
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.envs.plume_env import batched_step
from plume_jax.core.pytree import Pytree
from plume_jax.core.types import AgentState


@chex.dataclass(frozen=True)
class RolloutResult(Pytree):
    """Per-env outcome of the first episode, and the paths of the first
    ``K = min(num_tracked, N)`` envs' first episodes.

    Attributes:
        success: bool[N], the first episode ended by reaching the goal.
        finished: bool[N], the first episode ended within ``num_steps``.
        episode_length: i32[N], steps of the first episode (``num_steps`` if
            it did not finish).
        episode_return: f32[N], return of the first episode (so far, if it
            did not finish).
        path_length: f32[N], distance travelled in the first episode, cells.
        start_distance: f32[N], distance from the start to the goal, cells.
        trajectories: f32[K, num_steps + 1, 2], env k's positions (cells,
            ``(x, y)``; the lead agent's in a multi-agent env) from the start
            of its first episode (column 0) onwards (entries after
            ``steps_run`` are zeros).
        trajectories_valid: bool[K, num_steps + 1], the entries that belong
            to env k's first episode.
        steps_run: i32[], batched env steps taken (``num_steps`` unless the
            run stopped early with ``until_done``).
        final_agent: env 0's agent at the end of its first episode.
        final_plume: env 0's plume state at the end of its first episode.
        steps: with ``capture=True``, a dict of per-step arrays ``[T, N, ...]``
            (time-major; ``T = num_steps``, entries after ``steps_run`` are
            zeros) describing every env's transitions — see
            :func:`capture_record`; ``None`` otherwise.
        goal: f32[N, 2], each env's goal at the start of its first episode
            (cells, ``(x, y)``).
        source: f32[N, 2], each env's plume source at the start of its first
            episode (cells, ``(x, y)``).
    """

    success: jax.Array
    finished: jax.Array
    episode_length: jax.Array
    episode_return: jax.Array
    path_length: jax.Array
    start_distance: jax.Array
    trajectories: jax.Array
    trajectories_valid: jax.Array
    steps_run: jax.Array
    final_agent: Any
    final_plume: Any
    steps: Any = None
    goal: Any = None
    source: Any = None


#: Largest flattened per-env observation a capture records (larger ones,
#: e.g. images, are left out of the record).
MAX_CAPTURED_OBS = 64


def capture_record(env: Any, params: Any, t: dict[str, Any], obs: Any, state: Any,
                   action: jax.Array, reward: jax.Array, terminated: jax.Array,
                   truncated: jax.Array, info: dict[str, Any]) -> dict[str, jax.Array]:
    """One batched transition as arrays ``[N, ...]`` — ``[N, A, ...]``, one
    entry per agent, for a multi-agent env: the agent's pose ``x``, ``y``,
    ``heading`` and the ``concentration`` there *before* the step, the
    ``observation`` it acted on (flattened, when an array of at most
    :data:`MAX_CAPTURED_OBS` numbers per agent), its ``action``, then the
    step's ``reward``, ``terminated`` (a multi-agent env's: the agent has
    reached the goal, at this step or before), ``truncated`` and the pose
    after it (``next_x``, ``next_y``); ``valid`` (``bool[N]``) marks the envs
    still in their first episode (the rows a capture keeps).
    """
    position = state.agent.position  # f32[N, 2] or f32[N, A, 2]
    concentration = jax.vmap(lambda p, xy: env.plume.concentration(
        p, xy, env.grid, params.plume))(state.plume, position)
    record = {
        "valid": ~t["done"],
        "x": position[..., 0], "y": position[..., 1], "heading": state.agent.heading,
        "concentration": concentration.astype(jnp.float32),
        "action": action,
        "reward": reward.astype(jnp.float32),
        "terminated": terminated, "truncated": truncated,
        "next_x": info["agent_xy"][..., 0], "next_y": info["agent_xy"][..., 1],
    }
    if isinstance(obs, jax.Array) and obs.ndim >= 1:
        lead = position.shape[:-1]  # (N,) or (N, A)
        flat = obs.reshape(lead + (-1,))
        if flat.shape[-1] <= MAX_CAPTURED_OBS:
            record["observation"] = flat.astype(jnp.float32)
    return record


def _select(mask: jax.Array, new: Any, old: Any) -> Any:
    """Select per leading index (``mask`` bool[N] or bool[]) over pytrees."""
    return jax.tree.map(
        lambda a, b: jnp.where(jnp.reshape(mask, mask.shape + (1,) * (a.ndim - mask.ndim)), a, b),
        new, old)


def _env0(tree: Any) -> Any:
    return jax.tree.map(lambda x: x[0], tree)


def _lead(position: jax.Array) -> jax.Array:
    """f32[N, 2]: each env's (first) agent — multi-agent envs carry f32[N, A, 2]."""
    return position if position.ndim == 2 else position[:, 0]


def _per_env(x: jax.Array, reduce: Any) -> jax.Array:
    """Reduce a per-agent f32/bool[N, A] to per-env [N] (no-op for [N])."""
    return x if x.ndim == 1 else reduce(x, axis=1)


def start_tracker(env: Any, params: Any, state: Any, num_steps: int) -> dict[str, Any]:
    """Bookkeeping for a fresh batch of episodes ``state`` (batched).

    For a multi-agent env the episode's outcome is the team's: it succeeds
    when an agent arrives (its length is then the time to first arrival
    for ``done_mode="any"``), its return is summed over agents, and paths
    and the trajectory follow agent 0.
    """
    num_envs = state.step_count.shape[0]
    goal = jax.vmap(env.goal_location, in_axes=(0, None), axis_size=num_envs)(state.plume, params)
    source = jax.vmap(env.plume.source_location, in_axes=(0, None),
                      axis_size=num_envs)(state.plume, params.plume)
    zeros = jnp.zeros(num_envs, bool)
    return {
        "done": zeros, "success": zeros,
        "length": jnp.full(num_envs, num_steps, jnp.int32),
        "ret": jnp.zeros(num_envs, jnp.float32),
        "path": jnp.zeros(num_envs, jnp.float32),
        "start_distance": jnp.linalg.norm(_lead(state.agent.position) - goal, axis=-1),
        "position": _lead(state.agent.position),
        "goal": goal.astype(jnp.float32), "source": jnp.asarray(source, jnp.float32),
        "final_agent": _env0(state.agent),
        "final_plume": _env0(state.plume),
    }


def track(t: dict[str, Any], state: Any, reward: jax.Array, terminated: jax.Array,
          truncated: jax.Array, info: dict[str, Any]) -> dict[str, Any]:
    """Update the bookkeeping after one batched ``env.step`` (``state`` is the
    post-step, possibly auto-reset, state)."""
    ended = info["done"] if "done" in info else terminated | truncated
    terminated = ended & ~_per_env(truncated, jnp.any)  # ended before the time limit
    if "goal_reached" in info:  # at the goal (a plume's stray limit also terminates)
        terminated = terminated & _per_env(info["goal_reached"], jnp.any)
    reward = _per_env(reward, jnp.sum)
    first_end = ended & ~t["done"]
    running = ~t["done"]
    position = _lead(info["agent_xy"])
    moved = jnp.linalg.norm(position - t["position"], axis=-1)
    env0_agent = AgentState(position=info["agent_xy"][0], heading=info["agent_heading"][0])
    return {
        "done": t["done"] | ended,
        "success": t["success"] | (first_end & terminated),
        "length": jnp.where(first_end, info["step_count"], t["length"]),
        "ret": jnp.where(running, t["ret"] + reward, t["ret"]),
        "path": jnp.where(running, t["path"] + moved, t["path"]),
        "start_distance": t["start_distance"],
        "position": _lead(state.agent.position),
        "goal": t["goal"], "source": t["source"],
        "final_agent": _select(running[0], env0_agent, t["final_agent"]),
        "final_plume": _select(running[0], _env0(state.plume), t["final_plume"]),
    }


def _result(t: dict[str, Any], start: jax.Array, path: jax.Array, valid: jax.Array,
            steps_run: Any, steps: Any = None) -> RolloutResult:
    """``start`` f32[K, 2], ``path`` f32[T, K, 2] and ``valid`` bool[T, K]
    (time-major, as ``lax.scan`` stacks them) -> episode-major fields."""
    return RolloutResult(
        steps_run=jnp.asarray(steps_run, jnp.int32),
        success=t["success"], finished=t["done"], episode_length=t["length"],
        episode_return=t["ret"], path_length=t["path"], start_distance=t["start_distance"],
        trajectories=jnp.swapaxes(jnp.concatenate([start[None], path], axis=0), 0, 1),
        trajectories_valid=jnp.swapaxes(
            jnp.concatenate([jnp.ones((1,) + valid.shape[1:], bool), valid], axis=0), 0, 1),
        final_agent=t["final_agent"], final_plume=t["final_plume"], steps=steps,
        goal=t["goal"], source=t["source"],
    )


def _tracked(t: dict[str, Any], xy: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """The first ``k`` envs' positions f32[k, 2] and whether each was still in
    its first episode before this step, bool[k]."""
    return _lead(xy)[:k], ~t["done"][:k]


def env_keys(key: jax.Array, num_envs: int, total_envs: int | None = None,
             env_offset: Any = 0) -> jax.Array:
    """The keys of envs ``env_offset .. env_offset + num_envs`` of a batch of
    ``total_envs`` (default ``num_envs``): ``jax.random.split(key,
    total_envs)``'s, so a run split into batches of envs draws what the
    whole batch would."""
    if total_envs is None or total_envs == num_envs:
        return jax.random.split(key, num_envs)
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    if (typed and str(jax.random.key_impl(key)) == "threefry2x32" and total_envs < 2**32
            and getattr(jax.config, "jax_threefry_partitionable", False)):
        # split(key, n)[i] is threefry2x32(key, (0, i)) here: only the window's
        # keys are computed (the whole split per step would cost a batch of
        # `num_envs` as much as one of `total_envs`)
        from jax.extend.random import threefry2x32_p

        data = jax.random.key_data(key)
        index = jnp.asarray(env_offset, jnp.uint32) + jnp.arange(num_envs, dtype=jnp.uint32)
        high, low = threefry2x32_p.bind(data[0], data[1], jnp.zeros_like(index), index)
        return jax.random.wrap_key_data(jnp.stack([high, low], axis=1),
                                        impl=jax.random.key_impl(key))
    return jax.lax.dynamic_slice_in_dim(jax.random.split(key, total_envs), env_offset, num_envs)


def _reset_batch(env: Any, params: Any, key: jax.Array, num_envs: int,
                 total_envs: int | None = None, env_offset: Any = 0):
    return jax.vmap(env.reset, in_axes=(0, None))(
        env_keys(key, num_envs, total_envs, env_offset), params)


def _step_batch(env: Any, params: Any, key: jax.Array, state: Any, action: jax.Array,
                total_envs: int | None = None, env_offset: Any = 0):
    keys = env_keys(key, state.step_count.shape[0], total_envs, env_offset)
    return batched_step(env, keys, state, action, params)


#: Envs whose first-episode paths a rollout records by default.
NUM_TRACKED = 4


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_envs", "num_steps",
                                             "until_done", "num_tracked", "progress",
                                             "progress_every", "capture", "total_envs"))
def rollout(env: Any, params: Any, policy: Any, key: jax.Array, num_envs: int,
            num_steps: int, until_done: bool = False, num_tracked: int = NUM_TRACKED,
            progress: Any = None, progress_every: int = 0,
            capture: bool = False, total_envs: int | None = None,
            env_offset: Any = 0) -> RolloutResult:
    """Run ``num_envs`` envs for ``num_steps`` steps under a functional policy.

    Args:
        env: a ``PlumeEnv`` (static).
        params: ``EnvParams`` shared by all envs.
        policy: a hashable functional policy (``init(key)``,
            ``act(carry, obs, key) -> (action, carry)``).
        key: PRNG key; the same key gives bit-identical results.
        num_envs, num_steps: static sizes.
        until_done: static; stop once every env's first episode has ended
            (a ``lax.while_loop``; the same steps, keys and first episodes
            as the full ``lax.scan``).
        num_tracked: static; record the paths of the first
            ``min(num_tracked, num_envs)`` envs (``trajectories``).
        progress: static, optional hashable host function
            ``progress(steps_done: int, episodes_finished: int)``, called
            every ``progress_every`` steps (default ``num_steps // 20``) and
            after the last step. Each call is a host round trip (a few ms on
            a busy CPU), so the default keeps them to about 20 per run.
        capture: static; also keep every env's transitions, arrays
            ``[num_steps, num_envs, ...]`` (:func:`capture_record`) in
            ``RolloutResult.steps`` — memory grows with
            ``num_steps * num_envs`` (callers bound it:
            :func:`plume_jax.evaluate.capture.plan_batches` runs a captured
            evaluation in batches of envs).
        total_envs, env_offset: run envs ``env_offset .. env_offset +
            num_envs`` of a batch of ``total_envs`` (static; default
            ``num_envs``): each env draws the keys, and so gives the results,
            it has in the whole batch (``env_offset`` is dynamic: one compile
            serves every batch of a size).
    """
    k_reset, k_policy, k_run = jax.random.split(key, 3)
    tracked = max(1, min(num_tracked, num_envs))
    every = progress_every or max(1, num_steps // 20)

    def split(k: jax.Array) -> jax.Array:
        return env_keys(k, num_envs, total_envs, env_offset)

    obs, state = _reset_batch(env, params, k_reset, num_envs, total_envs, env_offset)
    carry = jax.vmap(policy.init)(split(k_policy))

    def body(c, step_key):
        obs, state, carry, t = c
        k_act, k_step, k_init = jax.random.split(step_key, 3)
        action, carry = jax.vmap(policy.act)(carry, obs, split(k_act))
        new_obs, new_state, reward, terminated, truncated, info = _step_batch(
            env, params, k_step, state, action, total_envs, env_offset)
        fresh = jax.vmap(policy.init)(split(k_init))
        ended = info["done"] if "done" in info else terminated | truncated
        carry = _select(ended, fresh, carry)
        new_t = track(t, new_state, reward, terminated, truncated, info)
        record = (capture_record(env, params, t, obs, state, action, reward, terminated,
                                 truncated, info) if capture else None)
        return (new_obs, new_state, carry, new_t), (*_tracked(t, info["agent_xy"], tracked),
                                                    record)

    def report(i, t):
        """Host progress after step ``i`` (1-based) — only when asked for."""
        if progress is not None:
            last = (i == num_steps) | jnp.all(t["done"]) if until_done else i == num_steps
            jax.lax.cond((i % every == 0) | last,
                         lambda: jax.debug.callback(progress, i, jnp.sum(t["done"])),
                         lambda: None)

    init = (obs, state, carry, start_tracker(env, params, state, num_steps))
    step_keys = jax.random.split(k_run, num_steps)
    start = _lead(state.agent.position)[:tracked]
    if not until_done:
        def scan_body(c, xs):
            i, step_key = xs
            c, out = body(c, step_key)
            report(i + 1, c[3])
            return c, out

        (_, _, _, t), (path, valid, steps) = jax.lax.scan(
            scan_body, init, (jnp.arange(num_steps, dtype=jnp.int32), step_keys))
        return _result(t, start, path, valid, num_steps, steps)

    def running(loop):
        i, c = loop[0], loop[1]
        return (i < num_steps) & ~jnp.all(c[3]["done"])

    def advance(loop):
        i, c, path, valid, steps = loop
        c, (xy, v, record) = body(c, step_keys[i])
        report(i + 1, c[3])
        steps = jax.tree.map(lambda buf, r: buf.at[i].set(r), steps, record)
        return i + 1, c, path.at[i].set(xy), valid.at[i].set(v), steps

    record_shape = jax.eval_shape(body, init, step_keys[0])[1][2] if capture else None
    empty = (jnp.zeros((num_steps, tracked, 2), jnp.float32),
             jnp.zeros((num_steps, tracked), bool),
             jax.tree.map(lambda a: jnp.zeros((num_steps,) + a.shape, a.dtype), record_shape))
    n, (_, _, _, t), path, valid, steps = jax.lax.while_loop(
        running, advance, (jnp.int32(0), init, *empty))
    return _result(t, start, path, valid, n, steps)


@functools.partial(jax.jit, static_argnames=("env", "tracked", "capture", "total_envs"))
def _host_step(env: Any, params: Any, key: jax.Array, obs: Any, state: Any, t: dict,
               action: jax.Array, tracked: int, capture: bool = False,
               total_envs: int | None = None, env_offset: Any = 0):
    new_obs, new_state, reward, terminated, truncated, info = _step_batch(
        env, params, key, state, action, total_envs, env_offset)
    ended = info["done"] if "done" in info else terminated | truncated
    xy, valid = _tracked(t, info["agent_xy"], tracked)
    record = (capture_record(env, params, t, obs, state, action, reward, terminated, truncated,
                             info) if capture else None)
    return (new_obs, new_state, ended, track(t, new_state, reward, terminated, truncated, info),
            xy, valid, record)


def host_rollout(env: Any, params: Any, agent: Any, key: jax.Array, num_envs: int,
                 num_steps: int, until_done: bool = False, num_tracked: int = NUM_TRACKED,
                 progress: Any = None, progress_every: int = 0,
                 capture: bool = False, total_envs: int | None = None,
                 env_offset: int = 0) -> RolloutResult:
    """Like :func:`rollout` for a host-side agent with
    ``act_batch(obs[N], episode_start=bool[N]) -> actions[N]`` and ``reset()``.
    With ``until_done`` the loop ends once every env's first episode has
    ended; the trajectories then have ``steps_run + 1`` entries."""
    k_reset, k_run = jax.random.split(key)
    obs, state = jax.jit(_reset_batch, static_argnums=(0, 3, 4))(
        env, params, k_reset, num_envs, total_envs, jnp.int32(env_offset))
    t = start_tracker(env, params, state, num_steps)
    tracked = max(1, min(num_tracked, num_envs))
    every = progress_every or max(1, num_steps // 20)
    start = _lead(state.agent.position)[:tracked]
    agent.reset()
    episode_start = np.ones(num_envs, bool)
    path, valid, records = [], [], []
    for i, step_key in enumerate(jax.random.split(k_run, num_steps)):
        if until_done and bool(jnp.all(t["done"])):
            break
        action = agent.act_batch(np.asarray(obs), episode_start=episode_start)
        obs, state, ended, t, xy, v, record = _host_step(
            env, params, step_key, obs, state, t, jnp.asarray(action), tracked, capture,
            total_envs, jnp.int32(env_offset))
        episode_start = np.asarray(ended)
        records.append(record)
        path.append(xy)
        valid.append(v)
        if progress is not None and ((i + 1) % every == 0 or i + 1 == num_steps
                                     or (until_done and bool(jnp.all(t["done"])))):
            progress(i + 1, int(jnp.sum(t["done"])))
    steps = jax.tree.map(lambda *r: jnp.stack(r), *records) if capture else None
    return _result(t, start, jnp.stack(path), jnp.stack(valid), len(path), steps)


def join_results(parts: list[tuple[RolloutResult, int]],
                 num_tracked: int = NUM_TRACKED) -> RolloutResult:
    """One result from the results of consecutive batches of a run's envs
    (``(result, skip)``: a batch whose first ``skip`` envs the batch before
    already ran): per-env fields joined, the paths of the run's first
    ``num_tracked`` envs (padded to the longest batch's, the padding
    invalid), env 0's final state, the longest ``steps_run``; no ``steps``."""
    def joined(name: str) -> jax.Array:
        return jnp.concatenate([jnp.asarray(getattr(r, name))[skip:] for r, skip in parts])

    first = parts[0][0]
    fields = {name: joined(name) for name in ("success", "finished", "episode_length",
                                              "episode_return", "path_length",
                                              "start_distance", "goal", "source")}
    tracked = max(1, min(num_tracked, fields["success"].shape[0]))
    # batches that stopped at different steps (``until_done``) have paths of
    # different lengths: each is padded to the longest, its last position
    # repeated and marked invalid
    length = max(int(jnp.shape(r.trajectories)[1]) for r, _ in parts)

    def padded(r: RolloutResult, skip: int) -> tuple[jax.Array, jax.Array]:
        path = jnp.asarray(r.trajectories)[skip:]
        valid = jnp.asarray(r.trajectories_valid)[skip:]
        extra = length - path.shape[1]
        return (jnp.pad(path, ((0, 0), (0, extra), (0, 0)), mode="edge"),
                jnp.pad(valid, ((0, 0), (0, extra)), constant_values=False))

    paths = [padded(r, skip) for r, skip in parts]
    return RolloutResult(
        **fields,
        trajectories=jnp.concatenate([p for p, _ in paths])[:tracked],
        trajectories_valid=jnp.concatenate([v for _, v in paths])[:tracked],
        steps_run=jnp.int32(max(int(r.steps_run) for r, _ in parts)),
        final_agent=first.final_agent, final_plume=first.final_plume, steps=None)
