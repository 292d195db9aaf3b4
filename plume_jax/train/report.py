"""What a training run or sweep reports to its reader: the figures
(matplotlib, Agg, PNG), a sweep's ranked settings, ``summary.md`` and console
lines. Training success, return and length are per-episode metrics: a plotted
point or a table's figure pools the episodes that ended in its updates
(:func:`episode_mean`). A point is drawn only where at least
:data:`MIN_EPISODES_PER_POINT` ended (the few that end first are mostly the
quick successes); a table gives a training rate with its episode count, "no
episode ended" where none did.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib
import sys
import warnings
from typing import Any, Sequence, TextIO

import numpy as np

from plume_jax.train.member_names import SweepMembers, member_label

#: The fewest ended episodes a plotted point of a training rate or return pools.
MIN_EPISODES_PER_POINT = 20
#: The updates a plotted point pools: its own and the ones before.
SMOOTH_WINDOW = 5
_POINTS = f"points: \u2265 {MIN_EPISODES_PER_POINT} episodes in {SMOOTH_WINDOW} updates"


def episode_mean(rows: list[dict[str, Any]], metric: str) -> tuple[float | None, int | None]:
    """``(mean, episodes)`` of a per-episode metric (``success_rate``,
    ``return_mean``, ``length_mean``) over the episodes that ended in metrics
    ``rows`` (each row weighted by its ``episodes``); ``(None, 0)`` when none
    ended; without ``episodes`` counts, the rows' plain mean and ``None``."""
    if any("episodes" not in r for r in rows):
        values = [r[metric] for r in rows if r.get(metric) is not None
                  and math.isfinite(r[metric])]
        return (float(np.mean(values)) if values else None), None
    weighted: list[tuple[float, float]] = []
    for r in rows:
        value = r.get(metric)
        if r["episodes"] and value is not None and math.isfinite(value):
            weighted.append((float(r["episodes"]), float(value)))
    episodes = sum(n for n, _ in weighted)
    if episodes <= 0:
        return None, 0
    return sum(n * v for n, v in weighted) / episodes, int(round(episodes))


def training_tail(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A member's training success (sampled actions), return and length over
    the episodes that ended in the last 10% of its updates (None where none
    ended), and their number (:func:`episode_mean`)."""
    tail = rows[-max(1, len(rows) // 10):]
    success, episodes = episode_mean(tail, "success_rate")
    return {"train_success_rate_last10pct": success,
            "train_episodes_last10pct": episodes,
            "train_return_last10pct": episode_mean(tail, "return_mean")[0],
            "train_length_last10pct": episode_mean(tail, "length_mean")[0]}


# ------------------------------------------------------------------ figures
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def episode_curve(rows: list[dict[str, Any]], metric: str) -> np.ndarray:
    """f64[len(rows)]: per update, :func:`episode_mean` of ``metric`` over
    its :data:`SMOOTH_WINDOW` updates; NaN where fewer than
    :data:`MIN_EPISODES_PER_POINT` episodes ended there."""
    out = np.full(len(rows), np.nan)
    for i in range(len(rows)):
        value, episodes = episode_mean(rows[max(0, i - SMOOTH_WINDOW + 1): i + 1], metric)
        if value is not None and (episodes is None or episodes >= MIN_EPISODES_PER_POINT):
            out[i] = value
    return out


def _column(rows: list[dict[str, Any]], name: str) -> np.ndarray:
    return np.asarray([np.nan if r.get(name) is None else r[name] for r in rows], np.float64)


def plot_learning_curves(path: str | pathlib.Path, curves: dict[str, list[dict[str, Any]]],
                         title: str = "") -> pathlib.Path:
    """A run's ``learning_curve.png``: training success, mean return
    (:func:`episode_curve`) and episodes ended per update against env steps;
    one line per curve (``label -> metric rows``)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for label, rows in curves.items():
        x = _column(rows, "env_steps")
        for ax, name, scale in ((axes[0], "success_rate", 100.0), (axes[1], "return_mean", 1.0)):
            ax.plot(x, scale * episode_curve(rows, name), label=label, linewidth=1.2)
        axes[2].plot(x, _column(rows, "episodes"), label=label, linewidth=1.0)
    for ax, ylabel in zip(axes, ("training success, sampled actions (%)",
                                 "mean episode return (training reward)",
                                 "episodes ended per update")):
        ax.set_ylabel(ylabel)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    for ax in axes[:2]:
        ax.set_title(_POINTS, fontsize=8)
    if len(curves) > 1:
        fig.legend(*axes[1].get_legend_handles_labels(), loc="center left",
                   bbox_to_anchor=(1.0, 0.5), fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_setting_curves(path: str | pathlib.Path,
                        settings: dict[str, list[list[dict[str, Any]]]], metric: str,
                        ylabel: str, title: str = "", scale: float = 1.0) -> pathlib.Path:
    """A sweep's training curves of one per-episode metric (``settings``: a
    label -> its seeds' metrics rows): the seeds' mean :func:`episode_curve`,
    their range as a band, below it the episodes ended per update."""
    plt = _pyplot()
    fig, (ax, count_ax) = plt.subplots(2, 1, figsize=(8, 6), sharex=True,
                                       gridspec_kw={"height_ratios": [3, 1]})
    for label, seeds in settings.items():
        x = _column(seeds[0], "env_steps")
        ys = np.stack([scale * episode_curve(rows[:len(x)], metric) for rows in seeds])
        counts = np.stack([_column(rows[:len(x)], "episodes") for rows in seeds])
        with warnings.catch_warnings():  # all-NaN columns (too few episodes ended yet)
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, lo, hi = np.nanmean(ys, 0), np.nanmin(ys, 0), np.nanmax(ys, 0)
            count = np.nanmean(counts, 0)
        (line,) = ax.plot(x, mean, linewidth=1.4,
                          label=f"{label} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})")
        if len(seeds) > 1:
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        count_ax.plot(x, count, linewidth=1.0, color=line.get_color())
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    ax.set_title((f"{title}\n" if title else "") + _POINTS, fontsize=9)
    count_ax.set_xlabel("env steps (per member)")
    count_ax.set_ylabel("episodes ended\nper update", fontsize=8)
    count_ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_setting_bars(path: str | pathlib.Path, labels: Sequence[str],
                      values: Sequence[Sequence[float | None]], xlabel: str, title: str,
                      scale: float) -> pathlib.Path:
    """One final metric per setting, ranked from the top: ``values[i]`` is
    setting ``i``'s value per seed (None: none, e.g. no goal reached); the
    seed mean as a bar, each seed a dot, the range a line."""
    plt = _pyplot()
    n = len(labels)
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * n))
    for i, seeds in enumerate(values):
        y = n - 1 - i
        v = np.asarray([np.nan if s is None else scale * s for s in seeds], np.float64)
        finite = v[np.isfinite(v)]
        if finite.size:
            ax.barh(y, finite.mean(), color="tab:blue", alpha=0.35, height=0.6)
            ax.plot([finite.min(), finite.max()], [y, y], color="tab:blue", linewidth=1.5)
            ax.plot(finite, np.full(finite.shape, y), "o", color="tab:blue", markersize=4)
            ax.text(finite.mean(), y + 0.32, f"{finite.mean():.3g}", fontsize=7, va="bottom")
        else:
            ax.text(0, y, "  n/a", fontsize=7, va="center")
    ax.set_yticks(range(n))
    ax.set_yticklabels(list(reversed(list(labels))), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title)
    return _save(fig, path)


# ------------------------------------------------------------------ a sweep's tables
def _stats(values: list[float | None]) -> dict[str, Any]:
    v = np.asarray([x for x in values if x is not None], np.float64)
    if v.size == 0:
        return {"mean": None, "sd": None, "min": None, "max": None, "n": 0}
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0,
            "min": float(v.min()), "max": float(v.max()), "n": int(v.size)}


def rank_settings(sweep: SweepMembers, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per setting (a grid point without ``run.seed``), ranked:
    by greedy evaluation success (mean over seeds, highest first), then mean
    steps to the goal (fewest first); by training success over the last 10%
    of updates when there is no evaluation."""
    settings: dict[str, dict[str, Any]] = {}
    for i, assignment in enumerate(sweep.members):
        point = {k: v for k, v in assignment.items() if k != "run.seed"}
        key = json.dumps(point, sort_keys=True, default=str)
        entry = settings.setdefault(key, {"setting": point, "label": member_label(point)
                                          or "(base config)", "members": []})
        entry["members"].append(i)
    ranked = []
    for entry in settings.values():
        rows = [results[i] for i in entry["members"]]
        entry["seeds"] = [sweep.configs[i].run["seed"] for i in entry["members"]]
        entry["member_names"] = [sweep.names[i] for i in entry["members"]]
        entry["programs"] = sorted({r["program"] for r in rows})
        for metric in ("eval_success_rate", "eval_mean_steps_to_goal",
                       "train_success_rate_last10pct"):
            entry[metric] = _stats([r.get(metric) for r in rows])
        counts = [r.get("train_episodes_last10pct") for r in rows]
        entry["train_episodes_last10pct"] = None if None in counts else sum(counts)
        ranked.append(entry)
    evaluated = any(e["eval_success_rate"]["n"] for e in ranked)
    primary = "eval_success_rate" if evaluated else "train_success_rate_last10pct"

    def order(e: dict[str, Any]) -> tuple[float, float]:
        success, steps = e[primary]["mean"], e["eval_mean_steps_to_goal"]["mean"]
        return (-(success if success is not None else -1.0),
                steps if steps is not None else math.inf)

    ranked.sort(key=order)
    for rank, e in enumerate(ranked, 1):
        e["rank"] = rank
        e["ranked_by"] = primary
    return ranked


#: What the figures of a sweep's tables are (``summary.md``).
FIGURES_EXPLAINED = (
    "*Greedy success*: the share of the fresh evaluation episodes in which the trained "
    "policy, taking its most likely action at every step, reached the goal; settings are "
    "ranked by it. *Training success*: the share of the training episodes that ended in the "
    "last 10% of updates that reached the goal, while the policy sampled its actions "
    "(exploration included), with the number of those episodes. In a short run the episodes "
    "that end are mostly the quick successes (the others are still running), so training "
    "success can read 100 % beside a low greedy success; where no training episode ended "
    "there is no rate.")


def _pct(s: dict[str, Any], empty: str) -> str:
    """Seed statistics of a rate (:func:`_stats`) in percent; else ``empty``."""
    if s["mean"] is None:
        return empty
    text = f"{100 * s['mean']:.1f}"
    if s["n"] > 1:
        text += f" ± {100 * s['sd']:.1f} ({100 * s['min']:.1f}–{100 * s['max']:.1f})"
    return text


def _greedy(success: dict[str, Any], steps: dict[str, Any]) -> tuple[str, str]:
    """The greedy success (%) and mean steps to the goal, or why there are
    none."""
    if steps["mean"] is None:
        steps_text = "not evaluated" if success["mean"] is None else "none reached it"
    else:
        steps_text = f"{steps['mean']:.1f}" + (f" ± {steps['sd']:.1f}" if steps["n"] > 1 else "")
    return _pct(success, "not evaluated"), steps_text


def _training(success: dict[str, Any], episodes: int | None, unit: str = "") -> str:
    """The training success (:func:`_stats`, ``unit`` after it) with the
    number of episodes it is over; no rate where no episode ended."""
    if success["mean"] is None or episodes == 0:
        return "no episode ended"
    count = "" if episodes is None else f", {episodes:,} episode{'s' if episodes != 1 else ''}"
    return f"{_pct(success, '')}{unit}{count}"


def best_setting_line(summary: dict[str, Any]) -> str:
    """One sentence naming the best setting and its figures."""
    best = summary["settings"][0]
    if best["ranked_by"] == "eval_success_rate":
        success, steps = _greedy(best["eval_success_rate"], best["eval_mean_steps_to_goal"])
        what = f"greedy success {success} %, mean steps to the goal {steps}"
    else:
        what = ("training success (sampled actions, last 10% of updates) "
                + _training(best["train_success_rate_last10pct"],
                            best["train_episodes_last10pct"], " %")
                + " (no evaluation was run)")
    seeds = len(best["members"])
    return (f"Best setting: {best['label']} — {what} (mean ± sd over {seeds} "
            f"seed{'s' if seeds > 1 else ''})")


def summary_markdown(summary: dict[str, Any]) -> str:
    """``summary.md``: the ranked settings, the best named, what the figures
    are, the programs and the members."""
    lines = [f"# Sweep: {summary['members']} members, {len(summary['settings'])} settings, "
             f"{len(summary['programs'])} compiled program"
             f"{'s' if len(summary['programs']) > 1 else ''}", ""]
    ev = summary.get("eval")
    if ev:
        lines.append(f"Greedy evaluation: {ev['episodes']} fresh episodes per member (evaluation "
                     f"seed {ev['seed']}). Figures are mean ± sd over seeds (min–max).")
    else:
        lines.append("No evaluation was run: settings are ranked by training success.")
    training = "training success % (sampled actions, last 10% of updates)"
    lines += ["", FIGURES_EXPLAINED, "",
              f"**{best_setting_line(summary)}.** Its members: "
              + ", ".join(f"`members/{n}/`" for n in summary["settings"][0]["member_names"]), "",
              "## Settings, ranked", "",
              f"| rank | setting | seeds | greedy success % | mean steps to goal | {training} "
              "| program |", "|---|---|---|---|---|---|---|"]
    for e in summary["settings"]:
        success, steps = _greedy(e["eval_success_rate"], e["eval_mean_steps_to_goal"])
        tr = _training(e["train_success_rate_last10pct"], e["train_episodes_last10pct"])
        lines.append(f"| {e['rank']} | {e['label']} | {len(e['members'])} | {success} | {steps} | "
                     f"{tr} | {', '.join(map(str, e['programs']))} |")
    lines += ["", "## Compiled programs", "",
              "Members of one program were trained together, vmapped, by one compiled XLA "
              "program.", "", "| program | static settings | members | compile s | train s |",
              "|---|---|---|---|---|"]
    for p in summary["programs"]:
        static = member_label(p["static_settings"]) or "(all the same)"
        lines.append(f"| {p['program']} | {static} | {', '.join(p['members'])} | "
                     f"{p['compile_seconds']:.1f} | {p['train_seconds']:.1f} |")
    lines += ["", "## Members", "", "| member | folder | greedy success % | mean steps to goal | "
              f"{training} | program |", "|---|---|---|---|---|---|"]
    for r in summary["results"]:
        success, steps = _greedy(_stats([r.get("eval_success_rate")]),
                                 _stats([r.get("eval_mean_steps_to_goal")]))
        tr = _training(_stats([r.get("train_success_rate_last10pct")]),
                       r.get("train_episodes_last10pct"))
        lines.append(f"| {r['member']} | `members/{r['name']}/` | {success} | {steps} | {tr} | "
                     f"{r['program']} |")
    lines += ["", "Each member folder is a run folder: `agents.trained.TrainedPolicy.load("
              "\"<folder>/policy\")` loads its policy, `plume-jax evaluate --agent trained "
              "--agent-param path=<folder>/policy` evaluates it, `plume-jax train --resume "
              "<folder> --total-steps N` trains it further.", ""]
    return "\n".join(lines)


def sweep_figures(out: pathlib.Path, summary: dict[str, Any], rows: list[dict[str, Any]]
                  ) -> None:
    """A sweep's figures in ``out``: greedy success and steps per setting
    (when evaluated), training success and return curves per setting."""
    settings, results = summary["settings"], summary["results"]
    if "eval" in summary:
        for name, metric, xlabel, scale, title in (
                ("eval_success", "eval_success_rate", "greedy evaluation success (%)", 100.0,
                 f"Greedy success on {summary['eval']['episodes']} fresh episodes per member"),
                ("eval_steps", "eval_mean_steps_to_goal",
                 "mean steps to the goal (successful greedy episodes)", 1.0,
                 "Steps to the goal")):
            plot_setting_bars(out / f"{name}.png", [e["label"] for e in settings],
                              [[results[i][metric] for i in e["members"]] for e in settings],
                              xlabel, scale=scale, title=f"{title} (bar: seed mean, dots: seeds)")
    by_member: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_member.setdefault(r["member"], []).append(r)
    curves = {e["label"]: [by_member[i] for i in e["members"]] for e in settings}
    for name, metric, ylabel, scale, title in (
            ("train_success", "success_rate", "training success, sampled actions (%)", 100.0,
             "Training success"),
            ("train_return", "return_mean", "mean episode return (training reward)", 1.0,
             "Training return")):
        plot_setting_curves(out / f"{name}.png", curves, metric, ylabel, scale=scale,
                            title=f"{title} per setting (line: seed mean, band: range)")


def print_results(summary: dict[str, Any], stream: TextIO | None = None) -> None:
    """The programs, the settings ranked and the best setting."""
    p = functools.partial(print, file=stream or sys.stdout)
    n_prog = len(summary["programs"])
    sps = summary["steps_per_second_excl_compile"]
    p(f"sweep: {summary['members']} members in {n_prog} compiled program"
      f"{'s' if n_prog > 1 else ''}: compile {summary['compile_seconds']:.1f} s, train "
      f"{summary['train_seconds']:.1f} s"
      + (f" ({sps:,.0f} env steps/s over all members)" if sps else "")
      + f", wall {summary['wall_seconds']:.1f} s")
    for prog in summary["programs"]:
        static = member_label(prog["static_settings"])
        p(f"  program {prog['program']}{' (' + static + ')' if static else ''} shared by "
          f"{len(prog['members'])} members: {', '.join(prog['members'])}")
    evaluated = summary["settings"][0]["ranked_by"] == "eval_success_rate"
    p("settings ranked" + (" by greedy evaluation success (mean ± sd over seeds; training "
                          "success: sampled actions, the episodes that ended in the last 10% "
                          "of updates):" if evaluated else
                          " by training success (sampled actions, the episodes that ended in "
                          "the last 10% of updates; no evaluation):"))
    for e in summary["settings"]:
        greedy = ""
        if evaluated:
            success, steps = _greedy(e["eval_success_rate"], e["eval_mean_steps_to_goal"])
            greedy = f"greedy success {success} %, steps {steps}, "
        p(f"  {e['rank']}. {e['label']}: {greedy}training success "
          f"{_training(e['train_success_rate_last10pct'], e['train_episodes_last10pct'], ' %')}"
          f" ({len(e['members'])} seed{'s' if len(e['members']) > 1 else ''})")
    p(best_setting_line(summary))
