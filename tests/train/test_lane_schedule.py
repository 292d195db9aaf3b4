"""``run.lanes`` as a width schedule (``[{from_update: U, lanes: N}, ...]``):
its checks, the widths it trains and evaluates at, and a resume from a
checkpoint in any segment, bit for bit. (That it reproduces a tune trial
rebuilt by pruning: ``tests/train/test_tune.py``.)"""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

from plume_jax.cli import main
from plume_jax.core.errors import ValidationError
from plume_jax.train.config import train_config
from plume_jax.train.lane_schedule import LaneSchedule

MINIMAL = {"env": {"id": "PlumeNav-Gaussian-v0"}, "algo": {"total_steps": 100_000}}  # 12 updates
SCHEDULE = [{"from_update": 0, "lanes": 4}, {"from_update": 5, "lanes": 2}]


def _lanes(value):
    return {**MINIMAL, "run": {"lanes": value}}


@pytest.mark.parametrize("value, words", [
    ([{"from_update": 1, "lanes": 2}], "the first entry's from_update is 1, not 0"),
    ([{"from_update": 0, "lanes": 2}, {"from_update": 0, "lanes": 3}],
     "entry 1's from_update 0 does not come after entry 0's 0"),
    ([{"from_update": 0, "lanes": 2}, {"from_update": 6, "lanes": 3},
      {"from_update": 4, "lanes": 1}], "entry 2's from_update 4 does not come after"),
    ([{"from_update": 0, "lanes": 0}], "entry 0's lanes is 0, not an integer in [1, 4096]"),
    ([{"from_update": 0, "lanes": 4097}], "entry 0's lanes is 4097"),
    ([{"from_update": 0, "lanes": 2.5}], "entry 0's lanes is 2.5"),
    ([{"from_update": 0, "lanes": True}], "entry 0's lanes is True"),
    ([{"from_update": 0, "lanes": "2"}], "entry 0's lanes is '2'"),
    ([{"from_update": -1, "lanes": 2}], "entry 0's from_update is -1, not an integer >= 0"),
    ([{"from_update": "0", "lanes": 2}], "entry 0's from_update is '0'"),
    ([{"from_update": 0, "lanes": 2}, {"from_update": 5}],
     "entry 1 is a mapping with keys ['from_update'], not a mapping with exactly the keys"),
    ([{"from_update": 0, "lanes": 2, "devices": 1}], "keys ['devices', 'from_update', 'lanes']"),
    ([2, 1], "entry 0 is 2, not a mapping"),
    ([], "the list is empty"),
    ({"from_update": 0, "lanes": 2}, "null, an integer in [1, 4096] or a width schedule"),
    ("2", "null, an integer in [1, 4096] or a width schedule"),
    ([{"from_update": 0, "lanes": 2}, {"from_update": 12, "lanes": 1}],
     "below the run's 12 updates"),
])
def test_a_bad_lanes_schedule_gets_a_one_line_error_naming_run_lanes(value, words):
    with pytest.raises(ValidationError) as info:
        train_config(_lanes(value))
    message = str(info.value)
    assert info.value.parameter == "run.lanes" and message.startswith("run.lanes=")
    assert "\n" not in message and words in message, message


def test_a_bad_lanes_schedule_from_the_command_line_is_one_line(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text(json.dumps(MINIMAL))
    status = main(["train", "--config", str(tmp_path / "c.yaml"), "--set",
                   "run.lanes=[{from_update: 0, lanes: 2}, {from_update: 0, lanes: 1}]",
                   "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1 and "run.lanes" in err, err
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_lanes_schedule_round_trips_and_integer_and_null_stay_as_they_were():
    cfg = train_config(_lanes([{"from_update": 0.0, "lanes": 4}, {"from_update": 5,
                                                                   "lanes": np.int64(2)}]))
    assert cfg.run["lanes"] == SCHEDULE
    assert all(type(v) is int for e in cfg.run["lanes"] for v in e.values())
    assert train_config(cfg.to_dict()) == cfg
    cfg.to_dict()["run"]["lanes"][0]["lanes"] = 99  # to_dict is a copy
    assert cfg.run["lanes"] == SCHEDULE
    assert train_config(_lanes(3)).run["lanes"] == 3 and train_config(_lanes(3.0)).run["lanes"] == 3
    assert train_config(MINIMAL).run["lanes"] is None
    assert train_config(MINIMAL).to_dict()["run"] == train_config(MINIMAL).run


def test_a_schedule_trains_each_update_and_evaluates_each_runner_at_its_programs_width():
    """Updates [0, 5) at 4 lanes, then 2; the runner at update u was made
    by the program that trained update u, so the evaluation at 5 (before a
    tune rebuild's switch) is at 4 lanes, and at 6 at 2."""
    s = LaneSchedule.of(SCHEDULE)
    assert s == LaneSchedule(((0, 4), (5, 2)))
    assert [s.training_width(u) for u in range(8)] == [4] * 5 + [2] * 3
    assert [s.evaluation_width(u) for u in range(8)] == [4] * 6 + [2] * 2
    assert s.ends(10) == [(0, 5, 4), (5, 10, 2)] and s.cost(10) == 30
    assert LaneSchedule.of(3) == LaneSchedule(((0, 3),)) and LaneSchedule.of(3).cost(10) == 30
    assert LaneSchedule.of(None) is None


def test_a_schedule_builds_a_single_run_in_lanes_only():
    from plume_jax.train.loop import Member, build_program

    def member(**run):
        cfg = train_config({**MINIMAL, "run": run})
        return Member(cfg, *cfg.make_env())

    assert build_program([member(lanes=SCHEDULE)], batched=False).lanes == \
        LaneSchedule(((0, 4), (5, 2)))
    for runs, batched, words in (([member(lanes=SCHEDULE, devices=2)], False, "run.devices 2"),
                                 ([member(), member(lanes=SCHEDULE)], True,
                                  "sweep or tune member")):
        with pytest.raises(ValidationError, match=words) as info:
            build_program(runs, batched=batched)
        assert info.value.parameter == "run.lanes"


@pytest.mark.parametrize("lanes, words", [
    (4, ["trained as lane 0 of 4 identical copies", "4 x the compute"]),
    (SCHEDULE, ["trained as lane 0 of identical copies in a run.lanes width schedule: 4 copies "
                "for updates 0..4, then 2 copies for updates 5..11",
                "4 x 5 + 2 x 7 = 34 lane-updates, 2.83 times the compute of one run's 12"]),
    (1, ["trained as the one member of a vmapped program (run.lanes: 1; the compute of one "
         "run)"]),
])
def test_a_run_in_lanes_says_in_its_closing_lines_that_it_trained_copies(lanes, words):
    """Regression: a run with run.lanes N ended with the lines of a single
    run, its env steps/s one lane's, saying nothing of the N copies it
    trained (N times the compute); the line after the timings now says so,
    for a width and for a width schedule, and a run without lanes has none."""
    import io

    from plume_jax.cli.train import print_summary

    def closing(run):
        cfg = train_config({**MINIMAL, "run": run})
        summary = {"env_steps_this_call": 98304, "updates_this_call": 12,
                   "env_steps_total": 98304, "env": "PlumeNav-Gaussian-v0",
                   "compile_seconds": 1.0, "train_seconds": 2.0,
                   "steps_per_second_excl_compile": 49152.0, "wall_seconds": 4.0,
                   "config": cfg.to_dict(), "num_updates": cfg.num_updates}
        out = io.StringIO()
        print_summary(summary, out)
        return out.getvalue().splitlines()

    lines = closing({"lanes": lanes})
    assert lines[1].startswith("compile 1.0 s, train 2.0 s (49,152 env steps/s")
    for word in words:
        assert word in lines[2], lines[2]
    assert lines[2].endswith("; the env steps and steps/s above are one lane's") == (lanes != 1)
    assert not any("lane" in line for line in closing({}))


# ------------------------------------------------------------------- resume
RUN = {
    "env": {"id": "PlumeNav-Gaussian-v0",
            "overrides": {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5,
                          "max_steps": 40, "start": {"type": "fixed", "position": [4, 7]}}},
    "algo": {"total_steps": 16 * 32 * 10, "num_envs": 16, "num_steps": 32,
             "update_epochs": 2, "num_minibatches": 2, "learning_rate": 3e-3,
             "normalize_obs": True, "ent_coef": 0.0},
    "network": {"hidden_sizes": [8]},
    "run": {"seed": 0, "log_every": 5, "checkpoint_every": 1, "lanes": SCHEDULE,
            "tensorboard": False},
    "eval": {"num_envs": 32, "every": 5, "periodic_episodes": 16},
}


def _rows(path: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def scheduled_run(tmp_path_factory):
    from plume_jax.train.run import train

    out = tmp_path_factory.mktemp("schedule") / "run"
    train(train_config(RUN), out, progress=False)
    return out


@pytest.mark.slow  # four trains of 10 updates in lanes (4, then 2): about 50 s on a loaded CPU
@pytest.mark.parametrize("update", [3, 5, 7], ids=["first segment", "at the switch",
                                                    "second segment"])
def test_a_run_with_a_lanes_schedule_resumes_bit_for_bit_from_any_segment(scheduled_run,
                                                                          tmp_path, update):
    """A resume from the kept checkpoint of update 3 (lanes 4), 5 (the
    switch: its evaluation ran at 4 lanes, the rest trains at 2) or 7
    (lanes 2) trains on at the schedule's widths and gives the same
    policy, best/, metrics rows and evaluations as the uninterrupted run."""
    from plume_jax.train.run import train

    out = scheduled_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    train(train_config(RUN), copy, progress=False,
          resume=copy / "checkpoints" / f"update_{update:08d}")
    assert _rows(copy / "metrics.jsonl") == _rows(out / "metrics.jsonl")
    assert _rows(copy / "evaluations.jsonl") == _rows(out / "evaluations.jsonl")
    for policy in ("policy", "best"):
        a, b = np.load(out / policy / "policy.npz"), np.load(copy / policy / "policy.npz")
        assert a.files == b.files
        for key in a.files:
            assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), (policy, key)
    timing = ("seconds_incl_compile",)
    first, again = (json.loads((f / "summary.json").read_text())["evaluation"]
                    for f in (out, copy))
    assert {k: v for k, v in first.items() if k not in timing} == \
        {k: v for k, v in again.items() if k not in timing}
