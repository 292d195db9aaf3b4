"""Run folders never lose a result (issue 26): write-ahead resume from an
older checkpoint, the folder lock, checksummed checkpoints, metrics files
that must cover their checkpoint, sweeps that never rewind or drop a
member, unwritable TensorBoard folders refused before anything changes,
and the evaluation length inherited from max_steps bounded."""

from __future__ import annotations

import json
import pathlib

import pytest

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.train.config import train_config
from plume_jax.train.folder import FolderLock
from plume_jax.train.sweep import run_sweep, sweep_config
from plume_jax.train.run import train

TINY = {"env": {"id": "PlumeNav-Gaussian-v0",
                "overrides": {"grid_size": [12, 12], "max_steps": 20}},
        "algo": {"total_steps": 4 * 8 * 4, "num_envs": 4, "num_steps": 8,
                 "update_epochs": 1, "num_minibatches": 1},
        "network": {"hidden_sizes": [8]},
        "run": {"seed": 0, "log_every": 1, "checkpoint_every": 1, "tensorboard": False},
        "eval": {"num_envs": 4, "num_steps": 10}}


def _updates(path: pathlib.Path) -> list[int]:
    return [json.loads(line)["update"] for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished 4-update run with every update's checkpoint kept."""
    out = tmp_path_factory.mktemp("rules") / "run"
    train(train_config(TINY), out, progress=False, evaluate=False)
    return out


@pytest.mark.slow
def test_resume_from_an_older_checkpoint_moves_the_later_state_aside_not_away(trained, tmp_path):
    """Defect 2: resuming from a kept checkpoint used to trim the metrics and
    delete the later kept checkpoints before anything durable was written."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    config = train_config({**TINY, "algo": {**TINY["algo"], "total_steps": 4 * 8 * 2}})
    result = train(config, run, progress=False, evaluate=False,
                   resume=run / "checkpoints" / "update_00000001")
    aside = list((run / "superseded").iterdir())
    assert len(aside) == 1
    assert _updates(aside[0] / "metrics.jsonl") == [1, 2, 3, 4]
    assert sorted(p.name for p in (aside[0] / "checkpoints").iterdir()) == [
        "update_00000002", "update_00000003"]
    assert json.loads((aside[0] / "checkpoint" / "meta.json").read_text())["update"] == 4
    assert (aside[0] / "policy" / "policy.npz").exists()
    assert _updates(run / "metrics.jsonl") == [1, 2]
    assert any("moved, whole" in n for n in result.summary["notes"])


def test_resume_refuses_a_metrics_file_shorter_than_its_checkpoint(trained, tmp_path):
    """Defect 9: a metrics.jsonl shorter than the checkpoint resumed with those
    updates silently missing; a row without 'update' was a KeyError."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join(lines[:2]) + "\n")
    config = train_config({**TINY, "algo": {**TINY["algo"], "total_steps": 4 * 8 * 5}})
    with pytest.raises(StateError, match="lacks the metrics rows"):
        train(config, run, progress=False, evaluate=False, resume=run)
    (run / "metrics.jsonl").write_text('{"env_steps": 32}\n' + "\n".join(lines) + "\n")
    with pytest.raises(ValidationError, match="metrics.jsonl:1"):
        train(config, run, progress=False, evaluate=False, resume=run)


@pytest.mark.parametrize("where", [0, 1, -2])
def test_a_damaged_checkpoint_byte_is_refused_by_its_checksum(trained, tmp_path, where):
    """Defect 9: single-byte flips in runner.msgpack resumed with other weights."""
    import shutil

    from plume_jax.train.checkpoint import read_checkpoint

    ckpt = tmp_path / "ckpt"
    shutil.copytree(trained / "checkpoint", ckpt)
    data = bytearray((ckpt / "runner.msgpack").read_bytes())
    position = len(data) // 2 if where == 0 else (len(data) - 40 if where == -2 else 200)
    data[position] ^= 0x01
    (ckpt / "runner.msgpack").write_bytes(bytes(data))
    with pytest.raises(ValidationError, match="runner.msgpack"):
        read_checkpoint(ckpt)


def test_a_second_process_on_a_locked_folder_is_refused_naming_the_holder(tmp_path):
    """Defect 10: two sweeps (or resumes) into one folder interleaved their writes."""
    with FolderLock(tmp_path / "run", "train"):
        with pytest.raises(StateError, match=r"in use by another plume-jax process \(pid \d+"):
            train(train_config(TINY), tmp_path / "run", progress=False, evaluate=False)
    assert not (tmp_path / "run").exists()  # the lock made it and took it away, empty


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_an_unwritable_tensorboard_folder_is_refused_before_the_resume_changes_anything(
        trained, tmp_path, kind):
    """Defect 7: a TensorBoard folder that is a file or a symbolic link failed the
    resume with a traceback after the folder was already trimmed."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    if kind == "file":
        (run / "tensorboard").write_text("not a folder")
    else:
        (tmp_path / "elsewhere").mkdir()
        (run / "tensorboard").symlink_to(tmp_path / "elsewhere")
    before = (run / "metrics.jsonl").read_bytes()
    config = train_config({**TINY, "algo": {**TINY["algo"], "total_steps": 4 * 8 * 5},
                           "run": {**TINY["run"], "tensorboard": True}})
    with pytest.raises(ValidationError, match="run.tensorboard"):
        train(config, run, progress=False, evaluate=False, resume=run)
    assert (run / "metrics.jsonl").read_bytes() == before


@pytest.mark.slow
def test_an_evaluation_inherits_at_most_a_bounded_number_of_steps(tmp_path, monkeypatch):
    """Defect 8: max_steps=2**31-1 with eval.num_steps null asked for 34 GB.
    (The bound is lowered here so the test runs few steps; it is 100 000.)"""
    from plume_jax.train import evaluation

    assert evaluation.MAX_INHERITED_EVAL_STEPS == 100_000
    monkeypatch.setattr(evaluation, "MAX_INHERITED_EVAL_STEPS", 50)
    raw = {**TINY, "env": {"id": "PlumeNav-Gaussian-v0", "overrides": {
        "grid_size": [12, 12], "max_steps": 2**31 - 1, "goal_radius": 7.0}},
           "algo": {**TINY["algo"], "total_steps": 32},
           "eval": {"num_envs": 2, "num_steps": None}}
    result = train(train_config(raw), progress=False)
    assert result.summary["evaluation"]["max_steps"] == 50


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    raw = {**TINY, "algo": {**TINY["algo"], "total_steps": 64}}
    sweep = sweep_config({"base": raw, "grid": {"run.seed": [0, 1]}})
    out = tmp_path_factory.mktemp("sweep") / "s"
    run_sweep(sweep, out, progress=False, evaluate_members=False)
    return sweep, out


def test_sweep_resume_recovers_a_deleted_member_from_the_sweep_metrics(sweep_run, tmp_path):
    """Defect 3: after a member's folder was deleted, sweep --resume crashed
    in the plots and rewrote the sweep's metrics.jsonl without its rows."""
    import shutil

    sweep, original = sweep_run
    out = tmp_path / "s"
    shutil.copytree(original, out)
    before = (out / "metrics.jsonl").read_text().splitlines()
    shutil.rmtree(out / "members" / sweep.names[0])
    run_sweep(sweep, out, progress=False, evaluate_members=False, resume=True)
    assert sorted((out / "metrics.jsonl").read_text().splitlines()) == sorted(before)
    assert _updates(out / "members" / sweep.names[0] / "metrics.jsonl") == [1, 2]


def test_sweep_resume_from_a_damaged_checkpoint_changes_no_member_file(sweep_run, tmp_path):
    """The one-driver refactor trimmed the members' metrics to the program
    checkpoint's update before loading (and checking) that checkpoint: a
    damaged one was refused only after later rows were dropped."""
    import shutil

    sweep, original = sweep_run
    out = tmp_path / "s"
    shutil.copytree(original, out)
    program = out / "programs" / "1"
    shutil.rmtree(program / "checkpoint")
    shutil.copytree(program / "checkpoints" / "update_00000001", program / "checkpoint")
    (program / "checkpoint" / "runner.msgpack").write_bytes(b"not a checkpoint")
    before = {m: (out / "members" / m / "metrics.jsonl").read_bytes() for m in sweep.names}
    with pytest.raises(ValidationError):
        run_sweep(sweep, out, progress=False, evaluate_members=False, resume=True)
    assert {m: (out / "members" / m / "metrics.jsonl").read_bytes()
            for m in sweep.names} == before
    assert not (program / "superseded").exists()


def test_a_sweep_resume_from_a_damaged_checkpoint_writes_nothing(sweep_run, tmp_path):
    """sweep --resume rewrote sweep.yaml and every member's config.yaml before
    it loaded (and checked) its first program's checkpoint; the one run
    function loads it before anything is written, so a refused resume leaves
    every file of the sweep as it was (contents and modification times)."""
    import shutil

    from plume_jax.train.folder import LOCK_NAME

    sweep, original = sweep_run
    out = tmp_path / "s"
    shutil.copytree(original, out)
    (out / "programs" / "1" / "checkpoint" / "runner.msgpack").write_bytes(b"not a checkpoint")

    def files() -> dict[str, tuple[bytes, int]]:
        return {str(p.relative_to(out)): (p.read_bytes(), p.stat().st_mtime_ns)
                for p in sorted(out.rglob("*")) if p.is_file() and p.name != LOCK_NAME}

    before = files()
    with pytest.raises(ValidationError):
        run_sweep(sweep, out, progress=False, evaluate_members=False, resume=True)
    after = files()
    assert [k for k in before if before[k] != after.get(k)] == [] and after.keys() == before.keys()


@pytest.mark.slow
def test_sweep_resume_refuses_to_rewind_a_member_trained_further(sweep_run, tmp_path):
    """Defect 4: a member trained further with train --resume was silently
    reverted to the sweep's budget by sweep --resume."""
    import shutil

    sweep, original = sweep_run
    out = tmp_path / "s"
    shutil.copytree(original, out)
    member = out / "members" / sweep.names[1]
    further = train_config({**sweep.configs[1].to_dict(),
                            "algo": {**sweep.configs[1].to_dict()["algo"], "total_steps": 96}})
    train(further, member, progress=False, evaluate=False, resume=member)
    before = (member / "metrics.jsonl").read_bytes()
    with pytest.raises(ValidationError, match="trained further, to 3 updates"):
        run_sweep(sweep, out, progress=False, evaluate_members=False, resume=True)
    assert (member / "metrics.jsonl").read_bytes() == before


@pytest.mark.slow
def test_train_seed_above_two_to_the_31_is_accepted_and_every_bit_counts():
    """Defect 12: run.seed stopped at 2**31 - 1 though every door takes
    [0, 2**63); and jax.random.key drops the bits above 32, so seeds that
    differ only there must still train differently (plume_jax.core.seeding)."""
    import jax
    import numpy as np

    raw = {**TINY, "algo": {**TINY["algo"], "total_steps": 32}}
    big = train_config({**raw, "run": {**TINY["run"], "seed": 4611686018427387904}})
    assert big.run["seed"] == 2**62
    runs = [train(train_config({**raw, "run": {**TINY["run"], "seed": s}}), progress=False,
                  evaluate=False) for s in (5, 5 + 2**32)]
    a, b = (jax.tree.leaves(r.runner.params)[0] for r in runs)
    assert not np.array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValidationError, match=r"run\.seed"):
        train_config({**raw, "run": {**TINY["run"], "seed": 2**63}})


@pytest.mark.parametrize("signame", [
    "SIGINT", pytest.param("SIGTERM", marks=pytest.mark.slow)])  # one handler; CI time
def test_an_interrupted_train_checkpoints_and_says_how_to_resume(tmp_path, signame):
    """Ctrl-C (or a scheduler's SIGTERM) printed a long traceback and wrote no
    checkpoint: a run shorter than the checkpoint period could not resume."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    raw = {**TINY, "algo": {**TINY["algo"], "total_steps": 4 * 8 * 100000},
           "run": {**TINY["run"], "checkpoint_every": None, "checkpoint_minutes": 60.0}}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(raw))
    root = pathlib.Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "plume_jax", "train", "--config", "t.yaml",
                             "--out", "run", "--quiet"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.exists() and metrics.stat().st_size) and time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == (130 if signame == "SIGINT" else 143), err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "plume-jax train --resume run" in lines[0], err[-2000:]
    update = json.loads((tmp_path / "run" / "checkpoint" / "meta.json").read_text())["update"]
    assert update >= 1 and _updates(metrics)[-1] >= update


def test_a_folder_in_use_fails_the_command_line_with_one_line_not_a_traceback(tmp_path, capsys):
    """Found by tests/train/test_run_folder_property.py: two `plume-jax train --resume`
    of one run at once: the second died with a StateError traceback (exit 1),
    the CLI caught only ValidationError."""
    from plume_jax.cli import main

    with FolderLock(tmp_path / "run", "train"):
        code = main(["train", "--config", "configs/train_gaussian.yaml", "--out",
                     str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("plume-jax: error: ") and err.count("\n") == 1
    assert "in use by another plume-jax process (pid" in err


def test_continuing_a_finished_run_keeps_its_final_checkpoint_and_policy(trained, tmp_path):
    """A finished run resumed with a larger budget replaced checkpoint/ and
    policy/: the finished state was gone."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    shutil.rmtree(run / "checkpoints" / "update_00000004", ignore_errors=True)
    final = (run / "policy" / "policy.npz").read_bytes()
    config = train_config({**TINY, "algo": {**TINY["algo"], "total_steps": 4 * 8 * 5}})
    train(config, run, progress=False, evaluate=False, resume=run)
    kept = run / "checkpoints" / "update_00000004"
    assert json.loads((kept / "meta.json").read_text())["update"] == 4
    assert (kept / "policy" / "policy.npz").read_bytes() == final
    assert json.loads((run / "checkpoint" / "meta.json").read_text())["update"] == 5


def test_a_sweep_resume_refuses_a_member_another_process_is_training(sweep_run, tmp_path):
    """A sweep --resume and a train --resume of one of its members at the same
    time both wrote the member's folder."""
    import shutil

    sweep, original = sweep_run
    out = tmp_path / "s"
    shutil.copytree(original, out)
    with FolderLock(out / "members" / sweep.names[0], "train"):
        with pytest.raises(StateError, match=sweep.names[0]):
            run_sweep(sweep, out, progress=False, evaluate_members=False, resume=True)


def test_a_failing_learning_curve_loses_no_training_results(tmp_path, monkeypatch):
    """train wrote summary.json after the learning-curve figure: a figure that
    failed lost the summary (results come before figures)."""
    from plume_jax.train import run

    def broken(*args, **kwargs):
        raise RuntimeError("no figure today")

    monkeypatch.setattr(run, "plot_learning_curves", broken)
    raw = {**TINY, "algo": {**TINY["algo"], "total_steps": 32}}
    with pytest.warns(RuntimeWarning, match="learning_curve.png was not written"):
        train(train_config(raw), tmp_path / "run", progress=False, evaluate=False)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["num_updates"] == 1
    assert (tmp_path / "run" / "metrics.csv").exists()


def test_a_checkpoint_written_before_a_setting_existed_resumes_at_its_default(trained, tmp_path):
    """A setting added after a checkpoint was written (algo.frozen_target came
    with belief_value_iteration's ablations) made every older checkpoint's
    resume refused ('checkpoint <unset>, now True'); a missing setting counts
    at its default, and one set away from it is still refused (here PPO's
    algo.normalize_advantages plays the new setting)."""
    import shutil

    from plume_jax.train.checkpoint import read_meta, save_checkpoint
    from plume_jax.train.loop import Member, build_program, load_runner

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    config = train_config(TINY)
    program = build_program([Member(config, *config.make_env())], batched=False)
    runner, _ = load_runner(program, run / "checkpoint")
    meta = read_meta(run / "checkpoint")
    del meta["config"]["algo"]["normalize_advantages"]  # as a checkpoint before it existed
    save_checkpoint(run / "checkpoint", runner, meta)
    longer = {**TINY, "algo": {**TINY["algo"], "total_steps": 4 * 8 * 5}}
    with pytest.raises(ValidationError, match="algo.normalize_advantages"):
        train(train_config({**longer, "algo": {**longer["algo"],
                                                "normalize_advantages": False}}),
              run, progress=False, evaluate=False, resume=run)
    result = train(train_config(longer), run, progress=False, evaluate=False, resume=run)
    assert result.summary["resumed_at_update"] == 4
    assert _updates(run / "metrics.jsonl") == [1, 2, 3, 4, 5]
