"""``plume-jax tune`` under resumes, moved folders, several processes and
hostile files (issue 54 items 1-11, issue 55 "claims" 4-5): each test is
named after what broke. Training is replaced by a stand-in that writes a
trial's folder as a finished trial's (no compile), so the study logic runs
at full speed; the real training is covered by tests/train/test_tune.py
and the kill walk (tests/train/test_tune_kill_walk.py)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

optuna = pytest.importorskip("optuna", reason="optuna (the tune extra) is not installed")

import plume_jax.train.tune as tune  # noqa: E402
from plume_jax.cli import main  # noqa: E402
from plume_jax.core.errors import ValidationError  # noqa: E402
from plume_jax.train.config import dump_yaml  # noqa: E402
from plume_jax.train.tune import read_record  # noqa: E402
from plume_jax.train.tune import report as tune_report  # noqa: E402
from plume_jax.train.tune import study as studies  # noqa: E402
from plume_jax.train.tune.space import space_from_mapping  # noqa: E402
from tests.train.test_tune import BASE  # noqa: E402

# the tiny training config of the tune tests (one definition: tests/train/test_tune.py)
RANDOM = {"params": {"algo.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2,
                                            "log": True}},
          "sampler": "random", "seed": 0, "batch_size": 2}
GRID = {"params": {"algo.update_epochs": {"type": "int", "low": 1, "high": 2},
                   "network.hidden_sizes": {"type": "categorical", "choices": [[8], [4]]}},
        "sampler": "grid", "seed": 0, "batch_size": 3}


def _score(values: dict) -> float:
    """A stand-in greedy success, different for different values."""
    text = json.dumps(values, sort_keys=True)
    return (sum(map(ord, text)) % 97) / 97.0


def fake_train_group(runs, *, stop, prune, bar):
    """Each trial "trains" at once: its folder written as a finished trial's."""
    for r in runs:
        r.folder.mkdir(parents=True, exist_ok=True)
        (r.folder / "config.yaml").write_text(dump_yaml(r.config.to_dict()))
        r.programs.append({"from_update": 0, "lanes": len(runs), "devices": 1})
        bonus = 1.0 if r.folder.parts[-3] == "m2" else 0.0  # the second machine's are best
        r.evaluation = {"success_rate": _score(r.values) + bonus, "mean_steps_to_goal": 10.0}
        (r.folder / "summary.json").write_text(json.dumps({
            "config": r.config.to_dict(), "evaluation": r.evaluation,
            "tune": {"trial": r.trial.number, "params": r.values, "pruned_at_update": None,
                     "programs": r.programs}}))
    return {}


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(tune, "train_group", fake_train_group)
    monkeypatch.setattr(tune_report, "plots", lambda study, out: [])


def _files(tmp: pathlib.Path, space: dict, base: dict | None = None):
    (tmp / "base.yaml").write_text(yaml.safe_dump(base or BASE))
    (tmp / "space.yaml").write_text(yaml.safe_dump(space))
    return tmp / "base.yaml", tmp / "space.yaml"


def _study(out: pathlib.Path) -> optuna.Study:
    record = json.loads((out / "tune.json").read_text())
    return optuna.load_study(study_name=record["study_name"],
                             storage=studies.open_storage(record["storage"], out))


def _complete(out: pathlib.Path) -> list:
    return [t for t in _study(out).trials if t.state.name == "COMPLETE"]


def _tune(*args: str) -> int:
    return main(["tune", *args, "--quiet"])


def _one_line_error(capsys, status: int, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("plume-jax: error:"), err
    for word in words:
        assert word in err, err
    return err


# ------------------------------------------------------------------- grids
def test_a_grid_study_over_its_whole_grid_ends_normally_and_writes_its_report(tmp_path, fake):
    """Regression (54.1): Optuna's grid sampler stopped the study at the
    last grid point (study.stop() outside optimize: RuntimeError); no
    results.json, best_config.yaml or summary.md."""
    config, space = _files(tmp_path, GRID)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "10",
                 "--out", str(out)) == 0
    done = _complete(out)
    assert len(done) == 4
    assert len({json.dumps(t.params, sort_keys=True) for t in done}) == 4
    for name in ("results.json", "best_config.yaml", "summary.md", "trials.csv"):
        assert (out / name).is_file(), name
    # a resume asks for no point again: the grid is done
    assert _tune("--resume", str(out), "--trials", "12") == 0
    assert len(_study(out).trials) == 4


def test_a_grid_point_the_config_refuses_is_never_trained_nor_retrained_on_resume(tmp_path,
                                                                                 fake):
    """Regression (54.2): num_envs {8, 6} x num_minibatches {1, 128}: 6 with
    128 passed the space check (each bound checked with the others at
    their lowest), failed as a trial, and --resume trained a finished
    point again. Every grid point is checked up front; the refused one is
    left out of the grid."""
    grid = {"params": {"algo.num_envs": {"type": "categorical", "choices": [8, 6]},
                       "algo.num_minibatches": {"type": "categorical", "choices": [1, 128]}},
            "sampler": "grid", "batch_size": 4}
    config, space = _files(tmp_path, grid)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "4",
                 "--out", str(out)) == 0
    assert _tune("--resume", str(out), "--trials", "5") == 0
    trials = _study(out).trials
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3
    assert {(t.params["algo.num_envs"], t.params["algo.num_minibatches"]) for t in trials} \
        == {(8, 1), (8, 128), (6, 1)}


def test_grid_values_never_go_past_high_and_each_is_checked(tmp_path):
    """Regression (54.3): ent_coef [0, 0.01] step 0.006 gave 0.012,
    update_epochs 2..8 step 4 gave 10, gamma 0.5..1 step 0.3 gave 1.1."""
    space = space_from_mapping({"params": {
        "algo.ent_coef": {"type": "float", "low": 0.0, "high": 0.01, "step": 0.006},
        "algo.update_epochs": {"type": "int", "low": 2, "high": 8, "step": 4},
        "algo.gamma": {"type": "float", "low": 0.5, "high": 1.0, "step": 0.3}},
        "sampler": "grid"}, BASE, str(tmp_path))
    grid = space.grid()
    assert grid == {"algo.ent_coef": [0.0, 0.006], "algo.update_epochs": [2, 6],
                    "algo.gamma": [0.5, 0.8]}
    assert space.refused(space.points()) == {}
    # an exact range keeps its high, not a float just past it
    assert space_from_mapping({"params": {"algo.ent_coef": {
        "type": "float", "low": 0.0, "high": 0.3, "step": 0.1}}, "sampler": "grid"},
        BASE, str(tmp_path)).grid()["algo.ent_coef"][-1] == 0.3


# ------------------------------------------------------------------- seeds
def test_a_resumed_study_and_a_joining_process_sample_values_never_trained(tmp_path, fake):
    """Regression (54.4): the sampler was seeded with the space's seed on
    every start, so a resume (and a second process) replayed it: trials 2
    and 3 got trials 0 and 1's learning rates."""
    config, space = _files(tmp_path, RANDOM)
    out = tmp_path / "out"
    args = ["--config", str(config), "--space", str(space), "--out", str(out),
            "--storage", "journal", "--study-name", "s"]
    assert _tune(*args, "--trials", "2") == 0
    assert _tune("--resume", str(out), "--trials", "4") == 0
    # a process joining with the very command of the first (its record, its folder)
    assert _tune(*args, "--trials", "6") == 0
    rates = [t.params["algo.learning_rate"] for t in _complete(out)]
    assert len(rates) == 6 and len(set(rates)) == 6
    # a fresh study of the same space is reproducible: its first values are the seed's
    again = tmp_path / "again"
    assert _tune("--config", str(config), "--space", str(space), "--out", str(again),
                 "--trials", "2") == 0
    assert [t.params for t in _complete(again)] == [t.params for t in _complete(out)[:2]]


def test_processes_asking_at_once_never_overshoot_the_budget(tmp_path):
    """Regression (54, overshoot): two processes each asked for what was
    missing at the same moment, one batch too many each. A trial with
    ``goal`` counted trials before it is skipped."""
    space = space_from_mapping(RANDOM, BASE, str(tmp_path))
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}")
    asked = []
    for _ in range(3):  # two processes' batches of 2 and 1, asked at once, budget 2
        trial = study.ask()
        studies.suggest(trial, space)
        asked.append(trial)
    reasons = [studies.skip_reason(study, t, space, goal=2) for t in asked]
    assert reasons[:2] == [None, None] and reasons[2].startswith("over budget")


def test_two_trials_holding_the_same_values_train_once(tmp_path):
    """Two processes that sampled alike (or enqueued one re-run twice): the
    later trial to look gives way."""
    space = space_from_mapping(RANDOM, BASE, str(tmp_path))
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}")
    for _ in range(2):
        study.enqueue_trial({"algo.learning_rate": 1e-3})
    one, two = study.ask(), study.ask()
    studies.suggest(one, space)
    studies.suggest(two, space)
    assert studies.skip_reason(study, two, space, goal=10) == "duplicate of trial 0"
    studies.skip(study, two, "duplicate of trial 0")
    assert studies.skip_reason(study, one, space, goal=10) is None


# ------------------------------------------------------------------- folders
def test_a_moved_study_folder_resumes_where_it_now_is(tmp_path, fake):
    """Regression (54.5): the record held the storage's absolute URL, so
    --resume of a moved folder started a new study at the old path."""
    config, space = _files(tmp_path, RANDOM)
    out = tmp_path / "before"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "2",
                 "--out", str(out)) == 0
    moved = tmp_path / "elsewhere" / "after"
    moved.parent.mkdir()
    out.rename(moved)
    assert _tune("--resume", str(moved), "--trials", "3") == 0
    assert not out.exists()
    trials = _complete(moved)
    assert [t.number for t in trials] == [0, 1, 2]
    assert (moved / "trials" / "00002" / "summary.json").is_file()
    assert json.loads((moved / "results.json").read_text())["storage"] == \
        f"sqlite:{moved / 'study.db'}"


def test_a_moved_folder_of_an_earlier_version_is_refused_not_restarted(tmp_path, fake):
    config, space = _files(tmp_path, RANDOM)
    out = tmp_path / "old"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "1",
                 "--out", str(out)) == 0
    record = json.loads((out / "tune.json").read_text())
    record["storage"] = f"sqlite:///{tmp_path / 'gone' / 'study.db'}"  # absolute, elsewhere
    (out / "tune.json").write_text(json.dumps(record))
    with pytest.raises(ValidationError, match="missing"):
        tune.tune(read_record(out), resume=True, progress=False)
    assert not (tmp_path / "gone").exists()


def test_a_resume_from_another_folder_writes_into_the_folder_given(tmp_path, fake,
                                                                  monkeypatch):
    """Regression (54.6): `tune --resume ../c1` from another folder wrote
    the new trials and the report into ./c1 (the record's relative out);
    a hand-edited out did the same."""
    config, space = _files(tmp_path, RANDOM)
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    assert _tune("--config", str(config), "--space", str(space), "--trials", "1",
                 "--out", "c1") == 0
    record = json.loads((tmp_path / "a" / "c1" / "tune.json").read_text())
    record["out"] = "somewhere/else"  # a hand edit
    (tmp_path / "a" / "c1" / "tune.json").write_text(json.dumps(record))
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "b")
    assert _tune("--resume", "../a/c1", "--trials", "2") == 0
    assert sorted(os.listdir(tmp_path / "b")) == []
    c1 = tmp_path / "a" / "c1"
    assert (c1 / "trials" / "00001" / "summary.json").is_file()
    assert len(json.loads((c1 / "results.json").read_text())["trials"]) == 2


def test_a_study_shared_by_two_out_folders_reports_its_best_from_either(tmp_path, fake):
    """Regression (54.7): one study, two --out folders (journal storage, as
    on two machines): a resume failed with "config.yaml ... No such file"
    for a trial the other process trained, and best_config.yaml stayed at
    an older trial. The study holds each trial's config and programs."""
    config, space = _files(tmp_path, RANDOM)
    journal = tmp_path / "shared.journal"
    common = ["--config", str(config), "--space", str(space), "--storage", f"journal:{journal}",
              "--study-name", "shared"]
    assert _tune(*common, "--trials", "2", "--out", str(tmp_path / "m1")) == 0
    assert _tune(*common, "--trials", "6", "--out", str(tmp_path / "m2")) == 0
    m1 = tmp_path / "m1"
    import shutil
    shutil.rmtree(tmp_path / "m2")  # the other machine's folder: not reachable from here
    assert _tune("--resume", str(m1), "--trials", "6") == 0
    results = json.loads((m1 / "results.json").read_text())
    best = results["best"]
    study = _study(m1)
    top = max((t for t in study.trials if t.state.name == "COMPLETE"),
              key=lambda t: (t.value, -t.number))
    assert best["trial"] == top.number
    written = yaml.safe_load((m1 / "best_config.yaml").read_text())
    assert written["algo"]["learning_rate"] == top.params["algo.learning_rate"]
    assert top.user_attrs["out_id"] != json.loads((m1 / "tune.json").read_text())["out_id"]
    assert f"{tmp_path / 'm2'}/trials/" in (m1 / "summary.md").read_text()


# ------------------------------------------------------------------- orphans
def _dead_pid() -> int:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return dead.pid


def test_a_trial_killed_between_ask_and_claim_is_requeued(tmp_path, fake, monkeypatch):
    """Regression (54.8): a kill -9 between Optuna's ask() and tune's claim
    left a running trial with no host or pid, which orphan detection
    skipped: --trials 3 ended with 2 complete trials."""
    config, space = _files(tmp_path, RANDOM)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "2",
                 "--out", str(out)) == 0
    _study(out).ask()  # a process that died right after asking
    monkeypatch.setenv("PLUME_JAX_TUNE_CLAIM_GRACE_S", "0")
    assert _tune("--resume", str(out), "--trials", "3") == 0
    states = [t.state.name for t in _study(out).trials]
    assert states.count("COMPLETE") == 3 and states.count("RUNNING") == 0


def test_a_trial_whose_pid_now_belongs_to_another_process_is_requeued(tmp_path, fake):
    """Regression (54.8): a killed trial whose pid a live process now has
    was never requeued. The claim records the process's start time."""
    config, space = _files(tmp_path, RANDOM)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "1",
                 "--out", str(out)) == 0
    study = _study(out)
    orphan = study.ask()
    studies.claim(orphan)
    orphan.set_user_attr("nonce", "a killed process")
    orphan.set_user_attr("pid", os.getppid())  # alive: the pid was reused
    orphan.set_user_attr("pid_start", 1)  # ... by a process started later than the claim's
    orphan.suggest_float("algo.learning_rate", 1e-4, 1e-2, log=True)
    assert _tune("--resume", str(out), "--trials", "2") == 0
    trials = _study(out).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "COMPLETE"]
    assert trials[2].user_attrs["rerun_of"] == 1


def test_a_trial_killed_after_training_before_its_tell_is_told_not_retrained(tmp_path, fake):
    config, space = _files(tmp_path, RANDOM)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "1",
                 "--out", str(out)) == 0
    study = _study(out)
    trial = study.ask()
    studies.claim(trial)
    trial.set_user_attr("nonce", "killed")
    trial.set_user_attr("pid", _dead_pid())
    values = studies.suggest(trial, space_from_mapping(RANDOM, BASE, str(tmp_path)))
    trial.set_user_attr("folder", "trials/00001")
    run = tune.TrialRun(trial, values, tune._space(read_record(out)).config(values),
                        out / "trials" / "00001")
    fake_train_group([run], stop=None, prune=False, bar=None)  # its folder, finished
    assert _tune("--resume", str(out), "--trials", "2") == 0
    trials = _study(out).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]
    assert trials[1].value == _score(values)


# ------------------------------------------------------------------- storages
@pytest.mark.parametrize("storage, words", [
    ("sqlite:///", ["in-memory"]),
    ("sqlite://", ["in-memory"]),
    ("sqlite:///:memory:", ["in-memory"]),
    ("redis://localhost", ["--storage"]),
    ("ftp://x", ["--storage"]),
    ("journal:", ["journal:PATH"]),
    ("postgresql://u@127.0.0.1:1/db", ["--storage", "a storage that opens"]),
    ("mysql://u@127.0.0.1:1/db", ["--storage", "a storage that opens"]),
])
def test_a_storage_that_cannot_hold_a_study_is_one_line(tmp_path, capsys, fake, storage,
                                                        words):
    """Regression (54.9, 54.11): an in-memory SQLite database was accepted
    (the study vanished at exit); unknown schemes and missing drivers were
    tracebacks. Nothing is left behind."""
    config, space = _files(tmp_path, RANDOM)
    status = _tune("--config", str(config), "--space", str(space), "--trials", "1",
                   "--out", str(tmp_path / "out"), "--storage", storage)
    _one_line_error(capsys, status, *words)
    assert not (tmp_path / "out").exists()


def test_a_journal_in_a_missing_folder_is_one_line(tmp_path, capsys, fake):
    config, space = _files(tmp_path, RANDOM)
    status = _tune("--config", str(config), "--space", str(space), "--trials", "1",
                   "--out", str(tmp_path / "out"), "--storage",
                   f"journal:{tmp_path / 'no' / 'such' / 'x.journal'}")
    _one_line_error(capsys, status, "a folder that exists")
    assert not (tmp_path / "out").exists()


def test_a_garbage_study_db_is_one_line(tmp_path, capsys, fake):
    config, space = _files(tmp_path, RANDOM)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "1",
                 "--out", str(out)) == 0
    (out / "study.db").write_bytes(b"garbage" * 100)
    _one_line_error(capsys, _tune("--resume", str(out)), "not one")


def test_a_journal_whose_last_line_a_kill_cut_is_repaired(tmp_path, fake):
    """Regression (54.11): a journal whose last line was cut (a kill, a
    full disk) made every later --resume fail with JSONDecodeError."""
    config, space = _files(tmp_path, RANDOM)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "1",
                 "--out", str(out), "--storage", "journal") == 0
    with open(out / "study.journal", "a") as f:
        f.write('{"op_code": 5, "worker_id": "x", "trial_id": 0, "par')  # cut mid-line
    assert _tune("--resume", str(out), "--trials", "2") == 0
    assert len(_complete(out)) == 2


def test_a_journal_damaged_in_the_middle_is_one_line_naming_the_line(tmp_path, capsys, fake):
    config, space = _files(tmp_path, RANDOM)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space), "--trials", "1",
                 "--out", str(out), "--storage", "journal") == 0
    lines = (out / "study.journal").read_text().splitlines(keepends=True)
    lines[1] = "garbage" + lines[1]
    (out / "study.journal").write_text("".join(lines))
    _one_line_error(capsys, _tune("--resume", str(out)), "line 2 is damaged")


@pytest.mark.parametrize("text, words", [
    ("[1, 2]", ["a JSON object"]),
    ("{}", ["'config'"]),
    ("not json {", ["--resume"]),
    ('{"config": {}, "config_dir": ".", "space": {}, "storage": "sqlite:study.db", '
     '"study_name": "s", "trials": "3"}', ["'trials'"]),
    ("[" * 100_000, ["--resume"]),
    (" " * 3_000_000 + "{}", ["--resume"]),
])
def test_a_damaged_study_record_is_one_line(tmp_path, capsys, text, words):
    """Regression (54.11): a damaged tune.json on --resume (a list, {},
    garbage, 3 MB read whole) gave TypeError, KeyError, JSONDecodeError."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "tune.json").write_text(text)
    _one_line_error(capsys, _tune("--resume", str(out)), *words)


# ------------------------------------------------------------------- hostile spaces
@pytest.mark.parametrize("param, words", [
    ({"type": "int", "low": 0, "high": 10**12}, ["at most 10000"]),
    ({"type": "float", "low": 0.0, "high": 1.0, "step": 1e-12}, ["at most 10000"]),
    ({"type": "float", "low": -1e308, "high": 1e308, "step": 1.0}, ["magnitude"]),
    ({"type": "int", "low": 0, "high": int("9" * 400)}, ["magnitude", "400 digits"]),
    ({"type": "int", "low": 0, "high": 4, "step": 0.5}, ["a positive integer"]),
    ({"type": "categorical", "choices": list(range(20_000))}, ["at most 10000 values"]),
])
def test_a_hostile_search_space_is_one_line(tmp_path, capsys, param, words):
    """Regression (54.11): a grid of 10^12 seeds or a float step of 1e-12
    (MemoryError), a range of +-1e308 or a 400-digit bound (OverflowError)."""
    space = {"params": {"run.seed": param} if param["type"] != "float" else
             {"algo.ent_coef": param}, "sampler": "grid"}
    config, space_file = _files(tmp_path, space)
    status = _tune("--config", str(config), "--space", str(space_file), "--trials", "1",
                   "--out", str(tmp_path / "out"))
    _one_line_error(capsys, status, *words)
    assert not (tmp_path / "out").exists()


def test_a_missing_init_from_policy_in_a_search_space_is_refused_up_front(tmp_path, capsys):
    """Regression (54.10): run.init_from: [null, /nonexistent] was accepted;
    the missing policy stopped the whole call when its batch's program was
    built, and every resume retried that batch."""
    space = {"params": {"run.init_from": {"type": "categorical",
                                          "choices": [None, str(tmp_path / "nonexistent")]}}}
    config, space_file = _files(tmp_path, space)
    status = _tune("--config", str(config), "--space", str(space_file), "--trials", "2",
                   "--out", str(tmp_path / "out"))
    _one_line_error(capsys, status, "run.init_from", "nonexistent")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------- issue 55
def test_command_line_set_beats_the_search_space_set(tmp_path, fake):
    """Regression (55.4): --set algo.total_steps=... ran the space's `set:`
    value (500000) instead; the command line wins."""
    space = {**RANDOM, "set": {"algo.total_steps": 16 * 32 * 20, "algo.ent_coef": 0.01}}
    config, space_file = _files(tmp_path, space)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space_file), "--trials", "1",
                 "--out", str(out), "--set", f"algo.total_steps={16 * 32 * 3}") == 0
    trained = yaml.safe_load((out / "trials" / "00000" / "config.yaml").read_text())
    assert trained["algo"]["total_steps"] == 16 * 32 * 3
    assert trained["algo"]["ent_coef"] == 0.01  # the space's other settings stay


def test_a_command_line_set_of_a_tuned_parameter_is_refused_naming_both(tmp_path, capsys):
    config, space_file = _files(tmp_path, RANDOM)
    status = _tune("--config", str(config), "--space", str(space_file), "--trials", "1",
                   "--out", str(tmp_path / "out"), "--set", "algo.learning_rate=0.001")
    _one_line_error(capsys, status, "--set algo.learning_rate", "params: algo.learning_rate")


def test_a_failed_first_tune_writes_nothing(tmp_path, capsys, fake, monkeypatch):
    """Regression (55.5): without Optuna the first tune left tune.json, so
    the same command after installing was refused (and --resume refused
    its --batch-size)."""
    config, space_file = _files(tmp_path, RANDOM)
    out = tmp_path / "out"
    command = ["--config", str(config), "--space", str(space_file), "--trials", "1",
               "--out", str(out), "--batch-size", "1"]
    real = studies._optuna

    def no_optuna():
        raise ValidationError.for_parameter("tune", "optuna", "optuna installed: pip install "
                                            "'plume-jax[tune]'")

    monkeypatch.setattr(studies, "_optuna", no_optuna)
    _one_line_error(capsys, _tune(*command), "optuna installed")
    assert not out.exists()
    monkeypatch.setattr(studies, "_optuna", real)
    assert _tune(*command) == 0  # after installing, the same command runs


def test_tune_progress_says_no_success_before_an_episode_ended():
    """Regression (55, smaller): tune's progress line said "0 episodes
    ended ... success 100.0%" (the members' mean count, rounded, beside the
    rate of the one member whose episode ended)."""
    import numpy as np

    from plume_jax.progress import ProgressBar
    from plume_jax.train.progress import Progress

    bar = ProgressBar(10, "tune", quiet=True)
    shown = []
    bar.update = lambda value, message="": shown.append(message)  # type: ignore[method-assign]
    progress = Progress(bar, 10, members=4)
    progress({"update": np.array([1, 1, 1, 1]), "env_steps": np.array([512] * 4),
              "episodes": np.array([1.0, 0.0, 0.0, 0.0]),
              "success_rate": np.array([1.0, np.nan, np.nan, np.nan]),
              "return_mean": np.array([1.0, np.nan, np.nan, np.nan]),
              "length_mean": np.array([30.0, np.nan, np.nan, np.nan])})
    line = shown[-1]
    assert "0 episodes ended" not in line
    assert "1 episode ended" in line and "1 of 4 members" in line


# ------------------------------------------------------------------- 55.3: what best_config claims
def test_best_config_claims_no_bits_for_a_trial_whose_program_held_env_settings_per_member():
    """Regression (55.3): best_config.yaml said "reproduces it bit for bit"
    for a trial of configs/tune_gaussian.yaml, whose program's members
    differed in env.reward.scale: tune holds such a setting per member,
    run.lanes once for all lanes, and train differed from the first metrics
    row (policy by 6e-8 after 8 updates; measured, docs/training.md). The
    trial's programs record it, and the header says float tolerance."""
    from plume_jax.train.tune.programs import reproducing_lanes
    from plume_jax.train.tune.report import best_config

    programs = [{"from_update": 0, "lanes": 2, "devices": 1, "env_per_member": True}]
    assert reproducing_lanes(programs) is None
    assert reproducing_lanes([{**programs[0], "env_per_member": False}]) == 2
    base = {"run": {"seed": 0}, "algo": {"total_steps": 5120, "num_envs": 16,
                                         "num_steps": 32}}
    text = best_config(base, {"programs": programs}, 3, "s", 0.5)
    head = text.splitlines()[1]
    assert "float tolerance, not bit for bit" in head and "env settings" in head
    assert "lanes" not in yaml.safe_load(text)["run"]


@pytest.mark.slow  # two trials trained in one program (one compile): about 30 s
def test_a_program_whose_members_differ_in_an_env_setting_is_recorded(tmp_path):
    space = {"params": {"env.reward.scale": {"type": "float", "low": 0.02, "high": 0.2}},
             "sampler": "random", "seed": 0, "batch_size": 2}
    base = {**BASE, "env": {**BASE["env"], "overrides": {
        **BASE["env"]["overrides"],
        "reward": {"type": "potential_shaping", "goal_reward": 1.0, "gamma": 1.0,
                   "scale": 0.1}}}}
    config, space_file = _files(tmp_path, space, base)
    out = tmp_path / "out"
    assert _tune("--config", str(config), "--space", str(space_file), "--trials", "2",
                 "--out", str(out)) == 0
    for trial in ("00000", "00001"):
        tune_section = json.loads((out / "trials" / trial / "summary.json").read_text())["tune"]
        assert tune_section["programs"] == [{"from_update": 0, "lanes": 2, "devices": 1,
                                             "env_per_member": True}]
        assert tune_section["reproducing_lanes"] is None
    assert "float tolerance, not bit for bit" in \
        (out / "best_config.yaml").read_text().splitlines()[1]
