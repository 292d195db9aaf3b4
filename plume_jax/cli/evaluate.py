"""``plume-jax evaluate``: evaluation scenarios (agent x scenario x seeds),
see :mod:`plume_jax.evaluate.scenario`.

Agents, each with its own parameters::

    plume-jax evaluate --scenario configs/scenarios/filament_cast_and_surge.yaml \\
        --agent trained klinotaxis cast_and_surge \\
        --agent-param trained.path=runs/train_filament_gru/policy

``--agent`` takes registry names, or ``LABEL=NAME`` to run one agent twice
under two labels (``--agent gru=trained mlp=trained``); ``--agent-param
LABEL.KEY=VALUE`` gives a parameter to one of them (``KEY=VALUE`` when only
one agent is named). Every input — options, scenario files, the baseline,
the output folder, and every (scenario, agent) pair, built against the
scenario's env — is checked before the first rollout; all problems are
reported together and nothing runs.

``--out`` is treated as ``train`` treats run folders: a folder that is not
empty is refused unless ``--overwrite`` is given, which replaces the outputs
of the earlier ``evaluate`` there (its reports, ``summary.md``, figures and
saved baselines: :func:`earlier_outputs`) once the new rollouts are done,
and leaves other files alone.

``--capture DIR`` must be a new or empty folder, or an earlier capture with
``--overwrite``; the capture is streamed to a folder beside it while the runs
go, and renamed into place (the earlier one set aside, then deleted) once
whole (:class:`plume_jax.files.capture_files.CaptureWriter`).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from plume_jax.cli.common import check_output_file, check_output_folder
from plume_jax.settings import parse_overrides
from plume_jax.core.errors import ValidationError
from plume_jax.train.folder import check_out_dir, clear_outputs

#: ``--agent`` labels: what ``--agent-param LABEL.KEY=VALUE`` refers to.
_LABEL = re.compile(r"[A-Za-z0-9_-]+")


def add_parser(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser(
        "evaluate", help="run evaluation scenarios (agent x scenario x seeds)",
        description="Run evaluation scenarios and compare agents: a table and a figure per "
        "scenario. Scenario files and SB3 models may run code: use only ones you trust.")
    ev.add_argument("--scenario", nargs="+", required=True,
                    help="scenario YAML file(s), folder(s) of them, or the name(s) of shipped "
                    "scenarios (singh2023_constant: a file of configs/scenarios/, found in "
                    "the checkout or in the installed package; plume-jax list --scenarios)")
    ev.add_argument("--agent", nargs="+", action="extend", default=None, metavar="[LABEL=]NAME",
                    help="agent(s) to run instead of each scenario's own (repeatable); "
                    "LABEL=NAME runs NAME under another label, e.g. gru=trained")
    ev.add_argument("--agent-param", action="append", default=[], metavar="[LABEL.]KEY=VALUE",
                    help="a parameter of one --agent, e.g. trained.path=runs/x/policy "
                    "(repeatable; VALUE in YAML syntax; LABEL. may be left out when one agent "
                    "is named)")
    ev.add_argument("--episodes", type=int, default=None,
                    help="override each scenario's episodes (a protocol: singh240 scenario "
                    "runs that many of its 240 fixed starts, evenly spread)")
    ev.add_argument("--seed", type=int, default=None,
                    help="override each scenario's seed (an integer in [0, 2**63))")
    ev.add_argument("--out", default="eval_out",
                    help="folder for the JSON reports, summary.md and a figure per scenario "
                    "(default eval_out)")
    ev.add_argument("--overwrite", action="store_true",
                    help="replace the outputs of an earlier evaluate in --out (its reports, "
                    "summary.md, figures and a --save-baseline file it wrote there; other "
                    "files are left alone) and an earlier capture in --capture DIR (the whole "
                    "folder, once the new one is written); without it a folder that is not "
                    "empty is refused")
    ev.add_argument("--baseline", default=None, help="saved report JSON to compare against")
    ev.add_argument("--save-baseline", default=None, help="write this run's reports as a baseline")
    ev.add_argument("--capture", default=None, metavar="DIR",
                    help="also write every transition and episode to DIR: run.json, "
                    "steps.parquet, episodes.parquet, as one unit renamed into place (a new "
                    "or empty folder, or an earlier capture with --overwrite; needs pyarrow "
                    "and pandas: plume-jax[data]; docs/agents.md, 'Captured trajectories')")
    ev.add_argument("--env-from-run", action="store_true",
                    help="run trained agents (trained with path=..., zoo:<name>) on the env "
                    "they were trained on (policy.json), not the scenario's; without it, a "
                    "trained agent on an env with other settings gets a warning")
    ev.add_argument("--quiet", action="store_true", help="no progress bar or lines")


def earlier_outputs(out: pathlib.Path) -> list[str]:
    """The names of the files an earlier ``evaluate`` wrote in ``out``:
    ``summary.md``, the JSON files that are evaluation reports
    (``scenario``, ``agent`` and ``metrics`` keys) or saved baselines (only a
    ``reports`` list), and the ``<scenario>.png`` figure beside each
    ``<scenario>__<agent>.json`` report."""
    if not out.is_dir():
        return []
    names, scenarios = [], set()
    for path in sorted(out.glob("*.json")):
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(found, dict):
            continue
        if {"scenario", "agent", "metrics"} <= found.keys():
            names.append(path.name)
            scenarios.add(path.stem.rpartition("__")[0] or path.stem)
        elif found.keys() == {"reports"} and isinstance(found["reports"], list):
            names.append(path.name)
    names += [f"{s}.png" for s in sorted(scenarios) if (out / f"{s}.png").is_file()]
    if (out / "summary.md").is_file():
        names.append("summary.md")
    return names


def clear_earlier_outputs(out: pathlib.Path, keep: Sequence[str | None] = ()) -> list[str]:
    """Delete the outputs of an earlier ``evaluate`` in ``out`` (``--overwrite``
    was checked before anything ran) except the files ``keep`` (the
    ``--baseline`` being compared against); other files are left alone.
    Called after the rollouts, so a run that fails loses nothing."""
    kept = {os.path.abspath(k) for k in keep if k}
    return clear_outputs(out, [n for n in earlier_outputs(out)
                               if os.path.abspath(out / n) not in kept])


def scenario_files(paths: list[str]) -> list[str]:
    """The YAML files named, folders expanded (sorted); a name that is no
    file or folder here but a shipped scenario's (``singh2023_constant``)
    becomes that file (:func:`plume_jax.files.shipped.scenario_path`).

    Raises:
        ValidationError: a folder without YAML files, or a name that is
            neither a path nor a shipped scenario.
    """
    from plume_jax.files.shipped import is_scenario_name, scenario_path

    files = []
    for path in paths:
        if not os.path.exists(path) and is_scenario_name(path):
            files.append(str(scenario_path(path)))
        elif os.path.isdir(path):
            found = sorted(os.path.join(path, f) for f in os.listdir(path)
                           if f.endswith((".yaml", ".yml")))
            if not found:
                raise ValidationError.for_parameter("--scenario", path,
                                                    "a YAML file or a folder holding some")
            files += found
        else:
            files.append(path)
    return files


def parse_agent_choices(agents: list[str] | None, params: list[str]) -> list[Any] | None:
    """``--agent`` and ``--agent-param`` -> :class:`~plume_jax.evaluate.scenario.AgentChoice` list (``None``
    when no ``--agent`` was given: each scenario runs its own agent).

    Raises:
        ValidationError: an unknown agent name, a bad or repeated label, a
            parameter for no named agent, or an unprefixed parameter when
            several agents are named.
    """
    from plume_jax.core.agents_package import check_agents_package

    check_agents_package()
    from agents.registry import agent_names, is_agent_name
    from plume_jax.settings.schema import did_you_mean
    from plume_jax.evaluate.scenario import AgentChoice

    if not agents:
        if params:
            raise ValidationError.for_parameter("--agent-param", params,
                                                "to be used together with --agent")
        return None
    named: dict[str, str] = {}
    for item in agents:
        label, sep, name = item.rpartition("=")
        if not sep:
            label = name
        if not is_agent_name(name):
            raise ValidationError.for_parameter(
                "--agent", item, f"[LABEL=]NAME with NAME a known agent"
                f"{did_you_mean(name, agent_names())}: one of {agent_names()}")
        if sep and not _LABEL.fullmatch(label):  # a bare name labels itself (zoo:<name>@<v>)
            raise ValidationError.for_parameter(
                "--agent", item, "LABEL=NAME with LABEL made of letters, digits, '_' and '-'")
        if label in named:
            raise ValidationError.for_parameter(
                "--agent", item, f"distinct labels (label {label!r} is used twice; name runs of "
                f"one agent apart with LABEL=NAME, e.g. a={name} b={name})")
        named[label] = name
    given: dict[str, dict[str, Any]] = {label: {} for label in named}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError.for_parameter("--agent-param", item,
                                                "[LABEL.]KEY=VALUE (VALUE in YAML syntax)")
        label, dot, key = key.strip().rpartition(".")
        if not dot:
            if len(named) != 1:
                raise ValidationError.for_parameter(
                    "--agent-param", item, f"LABEL.KEY=VALUE with LABEL one of {list(named)} "
                    "(several agents are named, so say whose parameter it is)")
            label = next(iter(named))
        if label not in named:
            raise ValidationError.for_parameter(
                "--agent-param", item, f"LABEL.KEY=VALUE with LABEL one of {list(named)}")
        given[label].update(parse_overrides([f"{key}{sep}{value}"], "--agent-param"))
    return [AgentChoice(name, label, given[label]) for label, name in named.items()]


def plan_runs(files: list[str], choices: list[Any] | None, episodes: int | None,
              seed: int | None, env_from_run: bool = False) -> list[Any]:
    """Load every scenario and build every (scenario, agent) pair
    (``env_from_run``: :func:`plume_jax.evaluate.scenario.plan_run`).

    Raises:
        ValidationError: listing every file or pair that cannot run (the
            first problem's parameter is the error's).
    """
    from plume_jax.evaluate import scenario as sc

    plans, problems = [], []
    for path in files:
        try:
            scenario = sc.load_scenario(path)
            built = sc.scenario_env(scenario)
        except ValidationError as error:
            problems.append((f"{path}", error))
            continue
        for choice in choices or [None]:
            label = scenario["agent"]["name"] if choice is None else choice.label
            try:
                plans.append(sc.plan_run(scenario, choice, episodes=episodes, seed=seed,
                                         built_env=built, env_from_run=env_from_run))
            except ValidationError as error:
                problems.append((f"{path} (scenario {scenario['name']!r}), agent {label!r}",
                                 error))
    if problems:
        lines = "\n".join(f"  - {where}: {error}" for where, error in problems)
        first = problems[0][1]
        raise ValidationError(f"{len(problems)} problem(s) found before running anything; "
                              f"nothing was run:\n{lines}", parameter=first.parameter,
                              value=first.value, allowed=first.allowed)
    return plans


class RunProgress:
    """Host progress function of one run: reports ``offset`` + the episodes
    finished so far to a shared :class:`~plume_jax.progress.ProgressBar`.
    Hashable by identity (a static argument of the jitted rollout)."""

    def __init__(self, bar: Any, offset: int, message: str):
        self.bar, self.offset, self.message = bar, offset, message

    def __call__(self, steps: Any, finished: Any) -> None:
        self.bar.update(self.offset + int(finished), f"{self.message} (step {int(steps):,})")


def check_capture_target(capture: str, out: str, overwrite: bool) -> None:
    """Checks of ``--capture DIR`` before anything runs: a new or empty
    folder, or an earlier capture with ``--overwrite``; not ``--out`` nor a
    folder holding it (the capture replaces its folder whole); its parent
    can be written (the capture is written beside it, then renamed).

    Raises:
        ValidationError: naming ``--capture``.
    """
    from plume_jax.evaluate.capture import check_capture_folder

    target, out_path = os.path.abspath(capture), os.path.abspath(out)
    if target == out_path or out_path.startswith(target + os.sep):
        raise ValidationError.for_parameter(
            "--capture", capture, f"a folder apart from --out ({out}): the capture replaces "
            "its whole folder")
    check_capture_folder(capture, overwrite)
    check_output_folder(os.path.dirname(target), "--capture")


def run_plans(plans: list[Any], baseline: Any, quiet: bool, recorder: Any = None) -> list[Any]:
    """Run the planned (scenario, agent) pairs in order, with a progress bar;
    with ``recorder`` (an :class:`~plume_jax.evaluate.capture.EvaluationCapture`)
    each run's transitions are captured as it runs."""
    from plume_jax.evaluate import scenario as sc
    from plume_jax.progress import ProgressBar

    reports, groups = [], {id(p.scenario): i for i, p in enumerate(plans)}
    total = sum(p.episodes for p in plans)
    with ProgressBar(total, "evaluate", unit="episodes", quiet=quiet,
                     stream=sys.stderr) as bar:
        done = 0
        for i, plan in enumerate(plans):
            message = f"run {i + 1}/{len(plans)}: {plan.scenario['name']} / {plan.label}"
            bar.update(done, f"{message} (compiling)")
            report = sc.execute_run(plan, progress=None if quiet
                                    else RunProgress(bar, done, message),
                                    capture=None if recorder is None else recorder.run(i, plan))
            if recorder is not None:
                recorder.end_run(report)
            report["_group"] = groups[id(plan.scenario)]
            sc.attach_baseline(report, baseline)
            reports.append(report)
            done += plan.episodes
            bar.update(done, message)
    return reports


def run(args: argparse.Namespace) -> int:
    """Exit 0 when every checked expectation holds and nothing regressed
    against ``--baseline``, 1 otherwise (2 for bad input)."""
    from plume_jax.evaluate import scenario as sc

    if args.episodes is not None:  # the bounds of a scenario file's episodes
        sc.check_episodes("--episodes", args.episodes, None)
    seed = None if args.seed is None else sc.validate_seed(args.seed, "--seed")
    choices = parse_agent_choices(args.agent, args.agent_param)
    files = scenario_files(args.scenario)
    baseline = sc.load_baseline(args.baseline) if args.baseline else None
    check_out_dir(pathlib.Path(args.out), overwrite=getattr(args, "overwrite", False),
                  command="evaluate")
    check_output_folder(args.out, "--out")
    if args.save_baseline:
        check_output_file(args.save_baseline, "--save-baseline")
    plans = plan_runs(files, choices, args.episodes, seed,
                      env_from_run=getattr(args, "env_from_run", False))
    for plan in plans:
        if plan.env_note:
            print(f"warning: scenario {plan.scenario['name']!r}: {plan.env_note}",
                  file=sys.stderr)
    capture = getattr(args, "capture", None)
    if capture:
        from plume_jax.evaluate.capture import check_capture_plans, require_pyarrow

        require_pyarrow()
        check_capture_target(capture, args.out, getattr(args, "overwrite", False))
        check_capture_plans(plans)

    recorder = None
    if capture:
        from plume_jax.evaluate.capture import EvaluationCapture

        recorder = EvaluationCapture(capture)
    try:
        reports = run_plans(plans, baseline, args.quiet, recorder)
        # results first (reports, summary.md, the baseline), figures last: a
        # figure that fails is a warning and loses nothing
        clear_earlier_outputs(pathlib.Path(args.out), keep=[args.baseline])
        sc.write_results(reports, args.out)
        if recorder is not None:
            meta = recorder.finish()
            print(f"captured {meta['files']['steps.parquet']['rows']:,} transitions of "
                  f"{meta['files']['episodes.parquet']['rows']:,} episodes in {capture}/",
                  file=sys.stderr)
    except BaseException:
        if recorder is not None:
            recorder.abort()
        raise
    if args.save_baseline:
        with open(args.save_baseline, "w", encoding="utf-8") as f:
            json.dump({"reports": [sc.public(r) for r in reports]}, f, indent=2)
    print(sc.markdown_table(reports))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # printed below, once
        _, figure_problems = sc.write_figures(reports, args.out)
    for problem in figure_problems:
        print(f"warning: {problem}", file=sys.stderr)
    print(f"\nreports, summary.md and a comparison figure per scenario in {args.out}/"
          + (f" ({len(figure_problems)} figure(s) not written, see above)"
             if figure_problems else ""))
    failed = [r for r in reports if sc.failed(r)]
    missing = [r for r in reports if r["baseline"]["status"] == "missing"]
    if missing:
        print(f"{len(missing)} of {len(reports)} runs have no baseline to compare with",
              file=sys.stderr)
    if failed:
        print(f"{len(failed)} of {len(reports)} runs failed an expectation or regressed",
              file=sys.stderr)
    return 1 if failed else 0
