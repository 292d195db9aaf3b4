"""Singh et al. (2023)'s evaluation: 240 fixed starts, run as their
evaluation code ran (``evalCli.py``, ``evaluate_agent`` with ``--fixed_eval``;
docs/singh2023.md lists every way it differs from the paper's text).

The starts: for each downwind distance x in (4, 6, 8) m and each of two start
times 1 s apart (their 60.00 and 61.00 s; 58.00 and 59.00 s for switch-once,
whose switch then comes 2.5 s and 1.5 s into the episode): take a random
sample of at most 300 puffs of the plume at that time, the least and greatest
y of those within ``x +- 0.5`` m of the source, and start at five cross-wind
positions times eight headings (0, pi/4, ..., 7 pi/4):

- constant wind (the constant and sparse plumes): ``y_min - 0.5``,
  ``y_min``, the middle, ``y_max``, ``y_max + 0.5`` (two starts outside the
  plume);
- switching winds: five evenly spaced from ``y_min`` to ``y_max``.

3 x 2 x 5 x 8 = 240 episodes; success is reaching the source (their "HOME").

Two protocols (a scenario's ``protocol``):

- ``singh240``, their code: ONE plume evolution, replayed for every episode
  (their evaluation reads one precomputed dataset). The plume advances with
  keys indexed by the env step counted from the first start time, so every
  episode of a start time sees the same births, cross-wind jumps and winds
  at every step, and the second start time's plume is the first's 25 steps
  (1 s) later. Only the agent's own randomness (its sensor, its policy's
  draws) is per episode. Its scenarios (``configs/scenarios/singh2023_*.yaml``)
  run their evaluation env: diffusion 1.0, on switch-many their one wind
  history (``plume.wind_record: singh2023_switch_many``, made by their
  generator with their seed), and no wall within the stray limit.
- ``singh240_paper``: the paper's reading, kept as a robustness variant:
  each episode draws its own plume future from the shared start state (its
  own births, jumps and, on switch-many, winds after the next switch). Its
  scenarios (``singh2023_paper_*.yaml``) halve the diffusion and draw the
  switch-many winds.

``normalisation: online`` (``singh240`` only; a trained policy that
normalises its observations) scores a policy as their agents were scored:
their evaluation wraps the env in a fresh ``VecNormalize`` in training mode
and never installs saved statistics, so the statistics are re-estimated from
the evaluation itself. The 240 episodes then run one after another, in the
protocol's order, the policy normalising with a running mean and variance
(SB3's ``RunningMeanStd``: count 1e-4, mean 0, variance 1 at the start)
updated with every observation it receives; ``saved`` (the default) uses the
policy's own statistics. Runs through ``plume-jax evaluate`` with a scenario
whose ``protocol`` is one of :data:`PROTOCOLS`.
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

#: The protocols' names in a scenario file: their evaluation code's, the paper's reading.
PROTOCOL, PAPER = "singh240", "singh240_paper"
PROTOCOLS = (PROTOCOL, PAPER)
#: ``normalisation``: the policy's saved statistics, or their evaluation's online ones.
NORMALISATIONS = ("saved", "online")
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


def check_env(env: Any, params: Any, protocol: str = PROTOCOL) -> None:
    """The protocol needs a Singh plume and a single agent."""
    if getattr(env.plume, "type_name", None) != "singh" or env.is_multi_agent:
        raise ValidationError.for_parameter(
            "protocol", protocol, "a single-agent env with the singh plume (a "
            "PlumeNav-Singh2023-* preset)")


def check_options(protocol: str, normalisation: str, policy: Any = None) -> None:
    """Refuse a protocol or normalisation the module does not have, and
    ``online`` normalisation where it cannot apply (the paper's variant,
    or a policy without saved observation statistics to replace)."""
    if protocol not in PROTOCOLS:
        raise ValidationError.for_parameter("protocol", protocol, f"one of {list(PROTOCOLS)}")
    if normalisation not in NORMALISATIONS:
        raise ValidationError.for_parameter("normalisation", normalisation,
                                            f"one of {list(NORMALISATIONS)}")
    if normalisation == "online" and protocol != PROTOCOL:
        raise ValidationError.for_parameter(
            "normalisation", normalisation, f"'saved' with protocol {protocol} (online "
            f"normalisation is their evaluation code's, protocol {PROTOCOL})")
    if normalisation == "online" and policy is not None and not _normalises(policy):
        raise ValidationError.for_parameter(
            "normalisation", normalisation, "'saved' for this agent (online normalisation "
            "re-estimates a trained policy's observation statistics; this agent has none)")


def _normalises(policy: Any) -> bool:
    spec = getattr(policy, "spec", None)
    return isinstance(spec, dict) and bool(spec.get("normalize_obs")) \
        and "obs_mean" in getattr(policy, "params", {})


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


def plan_starts(env: Any, params: Any, key: jax.Array, seed: int, protocol: str = PAPER
                ) -> tuple[Any, AgentState, np.ndarray]:
    """``(plume states [2], agents [240], groups i32[240])``: the plume at
    the two start times (the second 1 s after the first), and the starts in
    their order (x, then time, then heading, then y). ``groups`` numbers the
    six (x, time) groups (``groups % 2``: the start time). ``singh240``
    reaches the second start time with the keys of its one evolution
    (:func:`evolution_key`); ``singh240_paper`` as it always did."""
    plume, pp = env.plume, params.plume
    first = jax.jit(plume.init)(key, pp)
    if protocol == PROTOCOL:
        k_evo = evolution_key(key)
        second = jax.jit(lambda s: jax.lax.fori_loop(
            0, TIME_OFFSETS[1], lambda i, s: plume.advance(jax.random.fold_in(k_evo, i), s, pp),
            s))(first)
    else:
        advance = jax.jit(lambda k, s: jax.lax.fori_loop(
            0, TIME_OFFSETS[1], lambda i, s: plume.advance(jax.random.fold_in(k, i), s, pp), s))
        second = advance(jax.random.fold_in(key, 1), first)
    states = [first, second]
    source = np.asarray(plume.source_location(first, pp), np.float64)
    constant_wind = plume.wind_kind == "constant"
    rng = np.random.default_rng(seed)
    xs, ys, headings, groups = [], [], [], []
    for gx, x in enumerate(DISTANCES):
        for t, state in enumerate(states):
            starts_y = cross_wind_starts(np.asarray(state.positions, np.float64),
                                         np.asarray(state.active), source, x, constant_wind, rng)
            for heading in HEADINGS:
                for y in starts_y:
                    xs.append(source[0] + x)
                    ys.append(y)
                    headings.append(heading)
                    groups.append(gx * len(TIME_OFFSETS) + t)
    starts = jax.tree.map(lambda a, b: jnp.stack([a, b]), *states)
    agents = AgentState(position=jnp.asarray(np.stack([xs, ys], 1), jnp.float32),
                        heading=jnp.asarray(headings, jnp.float32))
    return starts, agents, np.asarray(groups, np.int32)


def evolution_key(key: jax.Array) -> jax.Array:
    """``singh240``'s plume key: env step ``i`` counted from the first start
    time advances the plume with ``fold_in(evolution_key(key), i)``, in
    every episode."""
    return jax.random.fold_in(key, 2)


class OnlineNormalised:
    """A trained policy whose observation statistics are re-estimated from
    what it observes (their evaluation's ``VecNormalize`` in training mode,
    SB3's ``RunningMeanStd``): the carry holds the policy's own and the
    running ``(mean, var, count)`` of its features, updated before each
    decision. Functional (``init``, ``act``), hashable by identity."""

    def __init__(self, policy: Any):
        self.policy = policy

    def init(self, key: jax.Array) -> Any:
        size = jnp.shape(self.policy.params["obs_mean"])
        return (self.policy.init(key), jnp.zeros(size, jnp.float32),
                jnp.ones(size, jnp.float32), jnp.asarray(1e-4, jnp.float32))

    def act(self, carry: Any, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, Any]:
        from agents.trained import policy_step, preprocess

        inner, mean, var, count = carry
        spec = self.policy.spec
        x, _ = preprocess({**spec, "normalize_obs": False}, self.policy.params, inner, obs)
        # RunningMeanStd.update with a batch of one (their one env)
        total = count + 1.0
        delta = x - mean
        mean = mean + delta / total
        var = (var * count + delta ** 2 * count / total) / total
        params = {**self.policy.params, "obs_mean": mean, "obs_var": var}
        action, inner = policy_step(spec, params, inner, obs, key, self.policy.greedy)
        return action, (inner, mean, var, total)


def restart(carry: Any, fresh: Any) -> Any:
    """An online-normalised carry for the next episode: the policy's memory
    fresh, the running statistics kept."""
    return (fresh[0],) + tuple(carry[1:])


def _first_state(env: Any, params: Any, key: jax.Array, plume_state: Any,
                 agent: AgentState) -> tuple[Any, EnvState]:
    """``(obs, state)`` of an episode starting with ``agent`` in
    ``plume_state`` (a fixed start: the sensor initialised with ``key``,
    counters at an episode's first step)."""
    probe = env.probe(plume_state, params)
    obs, sensor_state = env.sensor.init(key, agent, probe, params.sensor)
    return obs, EnvState(agent=agent, plume=plume_state, sensor=sensor_state,
                         step_count=jnp.asarray(0, jnp.int32),
                         episode_count=jnp.asarray(1, jnp.int32),
                         total_reward=jnp.asarray(0.0, jnp.float32),
                         goal_reached=jnp.asarray(False))


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_steps"))
def replayed_rollout(env: Any, params: Any, policy: Any, keys: jax.Array, starts: Any,
                     times: jax.Array, agents: AgentState, k_evo: jax.Array, num_steps: int,
                     carry: Any = None) -> tuple[dict[str, Any], Any]:
    """The episodes started from ``agents[i]`` at start time ``times[i]``
    (0 or 1: ``starts``' first or second plume), all on ONE plume evolution:
    the two start times' plumes advance together with
    ``fold_in(k_evo, step + offset)`` and each episode reads its start
    time's (same puffs and winds at every step); ``keys[i]`` drives the
    episode's own randomness. Runs until every episode has ended or
    ``num_steps``; returns ``(tracker, policy carry)`` (``carry``: the
    policies' carries to start from, default ``policy.init``)."""
    from plume_jax.evaluate.rollout import start_tracker, track

    plume, pp = env.plume, params.plume

    def start(k: jax.Array, plume_state: Any, agent: AgentState):
        return _first_state(env, params, jax.random.fold_in(k, 1), plume_state, agent)

    def pick(shared: Any) -> Any:
        return jax.tree.map(lambda a: a[times], shared)

    obs, state = jax.vmap(start)(keys, pick(starts), agents)
    fresh = jax.vmap(policy.init)(jax.vmap(lambda k: jax.random.fold_in(k, 2))(keys))
    carry = fresh if carry is None else carry
    t0 = start_tracker(env, params, state, num_steps)
    offsets = jnp.asarray(TIME_OFFSETS, jnp.int32)

    def running(loop):
        i, _, _, _, t, _ = loop
        return (i < num_steps) & ~jnp.all(t["done"])

    def body(loop):
        i, obs, state, carry, t, shared = loop
        step = jax.vmap(lambda k: jax.random.fold_in(jax.random.fold_in(k, 3), i))(keys)
        k_act = jax.vmap(lambda k: jax.random.fold_in(k, 0))(step)
        action, carry = jax.vmap(policy.act)(carry, obs, k_act)
        plume_keys = jax.vmap(lambda o: jax.random.fold_in(k_evo, i + o))(offsets)
        shared = jax.vmap(plume.advance, in_axes=(0, 0, None))(plume_keys, shared, pp)
        step_keys = jax.vmap(env.step_keys)(jax.vmap(lambda k: jax.random.fold_in(k, 1))(step))
        obs, state, reward, terminated, truncated, info = jax.vmap(
            env.agent_transition, in_axes=(0, 0, 0, 0, None))(
                step_keys, state, pick(shared), action, params)
        return i + 1, obs, state, carry, track(t, state, reward, terminated, truncated,
                                                info), shared

    steps, _, _, carry, t, _ = jax.lax.while_loop(
        running, body, (jnp.int32(0), obs, state, carry, t0, starts))
    t = {**t, "steps": steps}
    return t, carry


def _replay(env: Any, params: Any, policy: Any, key: jax.Array, starts: Any,
            agents: AgentState, groups: np.ndarray, take: np.ndarray, num_steps: int,
            normalisation: str) -> Any:
    """``singh240``: the episodes ``take`` (indices among the 240) on the
    one plume evolution; with ``online`` normalisation one after another
    (in the protocol's order, the running statistics carried over), else
    all at once. A :class:`plume_jax.evaluate.rollout.RolloutResult`."""
    from plume_jax.evaluate.rollout import _result

    k_evo, k_run = evolution_key(key), jax.random.fold_in(key, 3)
    index = jnp.asarray(take)
    keys = jax.vmap(lambda i: jax.random.fold_in(k_run, i))(index)
    times = jnp.asarray(groups[take] % len(TIME_OFFSETS), jnp.int32)
    agents = jax.tree.map(lambda a: a[index], agents)
    if normalisation == "saved":
        t, _ = replayed_rollout(env, params, policy, keys, starts, times, agents, k_evo,
                                num_steps)
        steps = t.pop("steps")
    else:
        online = OnlineNormalised(policy)
        one = jax.tree.map(lambda a: a[:1], (keys, times, agents))
        carry = jax.vmap(online.init)(one[0])
        ts = []
        for e in range(len(take)):  # one compiled episode, run in order
            one = jax.tree.map(lambda a: a[e:e + 1], (keys, times, agents))
            fresh = jax.vmap(online.init)(one[0])
            t, carry = replayed_rollout(env, params, online, one[0], starts, one[1], one[2],
                                        k_evo, num_steps, restart(carry, fresh))
            ts.append(t)
        steps = max(int(t.pop("steps")) for t in ts)
        t = {k: (ts[0][k] if k.startswith("final_") else
                 jax.tree.map(lambda *a: jnp.concatenate(a), *[x[k] for x in ts]))
             for k in ts[0]}
    no_path = jnp.zeros((0, 1, 2), jnp.float32)
    return _result(t, agents.position[:1], no_path, jnp.zeros((0, 1), bool), steps)


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
        return _first_state(env, params, k, plume_state, agent)

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
        episodes: int = EPISODES, protocol: str = PROTOCOL, normalisation: str = "saved"
        ) -> tuple[Any, dict[str, Any]]:
    """The 240 episodes of ``protocol`` (``episodes`` < 240: the evenly
    spread subset :func:`subset` names, for quick looks only): ``(RolloutResult,
    details)``; ``details`` holds the homings out of the episodes run, per
    (x, time) group, the protocol and normalisation, and the starts (with
    ``starts``, their indices among the 240, when a subset ran)."""
    check_options(protocol, normalisation, policy)
    check_env(env, params, protocol)
    take = subset(episodes)
    k_plume, k_run = jax.random.split(key)
    starts, agents, groups = plan_starts(env, params, k_plume, seed, protocol)
    if protocol == PROTOCOL:
        result = jax.block_until_ready(_replay(env, params, policy, k_plume, starts, agents,
                                               groups, take, num_steps, normalisation))
        agents = jax.tree.map(lambda a: a[jnp.asarray(take)], agents)
        groups = groups[take]
    else:
        index = jnp.asarray(take)
        plumes = jax.tree.map(lambda a: a[jnp.asarray(groups % 2)][index], starts)
        agents = jax.tree.map(lambda a: a[index], agents)
        groups = groups[take]
        result = jax.block_until_ready(
            fixed_start_rollout(env, params, policy, k_run, plumes, agents, num_steps))
    success = np.asarray(result.success)
    per_group = {f"x{DISTANCES[g // 2]:g}_t{g % 2}": int(success[groups == g].sum())
                 for g in range(len(DISTANCES) * len(TIME_OFFSETS))}
    details = {"protocol": protocol, "normalisation": normalisation,
               "homings": int(success.sum()), "episodes": len(take),
               "homings_by_start": per_group,
               "start_positions": np.asarray(agents.position).round(4).tolist()}
    if len(take) < EPISODES:
        details["starts"] = take.tolist()
    return result, details
