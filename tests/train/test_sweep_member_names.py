"""Sweep member folders a shell takes without quotes (issue 30, friction
10): names of letters, digits, ``-``, ``_`` and ``.`` only, unique even when
values differ only in the characters replaced; sweeps written with the older
``key=value,key=value`` names are renamed by ``sweep --resume``, all or
nothing. The resume of a whole old-named sweep is in test_train_sweep.py
(default run) and below (slow: a sweep of the old kind written and killed
mid-program)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.train.member_names import legacy_member_names, member_folders, member_names, \
    rename_legacy_member_folders
from plume_jax.train.sweep import sweep_config

TINY = {"env": {"id": "PlumeNav-Gaussian-v0",
                "overrides": {"grid_size": [12, 12], "max_steps": 20}},
        "algo": {"total_steps": 64, "num_envs": 4, "num_steps": 8,
                 "update_epochs": 1, "num_minibatches": 1},
        "network": {"hidden_sizes": [8]},
        "run": {"seed": 0, "log_every": 1, "checkpoint_every": 1, "tensorboard": False},
        "eval": {"num_envs": 4, "num_steps": 10}}

_values = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, width=32),
                    st.text(max_size=30), st.booleans(), st.none(),
                    st.lists(st.integers(0, 999), max_size=4),
                    st.dictionaries(st.text(max_size=8), st.integers(), max_size=2))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(
    ["run.seed", "algo.learning_rate", "env.reward.scale", "env.overrides.reward.scale",
     "network.hidden_sizes", "env.id", "env.x/y", "env.-lead", "env..dot"]), _values,
    min_size=1, max_size=3), min_size=1, max_size=12))
def test_sweep_member_names_need_no_shell_quoting(members):
    """Safe file names, unique on any file system, and words a shell takes
    as they are (the old ``key=value,key=value`` needed quotes)."""
    names = member_names(members)
    assert len(names) == len(members)
    assert len({n.casefold() for n in names}) == len(names)
    for name in names:
        assert re.fullmatch(r"[A-Za-z0-9._-]{1,100}", name), name
        assert shlex.quote(name) == name  # a shell takes it as it is
        assert name[0] not in "-.", name  # not an option, not hidden


def test_sweep_member_names_are_readable_grid_values():
    assert member_names([{"algo.learning_rate": 0.0003, "algo.num_envs": 64},
                         {"network.hidden_sizes": [16, 16], "run.seed": 1},
                         {"algo.ent_coef": -0.01}]) == \
        ["learning_rate-0.0003_num_envs-64", "hidden_sizes-16x16_seed-1", "ent_coef--0.01"]


def test_member_names_stay_unique_when_values_differ_only_in_replaced_characters():
    members = [{"env.tag": "a/b"}, {"env.tag": "a:b"}, {"env.tag": "a b"}, {"env.tag": "A_B"},
               {"env.tag": "a_b-1"}]
    names = member_names(members)
    assert names == ["tag-a_b", "tag-a_b-1", "tag-a_b-2", "tag-A_B-3", "tag-a_b-1-4"]
    assert len({n.casefold() for n in names}) == len(names)


def test_old_member_names_are_the_names_older_sweeps_wrote():
    """The migration finds old members by these names: they must be the
    names plume_jax gave them before (``key=value,key=value``)."""
    sweep = sweep_config({"base": TINY, "grid": {"network.hidden_sizes": [[8], [16, 16]],
                                                 "run.seed": [0, 1]}})
    assert legacy_member_names(sweep.members) == [
        "hidden_sizes=8,seed=0", "hidden_sizes=8,seed=1", "hidden_sizes=16x16,seed=0",
        "hidden_sizes=16x16,seed=1"]
    assert legacy_member_names([{"env.tag": "a/b"}, {"env.tag": "a:b"}]) == \
        ["tag=a_b", "tag=a_b-1"]


def _old_sweep_folders(tmp_path: pathlib.Path):
    sweep = sweep_config({"base": TINY, "grid": {"run.seed": [0, 1, 2]}})
    out = tmp_path / "s"
    for old in legacy_member_names(sweep.members):
        (out / "members" / old).mkdir(parents=True)
        (out / "members" / old / "metrics.jsonl").write_text(json.dumps({"update": 1}) + "\n")
    return sweep, out


def test_a_failed_member_rename_leaves_the_old_sweep_as_it_was(tmp_path, monkeypatch):
    """Nothing half renamed: when the second of three renames fails, the
    first is undone and the error names the folder."""
    sweep, out = _old_sweep_folders(tmp_path)
    before = sorted(p.name for p in (out / "members").iterdir())
    rename, calls = pathlib.Path.rename, []

    def failing(self, target):
        calls.append(self.name)
        if len(calls) == 2:
            raise PermissionError(13, "Permission denied")
        return rename(self, target)

    monkeypatch.setattr(pathlib.Path, "rename", failing)
    with pytest.raises(StateError, match=re.escape("seed=1 could not be renamed to seed-1")):
        rename_legacy_member_folders(out, sweep)
    assert sorted(p.name for p in (out / "members").iterdir()) == before == \
        ["seed=0", "seed=1", "seed=2"]
    monkeypatch.undo()
    assert [(a.name, b.name) for a, b in rename_legacy_member_folders(out, sweep)] == \
        [("seed=0", "seed-0"), ("seed=1", "seed-1"), ("seed=2", "seed-2")]
    assert sorted(p.name for p in (out / "members").iterdir()) == sweep.names


def test_a_member_with_folders_under_both_names_is_refused_naming_both(tmp_path):
    sweep, out = _old_sweep_folders(tmp_path)
    (out / "members" / "seed-1").mkdir()
    with pytest.raises(ValidationError, match=r"members/seed=1 .*and members/seed-1"):
        member_folders(out, sweep, resume=True)
    assert sorted(p.name for p in (out / "members").iterdir()) == \
        ["seed-1", "seed=0", "seed=1", "seed=2"]


@pytest.mark.slow
def test_an_old_named_sweep_killed_mid_program_continues_under_the_new_names(tmp_path):
    """A sweep of the old kind, written as older plume_jax wrote it (its
    member folders, metrics rows and program checkpoints name the members
    ``seed=0``), killed after update 1 of 2, resumes: its members continue
    from the checkpoint, bit for bit the uninterrupted sweep's rows, in
    folders of the new names, and the checkpoints written from then on name
    them so."""
    import shutil

    from plume_jax.train.sweep import run_sweep

    sweep = sweep_config({"base": TINY, "grid": {"run.seed": [0, 1]}})
    old = dataclasses.replace(sweep, names=legacy_member_names(sweep.members))
    out = tmp_path / "s"
    run_sweep(old, out, progress=False, evaluate_members=False)
    finished = {name: (out / "members" / o / "metrics.jsonl").read_text()
                for name, o in zip(sweep.names, old.names)}
    program = out / "programs" / "1"
    assert json.loads((program / "checkpoint" / "meta.json").read_text())["members"] == \
        ["seed=0", "seed=1"]
    shutil.rmtree(program / "checkpoint")
    shutil.copytree(program / "checkpoints" / "update_00000001", program / "checkpoint")
    result = run_sweep(sweep, out, progress=False, evaluate_members=False, resume=True)
    assert result.summary["programs"][0]["resumed_at_update"] == 1
    assert sorted(p.name for p in (out / "members").iterdir()) == ["seed-0", "seed-1"]
    for name, rows in finished.items():
        assert (out / "members" / name / "metrics.jsonl").read_text() == rows, name
    meta = json.loads((program / "checkpoint" / "meta.json").read_text())
    assert meta["members"] == ["seed-0", "seed-1"] and meta["update"] == 2
