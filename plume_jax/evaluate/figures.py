"""Figures of evaluation runs (layer 5, matplotlib): trajectory panels and the
per-scenario comparison of agents.

- :func:`trajectory_panel` draws several recorded episodes of one run (the
  ``trajectories`` of a :class:`~plume_jax.evaluate.rollout.RolloutResult`)
  over the concentration field, with the source, the goal radius, a colour
  bar for concentration and a title naming the scenario, the agent and the
  outcome (success rate with its 95% interval, mean steps ± SE), and a legend
  with each episode's outcome.
- :func:`scenario_figure` puts the agents of one scenario side by side:
  success rate with its 95% Wilson interval, mean steps to the source ± SE
  (successful episodes), and one trajectory panel per agent.
- :func:`run_figure` is one panel as its own figure (``plume-jax demo``).

Both return a ``matplotlib.figure.Figure``; the caller saves it.

Figures are built on ``matplotlib.figure.Figure`` (no pyplot state), so
they are safe in scripts, tests and threads. Coordinates are grid cells,
x east, y north, north at the top.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Episode path colours, chosen to stand out on viridis.
PATH_COLOURS = ("#ff7f0e", "#e41a1c", "#ffffff", "#00e5ff", "#ff4fd8", "#f0e442", "#a6761d",
                "#bdbdbd")


def outcome_text(metrics: Mapping[str, Any]) -> str:
    """``success 83.2% [80.7, 85.4] of 1000, mean steps 180.4 ± 2.1``."""
    lo, hi = metrics["success_ci95"]
    text = (f"success {100 * metrics['success_rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] "
            f"of {metrics['episodes']}")
    if metrics.get("mean_steps") is not None:
        text += f", mean steps {metrics['mean_steps']:.1f}"
        if metrics.get("sem_steps") is not None:
            text += f" ± {metrics['sem_steps']:.1f}"
    return text


def _scene(env: Any, params: Any, plume_state: Any) -> dict[str, Any]:
    """Field f32[H, W], source and goal (x, y) and goal radius, on the host."""
    return {
        "field": np.asarray(env.plume.field(plume_state, env.grid, params.plume), np.float64),
        "source": np.asarray(env.plume.source_location(plume_state, params.plume), np.float64),
        "goal": np.asarray(env.goal_location(plume_state, params), np.float64),
        "goal_radius": float(params.goal_radius),
    }


def trajectory_panel(ax: Any, env: Any, params: Any, result: Any, title: str,
                     max_episodes: int | None = None) -> Any:
    """Draw the recorded episodes of ``result`` over the field on ``ax``.

    Args:
        ax: a matplotlib ``Axes``.
        env, params: the env and params of the run.
        result: its ``RolloutResult`` (``trajectories`` f32[K, T+1, 2] with
            ``trajectories_valid``; the field shown is the plume at the end of
            env 0's first episode).
        title: the panel title.
        max_episodes: draw at most this many of the K recorded episodes.

    Returns:
        The field's ``AxesImage`` (for a colour bar).
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Circle

    scene = _scene(env, params, result.final_plume)
    height, width = scene["field"].shape
    image = ax.imshow(scene["field"], origin="lower", cmap="viridis", vmin=0.0,
                      extent=(-0.5, width - 0.5, -0.5, height - 0.5), interpolation="nearest")
    ax.add_patch(Circle(tuple(scene["goal"]), scene["goal_radius"], fill=False, color="white",
                        linestyle="--", linewidth=1.0))
    ax.plot(*scene["source"], marker="P", color="#e41a1c", markeredgecolor="black",
            markersize=9, linestyle="none")
    paths = np.asarray(result.trajectories, np.float64)
    valid = np.asarray(result.trajectories_valid, bool)
    success = np.asarray(result.success, bool)
    finished = np.asarray(result.finished, bool)
    lengths = np.asarray(result.episode_length)
    count = paths.shape[0] if max_episodes is None else min(max_episodes, paths.shape[0])
    handles = []
    for k in range(count):
        xy = paths[k][valid[k]]
        colour = PATH_COLOURS[k % len(PATH_COLOURS)]
        ax.plot(xy[:, 0], xy[:, 1], color=colour, linewidth=1.3, alpha=0.9)
        ax.plot(*xy[0], marker="o", color=colour, markeredgecolor="black", markersize=6)
        ax.plot(*xy[-1], marker="*" if success[k] else "X", color=colour,
                markeredgecolor="black", markersize=11 if success[k] else 8)
        outcome = (f"reached in {lengths[k]} steps" if success[k] else
                   f"not reached, ended at step {lengths[k]}" if finished[k] else
                   f"not reached in {lengths[k]} steps")
        handles.append(Line2D([], [], color=colour, marker="*" if success[k] else "X",
                              markeredgecolor="black", label=f"episode {k}: {outcome}"))
    handles.append(Line2D([], [], color="#e41a1c", marker="P", markeredgecolor="black",
                          linestyle="none", label="source"))
    handles.append(Line2D([], [], color="white", linestyle="--", label="goal radius"))
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(-0.5, height - 0.5)
    ax.set_xlabel("x (cells, east)")
    ax.set_ylabel("y (cells, north)")
    ax.set_title(title, fontsize=9)
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=7,
              ncol=1, facecolor="#bbbbbb", framealpha=1.0)
    return image


def _colour_bar(fig: Any, image: Any, ax: Any) -> None:
    fig.colorbar(image, ax=ax, shrink=0.7, label="concentration (end of episode 0)")


def run_figure(env: Any, params: Any, result: Any, title: str,
               panel_inches: float = 5.5) -> Any:
    """One trajectory panel with its colour bar, as a ``Figure`` (save it
    with ``fig.savefig(path)``; the format follows the suffix)."""
    from matplotlib.figure import Figure

    aspect = env.grid.height / env.grid.width
    fig = Figure(figsize=(panel_inches + 1.6, panel_inches * aspect + 2.8),
                 layout="constrained")
    ax = fig.add_subplot()
    _colour_bar(fig, trajectory_panel(ax, env, params, result, title), ax)
    return fig


def scenario_figure(reports: Sequence[Mapping[str, Any]]) -> Any:
    """The agents of one scenario side by side (see the module docstring),
    as a ``Figure``.

    ``reports``: the scenario's run reports
    (:func:`plume_jax.evaluate.scenario.execute_run`), each with its ``_rollout``, ``_env`` and
    ``_params``.
    """
    from matplotlib.figure import Figure

    first = reports[0]
    env = first["_env"]
    aspect = env.grid.height / env.grid.width
    labels = [r["agent"].get("label") or r["agent"]["name"] for r in reports]
    columns = min(len(reports), 3)
    rows = math.ceil(len(reports) / columns)
    panel, legend = 4.0, 1.8  # inches: a map's width, the legend below it
    row_height = panel * aspect + legend + 0.8
    fig = Figure(figsize=(max((panel + 1.4) * columns, 9.0), 3.4 + rows * row_height),
                 layout="constrained")
    panels = fig.subfigures(2, 1, height_ratios=[3.4, rows * row_height])
    assert isinstance(panels, np.ndarray)  # two rows: an array of two SubFigures
    top, bottom = panels
    top.suptitle(f"{first['scenario']} ({first['preset']}): {first['metrics']['episodes']} "
                 f"episodes per agent, seed {first['seed']}", fontsize=11)
    ax_success, ax_steps = top.subplots(1, 2)
    x = np.arange(len(reports))
    rate = np.asarray([r["metrics"]["success_rate"] for r in reports])
    ci = np.asarray([r["metrics"]["success_ci95"] for r in reports])
    ax_success.errorbar(x, rate, yerr=[rate - ci[:, 0], ci[:, 1] - rate], fmt="o", capsize=5,
                        color="#1f77b4")
    ax_success.set_ylim(-0.03, 1.03)
    ax_success.set_ylabel("success rate (95% Wilson interval)")
    steps = [r["metrics"]["mean_steps"] for r in reports]
    sem = [r["metrics"]["sem_steps"] or 0.0 for r in reports]
    has = np.asarray([s is not None for s in steps])
    ax_steps.bar(x[has], [s for s in steps if s is not None],
                 yerr=[e for e, h in zip(sem, has) if h], capsize=5, color="#9ecae1",
                 edgecolor="#1f77b4")
    for i in np.flatnonzero(~has):
        ax_steps.annotate("no success", (i, 0), ha="center", va="bottom", fontsize=8)
    ax_steps.set_ylabel("mean steps to the source ± SE\n(successful episodes)")
    for ax in (ax_success, ax_steps):
        ax.set_xticks(x, labels, rotation=20 if len(reports) > 3 else 0, fontsize=8)
        ax.set_xlim(-0.6, len(reports) - 0.4)
        ax.grid(axis="y", alpha=0.3)
    axes = np.atleast_1d(bottom.subplots(rows, columns)).ravel()
    for ax, r, label in zip(axes, reports, labels):
        title = f"{r['scenario']} — {label}\n{outcome_text(r['metrics'])}"
        _colour_bar(fig, trajectory_panel(ax, r["_env"], r["_params"], r["_rollout"], title),
                    ax)
    for ax in axes[len(reports):]:
        ax.set_visible(False)
    return fig
