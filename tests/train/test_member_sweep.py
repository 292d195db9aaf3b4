"""``member_sweep``: a sweep of given members (a tuner's trials) is a zip
grid over the base config, so ``sweep.yaml`` reproduces exactly those
members on ``sweep --resume``."""

from __future__ import annotations

import pytest

from plume_jax.core.errors import ValidationError
from plume_jax.train.sweep import member_sweep, sweep_config

BASE = {"env": {"id": "PlumeNav-Gaussian-v0", "overrides": {"grid_size": [12, 12]}},
        "algo": {"total_steps": 64, "num_envs": 4, "num_steps": 8},
        "run": {"tensorboard": False}, "eval": {"num_envs": 4}}


def test_a_member_sweep_trains_the_members_given_and_resumes_as_them():
    trials = [{"algo.learning_rate": 1e-3, "run.seed": 3},
              {"run.seed": 5, "algo.learning_rate": 3e-4}]
    sweep = member_sweep(BASE, trials)
    assert [(c.algo["learning_rate"], c.run["seed"]) for c in sweep.configs] == \
        [(1e-3, 3), (3e-4, 5)]
    assert sweep.mode == "zip" and len(set(sweep.names)) == 2
    again = sweep_config({"base": sweep.base.to_dict(), "grid": sweep.grid, "mode": sweep.mode})
    assert [c.to_dict() for c in again.configs] == [c.to_dict() for c in sweep.configs]
    assert again.names == sweep.names


@pytest.mark.parametrize("members, match", [
    ([], "at least one member"),
    ([{}], "at least one member"),
    ([{"run.seed": 1}, {"algo.learning_rate": 1e-3}], r"members\[1\]"),
])
def test_a_member_sweep_refuses_members_it_cannot_write_as_one_grid(members, match):
    with pytest.raises(ValidationError, match=match):
        member_sweep(BASE, members)
