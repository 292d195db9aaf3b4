"""Singh et al. (2023)'s evaluation: 240 fixed starts (their ``evalCli.py``,
``evaluate_agent`` with ``--fixed_eval``), on a plume whose puffs grow at half
the training rate.

For each downwind distance x in (4, 6, 8) m and each of two start times 1 s
apart (their 60.00 and 61.00 s; 58.00 and 59.00 s for switch-once, whose
switch then comes 2.5 s and 1.5 s into the episode): take a random sample of
at most 300 puffs of the plume at that time, the least and greatest y of those
within ``x +- 0.5`` m of the source, and start at five cross-wind positions
times eight headings (0, pi/4, ..., 7 pi/4):

- constant wind (the constant and sparse plumes): ``y_min - 0.5``,
  ``y_min``, the middle, ``y_max``, ``y_max + 0.5`` (two starts outside the
  plume);
- switching winds: five evenly spaced from ``y_min`` to ``y_max``.

3 x 2 x 5 x 8 = 240 episodes, the first 120 on one plume realisation (the
first start time) and the next 120 on the same plume 25 steps (1 s) later;
success is reaching the source (their "HOME"). Runs through
``plume-jax evaluate`` with a scenario whose ``protocol`` is ``singh240``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.core.types import AgentState, EnvState

#: The protocol's name in a scenario file (``protocol: singh240``).
PROTOCOL = "singh240"
#: Downwind distances (m), start-time offsets (env steps: 0 and 1 s), headings.
DISTANCES = (4.0, 6.0, 8.0)
TIME_OFFSETS = (0, 25)
HEADINGS = tuple(i * math.pi / 4 for i in range(8))
#: Their puff sample (``get_abunchofpuffs(max_samples=300)``) and band half-width.
SAMPLE, BAND, OUTSIDE = 300, 0.5, 0.5
EPISODES = len(DISTANCES) * len(TIME_OFFSETS) * 5 * len(HEADINGS)

#: Their best homings out of 240 per regime (code/tabulate.ipynb's stored output,
#: each the best over their agents), by the Singh2023 preset's name.
PAPER_BEST = {"Constant": 176, "SwitchOnce": 160, "SwitchMany": 86, "Sparse40": 130}


def paper_best(preset: str) -> int | None:
    """Their best homings for a ``PlumeNav-Singh2023-<name>-v0`` preset (None
    for the regimes their table does not list)."""
    parts = preset.split("-")
    return PAPER_BEST.get(parts[2]) if len(parts) == 4 and parts[1] == "Singh2023" else None


def check_env(env: Any, params: Any) -> None:
    """The protocol needs a Singh plume and a single agent."""
    if getattr(env.plume, "type_name", None) != "singh" or env.is_multi_agent:
        raise ValidationError.for_parameter(
            "protocol", PROTOCOL, "a single-agent env with the singh plume (a "
            "PlumeNav-Singh2023-* preset)")


def cross_wind_starts(positions: np.ndarray, active: np.ndarray, source: np.ndarray,
                      x: float, constant_wind: bool, rng: np.random.Generator) -> np.ndarray:
    """f64[5], the five start y (grid coordinates) at ``x`` m downwind: from a
    random sample of at most 300 live puffs, the least and greatest y of those
    within ``x +- 0.5`` m of the source (their rule; see the module docstring)."""
    live = np.flatnonzero(active)
    pick = live if len(live) <= SAMPLE else rng.choice(live, SAMPLE, replace=False)
    rel = positions[pick] - source
    band = rel[np.abs(rel[:, 0] - x) <= BAND, 1]
    if band.size == 0:  # no puff there (their quantile of nothing is NaN): the axis
        band = np.zeros(1)
    lo, hi = float(band.min()), float(band.max())
    if constant_wind:
        ys = np.asarray([lo - OUTSIDE, lo, (lo + hi) / 2.0, hi, hi + OUTSIDE])
    else:
        ys = np.linspace(lo, hi, 5)
    return ys + float(source[1])


def plan_starts(env: Any, params: Any, key: jax.Array, seed: int
                ) -> tuple[Any, AgentState, np.ndarray]:
    """``(plume states [240], agents [240], groups i32[240])``: the two plume
    realisations (the second 1 s after the first), each repeated for its 120
    starts, and the starts in their order (x, then time, then heading, then
    y). ``groups`` numbers the six (x, time) groups."""
    plume, pp = env.plume, params.plume
    first = jax.jit(plume.init)(key, pp)
    advance = jax.jit(lambda k, s: jax.lax.fori_loop(
        0, TIME_OFFSETS[1], lambda i, s: plume.advance(jax.random.fold_in(k, i), s, pp), s))
    states = [first, advance(jax.random.fold_in(key, 1), first)]
    source = np.asarray(plume.source_location(first, pp), np.float64)
    constant_wind = plume.wind_kind == "constant"
    rng = np.random.default_rng(seed)
    index, xs, ys, headings, groups = [], [], [], [], []
    for gx, x in enumerate(DISTANCES):
        for t, state in enumerate(states):
            starts_y = cross_wind_starts(np.asarray(state.positions, np.float64),
                                         np.asarray(state.active), source, x, constant_wind, rng)
            for heading in HEADINGS:
                for y in starts_y:
                    index.append(t)
                    xs.append(source[0] + x)
                    ys.append(y)
                    headings.append(heading)
                    groups.append(gx * len(TIME_OFFSETS) + t)
    take = jnp.asarray(index)
    plumes = jax.tree.map(lambda a, b: jnp.stack([a, b])[take], *states)
    agents = AgentState(position=jnp.asarray(np.stack([xs, ys], 1), jnp.float32),
                        heading=jnp.asarray(headings, jnp.float32))
    return plumes, agents, np.asarray(groups, np.int32)


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_steps"))
def fixed_start_rollout(env: Any, params: Any, policy: Any, key: jax.Array, plumes: Any,
                        agents: AgentState, num_steps: int) -> Any:
    """The first episode of each env started from ``plumes[i]`` and
    ``agents[i]`` (batched), until every env's episode has ended or
    ``num_steps``: a :class:`plume_jax.evaluate.rollout.RolloutResult`."""
    from plume_jax.evaluate.rollout import _result, start_tracker, track

    n = agents.position.shape[0]
    k_sensor, k_policy, k_run = jax.random.split(key, 3)

    def start(k: jax.Array, plume_state: Any, agent: AgentState):
        probe = env.probe(plume_state, params)
        obs, sensor_state = env.sensor.init(k, agent, probe, params.sensor)
        state = EnvState(agent=agent, plume=plume_state, sensor=sensor_state,
                         step_count=jnp.asarray(0, jnp.int32),
                         episode_count=jnp.asarray(1, jnp.int32),
                         total_reward=jnp.asarray(0.0, jnp.float32),
                         goal_reached=jnp.asarray(False))
        return obs, state

    obs, state = jax.vmap(start)(jax.random.split(k_sensor, n), plumes, agents)
    carry = jax.vmap(policy.init)(jax.random.split(k_policy, n))
    t0 = start_tracker(env, params, state, num_steps)

    def running(loop):
        i, _, _, _, t = loop
        return (i < num_steps) & ~jnp.all(t["done"])

    def body(loop):
        i, obs, state, carry, t = loop
        k_act, k_step = jax.random.split(jax.random.fold_in(k_run, i))
        action, carry = jax.vmap(policy.act)(carry, obs, jax.random.split(k_act, n))
        obs, state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(jax.random.split(k_step, n), state, action, params)
        return i + 1, obs, state, carry, track(t, state, reward, terminated, truncated, info)

    steps, _, _, _, t = jax.lax.while_loop(running, body, (jnp.int32(0), obs, state, carry, t0))
    start_xy = agents.position[:1]
    no_path = jnp.zeros((0, 1, 2), jnp.float32)
    return _result(t, start_xy, no_path, jnp.zeros((0, 1), bool), steps)


def subset(episodes: int) -> np.ndarray:
    """i32[episodes], the starts a run of ``episodes`` of the 240 takes: all
    of them for 240, else ``episodes`` indices spread evenly over the 240
    (every distance and start time touched; a quick look for tests and
    trials, never the protocol's figure).

    Raises:
        ValidationError: (parameter ``episodes``) not an integer in [1, 240].
    """
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) \
            or not 1 <= episodes <= EPISODES:
        raise ValidationError.for_parameter(
            "episodes", episodes, f"an integer in [1, {EPISODES}] (protocol {PROTOCOL}: "
            f"{EPISODES} fixed starts, or an evenly spread subset of them)")
    return np.round(np.linspace(0, EPISODES - 1, int(episodes))).astype(np.int32)


def run(env: Any, params: Any, policy: Any, key: jax.Array, seed: int, num_steps: int,
        episodes: int = EPISODES) -> tuple[Any, dict[str, Any]]:
    """The 240 episodes (``episodes`` < 240: the evenly spread subset
    :func:`subset` names, for quick looks only): ``(RolloutResult,
    details)``; ``details`` holds the homings out of the episodes run, per
    (x, time) group, and the starts (with ``starts``, their indices among
    the 240, when a subset ran)."""
    check_env(env, params)
    take = subset(episodes)
    k_plume, k_run = jax.random.split(key)
    plumes, agents, groups = plan_starts(env, params, k_plume, seed)
    if len(take) < EPISODES:
        index = jnp.asarray(take)
        plumes, agents = jax.tree.map(lambda a: a[index], (plumes, agents))
        groups = groups[take]
    result = jax.block_until_ready(
        fixed_start_rollout(env, params, policy, k_run, plumes, agents, num_steps))
    success = np.asarray(result.success)
    per_group = {f"x{DISTANCES[g // 2]:g}_t{g % 2}": int(success[groups == g].sum())
                 for g in range(len(DISTANCES) * len(TIME_OFFSETS))}
    details = {"protocol": PROTOCOL, "homings": int(success.sum()), "episodes": len(take),
               "homings_by_start": per_group,
               "start_positions": np.asarray(agents.position).round(4).tolist()}
    if len(take) < EPISODES:
        details["starts"] = take.tolist()
    return result, details
