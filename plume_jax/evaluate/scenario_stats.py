"""An evaluation's statistics: the metrics of a run, its expectations and
its comparison with a baseline report.

Metrics (first episode of every env, from the env's own step outputs):
success rate with a Wilson 95% interval; mean (with standard error),
median and the tail (90th and 99th percentiles) of the steps to source over
successful episodes; the 90th and 99th percentiles of the episode length
over all episodes (an episode that did not end within ``num_steps`` counts
as ``num_steps``, so that tail is censored there); path efficiency =
``max(start distance - goal_radius, 0) / path length`` averaged over
successful episodes (1 = straight to the goal region); mean return; and
throughput (env steps per second, excluding compile time). For a
multi-agent env the outcome is the team's: success when the episode ends at
the goal (the first arrival with ``done_mode="any"``), and steps are the
time to that arrival; path efficiency is not reported.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from plume_jax.core.errors import ValidationError

#: The largest ``--baseline`` file read (a report is a few KiB per run).
MAX_BASELINE_BYTES = 64 << 20


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval ``(low, high)`` for ``successes`` of ``n``.

    Always ``0 <= low <= successes / n <= high <= 1``: exactly ``0.0`` at no
    successes and exactly ``1.0`` at all successes (the closed form leaves a
    rounding error there, 0.9999999999999999, which put the point outside
    its own interval), so error bars drawn from it are never negative.
    ``n == 0`` gives ``(0.0, 1.0)``.
    """
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes <= 0 else min(max(0.0, centre - half), p)
    high = 1.0 if successes >= n else max(min(1.0, centre + half), p)
    return (low, high)


def summarise(result: Any, goal_radius: float, team: bool = False) -> dict[str, Any]:
    """Metrics from a :class:`~plume_jax.evaluate.rollout.RolloutResult` (numpy floats -> Python).

    ``team``: a multi-agent env, whose success and steps are the team's (first
    arrival for ``done_mode="any"``); path efficiency is then not reported
    (the agent that arrives need not be the one whose path was tracked).

    Percentiles (``median_steps``, ``p90_steps``, ``p99_steps`` over
    successful episodes; ``p90_episode_length``, ``p99_episode_length`` over
    all episodes, unfinished ones counted at ``num_steps``) are numpy's
    default, linear interpolation between order statistics, in steps
    (floats); ``None`` where there is no episode to take them over.
    """
    success = np.asarray(result.success)
    n, k = int(success.size), int(success.sum())
    all_lengths = np.asarray(result.episode_length).astype(float)
    lengths = all_lengths[success]
    shortest = np.maximum(np.asarray(result.start_distance)[success] - goal_radius, 0.0)
    travelled = np.asarray(result.path_length)[success]
    efficiency = np.where(travelled > 0, shortest / np.maximum(travelled, 1e-9), 1.0)
    low, high = wilson_interval(k, n)
    return {
        "episodes": n,
        "successes": k,
        "success_rate": k / n if n else 0.0,
        "success_ci95": [low, high],
        "mean_steps": float(lengths.mean()) if k else None,
        "sem_steps": float(lengths.std(ddof=1) / math.sqrt(k)) if k > 1 else None,
        "median_steps": float(np.median(lengths)) if k else None,
        "p90_steps": float(np.percentile(lengths, 90)) if k else None,
        "p99_steps": float(np.percentile(lengths, 99)) if k else None,
        "p90_episode_length": float(np.percentile(all_lengths, 90)) if n else None,
        "p99_episode_length": float(np.percentile(all_lengths, 99)) if n else None,
        "path_efficiency": float(efficiency.mean()) if k and not team else None,
        "mean_return": float(np.asarray(result.episode_return).mean()),
    }


def check_expectations(metrics: Mapping[str, Any], expect: Mapping[str, float]) -> list[str]:
    """Human-readable failures of ``expect`` (empty when all hold)."""
    failures = []
    if "min_success_rate" in expect and metrics["success_rate"] < expect["min_success_rate"]:
        failures.append(f"success rate {metrics['success_rate']:.3f} < "
                        f"min_success_rate {expect['min_success_rate']}")
    if "max_mean_steps" in expect and (metrics["mean_steps"] is None
                                       or metrics["mean_steps"] > expect["max_mean_steps"]):
        failures.append(f"mean steps {metrics['mean_steps']} > max_mean_steps "
                        f"{expect['max_mean_steps']}")
    if "min_path_efficiency" in expect and (metrics["path_efficiency"] is None
                                            or metrics["path_efficiency"] < expect["min_path_efficiency"]):
        failures.append(f"path efficiency {metrics['path_efficiency']} < min_path_efficiency "
                        f"{expect['min_path_efficiency']}")
    return failures


def compare_to_baseline(metrics: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    """Regressions against a saved report's metrics.

    Flags a success rate whose 95% interval lies wholly below the baseline
    rate, and mean steps more than 3 combined standard errors above the
    baseline's.
    """
    flags = []
    if metrics["success_ci95"][1] < baseline["success_rate"]:
        flags.append(f"success rate regressed: {metrics['success_rate']:.3f} "
                     f"(95% CI {metrics['success_ci95'][0]:.3f}-{metrics['success_ci95'][1]:.3f}) "
                     f"vs baseline {baseline['success_rate']:.3f}")
    if metrics.get("mean_steps") is not None and baseline.get("mean_steps") is not None:
        se = math.hypot(metrics.get("sem_steps") or 0.0, baseline.get("sem_steps") or 0.0)
        if metrics["mean_steps"] > baseline["mean_steps"] + 3 * se:
            flags.append(f"mean steps regressed: {metrics['mean_steps']:.1f} vs baseline "
                         f"{baseline['mean_steps']:.1f} (3 SE = {3 * se:.1f})")
    return flags


def baseline_key(report: Mapping[str, Any]) -> tuple[str, str]:
    """``(scenario, agent label)``: how a saved baseline finds a run."""
    agent = report["agent"]
    return (str(report["scenario"]), str(agent.get("label") or agent["name"]))


def load_baseline(path: str | os.PathLike) -> dict[tuple[str, str], dict[str, Any]]:
    """Metrics by :func:`baseline_key` from a file written by ``--save-baseline``.

    Raises:
        ValidationError: (parameter ``--baseline``) unreadable or not such a file.
    """
    from plume_jax.files.safe_io import load_json_file

    saved = load_json_file(path, "--baseline", max_bytes=MAX_BASELINE_BYTES)
    try:
        return {baseline_key(r): r["metrics"] for r in saved["reports"]}
    except (KeyError, TypeError, ValueError) as error:
        raise ValidationError.for_parameter(
            "--baseline", str(path), f"a report JSON written by --save-baseline "
            f"({type(error).__name__}: {' '.join(str(error).split())[:200]})") from None


def attach_baseline(report: dict[str, Any],
                    baseline: Mapping[tuple[str, str], Mapping[str, Any]] | None) -> None:
    """Set ``report["baseline"]`` (compared / missing / not requested) and
    ``report["regressions"]`` from a loaded baseline (``None``: none asked for)."""
    key = baseline_key(report)
    if baseline is None:
        report["baseline"], report["regressions"] = {"status": "not requested"}, []
    elif key not in baseline:
        report["baseline"] = {"status": "missing",
                              "reason": f"the baseline has no run of scenario {key[0]!r} "
                                        f"with agent {key[1]!r}"}
        report["regressions"] = []
    else:
        report["regressions"] = compare_to_baseline(report["metrics"], baseline[key])
        report["baseline"] = {"status": "regressed" if report["regressions"] else "matched"}


def status(report: Mapping[str, Any]) -> str:
    """One line: expectations (ok / FAIL / skipped, why / none set) and the
    baseline comparison (matched / REGRESSED / missing) when one was asked for."""
    parts = []
    expectations = report.get("expectations", {"status": "none"})
    if report["failures"]:
        parts.append("FAIL: " + "; ".join(report["failures"]))
    elif expectations["status"] == "passed":
        parts.append("ok")
    elif expectations["status"] == "skipped":
        parts.append(f"expectations skipped ({expectations['reason']})")
    else:
        parts.append("no expectations")
    base = report.get("baseline", {"status": "not requested"})
    if report.get("regressions"):
        parts.append("REGRESSED: " + "; ".join(report["regressions"]))
    elif base["status"] == "matched":
        parts.append("baseline matched")
    elif base["status"] == "missing":
        parts.append(f"NO BASELINE ({base['reason']})")
    return "; ".join(parts)


def failed(report: Mapping[str, Any]) -> bool:
    """An expectation failed or a regression was flagged."""
    return bool(report["failures"] or report.get("regressions"))
