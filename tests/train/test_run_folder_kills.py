"""Nothing lost at the new doors (issue 42, items 1, 2, 3 and 11): a kill
during the ``best/`` swap or during a periodic evaluation, a torn
checkpoint (``runner.msgpack`` ahead of ``meta.json``), a damaged or
missing ``meta.json``, and a damaged ``best/evaluation.json`` met by a
resume. Kills are injected in-process at the named write (an exception
nothing catches, so the folder is left as a kill there leaves it);
``tests/train/test_run_folder_property.py`` kills real processes at the same
points."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from plume_jax.core.errors import ValidationError
from plume_jax.train.checkpoint import find_checkpoint, read_checkpoint, read_meta, \
    save_checkpoint
from plume_jax.train.config import train_config
from plume_jax.train.folder import best_row, better, check_best, recorded_best, \
    settle_best, trim_evaluations
from plume_jax.train.progress import read_jsonl
from plume_jax.train.run import train

#: 8 updates of 32 env steps, every one checkpointed and kept; evaluated every 2.
TINY = {"env": {"id": "PlumeNav-Gaussian-v0",
                "overrides": {"grid_size": [12, 12], "max_steps": 20, "goal_radius": 3.0}},
        "algo": {"total_steps": 4 * 8 * 8, "num_envs": 4, "num_steps": 8,
                 "update_epochs": 1, "num_minibatches": 1, "learning_rate": 3e-3},
        "network": {"hidden_sizes": [8]},
        "run": {"seed": 3, "log_every": 1, "checkpoint_every": 1, "tensorboard": False},
        "eval": {"num_envs": 4, "num_steps": 10, "every": 2, "periodic_episodes": 16}}


class Killed(BaseException):
    """Stands for SIGKILL at an injected point: nothing catches it."""


def _tree(folder: pathlib.Path) -> dict[str, str]:
    """Every file under ``folder`` and its SHA-256."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _check_best_follows_the_rows(run: pathlib.Path) -> None:
    """The flags follow the rule in order, and best/ is the last flagged row."""
    rows = read_jsonl(run / "evaluations.jsonl")
    best = None
    for r in rows:
        assert r["best"] == better(r, best), rows
        best = r if r["best"] else best
    assert recorded_best(run) == best
    assert best_row(run) == best
    assert not (run / ".best.old").exists() and not (run / ".best.partial").exists()


@pytest.fixture(scope="module", autouse=True)
def scores_that_vary():
    """This tiny run's greedy policies all score alike; the folder rules need
    new bests: the periodic success rate is replaced by a number drawn from
    the policy's parameters (the same policy, the same score)."""
    from plume_jax.train import evaluation

    real = evaluation.evaluate

    def varied(env, spec, arrays, *args, **kwargs):
        out = real(env, spec, arrays, *args, **kwargs)
        total = sum(float(np.abs(np.asarray(v, np.float64)).sum()) for v in arrays.values())
        return {**out, "success_rate": round(total * 97.0 % 1.0, 2)}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evaluation, "evaluate", varied)
        yield


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The uninterrupted run: its folder (evaluations at updates 2, 4, 6, 8)."""
    out = tmp_path_factory.mktemp("kills") / "run"
    train(train_config(TINY), out, progress=False, evaluate=False)
    rows = read_jsonl(out / "evaluations.jsonl")
    assert [r["update"] for r in rows] == [2, 4, 6, 8]
    assert sum(r["best"] for r in rows) >= 2, "the walk below needs a second best"
    return out


def _kill_at(monkeypatch, module, name, when):
    """Raise :class:`Killed` from ``module.name`` on the call ``when(args)`` picks."""
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        if when(*args):
            raise Killed(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def _resume_to_the_end(run: pathlib.Path) -> None:
    train(train_config(TINY), run, progress=False, evaluate=False, resume=run)


@pytest.mark.slow
def test_a_kill_during_the_best_swap_keeps_the_best_policy(finished, tmp_path, monkeypatch):
    """Item 1: a kill between renaming best/ away and renaming the new best
    in left no best/ (.best.old never restored) and best tracking restarted:
    later, worse policies were flagged best and best/ disagreed with
    evaluations.jsonl."""
    run = tmp_path / "run"
    swaps = []

    def second_swap_in(src, dst):
        if pathlib.Path(dst).name == "best":
            swaps.append(dst)
        return len(swaps) == 2

    _kill_at(monkeypatch, os, "replace", second_swap_in)
    with pytest.raises(Killed):
        train(train_config(TINY), run, progress=False, evaluate=False)
    monkeypatch.undo()
    assert not (run / "best").exists()  # the kill's moment: no best/ in place
    _resume_to_the_end(run)
    assert read_jsonl(run / "evaluations.jsonl") == read_jsonl(finished / "evaluations.jsonl")
    _check_best_follows_the_rows(run)
    assert (run / "best" / "policy.npz").read_bytes() == \
        (finished / "best" / "policy.npz").read_bytes()


@pytest.mark.slow
def test_a_kill_during_a_periodic_evaluation_is_evaluated_again_on_resume(
        finished, tmp_path, monkeypatch):
    """Item 2: the update's checkpoint was written before its evaluation and
    resume never ran that evaluation again: its row was missing for good."""
    from plume_jax.train import evaluation

    run = tmp_path / "run"
    calls = []
    _kill_at(monkeypatch, evaluation, "evaluate", lambda *a: calls.append(1) or len(calls) == 2)
    with pytest.raises(Killed):
        train(train_config(TINY), run, progress=False, evaluate=False)
    monkeypatch.undo()
    assert [r["update"] for r in read_jsonl(run / "evaluations.jsonl")] == [2]
    assert read_meta(run / "checkpoint")["update"] == 4  # checkpointed, not evaluated
    _resume_to_the_end(run)
    assert read_jsonl(run / "evaluations.jsonl") == read_jsonl(finished / "evaluations.jsonl")
    _check_best_follows_the_rows(run)


def test_a_resume_from_before_a_later_best_restores_the_best_of_its_own_updates(
        finished, tmp_path):
    """Resuming from an older kept checkpoint dropped a later best/, while
    the row flagged best by then had no policy left: best/ is exported again
    from the kept checkpoint of that row's update."""
    rows = read_jsonl(finished / "evaluations.jsonl")
    flagged = [r["update"] for r in rows if r["best"]]
    first, last = flagged[0], flagged[-1]
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    resume_at = last - 1 if last - 1 >= first else first
    shorter = {**TINY, "algo": {**TINY["algo"], "total_steps": 4 * 8 * resume_at}}
    train(train_config(shorter), run, progress=False, evaluate=False,
          resume=run / "checkpoints" / f"update_{resume_at:08d}")
    kept = [r for r in rows if r["update"] <= resume_at]
    assert read_jsonl(run / "evaluations.jsonl") == kept
    _check_best_follows_the_rows(run)


def test_a_damaged_best_evaluation_json_is_refused_before_the_resume_moves_anything(
        finished, tmp_path, capsys):
    """Item 11: a bad best/evaluation.json crashed the resume half-way, after
    the set-aside had moved the later state."""
    from plume_jax.cli import main

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / "best" / "evaluation.json").write_text('{"update": "two"}')
    before = _tree(run)
    code = main(["train", "--resume", str(run / "checkpoints" / "update_00000004"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("plume-jax: error: ") and err.count("\n") == 1, err
    assert str(run / "best" / "evaluation.json") in err and "Traceback" not in err
    assert _tree(run) == before and not (run / "superseded").exists()


def _row(update: int, success: float) -> dict:
    return {"update": update, "env_steps": 32 * update, "success_rate": success,
            "mean_steps_to_goal": 7.5, "mean_return": 0.25 * update, "episodes": 16,
            "seed": 1, "best": True}


def _policy_folder(path: pathlib.Path, row: dict, marker: bytes) -> None:
    path.mkdir()
    (path / "policy.npz").write_bytes(marker)
    (path / "policy.json").write_text("{}")
    (path / "evaluation.json").write_text(json.dumps(row, indent=2))


def _mid_swap(run: pathlib.Path) -> tuple[dict, dict]:
    """A run folder whose rows flag updates 2 and 4 best, killed after the
    row of 4 was appended: best/ still holds 2, .best.partial/ holds 4."""
    rows = [_row(2, 0.5), _row(4, 0.75)]
    run.mkdir()
    (run / "evaluations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _policy_folder(run / "best", rows[0], b"two")
    _policy_folder(run / ".best.partial", rows[1], b"four")
    return rows[0], rows[1]


def _only_best(run: pathlib.Path) -> list[str]:
    return sorted(p.name for p in run.iterdir() if p.is_dir())


@pytest.mark.parametrize("left", ["evaluation.json", "policy.npz"])
def test_a_kill_while_best_is_deleted_leaves_the_run_folder_resumable(tmp_path, left):
    """Review item 1: settle_best deleted the old best/ with rmtree before
    renaming the committed .best.partial/ in; a kill part way left best/
    with evaluation.json and no policy.npz (or the reverse), and every
    later resume was refused by check_best."""
    run = tmp_path / "run"
    _, four = _mid_swap(run)
    for f in (run / "best").iterdir():  # the kill's moment: rmtree got this far
        if f.name != left:
            f.unlink()
    check_best(run)  # what every resume runs first: it raised
    assert settle_best(run) == four
    assert best_row(run) == four and (run / "best" / "policy.npz").read_bytes() == b"four"
    assert _only_best(run) == ["best"]


def test_a_kill_during_the_deletion_settle_best_does_leaves_only_a_folder_to_sweep(
        tmp_path, monkeypatch):
    """Review item 1: a folder settle_best drops is renamed aside
    (.best.drop-*) before it is deleted, so a kill in the deletion damages
    no folder a resume reads; the next settle sweeps it."""
    from plume_jax.train import folder as periodic_eval

    run = tmp_path / "run"
    _, four = _mid_swap(run)

    def killed_part_way(path, *a, **k):
        (pathlib.Path(path) / "policy.npz").unlink()
        raise Killed("rmtree")

    monkeypatch.setattr(periodic_eval.shutil, "rmtree", killed_part_way)
    with pytest.raises(Killed):
        settle_best(run)
    monkeypatch.undo()
    check_best(run)
    assert best_row(run) == four
    assert settle_best(run) == four and _only_best(run) == ["best"]


def test_a_kill_while_a_resume_drops_a_later_best_leaves_the_run_folder_resumable(
        tmp_path, monkeypatch):
    """Review item 1: trim_evaluations -> settle_best(folder, up_to)
    deleting a best/ past the resume's update had the same window."""
    from plume_jax.train import folder as periodic_eval

    run = tmp_path / "run"
    two, four = _mid_swap(run)
    settle_best(run)  # best/ holds 4
    real = shutil.rmtree

    def killed_part_way(path, *a, **k):
        (pathlib.Path(path) / "evaluation.json").unlink()
        raise Killed("rmtree")

    monkeypatch.setattr(periodic_eval.shutil, "rmtree", killed_part_way)
    with pytest.raises(Killed):
        trim_evaluations(run, 3)
    monkeypatch.setattr(periodic_eval.shutil, "rmtree", real)
    check_best(run)
    trim_evaluations(run, 3)  # the resume again
    assert recorded_best(run) == two and not (run / "best").exists()
    assert _only_best(run) == []


def test_a_swap_folder_of_the_same_update_but_another_row_is_not_adopted(tmp_path):
    """Review item 2: the holder of the recorded best was picked by its
    update alone: a .best.old/ another run left at the same update became
    best/ in place of the committed .best.partial/ (or beside none)."""
    run = tmp_path / "run"
    two, four = _mid_swap(run)
    shutil.rmtree(run / "best")
    _policy_folder(run / ".best.old", {**four, "success_rate": 0.1}, b"another run's")
    shutil.rmtree(run / ".best.partial")  # the committed row of 4 has no policy on disk
    assert settle_best(run) == four
    assert _only_best(run) == []  # nothing adopted: _restore_best exports it again


@pytest.mark.slow
def test_train_overwrite_does_not_adopt_a_best_old_a_killed_swap_left(finished, tmp_path):
    """Review item 2: --overwrite left .best.old/ (and .best.partial/) of the
    earlier run, and the new run adopted that run's policy as its best/
    (its row was of the same update as the new run's first evaluation)."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    first = read_jsonl(finished / "evaluations.jsonl")[0]
    _policy_folder(run / ".best.old", {**first, "mean_return": -1.0}, b"an earlier run's")
    shutil.rmtree(run / "best")  # the kill's moment: best/ renamed away, not yet replaced
    _policy_folder(run / ".best.drop-0123", first, b"half deleted")
    shutil.copytree(run / "checkpoint", run / ".checkpoint.partial-killed")
    shorter = {**TINY, "algo": {**TINY["algo"], "total_steps": 4 * 8 * 2}}  # one evaluation
    train(train_config(shorter), run, progress=False, evaluate=False, overwrite=True)
    assert (run / "best" / "policy.npz").read_bytes() != b"an earlier run's"
    _check_best_follows_the_rows(run)
    hidden = sorted(p.name for p in run.iterdir() if p.name.startswith("."))
    assert hidden in ([".plume_jax.lock"], []), hidden


# --------------------------------------------------------------- checkpoints
def _tiny_checkpoint(folder: pathlib.Path, update: int = 6) -> dict:
    runner = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "update": np.int32(update)}
    save_checkpoint(folder, runner, {"config": {"algo": {}}, "update": update})
    return runner


def test_every_byte_flip_in_meta_json_leaves_an_intact_checkpoint_resumable(tmp_path):
    """Item 3: 413 of 584 byte flips in meta.json made an intact checkpoint
    unresumable; the metadata inside runner.msgpack is the truth."""
    folder = tmp_path / "checkpoint"
    _tiny_checkpoint(folder)
    meta, leaves = read_checkpoint(folder)
    data = (folder / "meta.json").read_bytes()
    for i in range(len(data)):
        (folder / "meta.json").write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:])
        again, again_leaves = read_checkpoint(folder)
        assert again == meta and again_leaves.keys() == leaves.keys(), i
    assert read_meta(folder)["update"] == 6


def test_a_checkpoint_without_meta_json_is_still_a_checkpoint_folder(tmp_path):
    """Item 3: with meta.json missing, a whole checkpoint was refused as 'not
    a checkpoint folder'."""
    run = tmp_path / "run"
    _tiny_checkpoint(run / "checkpoint")
    (run / "checkpoint" / "meta.json").unlink()
    assert find_checkpoint(run) == (run, run / "checkpoint")
    assert read_checkpoint(run / "checkpoint")[0]["update"] == 6


def test_a_new_checkpoint_folder_exists_whole_or_not_at_all(tmp_path, monkeypatch):
    """Item 3: a kept checkpoint folder was written file by file in place: a
    kill between its files left a folder with runner.msgpack and no
    meta.json (or the reverse) under its final name."""
    from plume_jax.train import checkpoint

    folder = tmp_path / "checkpoints" / "update_00000006"
    _kill_at(monkeypatch, checkpoint, "atomic_write",
             lambda path, content: pathlib.Path(path).name == "meta.json")
    with pytest.raises(Killed):
        _tiny_checkpoint(folder)
    monkeypatch.undo()
    assert not folder.exists()
    leftover = tmp_path / "checkpoints" / ".update_00000006.partial-killed"
    leftover.mkdir()  # as a SIGKILL (no clean-up) leaves it
    _tiny_checkpoint(folder)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["update_00000006"]
    assert read_meta(folder)["update"] == 6


def test_a_torn_checkpoint_is_set_aside_by_its_own_update_not_by_a_stale_meta_json(
        finished, tmp_path):
    """Item 3: with checkpoint/runner.msgpack at update 6 and meta.json still
    at 4 (a kill between the two files), --resume RUN/checkpoints/update_4
    set nothing aside: update 6's checkpoint and metrics rows 5-6 were
    overwritten or dropped."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    for u in (5, 6, 7):  # (the last update is not kept)
        shutil.rmtree(run / "checkpoints" / f"update_{u:08d}")
    shutil.rmtree(run / "checkpoint")
    shutil.copytree(finished / "checkpoints" / "update_00000006", run / "checkpoint")
    shutil.copy(finished / "checkpoints" / "update_00000004" / "meta.json",
                run / "checkpoint" / "meta.json")  # the readable copy, one save behind
    runner6 = (run / "checkpoint" / "runner.msgpack").read_bytes()
    shorter = {**TINY, "algo": {**TINY["algo"], "total_steps": 4 * 8 * 5}}
    train(train_config(shorter), run, progress=False, evaluate=False,
          resume=run / "checkpoints" / "update_00000004")
    aside = list((run / "superseded").iterdir())
    assert len(aside) == 1
    assert (aside[0] / "checkpoint" / "runner.msgpack").read_bytes() == runner6
    assert [r["update"] for r in read_jsonl(aside[0] / "metrics.jsonl")] == list(range(1, 9))


def test_the_sweep_member_ahead_check_reads_the_update_inside_runner_msgpack(tmp_path):
    """Item 3: the sweep's 'member ahead' check trusted meta.json: a member
    trained further whose meta.json was one save behind passed it and was
    rewound."""
    from plume_jax.train.folder import check_members_not_ahead
    from plume_jax.train.sweep import sweep_config

    sweep = sweep_config({"base": {**TINY, "eval": {"num_envs": 4, "num_steps": 10}},
                          "grid": {"run.seed": [0]}})
    folder = tmp_path / "members" / sweep.names[0]
    _tiny_checkpoint(folder / "checkpoint", update=12)
    meta = json.loads((folder / "checkpoint" / "meta.json").read_text())
    (folder / "checkpoint" / "meta.json").write_text(json.dumps({**meta, "update": 8}))
    with pytest.raises(ValidationError, match="to 12 updates"):
        check_members_not_ahead(tmp_path, sweep, [folder])


def test_a_new_checkpoint_folder_follows_the_umask_not_mkdtemps_0700(tmp_path):
    """Review item 4: a new checkpoint folder is made by tempfile.mkdtemp
    (mode 0700) and renamed into place, where os.mkdir had made it 0755
    under the usual umask: other users lost access to kept checkpoints."""
    for umask, mode in ((0o022, 0o755), (0o002, 0o775), (0o077, 0o700)):
        old = os.umask(umask)
        try:
            folder = tmp_path / "checkpoints" / f"update_{umask:08d}"
            _tiny_checkpoint(folder)
        finally:
            os.umask(old)
        assert folder.stat().st_mode & 0o777 == mode, oct(umask)


def test_every_stale_partial_checkpoint_folder_is_swept_by_the_next_save(tmp_path):
    """Review item 4: an orphaned .update_N.partial-* folder (a kill while
    update N was written whole) was removed only when update N itself was
    saved again: kept-checkpoint runs piled them up."""
    kept = tmp_path / "checkpoints"
    kept.mkdir()
    for name in (".update_00000002.partial-killed", ".update_00000004.partial-x1"):
        (kept / name).mkdir()
        (kept / name / "runner.msgpack").write_bytes(b"half")
    (tmp_path / ".checkpoint.partial-killed").mkdir()
    _tiny_checkpoint(kept / "update_00000006")
    assert sorted(p.name for p in kept.iterdir()) == ["update_00000006"]
    _tiny_checkpoint(tmp_path / "checkpoint")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "checkpoints"]


def test_checkpoint_tear_kills_at_a_torn_checkpoint_not_at_a_new_folder_written_whole():
    """Review item 3: kill_at.py's checkpoint_tear point also fired when
    meta.json was renamed into a .NAME.partial-* folder (a new checkpoint
    folder being written whole), which tears nothing."""
    from tests.kill_at import tears_a_checkpoint

    def meta(folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
        return folder / ".meta.json.tmp-1", folder / "meta.json"

    existing = {pathlib.Path("run/checkpoint"), pathlib.Path("run/checkpoints/update_00000004"),
                pathlib.Path("run/checkpoints/.update_00000006.partial-abc")}
    real_exists = pathlib.Path.exists

    def exists(path: pathlib.Path) -> bool:
        return path.name == "runner.msgpack" and path.parent in existing or real_exists(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pathlib.Path, "exists", exists)
        assert tears_a_checkpoint(*meta(pathlib.Path("run/checkpoint")))
        assert tears_a_checkpoint(*meta(pathlib.Path("run/checkpoints/update_00000004")))
        assert not tears_a_checkpoint(
            *meta(pathlib.Path("run/checkpoints/.update_00000006.partial-abc")))
        assert not tears_a_checkpoint(*meta(pathlib.Path("run/elsewhere")))
