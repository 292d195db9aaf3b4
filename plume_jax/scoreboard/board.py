"""Run the board of one family: every contender on every preset of it.

Each (preset, agent) pair is one evaluation run
(:func:`plume_jax.evaluate.scenario.execute_run`: one jitted, vmapped
rollout of the protocol's episodes, stopping when all have ended), so the
metrics are the scenario runner's: success with its Wilson 95 % interval,
mean steps to the source ± SE, median and p90, path efficiency. A pair whose
agent cannot act on the preset's env (it lacks the observation or actions
the agent needs, or a trained policy was trained on other ones) is a row
``not applicable`` with the reason, found before anything runs. A zoo
entry that reads the preset through its own sensor (``env_overrides``, e.g.
a belief built from the preset's hits) runs with it; its row says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from plume_jax.core.errors import ValidationError
from plume_jax.scoreboard.contenders import Contender
from plume_jax.scoreboard.protocol import Protocol

#: The metrics a row keeps (the scenario runner's names).
ROW_METRICS = ("episodes", "successes", "success_rate", "success_ci95", "mean_steps",
               "sem_steps", "median_steps", "p90_steps", "path_efficiency")


def plan(preset: str, contender: Contender, episodes: int, seed: int,
         overrides: Mapping[str, Any] | None = None, built: dict | None = None
         ) -> tuple[Any | None, str | None]:
    """``(planned run, None)``, or ``(None, reason)`` when the contender does
    not apply to ``preset`` (with ``overrides``: a robustness variation).

    ``built`` caches built agents by (label, env) across calls, so one
    trained policy object (hashed by identity) serves every variation of an
    env with the same static structure and its rollout compiles once.
    """
    from plume_jax.evaluate import scenario as sc

    scenario = sc.validate_scenario({
        "name": preset, "env": {"preset": preset,
                                "overrides": {**contender.env_overrides, **(overrides or {})}},
        "agent": contender.agent,
        "episodes": episodes, "seed": seed})
    env, params, used = sc.scenario_env(scenario)
    cache = {} if built is None else built
    try:
        key = (contender.label, env)
        if key not in cache:
            policy = contender.build(env)
            if not contender.host:
                sc.check_policy_traces(env, params, policy, contender.label)
            cache[key] = policy
        policy = cache[key]
    except ValidationError as error:
        return None, reason_of(error)
    run = sc.PlannedRun(
        scenario=scenario, label=contender.label,
        agent_name="sb3" if contender.host else contender.agent,
        agent_params=dict(contender.params), expect={}, expect_skipped=None, env=env,
        params=params, policy=policy, episodes=episodes, seed=seed,
        num_steps=int(params.max_steps), overrides=used)
    return run, None


def reason_of(error: ValidationError) -> str:
    """Why an agent does not apply, in one line: what it needs."""
    text = error.allowed if getattr(error, "allowed", None) else str(error)
    return "needs " + " ".join(str(text).split())


def row(preset: str, family: str, contender: Contender, report: dict | None,
        reason: str | None, seconds: float = 0.0) -> dict[str, Any]:
    """One JSON-ready row of the board."""
    out = {"family": family, "preset": preset, "label": contender.label,
           "kind": contender.kind, "agent": contender.agent, "source": contender.source,
           "own_settings": sorted(contender.env_overrides)}
    if report is None:
        return {**out, "status": "not applicable", "reason": reason}
    metrics = report["metrics"]
    return {**out, "status": "ok",
            "metrics": {k: metrics.get(k) for k in ROW_METRICS},
            "max_steps": report["max_steps"], "seconds": round(seconds, 2),
            "compile_seconds": round(report["timing"]["compile_seconds"], 2)}


def run_family(family: Any, contenders: list[Contender], protocol: Protocol,
               progress: Callable[[str], None] | None = None
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every contender on every preset of ``family``
    (:class:`~plume_jax.scoreboard.families.Family`).

    Returns:
        ``(rows, reports)``: a row per (preset, contender), in preset then
        contender order; and the scenario reports of the pairs that ran
        (for the figure).
    """
    from plume_jax.evaluate import scenario as sc

    rows, reports = [], []
    for preset in family.presets:
        built: dict = {}
        for contender in contenders:
            if progress is not None:  # every pair, so that a count of them can show progress
                progress(f"{preset} / {contender.label}")
            planned, reason = plan(preset, contender, protocol.episodes, protocol.seed,
                                   built=built)
            if planned is None:
                rows.append(row(preset, family.name, contender, None, reason))
                continue
            t0 = time.perf_counter()
            report = sc.execute_run(planned)
            rows.append(row(preset, family.name, contender, report, None,
                            time.perf_counter() - t0))
            reports.append(report)
    return rows, reports


def beats(candidate: Mapping[str, Any], baseline: Mapping[str, Any]) -> bool:
    """Whether ``candidate``'s metrics beat ``baseline``'s: a success rate
    whose 95 % interval lies wholly above the baseline's rate, or one whose
    interval reaches the baseline's rate (equal or better success, within
    the noise) with fewer mean steps to the source."""
    low, high = candidate["success_ci95"]
    if low > baseline["success_rate"]:
        return True
    if high < baseline["success_rate"] or candidate["mean_steps"] is None:
        return False
    return baseline["mean_steps"] is None or candidate["mean_steps"] < baseline["mean_steps"]


def verdicts(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per preset: does a zoo agent beat every baseline that ran there
    (:func:`beats`)? ``{preset: {"best_zoo": label | None, "beats_all": bool,
    "not_beaten": [baseline labels]}}``; presets without a zoo agent that
    ran get ``best_zoo`` None."""
    out: dict[str, dict[str, Any]] = {}
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    for preset in presets:
        ran = [r for r in rows if r["preset"] == preset and r["status"] == "ok"]
        base = [r for r in ran if r["kind"] == "baseline"]
        zoo = [r for r in ran if r["kind"] == "zoo"]
        if not zoo:
            out[preset] = {"best_zoo": None, "beats_all": False, "not_beaten": []}
            continue

        def lost(z):
            return [b["label"] for b in base if not beats(z["metrics"], b["metrics"])]

        best = min(zoo, key=lambda z: (len(lost(z)), -z["metrics"]["success_rate"],
                                       z["metrics"]["mean_steps"] or float("inf")))
        out[preset] = {"best_zoo": best["label"], "beats_all": not lost(best),
                       "not_beaten": lost(best)}
    return out
