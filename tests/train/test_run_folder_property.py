"""Run folders never lose a result (issue 26, "Done when"): a randomized
test that interleaves ``plume-jax train`` and ``plume-jax sweep`` commands,
run as the user runs them (``python -m plume_jax`` in a subprocess) and
killed with SIGKILL at random moments or at named points (``tests/kill_at.py``:
during a periodic evaluation, during the ``best/`` swap, between a
checkpoint's two files, before a new checkpoint folder is renamed into
place): fresh runs, resumes of the run,
resumes from an arbitrary kept checkpoint, re-training of a sweep member
with a larger budget, ``sweep --resume`` and two commands on one folder at
once.

After every command it checks that

- the command succeeded, was killed by the test, or failed with a one-line
  ``plume-jax: error: ...`` (a ``ValidationError`` / ``StateError``), never
  a traceback;
- nothing that existed before is lost: every metrics row up to the latest
  checkpoint, every kept checkpoint, the latest checkpoint and the exported
  policy are still in place (byte for byte) or under ``RUN/superseded/``;
  the latest checkpoint and the policy may also have been replaced by a
  later update of the same run (a continued run), and metrics rows past the
  latest checkpoint (not yet durable) may be trained again;
- a sweep's own metrics rows (member, update) are kept likewise, and so
  are the periodic evaluation rows of every run folder;
- after a command that finished, its run folders' periodic evaluations are
  whole: a row for every ``eval.every`` multiple up to the checkpoint, the
  ``best`` flags as the rule gives them in order, and ``best/`` the policy
  of the last flagged row.

The choice of commands is seeded (``random.Random(seed)``); the kill moments
are real time, so which writes a kill interrupts depends on the machine's
speed: each run explores other interleavings.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: 40 updates of 32 env steps, every update checkpointed (and kept, but the last),
#: evaluated every 4.
TINY = {"env": {"id": "PlumeNav-Gaussian-v0",
                "overrides": {"grid_size": [12, 12], "max_steps": 20}},
        "algo": {"total_steps": 4 * 8 * 40, "num_envs": 4, "num_steps": 8,
                 "update_epochs": 1, "num_minibatches": 1},
        "network": {"hidden_sizes": [8]},
        "run": {"seed": 0, "log_every": 1, "checkpoint_every": 1, "tensorboard": False},
        "eval": {"num_envs": 2, "num_steps": 10, "every": 4, "periodic_episodes": 4}}
PER_UPDATE = 4 * 8
#: The named kill points of tests/kill_at.py.
POINTS = ("best_swap", "evaluation", "checkpoint_tear", "kept_checkpoint")
#: Keys of a metrics row that are measured, not computed (they differ between runs).
TIMING = ("time", "wall", "seconds", "sps", "per_second")


# ------------------------------------------------------------------ commands
def _cli(args: list[str], kill_after: float | None = None,
         together: list[str] | None = None,
         point: tuple[str, int] | None = None) -> list[tuple[int, str]]:
    """Run ``plume-jax ARGS`` (and, if given, ``plume-jax TOGETHER`` at the
    same time); SIGKILL them after ``kill_after`` seconds, or ARGS at the
    n-th time it reaches the named ``point`` (``(name, n)``). Returns
    ``(returncode, stderr)`` of each (-9: killed by the test)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "JAX_PLATFORMS": "cpu"}
    first = [str(ROOT / "tests" / "kill_at.py"), point[0], str(point[1])] if point \
        else ["-m", "plume_jax"]
    procs = [subprocess.Popen([sys.executable, *launch, *a, "--quiet"], cwd=ROOT,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
             for launch, a in [(first, args)] + ([(["-m", "plume_jax"], together)]
                                                 if together else [])]
    try:
        if kill_after is not None:
            deadline = time.monotonic() + kill_after
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                time.sleep(0.02)
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
        return [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()


def _check_outcome(args: list[str], rc: int, err: str) -> None:
    """Succeeded, killed by the test, or one line ``plume-jax: error: ...``."""
    if rc in (0, -signal.SIGKILL):
        return
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and lines and lines[-1].startswith("plume-jax: error: "), (
        f"plume-jax {' '.join(args)} exited {rc} without a one-line error:\n{err[-3000:]}")


# ------------------------------------------------------------------ snapshots
def _sha(path: pathlib.Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _rows(path: pathlib.Path) -> dict[tuple, str]:
    """``(member name, update) -> row`` (JSON; timing columns and the member's
    index and name left out) of a
    metrics file; a torn last line is skipped."""
    out = {}
    if not path.is_file():
        return out
    for line in path.read_text(errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or "update" not in row:
            continue
        kept = {k: v for k, v in row.items()
                if k not in ("member", "name") and not any(t in k for t in TIMING)}
        out[(row.get("name"), row["update"])] = json.dumps(kept, sort_keys=True)
    return out


def _checkpoint(folder: pathlib.Path) -> tuple[int, str] | None:
    """``(update, sha256 of runner.msgpack)`` of a whole checkpoint folder
    (its update as runner.msgpack holds it: meta.json may lag after a kill)."""
    from plume_jax.core.errors import ValidationError
    from plume_jax.train.checkpoint import checkpoint_update

    try:
        update = checkpoint_update(folder)
    except (ValidationError, OSError):
        return None
    digest = _sha(folder / "runner.msgpack")
    return None if digest is None else (update, digest)


def _policy(folder: pathlib.Path) -> tuple[int, str] | None:
    """``(trained env steps, sha256 of policy.npz)`` of an exported policy."""
    try:
        steps = int(json.loads((folder / "policy.json").read_text()).get(
            "trained_env_steps", -1))
    except (OSError, ValueError, TypeError, AttributeError):
        steps = -1
    digest = _sha(folder / "policy.npz")
    return None if digest is None else (steps, digest)


def _run_state(run: pathlib.Path) -> dict:
    """What a run folder holds, and what its ``superseded/`` holds."""
    aside = sorted((run / "superseded").glob("*")) if (run / "superseded").is_dir() else []
    places = [run] + aside
    return {
        "rows": _rows(run / "metrics.jsonl"),
        "checkpoint": _checkpoint(run / "checkpoint"),
        "policy": _policy(run / "policy"),
        "all_rows": [_rows(p / "metrics.jsonl") for p in places],
        "evals": _rows(run / "evaluations.jsonl"),
        "all_evals": [_rows(p / "evaluations.jsonl") for p in places],
        "all_checkpoints": {c for p in places for c in
                            [_checkpoint(p / "checkpoint")]
                            + [_checkpoint(k) for k in sorted((p / "checkpoints").glob("update_*"))]
                            if c is not None},
        "kept": {c for c in (_checkpoint(k) for k in sorted((run / "checkpoints").glob(
            "update_*"))) if c is not None},
        "all_policies": {p_ for p_ in (_policy(p / "policy") for p in places) if p_},
    }


def _check_evaluations_whole(name: str, run: pathlib.Path) -> None:
    """A finished command's run folder: a periodic evaluation row for every
    ``eval.every`` multiple up to its checkpoint, the ``best`` flags as
    :func:`better` gives them in order, and ``best/`` the last flagged row."""
    from plume_jax.train.folder import best_row, better
    from plume_jax.train.progress import read_jsonl

    state = _run_state(run)
    if state["checkpoint"] is None:
        return
    rows = read_jsonl(run / "evaluations.jsonl")
    every = TINY["eval"]["every"]
    assert [r["update"] for r in rows] == list(range(every, state["checkpoint"][0] + 1, every)), (
        f"{name}: periodic evaluations {[r['update'] for r in rows]} after a finished command "
        f"at update {state['checkpoint'][0]}")
    best = None
    for r in rows:
        assert r["best"] == better(r, best), f"{name}: update {r['update']} flagged wrongly"
        best = r if r["best"] else best
    assert best_row(run) == best, f"{name}: best/ holds {best_row(run)}, the rows say {best}"
    assert not (run / ".best.old").exists() and not (run / ".best.partial").exists()
    assert not list(run.glob(".best.drop-*")), f"{name}: a dropped best folder was left"


def _same_line(before: dict, after: dict, upto: int) -> bool:
    """The run after continues the run before: its rows up to ``upto`` are the same."""
    return all(after["rows"].get(k) == v for k, v in before["rows"].items() if k[1] <= upto)


def _check_run_kept(name: str, before: dict, after: dict) -> None:
    """Nothing of ``before`` lost in ``after`` (see the module docstring)."""
    durable = before["checkpoint"][0] if before["checkpoint"] else 0
    for key, row in before["rows"].items():
        if key[1] <= durable:
            assert any(rows.get(key) == row for rows in after["all_rows"]), (
                f"{name}: the metrics row of update {key[1]} (covered by the checkpoint at "
                f"update {durable}) was lost")
    for key, row in before["evals"].items():
        if key[1] <= durable:
            assert any(rows.get(key) == row for rows in after["all_evals"]), (
                f"{name}: the periodic evaluation row of update {key[1]} was lost")
    for ckpt in before["kept"]:
        assert ckpt in after["all_checkpoints"], (
            f"{name}: the kept checkpoint of update {ckpt[0]} was lost")
    if before["checkpoint"]:
        newer = (after["checkpoint"] and after["checkpoint"][0] > durable
                 and _same_line(before, after, durable))
        assert before["checkpoint"] in after["all_checkpoints"] or newer, (
            f"{name}: the latest checkpoint (update {durable}) was lost, not replaced by a "
            f"later one of the same run (now {after['checkpoint']})")
    if before["policy"]:
        newer = (after["policy"] and after["policy"][0] > before["policy"][0]
                 and _same_line(before, after, before["policy"][0] // PER_UPDATE))
        assert before["policy"] in after["all_policies"] or newer, (
            f"{name}: the policy of {before['policy'][0]} env steps was lost, not replaced by "
            "a later one of the same run")


def _state(run: pathlib.Path, sweep: pathlib.Path) -> dict:
    members = sorted((sweep / "members").glob("*")) if (sweep / "members").is_dir() else []
    programs = [_checkpoint(p / "checkpoint") for p in sorted((sweep / "programs").glob("*"))] \
        if (sweep / "programs").is_dir() else []
    return {"run": _run_state(run), "sweep_rows": _rows(sweep / "metrics.jsonl"),
            "sweep_durable": max([c[0] for c in programs if c] + [0]),
            "members": {m.name: _run_state(m) for m in members}}


def _check_kept(before: dict, after: dict) -> None:
    _check_run_kept("RUN", before["run"], after["run"])
    for name, member in before["members"].items():
        assert name in after["members"], f"sweep member {name} was lost"
        _check_run_kept(f"member {name}", member, after["members"][name])
    for (name, update), row in before["sweep_rows"].items():
        member = before["members"].get(name)
        durable = max(before["sweep_durable"],
                      member["checkpoint"][0] if member and member["checkpoint"] else 0)
        if update > durable:
            continue
        in_member = name in after["members"] and any(
            rows.get((None, update)) == row for rows in after["members"][name]["all_rows"])
        assert after["sweep_rows"].get((name, update)) == row or in_member, (
            f"the sweep's metrics row of member {name}, update {update} was lost")


# ------------------------------------------------------------------ the walk
def _walk(tmp_path: pathlib.Path, seed: int, actions: int,
          script: list[tuple[str, bool | str]] | None = None) -> list[str]:
    """``actions`` commands chosen at random (or ``script``: ``(action,
    kill)`` pairs, ``kill`` False, True (at a random moment) or a named
    point of :data:`POINTS`, reached the first time), each checked; returns
    what ran."""
    rng = random.Random(seed)
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    sweep_config = tmp_path / "sweep.yaml"
    sweep_config.write_text(yaml.safe_dump({"base": TINY, "grid": {"run.seed": [0, 1]}}))
    run, sweep = tmp_path / "run", tmp_path / "sweep"
    log = []
    took: dict[str, float] = {}  # seconds a whole command of each kind took
    budget = TINY["algo"]["total_steps"]
    for step in range(len(script) if script else actions):
        state = _state(run, sweep)
        kept = sorted((run / "checkpoints").glob("update_*")) \
            if (run / "checkpoints").is_dir() else []
        members = sorted(state["members"])
        # a folder killed before its first checkpoint holds nothing durable:
        # it is started again (--overwrite); one with a checkpoint is resumed
        choices = ["train"] if state["run"]["checkpoint"] is None else \
            ["resume", "resume", "two_at_once"] + ["resume_kept"] * 3 * bool(kept)
        choices += ["sweep"] if state["sweep_durable"] == 0 and not any(
            m["checkpoint"] for m in state["members"].values()) else ["sweep_resume"] * 2
        choices += ["member"] * 2 * bool(members)
        action = script[step][0] if script else rng.choice(choices)
        if action not in choices:  # a scripted action whose folder is not there yet
            action = "train"
        together = None
        overwrite = []
        if action == "train":
            overwrite = ["--overwrite"] if run.exists() else []
            args = ["train", "--config", str(config), "--out", str(run), *overwrite]
        elif action == "resume":
            budget += rng.choice([0, PER_UPDATE * 4])
            args = ["train", "--resume", str(run), "--total-steps", str(budget)]
        elif action == "resume_kept":
            args = ["train", "--resume", str(rng.choice(kept)), "--total-steps", str(budget)]
        elif action == "two_at_once":
            args = ["train", "--resume", str(run), "--total-steps", str(budget)]
            together = list(args)
        elif action == "sweep":
            overwrite = ["--overwrite"] if sweep.exists() else []
            args = ["sweep", "--config", str(sweep_config), "--out", str(sweep), *overwrite]
        elif action == "sweep_resume":
            args = ["sweep", "--resume", str(sweep)]
        else:
            member = rng.choice(members)
            ckpt = state["members"][member]["checkpoint"]
            steps = ((ckpt[0] if ckpt else 0) + rng.choice([2, 6])) * PER_UPDATE
            args = ["train", "--resume", str(sweep / "members" / member),
                    "--total-steps", str(max(steps, TINY["algo"]["total_steps"]))]
        kind = args[0] if "--resume" not in args else args[0] + " --resume"
        kill = script[step][1] if script else (
            rng.random() < 0.6 and (rng.choice(POINTS) if rng.random() < 0.5 else True))
        point = (kill, 1 if script else rng.randint(1, 2)) if isinstance(kill, str) else None
        kill_after = rng.uniform(0.4, 1.0) * took.get(kind, 12.0) if kill is True else None
        t0 = time.monotonic()
        outcomes = _cli(args, kill_after, together, point)
        if kill_after is None and all(rc == 0 for rc, _ in outcomes):
            took[kind] = time.monotonic() - t0
        log.append(f"{' '.join(a if '/' not in a else pathlib.Path(a).name for a in args)}"
                   f"{' (twice at once)' if together else ''}"
                   f"{f' killed after {kill_after:.1f} s' if kill_after else ''}"
                   f"{f' killed at {point[0]} #{point[1]}' if point else ''}"
                   f" -> {[rc for rc, _ in outcomes]}"
                   + "".join(f"\n    {err.strip().splitlines()[-1][:160]}"
                             for rc, err in outcomes if rc > 0 and err.strip()))
        for rc, err in outcomes:
            _check_outcome(args, rc, err)
        after = _state(run, sweep)
        if overwrite:  # --overwrite: what that folder held may go
            after = {**after, "run": state["run"]} if action == "train" \
                else {**state, "run": after["run"]}
        _check_kept(state, after)
        if all(rc == 0 for rc, _ in outcomes):
            if args[0] == "train":
                folder = pathlib.Path(args[args.index("--out" if "--out" in args
                                                      else "--resume") + 1])
                if folder.parent.name == "checkpoints":  # a kept checkpoint of its run
                    folder = folder.parent.parent
                _check_evaluations_whole(folder.name, folder)
            else:
                for member in sorted((sweep / "members").glob("*")):
                    _check_evaluations_whole(f"member {member.name}", member)
    return log


@pytest.mark.slow
def test_kills_and_resumes_lose_nothing_short(tmp_path):
    """A short scripted walk: a run killed while its first best policy is
    swapped into best/, a resume from a kept checkpoint killed between its
    checkpoint's two files (torn), a resume of the run to its end (two
    resumes at once: tests/train/test_run_folder_rules.py)."""
    log = _walk(tmp_path, seed=2026, actions=3, script=[
        ("train", "best_swap"), ("resume_kept", "checkpoint_tear"), ("resume", False)])
    print("\n".join(log))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kills_resumes_and_member_retraining_lose_nothing(tmp_path, seed):
    """Longer walks (20 commands each)."""
    log = _walk(tmp_path, seed=seed, actions=20)
    print("\n".join(log))
