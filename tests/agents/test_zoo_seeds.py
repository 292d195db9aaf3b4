"""Issue 39, item 1: a zoo entry keeps its recipe's per-seed policies
(``seeds/<seed>/``), each loadable as ``zoo:<name>@<version>#<seed>``; bad
forms are one-line errors; ``plume-jax list --zoo`` counts the seeds;
``zoo_publish --seeds`` copies a finished seed sweep's members in, checking
every member's config, and writes nothing when one is wrong."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

import plume_jax
from agents import make_agent, zoo
from agents.trained import TrainedPolicy
from plume_jax import ValidationError
from plume_jax.scoreboard import zoo_publish

SHIPPED = zoo.ZOO_ROOT / "gaussian-mlp" / "1"


def _sweep(folder, seeds, config_of=lambda seed, cfg: cfg):
    """A finished seed sweep of gaussian-mlp@1's config in ``folder``: each
    member the headline policy, its config the entry's with ``run.seed``."""
    from plume_jax.train.config import load_train_config

    base = load_train_config(SHIPPED / "config.yaml").to_dict()
    results = []
    for k in seeds:
        member = folder / "members" / f"seed-{k}"
        shutil.copytree(SHIPPED / "policy", member / "policy")
        cfg = json.loads(json.dumps(base))
        cfg["run"]["seed"] = k
        (member / "config.yaml").write_text(yaml.safe_dump(config_of(k, cfg)))
        (member / "summary.json").write_text(json.dumps({
            "env_steps_total": 1998848, "finished_at": "2026-11-28T00:00:00+00:00",
            "evaluation": {"episodes": 1000, "seed": 1000003, "greedy": True,
                           "success_rate": 0.9 + k / 100, "successes": 900 + 10 * k,
                           "mean_steps_to_goal": 60.0 + k}}))
        results.append({"name": f"seed-{k}", "run.seed": k, "eval_success_rate": 0.9 + k / 100,
                        "eval_mean_steps_to_goal": 60.0 + k})
    (folder / "results.json").write_text(json.dumps({
        "grid": {"run.seed": list(seeds)}, "results": results, "train_seconds": 12.5,
        "eval": {"episodes": 1000, "seed": 1000003},
        "machine": {"devices": ["cpu:0"], "jax": "0.10.2"}}))
    return folder


@pytest.fixture
def seeded_zoo(tmp_path, monkeypatch):
    """A zoo holding gaussian-mlp@1 (its headline policy only) and a
    finished seed sweep of its config with seeds 0, 1 and 2 published
    into it."""
    root = tmp_path / "zoo"
    shutil.copytree(SHIPPED, root / "gaussian-mlp" / "1", ignore=shutil.ignore_patterns("seeds"))
    monkeypatch.setenv(zoo.ZOO_ENV, str(root))
    sweep = _sweep(tmp_path / "sweep", [0, 1, 2])
    written = zoo_publish.publish_seeds(sweep, "zoo:gaussian-mlp@1")
    assert [p.name for p in written] == ["0", "1", "2"]
    return root


def test_a_kept_seed_loads_as_zoo_name_at_version_hash_seed(seeded_zoo):
    entry = zoo.resolve("zoo:gaussian-mlp@1#2")
    assert entry.reference == "zoo:gaussian-mlp@1#2" and entry.member_seed == 2
    assert entry.policy_path == seeded_zoo / "gaussian-mlp" / "1" / "seeds" / "2" / "policy"
    assert entry.member_info["evaluation"]["success_rate"] == pytest.approx(0.92)
    assert entry.member_info["sweep"]["members"] == 3
    assert zoo.resolve("zoo:gaussian-mlp@1").seeds == [0, 1, 2]
    assert zoo.resolve("zoo:gaussian-mlp@1").policy_path.name == "policy"  # the headline stays
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0")
    assert isinstance(make_agent("zoo:gaussian-mlp@1#2", env), TrainedPolicy)
    agent = zoo.load_agent("zoo:gaussian-mlp@1#0")
    assert agent.policy.spec["env"]["id"] == "PlumeNav-Gaussian-v0"


@pytest.mark.parametrize("reference, says", [
    ("zoo:gaussian-mlp#1", r"spell the version, e\.g\. zoo:gaussian-mlp@1#1"),
    ("zoo:gaussian-mlp@1#01", r"without leading zeros: \['zoo:gaussian-mlp@1#0'"),
    ("zoo:gaussian-mlp@1#", r"a non-negative integer"),
    ("zoo:gaussian-mlp@1#-1", r"a non-negative integer"),
    ("zoo:gaussian-mlp@1#²", r"a non-negative integer"),
    ("zoo:gaussian-mlp@1#7", r"a seed kept under .*: one of \['zoo:gaussian-mlp@1#0', "
                             r"'zoo:gaussian-mlp@1#1', 'zoo:gaussian-mlp@1#2'\]"),
    ("zoo:gaussian-mlp@2#0", r"a trained version of zoo entry 'gaussian-mlp'"),
])
def test_bad_seed_references_are_one_line_errors_naming_what_is_kept(seeded_zoo, reference,
                                                                     says):
    with pytest.raises(ValidationError, match=says) as caught:
        zoo.resolve(reference)
    assert "\n" not in str(caught.value)


def test_an_entry_without_kept_seeds_says_so(tmp_path, monkeypatch):
    root = tmp_path / "zoo"
    shutil.copytree(SHIPPED, root / "gaussian-mlp" / "1", ignore=shutil.ignore_patterns("seeds"))
    monkeypatch.setenv(zoo.ZOO_ENV, str(root))
    with pytest.raises(ValidationError, match=r"keeps no per-seed policies"):
        zoo.resolve("zoo:gaussian-mlp@1#0")


def test_plume_jax_list_zoo_counts_the_kept_seeds(seeded_zoo, capsys):
    from plume_jax import cli

    assert cli.main(["list", "--zoo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[-1] == "seeds"
    assert lines[2].split()[0] == "zoo:gaussian-mlp@1" and lines[2].split()[-1] == "3"


def test_evaluate_cli_takes_a_seed_reference(seeded_zoo, tmp_path):
    from plume_jax import cli

    out = tmp_path / "eval"
    assert cli.main(["evaluate", "--scenario", "configs/scenarios/gaussian_klinotaxis.yaml",
                     "--agent", "zoo:gaussian-mlp@1#1", "--episodes", "4", "--out", str(out),
                     "--quiet"]) == 0
    reports = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert any("zoo:gaussian-mlp@1#1" in json.dumps(r) for r in reports)


def test_republishing_replaces_the_kept_seeds_and_a_bad_member_writes_nothing(seeded_zoo,
                                                                              tmp_path):
    seeds = seeded_zoo / "gaussian-mlp" / "1" / "seeds"
    before = {p: p.read_bytes() for p in sorted(seeds.rglob("*")) if p.is_file()}

    def other_rate(k, cfg):
        if k == 1:
            cfg["algo"]["learning_rate"] = 0.5
        return cfg

    bad = _sweep(tmp_path / "bad", [0, 1, 2, 3], other_rate)
    with pytest.raises(ValidationError, match=r"member seed-1 differs in \['algo.learning_rate'\]"):
        zoo_publish.publish_seeds(bad, "gaussian-mlp@1")
    assert {p: p.read_bytes() for p in sorted(seeds.rglob("*")) if p.is_file()} == before
    assert not list((seeded_zoo / "gaussian-mlp" / "1").glob(".seeds.publishing-*"))
    again = _sweep(tmp_path / "again", [0, 3])
    zoo_publish.publish_seeds(again, "gaussian-mlp@1")
    assert zoo.resolve("zoo:gaussian-mlp@1").seeds == [0, 1, 2, 3]
    info = yaml.safe_load((seeds / "3" / "seed.yaml").read_text())
    assert info["seed"] == 3 and info["sweep"]["members"] == 2


def test_publish_seeds_refuses_a_sweep_without_member_policies_or_over_more_than_the_seed(
        seeded_zoo, tmp_path, capsys):
    sweep = _sweep(tmp_path / "s", [4])
    shutil.rmtree(sweep / "members" / "seed-4" / "policy")
    with pytest.raises(ValidationError, match=r"members/seed-4/policy/policy.json is missing"):
        zoo_publish.publish_seeds(sweep, "gaussian-mlp@1")
    grid = _sweep(tmp_path / "g", [4])
    results = json.loads((grid / "results.json").read_text())
    results["grid"]["algo.learning_rate"] = [1e-3]
    (grid / "results.json").write_text(json.dumps(results))
    with pytest.raises(ValidationError, match=r"a sweep of run.seed only"):
        zoo_publish.publish_seeds(grid, "gaussian-mlp@1")
    from plume_jax import cli

    assert cli.main(["zoo", "publish", str(grid), "gaussian-mlp", "--seeds"]) == 2
    assert "zoo:<name>@<version>" in capsys.readouterr().err
    assert zoo.resolve("zoo:gaussian-mlp@1").seeds == [0, 1, 2]


@pytest.mark.parametrize("entry", [e for e in zoo.entries() if e.seeds],
                         ids=lambda e: e.reference)
def test_every_shipped_seed_is_small_described_and_loads(entry):
    from plume_jax.files.safe_io import load_json_file

    for k in entry.seeds:
        member = entry.seed_member(k)
        size = sum(f.stat().st_size for f in member.policy_path.iterdir())
        assert size <= zoo_publish.MAX_POLICY_BYTES
        info = member.member_info
        assert info["seed"] == k and 0.0 <= info["evaluation"]["success_rate"] <= 1.0
        assert info["evaluation"]["episodes"] > 0 and info["training"]["env_steps"] > 0
        spec = load_json_file(member.policy_path / "policy.json", "policy")
        assert spec["env"]["id"] == entry.preset
        with np.load(member.policy_path / "policy.npz") as arrays:
            assert len(arrays.files) > 0


def test_bench_add_takes_a_seed_reference_as_its_own_label(seeded_zoo):
    from plume_jax.scoreboard.contenders import user_contender

    contender = user_contender("zoo:gaussian-mlp@1#2")
    assert contender.label == contender.agent == "zoo:gaussian-mlp@1#2"
    with pytest.raises(ValidationError, match=r"a seed kept under"):
        user_contender("zoo:gaussian-mlp@1#9")


def test_a_sweep_written_before_rnn_size_existed_publishes_its_seeds(seeded_zoo, tmp_path):
    """A seed sweep trained by plume_jax before ``network.rnn_size`` existed
    (its members' configs lack the key) was refused as "differs in
    ['network.rnn_size']" by an entry whose config this version resolves
    with it; its members are read in this version's form now."""
    def before_rnn(k, cfg):
        del cfg["network"]["rnn_size"]
        return cfg

    old = _sweep(tmp_path / "old", [5], before_rnn)
    assert "rnn_size" not in yaml.safe_load(
        (old / "members" / "seed-5" / "config.yaml").read_text())["network"]
    (written,) = zoo_publish.publish_seeds(old, "gaussian-mlp@1")
    assert written.name == "5" and zoo.resolve("zoo:gaussian-mlp@1").seeds == [0, 1, 2, 5]

    def other_width(k, cfg):  # a setting it did set is still compared
        cfg["network"]["rnn_size"] = 32
        return cfg

    with pytest.raises(ValidationError, match=r"differs in \['network.rnn_size'\]"):
        zoo_publish.publish_seeds(_sweep(tmp_path / "other", [6], other_width),
                                  "gaussian-mlp@1")


def test_a_member_of_a_shorter_budget_is_refused_naming_both_values(seeded_zoo, tmp_path):
    """Regression: a seed sweep trained with ``--set algo.total_steps=16384``
    was refused with only "member seed-0 differs in ['algo.total_steps']",
    leaving the user to find both budgets. Now the message gives the
    entry's value and the member's, and what to sweep."""
    def short(k, cfg):
        cfg["algo"]["total_steps"] = 16384
        return cfg

    sweep = _sweep(tmp_path / "short", [0, 1], short)
    with pytest.raises(ValidationError) as caught:
        zoo_publish.publish_seeds(sweep, "gaussian-mlp@1")
    text = str(caught.value)
    assert ("member seed-0 differs in ['algo.total_steps']: algo.total_steps: entry 2000000, "
            "member 16384; sweep only run.seed over ") in text
    assert text.endswith("config.yaml, its budget included)")
