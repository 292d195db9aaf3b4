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

A family measured by a fixed-start protocol (``Family.fixed_starts``,
:mod:`plume_jax.scoreboard.fixed_starts`) runs each pair as the preset's
scenario file of that protocol: its env settings, its starts, and for the
scenario's own baseline its parameters; such a row also holds the
protocol's ``homings`` (out of the starts run, per start group, and the
paper's best for the preset).
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
         overrides: Mapping[str, Any] | None = None, built: dict | None = None,
         fixed_starts: str | None = None) -> tuple[Any | None, str | None]:
    """``(planned run, None)``, or ``(None, reason)`` when the contender does
    not apply to ``preset`` (with ``overrides``: a robustness variation;
    with ``fixed_starts``: ``episodes`` of that protocol's starts, on the
    env of the preset's scenario file, :func:`fixed_starts.scenario_for`).

    ``built`` caches built agents by (label, env) across calls, so one
    trained policy object (hashed by identity) serves every variation of an
    env with the same static structure and its rollout compiles once.
    """
    from plume_jax.evaluate import scenario as sc

    extra: dict[str, Any] = {}
    protocol_overrides: Mapping[str, Any] = {}
    if fixed_starts is not None:
        from plume_jax.scoreboard.fixed_starts import protocol_contender, scenario_for

        own = scenario_for(preset, fixed_starts)
        contender, why = protocol_contender(contender, own)
        if why is not None:
            return None, why
        protocol_overrides, extra = own["env"]["overrides"], {"protocol": fixed_starts}
    scenario = sc.validate_scenario({
        "name": preset, "env": {"preset": preset,
                                "overrides": {**contender.env_overrides, **protocol_overrides,
                                              **(overrides or {})}},
        "agent": contender.agent,
        "episodes": episodes, "seed": seed, **extra})
    env, params, used = sc.scenario_env(scenario)
    cache = {} if built is None else built
    try:
        key = (contender.label, env)
        if key not in cache:
            if fixed_starts is not None:
                from plume_jax.evaluate.singh_protocol import check_env

                check_env(env, params)
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
    """One JSON-ready row of the board (``trained_on`` for a zoo entry;
    ``homings`` for a run of a fixed-start protocol: ``{"homings",
    "episodes", "by_start", "paper_best"}``, the paper's best ``None`` where
    it has none)."""
    out = {"family": family, "preset": preset, "label": contender.label,
           "kind": contender.kind, "agent": contender.agent, "source": contender.source,
           "own_settings": sorted(contender.env_overrides)}
    if contender.trained_on is not None:
        out["trained_on"] = contender.trained_on
    if report is None:
        return {**out, "status": "not applicable", "reason": reason}
    metrics = report["metrics"]
    done = {**out, "status": "ok",
            "metrics": {k: metrics.get(k) for k in ROW_METRICS},
            "max_steps": report["max_steps"], "seconds": round(seconds, 2),
            "compile_seconds": round(report["timing"]["compile_seconds"], 2)}
    if "protocol" in metrics:
        p = metrics["protocol"]
        done["homings"] = {"protocol": p["protocol"], "homings": p["homings"],
                           "episodes": p["episodes"], "by_start": p["homings_by_start"],
                           "paper_best": p.get("paper_best")}
    return done


def run_family(family: Any, contenders: list[Contender], protocol: Protocol,
               progress: Callable[[str], None] | None = None
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every contender on every preset of ``family``
    (:class:`~plume_jax.scoreboard.families.Family`) under ``protocol`` (the
    family's own: :func:`plume_jax.scoreboard.fixed_starts.family_protocol`).

    Returns:
        ``(rows, reports)``: a row per (preset, contender), in preset then
        contender order; and the scenario reports of the pairs that ran
        (for the figure).
    """
    import jax

    from plume_jax.evaluate import scenario as sc

    rows, reports = [], []
    for preset in family.presets:
        built: dict = {}
        for contender in contenders:
            if progress is not None:  # every pair, so that a count of them can show progress
                progress(f"{preset} / {contender.label}")
            planned, reason = plan(preset, contender, protocol.episodes, protocol.seed,
                                   built=built, fixed_starts=protocol.fixed_starts)
            if planned is None:
                rows.append(row(preset, family.name, contender, None, reason))
                continue
            t0 = time.perf_counter()
            report = sc.execute_run(planned)
            rows.append(row(preset, family.name, contender, report, None,
                            time.perf_counter() - t0))
            reports.append(report)
        # nothing compiled for this preset is reused on the next (``built`` starts
        # afresh), and XLA's CPU backend keeps every compiled program mapped: a
        # run of every family would reach Linux's 65,530 memory maps (see
        # plume_jax.scoreboard.recipes.evaluate_seeds, where it did)
        jax.clear_caches()
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
