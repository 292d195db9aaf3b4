#!/usr/bin/env python
"""Search times and throughput of (space-aware) infotaxis on the Poisson benchmarks.

For each benchmark case (isotropic 19x19, isotropic 53x53, windy 81x41) and
each rule (``infotaxis``, ``space_aware_infotaxis``) this script

1. runs thousands of complete searches of ``agents.infotaxis.InfotaxisPolicy``
   against the env (``plume_jax.make(preset, **overrides)``): a batch of
   ``slots`` envs steps in one jitted ``lax.scan`` per chunk; each slot
   records its first ``per_slot`` episodes (full episodes, auto-reset in
   between), so every recorded search is an independent draw of the
   protocol. Search time = the env's ``step_count`` when it reports the
   source found (``terminated``); episodes cut at ``max_steps`` count as
   failures. Reports mean +- standard error, median, success rate, and
   searches per second (wall time of the jitted run, compile excluded);
2. runs a **reference**: a plain NumPy implementation, one search at a time,
   of otto's algorithm and evaluation protocol (Loisy & Eloy 2022; the
   ``otto-benchmark`` code of Loisy & Heinonen 2023): the hit law written
   out independently with ``scipy.special.k0``, float64, first-index
   tie-breaking, the source not drawn but integrated out (each episode
   accumulates ``sum_t P(not found before t)`` and runs until that
   probability is < 1e-6), otto's "stuck" detector. Its mean search time
   must agree with ours within the combined standard errors, and its
   steps/second is the pure-Python cost we compare against;
3. checks decisions one by one (``--decisions-only``): along the
   reference's searches, our policy (float32) scores the moves on the
   reference's belief; the reference's move must be among our best;
4. measures the throughput of the plain batched use (``--lockstep-only``):
   a ``vmap``-ped batch of searches stepped in lockstep with auto-reset;
5. saves everything to ``benchmarks/infotaxis.json``.

The presets are the cases of the literature (hit classes ``N_hits`` 3 and 4
for the isotropic cases as otto's automatic setting gives, otto-benchmark's
windy length scale, otto's ``STOP_t`` as ``max_steps``; see
``docs/infotaxis.md``); the script checks each preset against its
reference description before running and stops if they differ.
``--tie-breaks`` chooses how our policy breaks exact ties (``random``, the
default, and ``first``, otto's move-order convention).

Usage::

    python scripts/bench/infotaxis.py                 # searches + reference (~25 min, 2 cores)
    python scripts/bench/infotaxis.py --lockstep-only  # then: add the lockstep throughput
    python scripts/bench/infotaxis.py --decisions-only # then: add the decision check
    python scripts/bench/infotaxis.py --render benchmarks/infotaxis.json   # markdown tables
    python scripts/bench/infotaxis.py --quick         # a small smoke run
    python scripts/bench/infotaxis.py --cases iso19 --rules infotaxis --tie-breaks first

Timings on a shared machine are noisy; the JSON records the load average.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

def _early_devices() -> None:
    """``--devices N`` must reach XLA before jax is imported."""
    if "--devices" in sys.argv:
        n = sys.argv[sys.argv.index("--devices") + 1]
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={int(n)}").strip()


_early_devices()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import plume_jax  # noqa: E402
from agents.infotaxis import InfotaxisPolicy  # noqa: E402

if __package__:  # imported as scripts.bench.infotaxis
    from scripts.bench.harness import machine_info as machine_fields, write_json  # noqa: E402
else:  # run as `python scripts/bench/infotaxis.py` (this folder is sys.path[0])
    from harness import machine_info as machine_fields, write_json  # noqa: E402

#: The benchmark cases: the preset, and ``reference``, the literature's
#: description of the case for the NumPy reference (checked against the preset
#: by :func:`check_preset`).
CASES: dict[str, dict[str, Any]] = {
    "iso19": {
        "preset": "PlumeNav-Poisson-Iso19x19-v0",
        "literature_name": "isotropic-19x19",
        "reference": {"model": "isotropic", "lambda_over_dx": 1.0, "r_dt": 1.0, "size": (19, 19),
                      "start": (9, 9), "h_max": 3, "stop_t": 642},
        "slots": 256, "per_slot": 40, "reference_episodes": 6000, "check_episodes": 200,
    },
    "iso53": {
        "preset": "PlumeNav-Poisson-Iso53x53-v0",
        "literature_name": "isotropic-53x53",
        "reference": {"model": "isotropic", "lambda_over_dx": 3.0, "r_dt": 2.0, "size": (53, 53),
                      "start": (26, 26), "h_max": 4, "stop_t": 2188},
        "slots": 256, "per_slot": 32, "reference_episodes": 1000, "check_episodes": 40,
    },
    "windy": {
        "preset": "PlumeNav-Poisson-Windy81x41-v0",
        "literature_name": "windy-medium-detections",
        "reference": {"model": "windy", "r_bar": 2.5, "v_bar": 2.0, "tau_bar": 150.0,
                      "size": (81, 41), "start": (65, 20), "h_max": 2, "stop_t": 10000},
        "slots": 256, "per_slot": 16, "reference_episodes": 1000, "check_episodes": 40,
    },
}
RULES = ("infotaxis", "space_aware_infotaxis")


# ---------------------------------------------------------------------------
# Our vectorised searches
# ---------------------------------------------------------------------------

def _select(flag: jax.Array, new: Any, old: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(flag, a, b), new, old)


def _slot_searches(env, params, policy, key, per_slot):
    """``per_slot`` consecutive complete searches in one env (auto-reset in
    between), run to completion by a ``lax.while_loop``: ``(lengths
    i32[per_slot], found bool[per_slot], first_hit i32[per_slot])`` (the
    hit class of each search's first observation)."""
    k_reset, k_policy, k_run = jax.random.split(key, 3)
    obs, state = env.reset(k_reset, params)
    carry = policy.init(k_policy)

    def first_class(obs):
        return policy.observed_class(jnp.reshape(obs, (-1,)))

    def cond(c):
        return c[3] < per_slot

    def body(c):
        obs, state, carry, count, lengths, found, firsts, first, step = c
        k_act, k_step, k_init = jax.random.split(jax.random.fold_in(k_run, step), 3)
        action, carry = policy.act(carry, obs, k_act)
        obs, state, _, terminated, truncated, info = env.step(k_step, state, action, params)
        ended = terminated | truncated
        carry = _select(ended, policy.init(k_init), carry)
        col = jnp.minimum(count, per_slot - 1)
        lengths = lengths.at[col].set(jnp.where(ended, info["step_count"], lengths[col]))
        found = found.at[col].set(jnp.where(ended, terminated, found[col]))
        firsts = firsts.at[col].set(jnp.where(ended, first, firsts[col]))
        first = jnp.where(ended, first_class(obs), first)
        return (obs, state, carry, count + ended.astype(jnp.int32), lengths, found, firsts, first,
                step + 1)

    zeros = jnp.zeros(per_slot, jnp.int32)
    init = (obs, state, carry, jnp.asarray(0, jnp.int32), zeros, jnp.zeros(per_slot, bool), zeros,
            first_class(obs), jnp.asarray(0, jnp.int32))
    out = jax.lax.while_loop(cond, body, init)
    return out[4], out[5], out[6]


def _searches(env, params, policy, keys, per_slot):
    """Every slot's searches, one slot after the other (``lax.map``)."""
    return jax.lax.map(lambda k: _slot_searches(env, params, policy, k, per_slot), keys)


def run_searches(env: Any, params: Any, policy: Any, seed: int, slots: int, per_slot: int,
                 devices: int = 1) -> dict[str, Any]:
    """``slots * per_slot`` complete searches in one compiled program;
    lengths, success flags, timing (compile excluded).

    Each search runs to its end in a ``lax.while_loop`` and the slots run one
    after the other (``lax.map``): on CPU the posterior work is a
    per-search loop anyway (``InfotaxisPolicy.step``), and no time goes to
    searches that finished early, as it would in a lockstep batch. With
    ``devices > 1`` (CPU devices made with ``--devices``), the slots are
    split evenly over the devices, one thread each (``jax.pmap``).
    """
    keys = jax.random.split(jax.random.key(seed), slots)
    t0 = time.perf_counter()
    if devices == 1:
        program = jax.jit(lambda k: _searches(env, params, policy, k, per_slot))
        compiled = program.lower(keys).compile()
    else:
        if slots % devices:
            raise ValueError(f"slots={slots} is not a multiple of devices={devices}")
        keys = keys.reshape(devices, slots // devices)
        compiled = jax.pmap(lambda k: _searches(env, params, policy, k, per_slot)).lower(
            keys).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    lengths, found, first = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - t0
    return {"lengths": np.asarray(lengths).reshape(-1), "found": np.asarray(found).reshape(-1),
            "first_hit": np.asarray(first).reshape(-1),
            "compile_seconds": compile_s, "run_seconds": run_s, "slots": slots,
            "per_slot": per_slot, "devices": devices}


def run_lockstep(env: Any, params: Any, policy: Any, seed: int, envs: int = 256,
                 steps: int = 256) -> dict[str, Any]:
    """Throughput of the plain batched use: ``envs`` searches stepped in
    lockstep by ``vmap`` inside one jitted ``lax.scan`` of ``steps`` steps
    (as ``plume_jax.evaluate.rollout`` does), auto-reset on; every search
    that ends counts. Searches/s = searches ended / wall time (compile
    excluded): the steady-state rate of a long batched run."""

    def program(key):
        k_reset, k_policy, k_run = jax.random.split(key, 3)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, envs),
                                                            params)
        carry = jax.vmap(policy.init)(jax.random.split(k_policy, envs))

        def body(c, k):
            obs, state, carry, ended_total, found_total = c
            k_act, k_step, k_init = jax.random.split(k, 3)
            action, carry = jax.vmap(policy.act)(carry, obs, jax.random.split(k_act, envs))
            obs, state, _, terminated, truncated, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None))(jax.random.split(k_step, envs), state, action,
                                                   params)
            ended = terminated | truncated
            fresh = jax.vmap(policy.init)(jax.random.split(k_init, envs))
            carry = jax.tree.map(lambda a, b: jnp.where(
                ended.reshape(ended.shape + (1,) * (a.ndim - 1)), a, b), fresh, carry)
            return (obs, state, carry, ended_total + ended.sum(), found_total + terminated.sum()), None

        zero = jnp.asarray(0, jnp.int32)
        out, _ = jax.lax.scan(body, (obs, state, carry, zero, zero), jax.random.split(k_run, steps))
        return out[3], out[4]

    t0 = time.perf_counter()
    compiled = jax.jit(program).lower(jax.random.key(seed)).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ended, found = jax.block_until_ready(compiled(jax.random.key(seed + 1)))
    run_s = time.perf_counter() - t0
    return {"envs": envs, "steps": steps, "searches_ended": int(ended),
            "searches_found": int(found), "run_seconds": run_s, "compile_seconds": compile_s,
            "searches_per_second": int(ended) / run_s,
            "env_steps_per_second": envs * steps / run_s}


def summarise(lengths: np.ndarray, found: np.ndarray,
              first_hit: np.ndarray | None = None) -> dict[str, Any]:
    """Mean +- SE and median of the search time over successful searches,
    and the mean for each class of the first hit."""
    t = lengths[found].astype(float)
    n = int(found.size)
    k = int(found.sum())
    out = {
        "episodes": n,
        "found": k,
        "success_rate": k / n if n else None,
        "mean": float(t.mean()) if k else None,
        "sem": float(t.std(ddof=1) / math.sqrt(k)) if k > 1 else None,
        "std": float(t.std(ddof=1)) if k > 1 else None,
        "median": float(np.median(t)) if k else None,
        "p90": float(np.percentile(t, 90)) if k else None,
        "p99": float(np.percentile(t, 99)) if k else None,
        "max": int(t.max()) if k else None,
    }
    if first_hit is not None:
        out["by_first_hit"] = _by_first_hit(lengths[found].astype(float), first_hit[found])
    return out


def _by_first_hit(values: np.ndarray, first_hit: np.ndarray) -> dict[str, Any]:
    """``{class: {fraction, mean, sem, n}}`` of ``values`` split by first hit."""
    out = {}
    for h in sorted(set(int(v) for v in first_hit)):
        v = values[first_hit == h]
        out[str(h)] = {"n": int(v.size), "fraction": v.size / values.size,
                       "mean": float(v.mean()),
                       "sem": float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else None}
    return out


def mixture_mean(by_first_hit: dict[str, Any], weights: dict[str, float]) -> dict[str, float]:
    """The mean search time re-weighted to other first-hit fractions."""
    mean = sum(weights[h] * by_first_hit[h]["mean"] for h in weights)
    sem = math.sqrt(sum((weights[h] * (by_first_hit[h]["sem"] or 0.0)) ** 2 for h in weights))
    return {"mean": mean, "sem": sem}


# ---------------------------------------------------------------------------
# The one-search-at-a-time NumPy reference (otto's algorithm and protocol)
# ---------------------------------------------------------------------------

class Reference:
    """otto's source-tracking POMDP and its heuristic policies, in NumPy
    (float64), written independently for this comparison. Array axis 0 is
    ``x`` (as in otto), axis 1 is ``y``."""

    def __init__(self, spec: dict[str, Any]):
        from scipy import special

        self.spec = spec
        nx, ny = spec["size"]
        self.shape = (nx, ny)
        self.h_max = spec["h_max"]
        dx = np.arange(-(nx - 1), nx)[:, None] * np.ones(2 * ny - 1)[None, :]
        dy = np.ones(2 * nx - 1)[:, None] * np.arange(-(ny - 1), ny)[None, :]
        # agent - source = -(offset); the table is indexed by offset = source - agent
        d = np.hypot(dx, dy)
        d_safe = np.where(d == 0, 1.0, d)
        if spec["model"] == "isotropic":
            lam = spec["lambda_over_dx"]
            mu0 = spec["r_dt"] / math.log(2.0 * lam) * special.k0(1.0)
            self.mu0 = mu0
            mu = mu0 * special.k0(d_safe / lam) / special.k0(1.0)
        else:
            lam = math.sqrt((spec["tau_bar"] / spec["v_bar"] ** 2) / (1.0 + spec["tau_bar"] / 4.0))
            self.lambda_bar = lam
            downwind = -dx  # x_agent - x_source
            mu = spec["r_bar"] / d_safe * np.exp(0.5 * spec["v_bar"] * downwind - d_safe / lam)
        mu[d == 0] = 0.0
        self.mu = mu
        lik = np.empty((self.h_max,) + mu.shape)
        for h in range(self.h_max - 1):
            lik[h] = np.exp(-mu) * mu ** h / math.factorial(h)
        lik[-1] = np.clip(1.0 - lik[:-1].sum(axis=0), 0.0, 1.0)
        lik[:, d == 0] = 0.0
        self.lik = lik
        self.manhattan = np.abs(dx) + np.abs(dy)

    def window(self, table: np.ndarray, agent: tuple[int, int]) -> np.ndarray:
        nx, ny = self.shape
        x, y = agent
        return table[..., nx - 1 - x:2 * nx - 1 - x, ny - 1 - y:2 * ny - 1 - y]

    @staticmethod
    def entropy(p: np.ndarray, axes=None) -> np.ndarray:
        logs = np.zeros_like(p)
        pos = p > 1e-10
        logs[pos] = -np.log2(p[pos])
        return np.sum(p * logs, axis=axes)

    def initial_hit_law(self) -> np.ndarray:
        """f64[h_max]: otto's law of the first (non-zero) hit, over an
        unbounded domain (shells of radius r = 1 .. 1000 λ)."""
        if self.spec["model"] != "isotropic":
            return np.eye(self.h_max)[1]
        from scipy import special

        lam = self.spec["lambda_over_dx"]
        r = np.arange(1, int(1000 * lam)).astype(float)
        shell = math.pi * ((r + 0.5) ** 2 - (r - 0.5) ** 2)
        mu = self.mu0 * special.k0(r / lam) / special.k0(1.0)
        head = [np.exp(-mu) * mu ** h / math.factorial(h) for h in range(self.h_max - 1)]
        probs = head + [np.clip(1.0 - np.sum(head, axis=0), 0.0, 1.0)]
        w = np.array([0.0] + [np.sum(probs[h] * shell) for h in range(1, self.h_max)])
        return w / w.sum()

    def initial_hit(self, rng: np.random.Generator) -> int:
        """otto's draw of the first (non-zero) hit."""
        return int(rng.choice(self.h_max, p=self.initial_hit_law()))

    def moves(self, agent):
        nx, ny = self.shape
        out = []
        for axis in (0, 1):
            for step in (-1, 1):
                a = list(agent)
                a[axis] += step
                ok = 0 <= a[0] < nx and 0 <= a[1] < ny
                out.append((tuple(a), ok))
        return out

    def choose(self, p: np.ndarray, agent: tuple[int, int], rule: str) -> tuple[int, int]:
        values = np.full(4, np.inf)
        cells = []
        for i, (cell, ok) in enumerate(self.moves(agent)):
            cells.append(cell)
            if not ok:
                continue
            p_end = p[cell]
            if p_end > 1 - 1e-10:
                values[i] = -1e-10
                continue
            q = p.copy()
            q[cell] = 0.0
            q /= q.sum()
            post = q[None] * self.window(self.lik, cell)
            p_hit = post.sum(axis=(1, 2))
            for h in range(self.h_max):
                if p_hit[h] > 1e-10:
                    post[h] /= p_hit[h]
            ent = self.entropy(post, axes=(1, 2))
            if rule == "infotaxis":
                values[i] = (1 - p_end) * np.sum(p_hit * ent)
            else:
                dist = self.window(self.manhattan, cell)
                total = 0.0
                for h in range(self.h_max):
                    v = np.sum(post[h] * dist) + 2 ** (ent[h] - 1) - 0.5
                    total += (1 - p_end) * p_hit[h] * (math.log2(v) if v > 0 else v)
                values[i] = total
        best = np.flatnonzero(np.abs(values - values.min()) < 1e-10)[0]
        return cells[best]

    def episode(self, rng: np.random.Generator, rule: str, stop_p: float = 1e-6):
        """One search under otto's protocol: ``(T_mean, steps, failed, first hit)``."""
        start = tuple(self.spec["start"])
        p = np.ones(self.shape)
        p[start] = 0.0
        p /= p.sum()
        hit = first = self.initial_hit(rng)
        p *= self.window(self.lik, start)[hit]
        p /= p.sum()
        agent, back1, back2 = start, None, None
        repeats, t, t_mean, not_found = 0, 0, 0.0, 1.0
        while True:
            back2, back1 = back1, agent
            agent = self.choose(p, agent, rule)
            repeats = repeats + 1 if agent == back2 else 0
            t += 1
            t_mean += not_found
            p_end = p[agent]
            not_found *= 1.0 - p_end
            if not_found < stop_p or p_end > 1 - 1e-10:
                return t_mean, t, False, first
            if t >= self.spec["stop_t"] or repeats > 8:
                return t_mean, t, True, first
            p[agent] = 0.0
            p /= p.sum()
            lik = self.window(self.lik, agent)
            p_hit = np.clip((p[None] * lik).sum(axis=(1, 2)), 0.0, None)
            hit = int(rng.choice(self.h_max, p=p_hit / p_hit.sum()))
            p *= lik[hit]
            p /= p.sum()


def run_reference(spec: dict[str, Any], rule: str, episodes: int, seed: int,
                  max_seconds: float) -> dict[str, Any]:
    ref = Reference(spec)
    rng = np.random.default_rng(seed)
    means, firsts, steps, failed = [], [], 0, 0
    t0 = time.perf_counter()
    for _ in range(episodes):
        t_mean, t, fail, first = ref.episode(rng, rule)
        means.append(t_mean)
        firsts.append(first)
        steps += t
        failed += int(fail)
        if time.perf_counter() - t0 > max_seconds:
            break
    elapsed = time.perf_counter() - t0
    m = np.asarray(means)
    return {"episodes": len(m), "mean": float(m.mean()),
            "sem": float(m.std(ddof=1) / math.sqrt(len(m))) if len(m) > 1 else None,
            "by_first_hit": _by_first_hit(m, np.asarray(firsts)),
            "first_hit_law": {str(h): float(w) for h, w in enumerate(ref.initial_hit_law())
                              if w > 0},
            "failed_episodes": failed, "steps": steps, "seconds": elapsed,
            "steps_per_second": steps / elapsed, "searches_per_second": len(m) / elapsed,
            "protocol": "otto: source integrated out, T = sum_t P(not found before t), "
                        "episodes run until P(not found) < 1e-6; float64; first-index ties; "
                        "first hit from otto's unbounded-domain law"}


def decision_check(case: dict[str, Any], rule: str, episodes: int, seed: int) -> dict[str, Any]:
    """Run the reference's searches and, at every step, also ask our policy
    (float32, built from the preset's env) for its
    scores on the reference's belief: counts the steps where the
    reference's (otto's) move is among our best moves (scores within
    ``tie_tolerance`` of the minimum)."""
    env, _ = plume_jax.make(case["preset"])
    policy = InfotaxisPolicy.for_env(env, space_aware=(rule != "infotaxis"))
    scores = jax.jit(policy.scores)
    deltas = list(policy.move_deltas)
    counts = {"steps": 0, "agree": 0}

    class Checked(Reference):
        def choose(self, p, agent, rule):
            cell = super().choose(p, agent, rule)
            s, _ = scores(jnp.asarray(p.T, jnp.float32), jnp.asarray(agent, jnp.int32))
            s = np.asarray(s)
            best = set(np.flatnonzero(s <= s.min() + policy.tie_tolerance))
            counts["steps"] += 1
            counts["agree"] += int(deltas.index((cell[0] - agent[0], cell[1] - agent[1])) in best)
            return cell

    ref = Checked(case["reference"])
    rng = np.random.default_rng(seed + 1)
    for _ in range(episodes):
        ref.episode(rng, rule)
    return {"episodes": episodes, "decisions": counts["steps"], "agree": counts["agree"],
            "fraction": counts["agree"] / max(counts["steps"], 1)}


# ---------------------------------------------------------------------------

def machine_info() -> dict[str, Any]:
    return machine_fields("date", "platform", "cpu_count", "load_average",
                          ("device", "device_platform"), "python", "jax",
                          ("numpy", "version:numpy"))


TIE_BREAKS = ("random", "first")


def check_preset(case: dict[str, Any]) -> None:
    """Stop with a message naming the difference if ``case["preset"]`` is not
    the literature's case ``case["reference"]`` (grid, start, hit classes,
    horizon ``STOP_t``, and the law's parameters: ``lambda/dx`` and
    ``R dt``, or the windy ``R̄``, ``V̄`` and length ``λ̄`` from ``τ̄``)."""
    env, params = plume_jax.make(case["preset"])
    ref, s = case["reference"], env.settings
    found = {"size": tuple(s["grid_size"]), "start": tuple(s["start"]["position"]),
             "h_max": s["sensor"]["h_max"], "stop_t": s["max_steps"]}
    wanted = {k: tuple(ref[k]) if isinstance(ref[k], (list, tuple)) else ref[k] for k in found}
    if ref["model"] == "isotropic":
        found.update(lambda_over_dx=s["plume"]["lambda_over_dx"], r_dt=s["plume"]["r_dt"])
        wanted.update(lambda_over_dx=ref["lambda_over_dx"], r_dt=ref["r_dt"])
    else:
        found.update(r_bar=s["plume"]["r_bar"], v_bar=s["plume"]["wind_speed"],
                     lambda_bar=round(float(env.plume.windy_length(params.plume)), 5))
        lam = math.sqrt((ref["tau_bar"] / ref["v_bar"] ** 2) / (1.0 + ref["tau_bar"] / 4.0))
        wanted.update(r_bar=ref["r_bar"], v_bar=ref["v_bar"], lambda_bar=round(lam, 5))
    differ = {k: (found[k], wanted[k]) for k in wanted if found[k] != wanted[k]}
    if differ:
        raise SystemExit(f"{case['preset']} is not {case['literature_name']}: "
                         + ", ".join(f"{k} is {a!r}, the literature's is {b!r}"
                                     for k, (a, b) in differ.items()))


def render(report: dict[str, Any]) -> str:
    """Markdown tables of a saved report: search times, and throughput."""
    def fmt(x, spec=".2f"):
        return "—" if x is None else format(x, spec)

    refs = {(r["case"], r["rule"]): r for r in report.get("reference", [])}
    lines = ["| case | rule | ties | searches | found | mean ± SE | median | NumPy reference "
             "(otto protocol) mean ± SE (searches) | z | ours at otto's first-hit law | z |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for e in report["results"]:
        o = e["ours"]
        ref = refs.get((e["case"], e["rule"]))
        ref_text = f"{ref['mean']:.2f} ± {ref['sem']:.2f} ({ref['episodes']})" if ref else "—"
        versus = e.get("versus_reference", {})
        adj = versus.get("at_reference_first_hit_fractions")
        adj_text = f"{adj['mean']:.2f} ± {adj['sem']:.2f}" if adj else "—"
        lines.append(f"| {e['literature_name']} | {e['rule']} | "
                     f"{e['tie_break']} | {o['episodes']} | {o['success_rate']:.4f} | "
                     f"{fmt(o['mean'])} ± {fmt(o['sem'])} | {fmt(o['median'], '.0f')} | "
                     f"{ref_text} | {fmt(versus.get('z'), '+.1f')} | {adj_text} | "
                     f"{fmt(adj['z'] if adj else None, '+.1f')} |")
    locks = {(r["case"], r["rule"]): r for r in report.get("lockstep", [])}
    lines += ["", "| case | rule | mean search time | lockstep vmap: steps/s | lockstep vmap: "
              "searches/s | to-completion loop: searches/s | NumPy reference: steps/s | "
              "reference: searches/s at this mean | speed-up (steps/s) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for e in report["results"]:
        if e["tie_break"] != "random":
            continue
        t = e["throughput"]
        mean = e["ours"]["mean"]
        ref = refs.get((e["case"], e["rule"]))
        lock = locks.get((e["case"], e["rule"]))
        ref_steps = ref["steps_per_second"] if ref else None
        lock_steps = lock["env_steps_per_second"] if lock else None
        best = max(v for v in (lock_steps, t["search_steps_per_second"]) if v is not None)
        lines.append(
            f"| {e['literature_name']} | {e['rule']} | {mean:.1f} | {fmt(lock_steps, '.0f')} | "
            f"{fmt(lock_steps / mean if lock_steps else None, '.0f')} | "
            f"{t['searches_per_second']:.0f} | {fmt(ref_steps, '.0f')} | "
            f"{fmt(ref_steps / mean if ref_steps else None, '.0f')} | "
            f"{fmt(best / ref_steps if ref_steps else None, '.0f')}x |")
    checks = report.get("decision_check", [])
    if checks:
        lines += ["", "| case | rule | reference searches | decisions | ours among the best |",
                  "|---|---|---:|---:|---:|"]
        names = {k: v["literature_name"] for k, v in CASES.items()}
        for c in checks:
            lines.append(f"| {names[c['case']]} | {c['rule']} | {c['episodes']} | "
                         f"{c['decisions']} | {c['agree']} ({100 * c['fraction']:.2f} %) |")
    return "\n".join(lines)


def stamp_end_load(report: dict[str, Any], args: argparse.Namespace,
                   load: list[float] | None) -> None:
    """Record the load average at the end of this run in the machine record
    of the measurements it made: ``lockstep_machine`` for ``--lockstep-only``,
    none for ``--decisions-only`` (no timings), else ``machine``. An add-on
    run never overwrites the main run's record."""
    if args.lockstep_only:
        report["lockstep_machine"]["load_average_end"] = load
    elif not args.decisions_only:
        report["machine"]["load_average_end"] = load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rules", nargs="+", default=list(RULES), choices=list(RULES))
    parser.add_argument("--tie-breaks", nargs="+", default=list(TIE_BREAKS),
                        choices=list(TIE_BREAKS),
                        help="how our policy breaks exact ties: at random, or by move order "
                             "as otto does")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every case's searches per slot (>= 1 search per slot)")
    parser.add_argument("--reference-scale", type=float, default=1.0,
                        help="multiply the reference's episodes (0: skip the reference)")
    parser.add_argument("--reference-seconds", type=float, default=600.0,
                        help="wall-time cap of each reference run")
    parser.add_argument("--devices", type=int, default=1,
                        help="split the searches over this many CPU devices (one thread each)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--output", default=os.path.join("benchmarks", "infotaxis.json"))
    parser.add_argument("--decisions-only", action="store_true",
                        help="run only the decision check (our moves vs the reference's on the "
                             "reference's beliefs), added to --output's existing report")
    parser.add_argument("--lockstep-only", action="store_true",
                        help="measure only the lockstep (vmap) throughput, added to --output's "
                             "existing report")
    parser.add_argument("--render", metavar="JSON",
                        help="print the markdown tables of a saved report and exit")
    args = parser.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            print(render(json.load(f)))
        return 0
    if args.quick:
        args.scale, args.reference_scale = 0.05, 0.05

    report: dict[str, Any] = {"benchmark": "infotaxis", "machine": machine_info(),
                              "settings": vars(args), "results": [], "reference": []}
    if args.lockstep_only or args.decisions_only:
        with open(args.output) as f:
            report = json.load(f)
        if args.lockstep_only:
            report["lockstep"] = []
            report["lockstep_machine"] = machine_info()
        else:
            report["decision_check"] = []

    def save():
        write_json(report, args.output, indent=1, default=_plain)

    for case_name in args.cases:
        check_preset(CASES[case_name])
    for case_name in args.cases:
        case = CASES[case_name]
        for rule in args.rules:
            ref = None
            if args.decisions_only:
                n_check = max(1, int(round(case["check_episodes"] * args.reference_scale)))
                print(f"[{case_name} {rule}] decision check, {n_check} searches ...", flush=True)
                check = decision_check(case, rule, n_check, args.seed)
                report["decision_check"].append({"case": case_name, "rule": rule, **check})
                print("   decisions:", check, flush=True)
                save()
                continue
            if args.lockstep_only:
                env, params = plume_jax.make(case["preset"])
                policy = InfotaxisPolicy.for_env(env, space_aware=(rule != "infotaxis"))
                print(f"[{case_name} {rule}] lockstep throughput ...", flush=True)
                lock = run_lockstep(env, params, policy, args.seed)
                report["lockstep"].append({"case": case_name, "rule": rule, **lock})
                print("   lockstep:", lock, flush=True)
                save()
                continue
            if args.reference_scale > 0:
                n_ref = max(2, int(round(case["reference_episodes"] * args.reference_scale)))
                print(f"[{case_name} {rule}] NumPy reference, {n_ref} searches ...", flush=True)
                ref = run_reference(case["reference"], rule, n_ref, args.seed,
                                    args.reference_seconds)
                report["reference"].append({"case": case_name, "rule": rule,
                                            "spec": case["reference"], **ref})
                print("   reference:", {k: ref[k] for k in ("episodes", "mean", "sem",
                                                           "failed_episodes",
                                                           "steps_per_second")}, flush=True)
            for tie_break in args.tie_breaks:
                env, params = plume_jax.make(case["preset"])
                policy = InfotaxisPolicy.for_env(env, space_aware=(rule != "infotaxis"),
                                                 tie_break=tie_break)
                per_slot = max(1, int(round(case["per_slot"] * args.scale)))
                slots = case["slots"] if not args.quick else 32
                print(f"[{case_name} {rule} ties {tie_break}] {slots} x {per_slot} searches ...",
                      flush=True)
                run = run_searches(env, params, policy, args.seed, slots, per_slot,
                                   devices=args.devices)
                stats = summarise(run["lengths"], run["found"], run["first_hit"])
                entry = {
                    "case": case_name, "literature_name": case["literature_name"],
                    "preset": case["preset"], "tie_break": tie_break,
                    "rule": rule, "settings": env.settings,
                    "ours": stats,
                    "throughput": {
                        "searches_per_second": stats["episodes"] / run["run_seconds"],
                        "search_steps_per_second": float(run["lengths"].sum()) / run["run_seconds"],
                        "run_seconds": run["run_seconds"],
                        "compile_seconds": run["compile_seconds"],
                        "slots": slots, "per_slot": per_slot, "devices": args.devices,
                    },
                }
                print("   ours:", {k: stats[k] for k in ("episodes", "success_rate", "mean", "sem",
                                                        "median")},
                      f"{entry['throughput']['searches_per_second']:.1f} searches/s, "
                      f"{entry['throughput']['search_steps_per_second']:.0f} steps/s", flush=True)
                if ref is not None:
                    se = math.hypot(stats["sem"] or 0.0, ref["sem"] or 0.0)
                    entry["versus_reference"] = {
                        "ours_minus_reference": stats["mean"] - ref["mean"], "combined_se": se,
                        "z": (stats["mean"] - ref["mean"]) / se if se else None}
                    # the env draws the first hit from its law on the finite grid, otto from an
                    # unbounded domain: also compare at otto's first-hit fractions
                    weights = ref["first_hit_law"]
                    if set(weights) <= set(stats["by_first_hit"]):
                        adj = mixture_mean(stats["by_first_hit"], weights)
                        se = math.hypot(adj["sem"], ref["sem"] or 0.0)
                        entry["versus_reference"]["at_reference_first_hit_fractions"] = {
                            **adj, "z": (adj["mean"] - ref["mean"]) / se if se else None}
                report["results"].append(entry)
                save()
    stamp_end_load(report, args, list(os.getloadavg()) if hasattr(os, "getloadavg") else None)
    save()
    print("wrote", args.output)
    return 0


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (tuple, set)):
        return list(value)
    return str(value)


if __name__ == "__main__":
    raise SystemExit(main())
