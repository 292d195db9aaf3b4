"""``plume-jax sweep``: several trainings as one compiled program, its output
files, and agreement of a sweep member with the single run of the same
seed and hyperparameters."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math

import numpy as np
import pytest
import yaml

from plume_jax.cli import main
from plume_jax.train.config import train_config
from plume_jax.train.trainer import train

TRIVIAL_ENV = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5, "max_steps": 40,
               "start": {"type": "fixed", "position": [4, 7]}}
NUM_UPDATES = 10
BASE = {
    "env": {"id": "PlumeNav-Gaussian-v0", "overrides": TRIVIAL_ENV},
    "algo": {"total_steps": 16 * 32 * NUM_UPDATES, "num_envs": 16, "num_steps": 32,
             "update_epochs": 2, "num_minibatches": 2, "learning_rate": 3e-3,
             "normalize_obs": True, "ent_coef": 0.0},
    "network": {"hidden_sizes": [16, 16]},
    "run": {"seed": 0, "log_every": 5},
    "eval": {"num_envs": 32},
}
GRID = {"run.seed": [0, 1], "algo.learning_rate": [0.001, 0.003], "env.max_steps": [40]}


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, "grid": GRID}, sort_keys=False))
    out = folder / "out"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["sweep", "--config", str(path), "--out", str(out)])
    assert code == 0, buffer.getvalue()
    return {"out": out, "stdout": buffer.getvalue(),
            "results": json.loads((out / "results.json").read_text()),
            "rows": [json.loads(line) for line in
                     (out / "metrics.jsonl").read_text().splitlines()]}


def test_sweep_writes_results_table_and_learning_curves(sweep_run):
    out, results = sweep_run["out"], sweep_run["results"]
    assert results["members"] == 4
    assert [r["member"] for r in results["results"]] == [0, 1, 2, 3]
    assert [(r["run.seed"], r["algo.learning_rate"]) for r in results["results"]] == \
        [(0, 0.001), (0, 0.003), (1, 0.001), (1, 0.003)]
    csv_lines = (out / "results.csv").read_text().splitlines()
    assert len(csv_lines) == 5 and "eval_success_rate" in csv_lines[0]
    assert (out / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert len(sweep_run["rows"]) == 4 * NUM_UPDATES
    assert results["compile_seconds"] > 0 and results["train_seconds"] > 0
    lines = [line for line in sweep_run["stdout"].splitlines() if line.startswith("[sweep]")]
    assert [line.split()[2] for line in lines] == ["5/10", "10/10"]
    assert "4 members" in lines[-1]


def test_every_member_learned_the_trivial_task(sweep_run):
    for r in sweep_run["results"]["results"]:
        assert r["eval_success_rate"] == 1.0, r


def _member_config(seed: int, lr: float):
    data = copy.deepcopy(BASE)
    data["run"]["seed"] = seed
    data["algo"]["learning_rate"] = lr
    return train_config(data)


def test_a_sweep_member_agrees_with_the_single_run_on_the_first_updates(sweep_run):
    """Member 3 (seed 1, lr 0.003) against the plain, un-vmapped run of the
    same config: vmap only changes the order of float reductions, so the
    first updates agree to float tolerance (later ones may drift apart)."""
    single = train(_member_config(1, 0.003), None, progress=False, evaluate=False)
    member = [r for r in sweep_run["rows"] if r["member"] == 3]
    keys = ("return_mean", "success_rate", "length_mean", "loss", "pg_loss", "vf_loss",
            "entropy", "approx_kl", "value_mean", "learning_rate")
    for a, b in zip(single.rows[:3], member[:3]):
        assert a["update"] == b["update"]
        for k in keys:
            if a[k] is None or b[k] is None:
                assert a[k] == b[k], k
            else:
                assert math.isclose(a[k], b[k], rel_tol=1e-3, abs_tol=1e-5), (k, a[k], b[k])


@pytest.mark.slow
def test_sweep_members_and_single_runs_reach_statistically_the_same_result(tmp_path):
    """Over a whole run a member and its single run drift apart; across
    seeds their outcomes must be the same in distribution."""
    data = copy.deepcopy(BASE)
    data["algo"]["total_steps"] = 16 * 32 * 40
    grid = {"run.seed": list(range(6))}
    from plume_jax.train.sweep import run_sweep, sweep_config

    sweep = run_sweep(sweep_config({"base": data, "grid": grid}), None, progress=False)
    member_len = [np.mean(np.asarray(sweep.metrics["length_mean"])[-5:, j]) for j in range(6)]
    single_len = []
    for seed in range(6):
        d = copy.deepcopy(data)
        d["run"]["seed"] = seed
        rows = train(train_config(d), None, progress=False, evaluate=False).rows
        single_len.append(np.mean([r["length_mean"] for r in rows[-5:]]))
    diff = np.mean(member_len) - np.mean(single_len)
    spread = np.sqrt(np.var(member_len) / 6 + np.var(single_len) / 6) + 0.05
    assert abs(diff) < 3 * spread, (member_len, single_len)
