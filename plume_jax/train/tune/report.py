"""What ``plume-jax tune`` leaves for people: ``best_config.yaml`` (a
``train`` config that reproduces the best trial), ``trials.csv``,
``results.json``, ``summary.md`` with the best trials and Optuna's
parameter importances, and Optuna's optimisation-history and
parallel-coordinate plots as PNG (drawn with matplotlib, through
``optuna.visualization.matplotlib``)."""

from __future__ import annotations

import json
import math
import os
import pathlib
import warnings
from typing import Any

from plume_jax.train.config import dump_yaml, read_yaml
from plume_jax.files import atomic_write as write_text
from plume_jax.train.progress import write_csv

#: The best trial's config in the study folder (``plume-jax train`` names its
#: default run folder after the study for a file of this name).
BEST_CONFIG = "best_config.yaml"

#: The figures ``summary.md`` shows.
FIGURES = ("optimization_history.png", "parallel_coordinate.png")


def _steps(t: Any) -> float:
    steps = t.user_attrs.get("mean_steps_to_goal")
    return float(steps) if isinstance(steps, (int, float)) else math.inf


def ranked(study: Any) -> list[Any]:
    """The complete trials, best first: highest greedy success, then fewest
    mean steps to the goal, then the earliest."""
    done = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    return sorted(done, key=lambda t: (-float(t.value), _steps(t), t.number))


def trial_rows(study: Any) -> list[dict[str, Any]]:
    """One row per trial: number, state, value, steps, pruning, re-run,
    why it was skipped (another trial's values, over budget) or refused,
    folder, params."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        rows.append({"trial": t.number, "state": t.state.name, "success_rate": t.value,
                     "mean_steps_to_goal": t.user_attrs.get("mean_steps_to_goal"),
                     "pruned_at_update": t.user_attrs.get("pruned_at_update"),
                     "rerun_of": t.user_attrs.get("rerun_of"),
                     "skipped": t.user_attrs.get("skipped"), "error": t.user_attrs.get("error"),
                     "folder": t.user_attrs.get("folder"), **t.params})
    return rows


def importances(study: Any) -> dict[str, float]:
    """Optuna's parameter importances (``optuna.importance.get_param_importances``
    with its default evaluator), or {} while fewer than two trials are
    complete or nothing varies."""
    import optuna

    if len(ranked(study)) < 2:
        return {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "importances will be equal" on flat studies
            return {k: float(v)
                    for k, v in optuna.importance.get_param_importances(study).items()}
    except (RuntimeError, ValueError):
        return {}


def plots(study: Any, out: pathlib.Path) -> list[str]:
    """The two PNG figures (:data:`FIGURES`) of the study's complete trials;
    the names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as ovm

    written: list[str] = []
    if not ranked(study):
        return written
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna marks its matplotlib plots experimental
        draws: tuple[Any, ...] = (ovm.plot_optimization_history, ovm.plot_parallel_coordinate)
        for name, draw in zip(FIGURES, draws):
            ax = draw(study)
            figure = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
            figure.set_size_inches(9, 5)
            figure.tight_layout()
            partial = out / f".{name}.partial-{os.getpid()}.png"
            figure.savefig(partial, dpi=100)  # whole or not at all (a kill here)
            os.replace(partial, out / name)
            plt.close(figure)
            written.append(name)
    return written


def _best_lines(best: list[Any]) -> list[str]:
    lines = ["| rank | trial | greedy success | mean steps to goal | parameters | folder |",
             "|---|---|---|---|---|---|"]
    for k, t in enumerate(best[:10]):
        steps = t.user_attrs.get("mean_steps_to_goal")
        params = ", ".join(f"{n}={v:.4g}" if isinstance(v, float) else f"{n}={v}"
                           for n, v in t.params.items())
        lines.append(f"| {k + 1} | {t.number} | {t.value:.3f} | "
                     f"{'-' if steps is None else f'{steps:.1f}'} | {params} | "
                     f"{t.user_attrs.get('folder', '-')} |")
    return lines


def summary_markdown(study: Any, record: dict[str, Any], figures: list[str],
                     weights: dict[str, float]) -> str:
    """``summary.md``: the study's counts, best trials, importances, figures."""
    trials = study.get_trials(deepcopy=False)
    states = {s: sum(t.state.name == s for t in trials)
              for s in ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")}
    best = ranked(study)
    lines = [f"# Tuning: study `{record['study_name']}`", "",
             f"Storage `{_shown(record)}`; sampler {record['space'].get('sampler', 'tpe')}, "
             f"pruner {record['space'].get('pruner', 'none')}, budget {record['trials']} trials; "
             + ", ".join(f"{n} {s.lower()}" for s, n in states.items() if n) + ".", "",
             "Objective: greedy success rate of the final evaluation (maximised); ties go to "
             "fewer mean steps to the goal.", ""]
    if best:
        lines += ["## Best trials", "", *_best_lines(best), "",
                  f"Train the best again: `plume-jax train --config {record['out']}/"
                  "best_config.yaml`", ""]
        elsewhere = best[0].user_attrs.get("out_id", record.get("out_id")) != \
            record.get("out_id")
        if elsewhere:
            lines += [f"The best trial ({best[0].number}) was trained by a process of another "
                      f"folder of this study: its run folder is "
                      f"`{best[0].user_attrs.get('out', '?')}/{best[0].user_attrs.get('folder')}`"
                      " (best_config.yaml is written from the config the study holds).", ""]
    if weights:
        lines += ["## Parameter importances (Optuna's get_param_importances)", "", "| parameter | importance |",
                  "|---|---|", *[f"| {k} | {v:.3f} |" for k, v in weights.items()], ""]
    for name in figures:
        lines += [f"![{name.removesuffix('.png')}]({name})", ""]
    return "\n".join(lines)


def _trial_tune(folder: pathlib.Path) -> dict[str, Any]:
    """The ``tune`` section of a trial folder's ``summary.json`` ({} when
    it has none: a folder of an older version)."""
    from plume_jax.files.safe_io import load_json_file

    path = folder / "summary.json"
    summary = load_json_file(path, "summary.json") if path.is_file() else {}
    tune = summary.get("tune") if isinstance(summary, dict) else None
    return tune if isinstance(tune, dict) else {}


def _recorded_lanes(tune: dict[str, Any]) -> int | list[dict[str, int]] | None:
    """The ``run.lanes`` that reproduces a trial whose ``summary.json``
    ``tune`` section is ``tune``: made from its recorded programs
    (:func:`~plume_jax.train.tune.programs.reproducing_lanes`), checked as
    ``run.lanes`` is; None when they are missing, malformed or sharded."""
    from plume_jax.core.errors import ValidationError
    from plume_jax.train.lane_schedule import lanes_check
    from plume_jax.train.tune.programs import reproducing_lanes

    programs = tune.get("programs")
    if not isinstance(programs, list) or not all(
            isinstance(p, dict) and all(isinstance(p.get(k), int) and not isinstance(p[k], bool)
                                        for k in ("from_update", "lanes", "devices"))
            for p in programs):
        return None
    lanes = reproducing_lanes(programs)
    try:
        return lanes_check("run.lanes", lanes)
    except ValidationError:
        return None


def _schedule_text(lanes: list[dict[str, int]], num_updates: int) -> str:
    """What a width schedule runs and costs
    (:meth:`~plume_jax.train.lane_schedule.LaneSchedule.cost_text`)."""
    from plume_jax.train.lane_schedule import LaneSchedule

    schedule = LaneSchedule.of(lanes)
    assert schedule is not None
    return schedule.cost_text(num_updates)


def best_config(config: dict[str, Any], tune: dict[str, Any], number: int, study: str,
                value: float) -> str:
    """``best_config.yaml``'s text: the trial's resolved ``config`` with
    ``run.lanes`` set to what reproduces it bit for bit with ``plume-jax
    train`` on the same device (made from ``tune["programs"]``, the
    programs it trained in): the width of its program, or the width
    schedule of its programs when pruning rebuilds continued it in narrower
    ones; and a header saying what that reproduces and costs. A trial
    without either (its members sharded over devices, a folder that does
    not record its programs) gets the config as it trained and a header
    saying that ``train`` agrees with it to float tolerance only."""
    config = {**config, "run": dict(config.get("run") or {})}
    lanes = _recorded_lanes(tune)
    head = (f"# The best trial ({number}) of the study {study}: greedy success "
            f"{value:.3f}.\n")
    if isinstance(lanes, int):
        config["run"]["lanes"] = lanes
        head += (f"# plume-jax train --config best_config.yaml reproduces it bit for bit on "
                 f"the same device and jax: run.lanes {lanes} trains it as lane 0 of {lanes} "
                 f"copies, the width of the program it trained in ({lanes} times the compute "
                 "of one run; run.lanes: null trains it once, agreeing to float tolerance).\n")
    elif isinstance(lanes, list):
        algo = config["algo"]
        num_updates = max(1, int(algo["total_steps"]) // (int(algo["num_envs"])
                                                          * int(algo["num_steps"])))
        config["run"]["lanes"] = lanes
        head += ("# plume-jax train --config best_config.yaml reproduces it bit for bit on "
                 "the same device and jax, its policy, best/, metrics rows and evaluations: "
                 "pruning rebuilds continued it in narrower programs, and the run.lanes width "
                 "schedule trains it as lane 0 of each in turn, switching at the updates of "
                 "the rebuilds: " + _schedule_text(lanes, num_updates)
                 + "; run.lanes: null trains it once, agreeing to float tolerance.\n")
    else:
        recorded = tune.get("programs")
        widths = ", ".join(f"{p.get('lanes')} member(s) on {p.get('devices')} device(s) from "
                           f"update {p.get('from_update')}" for p in
                           (recorded if isinstance(recorded, list) else [])
                           if isinstance(p, dict))
        per_member = isinstance(recorded, list) and any(
            isinstance(p, dict) and p.get("env_per_member") for p in recorded)
        head += ("# plume-jax train --config best_config.yaml trains it again, agreeing with "
                 "it to float tolerance, not bit for bit: no run.lanes reproduces the "
                 "programs it trained in ("
                 + (widths if widths else "its folder does not record them")
                 + ("; its program's members differed in env settings, which it held per "
                    "member, and run.lanes holds them once for all lanes" if per_member else
                    "; each on one device is needed") + ").\n")
    return head + dump_yaml(config)


def _shown(record: dict[str, Any]) -> str:
    from plume_jax.train.tune.study import shown

    return shown(record["storage"], pathlib.Path(record["out"]))


def _best_files(t: Any, out: pathlib.Path, record: dict[str, Any]
                ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The best trial's config and ``tune`` section: from what the study
    holds (a trial told by this version), else from its run folder here;
    None where neither is."""
    config, programs = t.user_attrs.get("config"), t.user_attrs.get("programs")
    if isinstance(config, dict) and isinstance(programs, list):
        return config, {"programs": programs}
    folder = t.user_attrs.get("folder")
    if t.user_attrs.get("out_id", record.get("out_id")) != record.get("out_id") or \
            not isinstance(folder, str) or not (out / folder / "config.yaml").is_file():
        return None
    return read_yaml(out / folder / "config.yaml"), _trial_tune(out / folder)


def write_report(study: Any, out: pathlib.Path, record: dict[str, Any],
                 timing: dict[str, float] | None = None) -> dict[str, Any]:
    """Write every result file of the module docstring into ``out``;
    results first (atomic replacements), figures last (a figure that fails
    is a warning). ``timing``: this call's seconds (``results.json``'s
    ``timing``). Returns ``results.json``'s content."""
    best = ranked(study)
    weights = importances(study)
    results = {"study_name": record["study_name"], "storage": _shown(record),
               "timing": timing,
               "trials": trial_rows(study), "importances": weights,
               "best": None if not best else {"trial": best[0].number, "value": best[0].value,
                                              "params": best[0].params,
                                              **{k: v for k, v in best[0].user_attrs.items()
                                                 if k != "config"}}}
    write_csv(out / "trials.csv", results["trials"])
    write_text(out / "results.json", json.dumps(results, indent=2, default=str))
    files = _best_files(best[0], out, record) if best else None
    if files is not None:
        text = best_config(files[0], files[1], best[0].number, record["study_name"],
                           float(best[0].value))
        write_text(out / BEST_CONFIG, text)
    figures: list[str] = []
    try:
        figures = plots(study, out)
    except Exception as exc:  # a figure never loses the results
        warnings.warn(f"tune figures were not written ({type(exc).__name__}: {exc}); the "
                      "results are in results.json", RuntimeWarning, stacklevel=2)
    write_text(out / "summary.md", summary_markdown(study, record, figures, weights))
    return results


__all__ = ["BEST_CONFIG", "FIGURES", "best_config", "importances", "plots", "ranked", "summary_markdown", "trial_rows",
           "write_report"]
