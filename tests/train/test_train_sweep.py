"""``plume-jax sweep`` end to end, as a researcher uses it: a tiny sweep of
2 settings (network sizes: a static setting, so two compiled programs) x 2
seeds; four member run folders whose policies load and whose checkpoints
resume; a summary naming the best setting; TensorBoard files per member;
agreement of a sweep member with the single run of the same config."""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import json
import math

import numpy as np
import pytest
import yaml

from agents.trained import TrainedPolicy
from plume_jax.cli import main
from plume_jax.train.config import train_config
from plume_jax.train.run import train

TRIVIAL_ENV = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5, "max_steps": 40,
               "start": {"type": "fixed", "position": [4, 7]}}
NUM_UPDATES = 10
BASE = {
    "env": {"id": "PlumeNav-Gaussian-v0", "overrides": TRIVIAL_ENV},
    "algo": {"total_steps": 16 * 32 * 4, "num_envs": 16, "num_steps": 32,
             "update_epochs": 2, "num_minibatches": 2, "learning_rate": 3e-3,
             "normalize_obs": True, "ent_coef": 0.0},
    "network": {"hidden_sizes": [16, 16]},
    "run": {"seed": 0, "log_every": 5, "checkpoint_every": 5},
    "eval": {"num_envs": 32},
}
GRID = {"network.hidden_sizes": [[8], [16, 16]], "run.seed": [0, 1]}
NAMES = ["hidden_sizes-8_seed-0", "hidden_sizes-8_seed-1", "hidden_sizes-16x16_seed-0",
         "hidden_sizes-16x16_seed-1"]
#: The names sweeps gave the same members before names were shell-safe.
OLD_NAMES = ["hidden_sizes=8,seed=0", "hidden_sizes=8,seed=1", "hidden_sizes=16x16,seed=0",
             "hidden_sizes=16x16,seed=1"]


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, "grid": GRID}, sort_keys=False))
    out = folder / "out"
    buffer, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(errors):
        code = main(["sweep", "--config", str(path), "--out", str(out),
                     "--set", f"algo.total_steps={16 * 32 * NUM_UPDATES}"])
    assert code == 0, buffer.getvalue() + errors.getvalue()
    return {"out": out, "stdout": buffer.getvalue(), "stderr": errors.getvalue(),
            "results": json.loads((out / "results.json").read_text()),
            "rows": [json.loads(line) for line in
                     (out / "metrics.jsonl").read_text().splitlines()]}


def test_sweep_writes_its_tables_plots_and_one_run_folder_per_member(sweep_run):
    out, results = sweep_run["out"], sweep_run["results"]
    assert results["members"] == 4
    assert [r["name"] for r in results["results"]] == NAMES
    assert [(r["network.hidden_sizes"], r["run.seed"]) for r in results["results"]] == \
        [([8], 0), ([8], 1), ([16, 16], 0), ([16, 16], 1)]
    csv_lines = (out / "results.csv").read_text().splitlines()
    assert len(csv_lines) == 5 and "eval_success_rate" in csv_lines[0]
    for name in ("eval_success.png", "eval_steps.png", "train_success.png", "train_return.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG", name
    assert len(sweep_run["rows"]) == 4 * NUM_UPDATES
    assert yaml.safe_load((out / "sweep.yaml").read_text())["base"]["algo"]["total_steps"] == \
        16 * 32 * NUM_UPDATES  # --set recorded
    for name in NAMES:
        member = out / "members" / name
        for file in ("config.yaml", "metrics.jsonl", "metrics.csv", "summary.json",
                     "checkpoint/runner.msgpack", "checkpoint/meta.json", "policy/policy.npz",
                     "policy/policy.json"):
            assert (member / file).is_file(), (name, file)
    for k in ("1", "2"):  # each program's stacked state, and the one kept at update 5
        assert json.loads((out / "programs" / k / "checkpoint" / "meta.json").read_text())[
            "update"] == NUM_UPDATES
        assert (out / "programs" / k / "checkpoints" / "update_00000005").is_dir()
        rows = [json.loads(x) for x in (member / "metrics.jsonl").read_text().splitlines()]
        assert [r["update"] for r in rows] == list(range(1, NUM_UPDATES + 1))
    lines = [line for line in sweep_run["stderr"].splitlines()
             if line.startswith("[sweep]") and "| update " in line]
    assert "[sweep]" not in sweep_run["stdout"]  # progress on stderr, results on stdout
    assert [line.split("| update ")[1].split()[0] for line in lines] == ["5/10", "10/10"] * 2
    assert "program 2/2" in lines[-1] and "2 members" in lines[-1] and "ETA" in lines[-1]


def test_sweep_says_which_members_shared_a_compiled_program(sweep_run):
    programs = sweep_run["results"]["programs"]
    assert [p["members"] for p in programs] == [NAMES[:2], NAMES[2:]]
    assert [p["static_settings"] for p in programs] == [{"network.hidden_sizes": [8]},
                                                        {"network.hidden_sizes": [16, 16]}]
    assert (f"program 1 (hidden_sizes=[8]) shared by 2 members: {NAMES[0]}, {NAMES[1]}"
            in sweep_run["stdout"])
    md = (sweep_run["out"] / "summary.md").read_text()
    assert "2 compiled programs" in md
    assert f"| 2 | hidden_sizes=[16, 16] | {NAMES[2]}, {NAMES[3]} |" in md


def test_summary_ranks_the_settings_and_names_the_best(sweep_run):
    settings = sweep_run["results"]["settings"]
    assert [s["label"] for s in settings] in (["hidden_sizes=[8]", "hidden_sizes=[16, 16]"],
                                              ["hidden_sizes=[16, 16]", "hidden_sizes=[8]"])
    results = sweep_run["results"]["results"]
    for s in settings:
        success = [results[i]["eval_success_rate"] for i in s["members"]]
        assert s["eval_success_rate"]["mean"] == pytest.approx(np.mean(success))
        assert s["eval_success_rate"]["sd"] == pytest.approx(np.std(success, ddof=1))
        assert s["seeds"] == [0, 1]
    key = [(-s["eval_success_rate"]["mean"], s["eval_mean_steps_to_goal"]["mean"])
           for s in settings]
    assert key == sorted(key)
    best = settings[0]["label"]
    md = (sweep_run["out"] / "summary.md").read_text()
    assert f"**Best setting: {best} — greedy success" in md
    assert f"Best setting: {best}" in sweep_run["stdout"].splitlines()[-2]


def test_every_member_policy_loads_and_learned_the_trivial_task(sweep_run):
    for r in sweep_run["results"]["results"]:
        assert r["eval_success_rate"] == 1.0, r
        policy = TrainedPolicy.load(sweep_run["out"] / "members" / r["name"] / "policy")
        assert policy.spec["network"]["hidden_sizes"] == r["network.hidden_sizes"]
        assert policy.spec["env"]["id"] == "PlumeNav-Gaussian-v0"
        action, _ = policy.act(policy.init(None), np.asarray([0.5], np.float32), None)
        assert 0 <= int(action) < 5


def test_every_member_has_its_own_tensorboard_run_with_the_metrics_csv_scalars(sweep_run):
    from tbparse import SummaryReader

    for name in NAMES:
        member = sweep_run["out"] / "members" / name
        with (member / "metrics.csv").open() as f:
            table = list(csv.DictReader(f))
        scalars = SummaryReader(str(member / "tensorboard")).scalars
        assert {f"train/{c}" for c in table[0]} | {"final/success_rate"} <= set(scalars["tag"])
        ret = scalars[scalars["tag"] == "train/return_mean"].sort_values("step")
        np.testing.assert_allclose(ret["value"], [float(r["return_mean"]) for r in table],
                                   rtol=1e-6)


@pytest.mark.slow
def test_a_member_folder_resumes_as_a_training_run(sweep_run, tmp_path, capsys):
    """``plume-jax train --resume <member folder>`` continues the member (no
    --config: the member's own config.yaml), with a larger budget."""
    import shutil

    member = tmp_path / "member"
    shutil.copytree(sweep_run["out"] / "members" / NAMES[3], member)
    before = [json.loads(x) for x in (member / "metrics.jsonl").read_text().splitlines()]
    assert main(["train", "--resume", str(member), "--total-steps", str(16 * 32 * 12),
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "note: algo.anneal_lr: the learning rate decays linearly to 0 over the whole " \
           "budget, now 12 updates instead of 10" in out
    rows = [json.loads(x) for x in (member / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == list(range(1, 13)) and rows[:10] == before
    assert json.loads((member / "checkpoint" / "meta.json").read_text())["update"] == 12
    assert json.loads((member / "summary.json").read_text())["resumed_at_update"] == 10


@pytest.mark.slow
def test_the_winner_is_compared_with_two_baselines_in_one_evaluate_call(sweep_run, tmp_path,
                                                                       capsys):
    """The researcher's next step: the best setting's first member (named in
    summary.md) against klinotaxis and a random walk, one ``plume-jax
    evaluate`` call, one table."""
    best = sweep_run["results"]["settings"][0]["member_names"][0]
    assert f"`members/{best}/`" in (sweep_run["out"] / "summary.md").read_text()
    scenario = tmp_path / "trivial.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "trivial_gaussian", "env": {"preset": "PlumeNav-Gaussian-v0",
                                            "overrides": TRIVIAL_ENV},
        "agent": {"name": "klinotaxis"}, "episodes": 16, "seed": 0}))
    out = tmp_path / "eval"
    policy = sweep_run["out"] / "members" / best / "policy"
    assert main(["evaluate", "--scenario", str(scenario), "--agent", "winner=trained",
                 "klinotaxis", "random_walk", "--agent-param", f"winner.path={policy}",
                 "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("### trivial_gaussian") == 1  # one scenario, one table
    rows = [line.split("|")[1:-1] for line in printed.splitlines()
            if line.startswith("| ") and "episodes" not in line]
    assert [r[0].strip() for r in rows] == ["winner (trained)", "klinotaxis", "random_walk"]
    assert rows[0][2].strip().startswith("1.000")  # the winner learned the trivial task
    assert (out / "summary.md").is_file() and (out / "trivial_gaussian.png").is_file()


@pytest.mark.slow
def test_a_killed_sweep_resumes_from_its_programs_checkpoints(sweep_run, tmp_path, capsys):
    """A sweep killed in its second program (its checkpoint at update 5, the
    members' metrics ahead of it with a torn line, no summary) resumes with
    ``plume-jax sweep --resume DIR``: the finished program is not trained
    again, the other continues from update 5, and the results are the
    uninterrupted sweep's, bit for bit."""
    import shutil

    folder = tmp_path / "sweep"
    shutil.copytree(sweep_run["out"], folder)
    program = folder / "programs" / "2"
    shutil.rmtree(program / "checkpoint")
    shutil.copytree(program / "checkpoints" / "update_00000005", program / "checkpoint")
    (program / "checkpoint" / ".runner.msgpack.tmp-abcd1234").write_bytes(b"partial")
    for name in ("results.json", "results.csv", "summary.md", "metrics.jsonl"):
        (folder / name).unlink()
    for name in NAMES[2:]:
        shutil.rmtree(folder / "members" / name / "policy")
        (folder / "members" / name / "summary.json").unlink()
        with (folder / "members" / name / "metrics.jsonl").open("a") as f:
            f.write('{"update": 11, "env_st')
    assert main(["sweep", "--resume", str(folder), "--set", "algo.ent_coef=0.1"]) == 2
    assert "--resume=" in capsys.readouterr().err
    assert main(["sweep", "--resume", str(folder), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Best setting:" in out
    results = json.loads((folder / "results.json").read_text())
    assert [p["resumed_at_update"] for p in results["programs"]] == [10, 5]
    assert results["env_steps_this_call"] == 2 * 5 * 16 * 32
    assert [r["eval_success_rate"] for r in results["results"]] == \
        [r["eval_success_rate"] for r in sweep_run["results"]["results"]]
    for name in NAMES:
        member = folder / "members" / name
        rows = [json.loads(x) for x in (member / "metrics.jsonl").read_text().splitlines()]
        original = (sweep_run["out"] / "members" / name / "metrics.jsonl").read_text()
        assert rows == [json.loads(x) for x in original.splitlines()], name
        assert (member / "policy" / "policy.npz").is_file()
    assert not (program / "checkpoint" / ".runner.msgpack.tmp-abcd1234").exists()
    assert json.loads((program / "checkpoint" / "meta.json").read_text())["update"] == 10


def _as_old_named_sweep(folder):
    """Make the sweep in ``folder`` (a copy of the fixture's) what plume_jax
    wrote before member names were shell-safe: its member folders, the
    sweep's tables and metrics rows, and its programs' checkpoints (inside
    their checksummed runner.msgpack too) name the members the old way."""
    import hashlib

    from flax import serialization

    old = dict(zip(NAMES, OLD_NAMES))
    for name in NAMES:
        (folder / "members" / name).rename(folder / "members" / old[name])
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps({**r, "name": old[r["name"]]}) + "\n" for r in rows))
    for table in ("summary.md", "results.json", "results.csv"):
        text = (folder / table).read_text()
        for name in NAMES:
            text = text.replace(name, old[name])
        (folder / table).write_text(text)
    for checkpoint in [*folder.glob("programs/*/checkpoint"),
                       *folder.glob("programs/*/checkpoints/update_*")]:
        state = serialization.msgpack_restore((checkpoint / "runner.msgpack").read_bytes())
        meta = json.loads(state["meta"])
        meta["members"] = [old[name] for name in meta["members"]]
        state["meta"] = json.dumps(meta)
        state["meta_sha256"] = hashlib.sha256(state["meta"].encode()).hexdigest()
        (checkpoint / "runner.msgpack").write_bytes(serialization.msgpack_serialize(state))
        (checkpoint / "meta.json").write_text(json.dumps(meta, indent=2))


def test_sweep_resume_renames_the_members_of_an_old_named_sweep(sweep_run, tmp_path):
    """A sweep written before member names were shell-safe
    (``members/hidden_sizes=8,seed=0``) resumes: ``sweep --resume`` finds
    its members under their old names, renames their folders, accepts the
    programs' checkpoints that name them the old way, keeps every metrics
    row and writes its tables with the new names. One member folder is
    already renamed, as a resume killed between two renames leaves it."""
    import shutil

    from plume_jax.train.sweep import load_sweep_config, run_sweep

    folder = tmp_path / "sweep"
    shutil.copytree(sweep_run["out"], folder)
    _as_old_named_sweep(folder)
    (folder / "members" / OLD_NAMES[0]).rename(folder / "members" / NAMES[0])
    run_sweep(load_sweep_config(folder / "sweep.yaml"), folder, progress=False,
              evaluate_members=False, resume=True)
    assert sorted(p.name for p in (folder / "members").iterdir()) == sorted(NAMES)
    for name in NAMES:
        member = folder / "members" / name
        assert (member / "metrics.jsonl").read_text() == \
            (sweep_run["out"] / "members" / name / "metrics.jsonl").read_text(), name
        assert (member / "policy" / "policy.npz").is_file()
        assert not (member / ".plume_jax.lock").exists()  # the lock moved with the folder
    results = json.loads((folder / "results.json").read_text())
    assert [r["name"] for r in results["results"]] == NAMES
    assert [p["members"] for p in results["programs"]] == [NAMES[:2], NAMES[2:]]
    assert [p["resumed_at_update"] for p in results["programs"]] == [NUM_UPDATES] * 2
    assert sorted({r["name"] for r in map(json.loads, (folder / "metrics.jsonl").read_text()
                                          .splitlines())}) == sorted(NAMES)
    md = (folder / "summary.md").read_text()
    assert all(f"`members/{name}/`" in md for name in NAMES) and "=" not in md.split(
        "## Members")[1].split("Each member folder")[0]


def test_a_sweep_member_agrees_with_the_single_run_on_the_first_updates(sweep_run):
    """Member 3 (seed 1, hidden sizes [16, 16]) against the plain, un-vmapped
    run of its config (the member's config.yaml): vmap only changes the
    order of float reductions, so the first updates agree to float
    tolerance (later ones may drift apart)."""
    config = train_config(yaml.safe_load(
        (sweep_run["out"] / "members" / NAMES[3] / "config.yaml").read_text()))
    assert config.run["seed"] == 1 and config.network.hidden_sizes == (16, 16)
    single = train(config, None, progress=False, evaluate=False)
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
