"""The tune kill walk (issue 54): one study on one journal, trained by two
processes at once and a third started later, each killed with SIGKILL at
one of the points a kill can land on (between Optuna's ask and tune's
claim, mid-trial, between a trial's end and its tell), a resume killed
during the report; then the study folder is moved and resumed from another
current folder. The study must hold exactly ``--trials`` complete trials,
no value trained twice by the random sampler, and the report must name the
best trial. Real training, a tiny config; about 2-4 minutes on 2 loaded
cores."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
import yaml

optuna = pytest.importorskip("optuna", reason="optuna (the tune extra) is not installed")

REPO = pathlib.Path(__file__).resolve().parents[2]
TRIALS = 6

BASE = {
    "env": {"id": "PlumeNav-Gaussian-v0",
            "overrides": {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5,
                          "max_steps": 30, "start": {"type": "fixed", "position": [4, 7]}}},
    "algo": {"total_steps": 8 * 16 * 4, "num_envs": 8, "num_steps": 16, "update_epochs": 1,
             "num_minibatches": 1, "learning_rate": 3e-3, "normalize_obs": True},
    "network": {"hidden_sizes": [8]},
    "run": {"seed": 0, "log_every": 2},
    "eval": {"num_envs": 8, "every": 2, "periodic_episodes": 8},
}
SPACE = {"params": {"algo.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2,
                                           "log": True}},
         "sampler": "random", "seed": 0, "batch_size": 2}
GRID = {"params": {"algo.learning_rate": {"type": "float", "low": 1e-3, "high": 8e-3,
                                          "step": 1e-3}},
        "sampler": "grid", "seed": 0, "batch_size": 2}

#: ``python KILLER POINT N ARGS...``: ``plume-jax ARGS``, SIGKILLed the N-th
#: time it reaches POINT.
KILLER = '''
import os, signal, sys
point, nth, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
import plume_jax.train.loop  # binds the final evaluation before the patch
import plume_jax.train.tune as tune
from plume_jax.cli import main
from plume_jax.train import evaluation
from plume_jax.train.tune import report, study
seen = [0]
def reached():
    seen[0] += 1
    if seen[0] == nth:
        os.kill(os.getpid(), signal.SIGKILL)
def before(owner, name):
    real = getattr(owner, name)
    def wrapper(*a, **k):
        reached()
        return real(*a, **k)
    setattr(owner, name, wrapper)
owner, name = {"ask_claim": (study, "claim"), "mid_trial": (evaluation, "evaluate"),
               "before_tell": (tune, "_tell"), "report": (report, "plots")}[point]
before(owner, name)
sys.exit(main(args))
'''


def _env(tmp: pathlib.Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PLUME_JAX_TUNE_CLAIM_GRACE_S": "2",
            "JAX_COMPILATION_CACHE_DIR": str(tmp / "jax_cache"),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


def _start(tmp: pathlib.Path, args: list[str], kill: tuple[str, int] | None = None,
           cwd: pathlib.Path = REPO) -> subprocess.Popen:
    head = [sys.executable, str(tmp / "killer.py"), kill[0], str(kill[1])] if kill else \
        [sys.executable, "-m", "plume_jax"]
    return subprocess.Popen([*head, "tune", *args, "--quiet"], env=_env(tmp), cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait(p: subprocess.Popen, killed: bool) -> None:
    _, err = p.communicate(timeout=600)
    if killed:
        assert p.returncode == -9, f"not killed (rc {p.returncode}): {err[-2000:]}"
    else:
        assert p.returncode == 0, err[-2000:]


def _study(out: pathlib.Path) -> optuna.Study:
    from plume_jax.train.tune.study import open_storage

    record = json.loads((out / "tune.json").read_text())
    return optuna.load_study(study_name=record["study_name"],
                             storage=open_storage(record["storage"], out))


@pytest.mark.slow
@pytest.mark.parametrize("space", [SPACE, GRID], ids=["random", "grid"])
def test_tune_kill_walk(tmp_path, space):
    (tmp_path / "killer.py").write_text(KILLER)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(BASE))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
    out = tmp_path / "study"
    args = ["--config", str(tmp_path / "base.yaml"), "--space", str(tmp_path / "space.yaml"),
            "--trials", str(TRIALS), "--out", str(out), "--storage", "journal",
            "--study-name", "walk"]
    # two processes at once: one killed mid-trial (its first periodic evaluation), one
    # between ask and claim of its second batch's first trial
    a = _start(tmp_path, args, kill=("ask_claim", 3))
    b = _start(tmp_path, args, kill=("mid_trial", 1))
    _wait(b, killed=True)
    _wait(a, killed=True)
    time.sleep(2.5)  # the unclaimed trial is past the claim grace
    states = [t.state.name for t in _study(out).trials]
    assert "RUNNING" in states  # orphans: the walk has something to clean up
    # a third, started later: killed after its first trial trained, before the tell
    c = _start(tmp_path, args, kill=("before_tell", 1))
    _wait(c, killed=True)
    # a resume killed while it writes the report (its figures)
    d = _start(tmp_path, ["--resume", str(out)], kill=("report", 1))
    _wait(d, killed=True)
    # the folder moved, resumed from another current folder
    moved = tmp_path / "moved" / "study"
    moved.parent.mkdir()
    out.rename(moved)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    e = _start(tmp_path, ["--resume", "../moved/study"], cwd=elsewhere)
    _wait(e, killed=False)
    assert os.listdir(elsewhere) == []

    trials = _study(moved).trials
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert len(complete) == TRIALS, [(t.number, t.state.name, t.user_attrs) for t in trials]
    assert not [t for t in trials if t.state.name in ("RUNNING", "WAITING")]
    rates = [t.params["algo.learning_rate"] for t in complete]
    assert len(set(rates)) == TRIALS  # no value (no grid point) trained twice
    for t in complete:
        assert (moved / t.user_attrs["folder"] / "summary.json").is_file()
    results = json.loads((moved / "results.json").read_text())
    top = max(complete, key=lambda t: (t.value, -t.user_attrs["mean_steps_to_goal"]
                                       if t.user_attrs.get("mean_steps_to_goal") is not None
                                       else -1e9, -t.number))
    assert results["best"]["trial"] == top.number
    assert f"| 1 | {top.number} |" in (moved / "summary.md").read_text()
    best = yaml.safe_load((moved / "best_config.yaml").read_text())
    assert best["algo"]["learning_rate"] == top.params["algo.learning_rate"]
    assert len(results["trials"]) == len(trials)
