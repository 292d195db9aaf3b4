"""``plume-jax tune`` (issue 43): the search-space file's checks, pruning
that stops pruned members, the best config reproducing its trial in
``train``, resume after kill -9 and two processes on one journal study."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

optuna = pytest.importorskip("optuna", reason="optuna (the tune extra) is not installed")

from plume_jax.cli import main  # noqa: E402
from plume_jax.core.errors import ValidationError  # noqa: E402
from plume_jax.progress import ProgressBar  # noqa: E402
from plume_jax.train.tune import new_record  # noqa: E402
from plume_jax.train.tune.programs import TrialRun, train_group  # noqa: E402
from plume_jax.train.tune.space import space_from_mapping  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
NUM_UPDATES = 10
BASE = {
    "env": {"id": "PlumeNav-Gaussian-v0",
            "overrides": {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5,
                          "max_steps": 40, "start": {"type": "fixed", "position": [4, 7]}}},
    "algo": {"total_steps": 16 * 32 * NUM_UPDATES, "num_envs": 16, "num_steps": 32,
             "update_epochs": 2, "num_minibatches": 2, "learning_rate": 3e-3,
             "normalize_obs": True, "ent_coef": 0.0},
    "network": {"hidden_sizes": [8]},
    "run": {"seed": 0, "log_every": 5},
    "eval": {"num_envs": 32, "every": 5, "periodic_episodes": 16},
}
SPACE = {"params": {"algo.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2,
                                           "log": True},
                    "algo.ent_coef": {"type": "float", "low": 0.0, "high": 0.05}},
         "sampler": "tpe", "seed": 0, "batch_size": 2}


def _files(tmp: pathlib.Path, space: dict | None = None) -> tuple[pathlib.Path, pathlib.Path]:
    (tmp / "base.yaml").write_text(yaml.safe_dump(BASE))
    (tmp / "space.yaml").write_text(yaml.safe_dump(space or SPACE))
    return tmp / "base.yaml", tmp / "space.yaml"


def _study(out: pathlib.Path) -> optuna.Study:
    record = json.loads((out / "tune.json").read_text())
    from plume_jax.train.tune.study import open_storage

    return optuna.load_study(study_name=record["study_name"],
                             storage=open_storage(record["storage"], out))


# --------------------------------------------------------------- bad spaces
@pytest.mark.parametrize("change, words", [
    ({"sampeler": "tpe"}, ["sampeler", "did you mean 'sampler'"]),
    ({"params": {"algo.learning_rat": {"type": "float", "low": 1e-4, "high": 1e-3}}},
     ["algo.learning_rat", "did you mean 'learning_rate'"]),
    ({"params": {"algo.ent_coef": {"type": "float", "lo": 0.0, "high": 0.1}}},
     ["params.algo.ent_coef.lo", "did you mean 'low'"]),
    ({"params": {"algo.ent_coef": {"type": "float", "low": 0.2, "high": 0.1}}},
     ["params.algo.ent_coef.low", "high=0.1"]),
    ({"params": {"algo.ent_coef": {"type": "flaot", "low": 0.0, "high": 0.1}}},
     ["params.algo.ent_coef.type", "'float'"]),
    ({"pruner": "median", "set": {"eval.every": None}}, ["pruner", "eval.every"]),
    ({"params": {"algo.ent_coef": {"type": "float", "low": 0.0, "high": 0.1}},
      "sampler": "grid"}, ["params.algo.ent_coef", "with sampler grid"]),
    ({"set": {"run.lanes": 2}}, ["run.lanes", "null in tune's training config"]),
])
def test_a_bad_search_space_gets_a_one_line_error(tmp_path, capsys, change, words):
    config, space = _files(tmp_path, {**SPACE, **change})
    status = main(["tune", "--config", str(config), "--space", str(space), "--trials", "2",
                   "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert len(err.splitlines()) == 1 and err.startswith("plume-jax: error:"), err
    for word in words:
        assert word in err
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_sampled_categorical_list_is_a_config_value(tmp_path):
    space = space_from_mapping({"params": {"network.hidden_sizes": {
        "type": "categorical", "choices": [[8], [16, 16]]}}}, BASE, str(tmp_path))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    from plume_jax.train.tune.study import suggest

    values = suggest(study.ask(), space)
    assert values["network.hidden_sizes"] in ([8], [16, 16])
    assert list(space.config(values).network.hidden_sizes) == values["network.hidden_sizes"]
    with pytest.raises(ValidationError, match="a positive integer"):
        new_record(tmp_path / "x.yaml", tmp_path / "y.yaml", trials=0, out=tmp_path / "o")


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("tune_*.yaml")) + [
    "docs/training.md"], ids=str)
def test_the_shipped_and_documented_search_spaces_are_valid(path):
    from plume_jax.train.config import read_yaml

    if str(path).endswith(".md"):  # the Tuning section's example
        text = (REPO / path).read_text()
        block = text.split("```yaml\nparams:", 1)[1].split("```", 1)[0]
        data = yaml.safe_load("params:" + block)
    else:
        data = read_yaml(path)
    base = REPO / "configs" / "train_gaussian.yaml"
    space = space_from_mapping(data, read_yaml(base), str(base.parent))
    assert space.params and space.config({p.name: p.lowest() for p in space.params})


# ------------------------------------------------------------------- budget
def test_a_killed_process_trial_is_rerun_once_and_counted_once(tmp_path):
    from plume_jax.train.tune.study import claim, counted, requeue_orphans, to_ask

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan, mine = study.ask(), study.ask()
    for trial in (orphan, mine):
        claim(trial)
        trial.suggest_float("x", 0.0, 1.0)
    orphan.set_user_attr("pid", dead.pid)  # a process that is gone
    orphan.set_user_attr("nonce", "another process")
    assert counted(study) == 2
    assert requeue_orphans(study) == [0]
    assert requeue_orphans(study) == []  # once
    states = [t.state.name for t in study.trials]
    assert states == ["FAIL", "RUNNING", "WAITING"] and counted(study) == 2
    assert to_ask(study, 2) == 1  # the re-run is asked for within the budget
    again = study.ask()
    assert again.suggest_float("x", 0.0, 1.0) == orphan.params["x"]
    assert again.user_attrs["rerun_of"] == 0


def test_the_grid_sampler_runs_each_grid_point_once_at_most(tmp_path):
    from plume_jax.train.tune.study import budget, suggest

    space = space_from_mapping({**SPACE, "sampler": "grid", "params": {
        "algo.update_epochs": {"type": "int", "low": 1, "high": 3},
        "network.hidden_sizes": {"type": "categorical", "choices": [[8], [16, 16]]}}},
        BASE, str(tmp_path))
    assert budget(space, 100) == 6 and budget(space, 4) == 4
    from plume_jax.train.tune.study import use_sampler

    study = optuna.create_study()
    use_sampler(study, space, first=True)
    seen = [json.dumps(suggest(study.ask(), space), sort_keys=True) for _ in range(6)]
    assert len(set(seen)) == 6


def test_the_progress_bar_counts_elapsed_time_from_the_start_of_the_study(tmp_path,
                                                                         monkeypatch):
    """Regression: tune shows one progress bar a batch of trials, and each
    bar's elapsed time restarted at 0:00:00; it now counts from the start
    of the study (of this tune call). Two batches of one trial, each
    "training" a minute on a fake clock (no compile)."""
    import types

    import plume_jax.progress
    import plume_jax.train.tune as tune

    clock = [1000.0]
    fake = types.SimpleNamespace(perf_counter=lambda: clock[0])
    monkeypatch.setattr(plume_jax.progress, "time", fake)
    monkeypatch.setattr(tune, "time", fake)
    shown = []

    def a_minute_of_training(runs, *, stop, prune, bar):
        bar.restart_clock(0)  # as after a compile
        clock[0] += 60.0
        bar.update(bar.total)
        shown.append(bar.line())
        for r in runs:
            r.evaluation = {"success_rate": 0.5, "mean_steps_to_goal": None}
        return {}

    monkeypatch.setattr(tune, "train_group", a_minute_of_training)
    monkeypatch.setattr(tune, "write_report", lambda *a, **k: {})
    config, space = _files(tmp_path, {**SPACE, "batch_size": 1})
    tune.tune(new_record(config, space, trials=2, out=tmp_path / "out"), progress=False)
    assert [line.split(" | ")[1] for line in shown] == ["0:01:00 elapsed", "0:02:00 elapsed"]


# ------------------------------------------------------------------ pruning
class _PruneTrialsOneAndTwo(optuna.pruners.BasePruner):
    def prune(self, study, trial):
        return trial.number in (1, 2)


@pytest.fixture(scope="module")
def pruned_group(tmp_path_factory):
    """4 trials in one program, trials 1 and 2 pruned at update 5: trials 0
    and 3 train on in a program rebuilt for 2 members (widths 4, then 2)."""
    tmp = tmp_path_factory.mktemp("pruned")
    space = space_from_mapping(SPACE, BASE, str(tmp))
    study = optuna.create_study(direction="maximize", pruner=_PruneTrialsOneAndTwo())
    runs = []
    for _ in range(4):
        trial = study.ask()
        values = {"algo.learning_rate": 3e-3, "algo.ent_coef": 0.01 * trial.number}
        runs.append(TrialRun(trial, values, space.config(values),
                             tmp / f"trial{trial.number}"))
    spent = train_group(runs, stop=None, prune=True,
                        bar=ProgressBar(1, "tune", quiet=True))
    return tmp, runs, spent


@pytest.mark.slow  # two compiles of the training program: about 40 s on a loaded CPU
def test_pruning_stops_a_pruned_member_and_the_others_train_on(pruned_group):
    _, runs, spent = pruned_group
    assert [r.pruned_at for r in runs] == [None, 5, 5, None]
    assert spent["segments"] == 2  # the survivors' program was rebuilt once
    updates = [[json.loads(line)["update"] for line in
                (r.folder / "metrics.jsonl").read_text().splitlines()] for r in runs]
    assert updates[1] == updates[2] == list(range(1, 6))  # no update after the pruning
    assert updates[0] == updates[3] == list(range(1, NUM_UPDATES + 1))
    assert runs[1].evaluation is None and runs[0].evaluation is not None
    summary = json.loads((runs[1].folder / "summary.json").read_text())
    assert summary["tune"]["pruned_at_update"] == 5 and summary["env_steps_total"] == 5 * 512
    assert (runs[1].folder / "policy").is_dir() and (runs[1].folder / "checkpoint").is_dir()
    assert (runs[0].folder / "tensorboard" / "tune_hparams").is_dir()
    survivor = json.loads((runs[0].folder / "summary.json").read_text())["tune"]
    assert survivor["programs"] == [{"from_update": 0, "lanes": 4, "devices": 1},
                                    {"from_update": 5, "lanes": 2, "devices": 1}]
    # two widths: the width schedule that reproduces it
    assert survivor["reproducing_lanes"] == [{"from_update": 0, "lanes": 4},
                                             {"from_update": 5, "lanes": 2}]


@pytest.mark.slow  # one train in lanes of 4 then 2: about 20 s on a loaded CPU
def test_a_trial_rebuilt_by_pruning_is_reproduced_by_its_lanes_schedule(pruned_group):
    """Regression: a trial that a pruning rebuild continued in a narrower
    program (4 members for updates 0..4, then 2) had no run.lanes that
    reproduced it: with its first width only (lanes 4) the parameters
    differed by 7e-9 and the metrics rows from update 6 on, with its last
    width (lanes 2) by 1e-8 and from update 1. Its best_config.yaml now
    sets the width schedule, and train gives its policy, best/, metrics
    rows, periodic and final evaluations bit for bit."""
    from plume_jax.train.config import read_yaml
    from plume_jax.train.tune.report import best_config

    tmp, runs, _ = pruned_group
    trial = runs[0].folder
    tune = json.loads((trial / "summary.json").read_text())["tune"]
    text = best_config(read_yaml(trial / "config.yaml"), tune, 0, "pruned", 1.0)
    assert "bit for bit" in text.splitlines()[1] and "4 x 5 + 2 x 5 = 30 lane-updates" in text
    assert yaml.safe_load(text)["run"]["lanes"] == [{"from_update": 0, "lanes": 4},
                                                    {"from_update": 5, "lanes": 2}]
    (tmp / "best_config.yaml").write_text(text)
    again = tmp / "again"
    assert main(["train", "--config", str(tmp / "best_config.yaml"), "--out", str(again),
                 "--quiet"]) == 0
    _assert_the_same_run(trial, again)


# ---------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def study_3_trials(tmp_path_factory):
    """A study of 3 trials in batches of 2: programs of 2 members and of 1."""
    tmp = tmp_path_factory.mktemp("tune3")
    config, space = _files(tmp)
    out = tmp / "out"
    assert main(["tune", "--config", str(config), "--space", str(space), "--trials", "3",
                 "--out", str(out), "--quiet"]) == 0
    return tmp, out


def _lines(path: pathlib.Path, drop: tuple[str, ...] = ()) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


@pytest.mark.slow  # four compiles (programs of 2 and 1 members, two trains): about 60 s
def test_the_best_config_reproduces_its_trial_in_train_bit_for_bit(study_3_trials):
    """Regression (issue 43): ``train --config best_config.yaml`` gave the
    trial's parameters only to ~6e-8 (a single run against a member of a
    vmapped program); ``run.lanes`` now runs the program's width."""
    tmp, out = study_3_trials
    study = _study(out)
    assert sorted(t.number for t in study.trials) == [0, 1, 2]
    assert all(t.state.name == "COMPLETE" for t in study.trials)
    for name in ("summary.md", "best_config.yaml", "trials.csv", "results.json",
                 "optimization_history.png", "parallel_coordinate.png"):
        assert (out / name).is_file(), name
    best = json.loads((out / "results.json").read_text())["best"]
    trial_dir = out / best["folder"]
    trained_in = json.loads((trial_dir / "summary.json").read_text())["tune"]
    width = 2 if best["trial"] < 2 else 1  # trials 0 and 1 share the first program
    assert trained_in["programs"] == [{"from_update": 0, "lanes": width, "devices": 1}]
    assert yaml.safe_load((out / "best_config.yaml").read_text())["run"]["lanes"] == width
    again = tmp / "again"
    assert main(["train", "--config", str(out / "best_config.yaml"), "--out", str(again),
                 "--quiet"]) == 0
    _assert_the_same_run(trial_dir, again)
    # trial 2 trained alone, in a vmapped program of one member: run.lanes 1, not null
    alone = tmp / "alone"
    assert main(["train", "--config", str(out / "trials" / "00002" / "config.yaml"), "--set",
                 "run.lanes=1", "--out", str(alone), "--quiet"]) == 0
    _assert_the_same_run(out / "trials" / "00002", alone)


def _assert_the_same_run(trial_dir: pathlib.Path, again: pathlib.Path) -> None:
    """The exported policies (final and best), evaluation figures, periodic
    evaluations and metrics rows of two run folders are equal, bit for bit."""
    timing = ("seconds_incl_compile",)
    tuned = json.loads((trial_dir / "summary.json").read_text())["evaluation"]
    trained = json.loads((again / "summary.json").read_text())["evaluation"]
    assert {k: v for k, v in tuned.items() if k not in timing} == \
        {k: v for k, v in trained.items() if k not in timing}
    for policy in ("policy", "best"):
        a = np.load(trial_dir / policy / "policy.npz")
        b = np.load(again / policy / "policy.npz")
        assert a.files == b.files
        for key in a.files:
            assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), (policy, key)
    assert _lines(trial_dir / "evaluations.jsonl") == _lines(again / "evaluations.jsonl")
    assert _lines(trial_dir / "metrics.jsonl") == _lines(again / "metrics.jsonl")


def test_best_config_sets_a_width_a_schedule_or_no_lanes_and_says_which():
    """One program: its width; pruning rebuilds: the width schedule of the
    programs and their cost; sharded, or no programs recorded: no
    run.lanes, and the header says float tolerance only."""
    base = {"run": {"seed": 0}, "algo": {"learning_rate": 1e-3, "total_steps": 5120,
                                         "num_envs": 16, "num_steps": 32}}
    from plume_jax.train.tune.programs import reproducing_lanes
    from plume_jax.train.tune.report import best_config

    rebuilt = [{"from_update": 0, "lanes": 3, "devices": 1},
               {"from_update": 5, "lanes": 2, "devices": 1}]
    sharded = [{"from_update": 0, "lanes": 4, "devices": 2}]
    rebuilt_sharded = [{"from_update": 0, "lanes": 4, "devices": 2},
                       {"from_update": 5, "lanes": 2, "devices": 1}]
    one = [{"from_update": 0, "lanes": 3, "devices": 1}]
    schedule = [{"from_update": 0, "lanes": 3}, {"from_update": 5, "lanes": 2}]
    assert [reproducing_lanes(p) for p in (rebuilt, sharded, rebuilt_sharded, one, [])] == \
        [schedule, None, None, 3, None]
    for programs, words in ((sharded, "4 member(s) on 2 device(s)"),
                            (rebuilt_sharded, "2 member(s) on 1 device(s) from update 5"),
                            ([], "does not record"),
                            ([{"from_update": 0, "lanes": "3", "devices": 1}], "3 member(s)")):
        text = best_config(base, {"programs": programs,
                                  "reproducing_lanes": None}, 7, "s", 0.5)
        assert "float tolerance, not bit for bit" in text and words in text
        assert "lanes" not in yaml.safe_load(text)["run"]
    text = best_config(base, {"programs": one, "reproducing_lanes": 3}, 7, "s", 0.5)
    assert "bit for bit" in text and yaml.safe_load(text)["run"]["lanes"] == 3
    # a folder of the version before schedules (reproducing_lanes null): its programs decide
    text = best_config(base, {"programs": rebuilt, "reproducing_lanes": None}, 7, "s", 0.5)
    head = text.splitlines()[1]
    assert "reproduces it bit for bit" in head and "float tolerance, not" not in head
    assert "3 copies for updates 0..4, then 2 copies for updates 5..9" in head
    assert "3 x 5 + 2 x 5 = 25 lane-updates, 2.5 times the compute of one run's 10" in head
    assert yaml.safe_load(text)["run"]["lanes"] == schedule
    assert base["run"] == {"seed": 0}  # the trial's config is not changed in place


# --------------------------------------------------------------- one folder, several processes
def test_a_process_joining_while_the_first_writes_the_record_is_not_refused(tmp_path):
    """`plume-jax tune --storage journal` started twice at once: the second
    process found the folder holding only the first's record being written
    (its temporary file) and refused it as "a folder holding other files"
    (the slow two-process test failed so under load). A record in progress
    is not a file; the one record is created once, whole, and both join."""
    from plume_jax.train.tune import RECORD, claim_folder

    config, space = _files(tmp_path)
    out = tmp_path / "out"
    record = new_record(config, space, trials=4, out=out, storage="journal",
                        study_name="shared")
    out.mkdir()
    in_progress = out / f".{RECORD}.tmp-4242_0badf00d"  # the first process, mid-write
    in_progress.write_text(json.dumps(record)[:40])
    claim_folder(out, record, resume=False)
    assert json.loads((out / RECORD).read_text()) == {k: v for k, v in record.items()
                                                      if k != "out"}
    claim_folder(out, record, resume=False)  # and the first, when its turn comes, joins
    assert sorted(p.name for p in out.iterdir()) == sorted([RECORD, in_progress.name])


def test_a_folder_holding_another_study_is_still_refused(tmp_path):
    from plume_jax.train.tune import claim_folder

    config, space = _files(tmp_path)
    out = tmp_path / "out"
    claim_folder(out, new_record(config, space, trials=4, out=out, study_name="one"), False)
    other = new_record(config, space, trials=4, out=out, study_name="two")
    with pytest.raises(ValidationError, match="new or empty folder"):
        claim_folder(out, other, resume=False)


def _tune_process(args: list[str], kill_at: int | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # -P: the script's folder (tests/, with its own agents/) stays off sys.path
    head = [sys.executable, "-P", str(REPO / "tests" / "kill_at.py"), "evaluation",
            str(kill_at)] \
        if kill_at is not None else [sys.executable, "-m", "plume_jax"]
    return subprocess.Popen([*head, "tune", *args, "--quiet"], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_study_resumes_after_kill_9_with_no_trial_lost_or_counted_twice(tmp_path):
    config, space = _files(tmp_path)
    out = tmp_path / "out"
    args = ["--config", str(config), "--space", str(space), "--trials", "4", "--out", str(out)]
    killed = _tune_process(args, kill_at=3)  # the second batch's first evaluation
    killed.communicate(timeout=600)
    assert killed.returncode == -9
    states = {t.number: t.state.name for t in _study(out).trials}
    assert states == {0: "COMPLETE", 1: "COMPLETE", 2: "RUNNING", 3: "RUNNING"}
    assert main(["tune", "--resume", str(out), "--quiet"]) == 0
    trials = _study(out).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE", "FAIL", "FAIL",
                                              "COMPLETE", "COMPLETE"]
    assert [t.user_attrs.get("rerun_of") for t in trials[4:]] == [2, 3]
    assert [t.params for t in trials[4:]] == [t.params for t in trials[2:4]]
    rows = json.loads((out / "results.json").read_text())["trials"]
    assert sorted(r["trial"] for r in rows) == list(range(6))  # each trial once
    for t in trials[4:]:
        assert (out / t.user_attrs["folder"] / "summary.json").is_file()


@pytest.mark.slow
def test_two_processes_share_one_journal_study_and_every_trial_is_in_it_once(tmp_path):
    config, space = _files(tmp_path)
    out = tmp_path / "out"
    args = ["--config", str(config), "--space", str(space), "--trials", "4", "--out", str(out),
            "--storage", "journal", "--study-name", "shared"]
    first = _tune_process(args)
    second = _tune_process(args)
    for p in (first, second):
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    trials = _study(out).trials
    assert len(trials) >= 4 and all(t.state.name == "COMPLETE" for t in trials)
    assert len({t.number for t in trials}) == len(trials)
    assert len({t.user_attrs["pid"] for t in trials}) == 2  # both processes trained
    folders = [t.user_attrs["folder"] for t in trials]
    assert len(set(folders)) == len(folders)
    for folder in folders:
        assert (out / folder / "summary.json").is_file()


@pytest.mark.slow
def test_ctrl_c_tells_the_finished_trials_and_enqueues_the_unfinished_ones(tmp_path):
    config, space = _files(tmp_path)
    out = tmp_path / "out"
    running = _tune_process(["--config", str(config), "--space", str(space), "--trials", "2",
                             "--out", str(out)])
    metrics = out / "trials" / "00000" / "metrics.jsonl"
    deadline = time.monotonic() + 600
    while not (metrics.is_file() and metrics.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    running.send_signal(signal.SIGINT)
    _, err = running.communicate(timeout=600)
    assert running.returncode == 130, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("plume-jax: interrupted by SIGINT") and \
        f"plume-jax tune --resume {out}" in line
    states = [t.state.name for t in _study(out).trials]
    assert states == ["FAIL", "FAIL", "WAITING", "WAITING"]
    assert main(["tune", "--resume", str(out), "--quiet"]) == 0
    assert [t.state.name for t in _study(out).trials] == ["FAIL", "FAIL", "COMPLETE",
                                                          "COMPLETE"]
