"""A sweep keeps what no member varies once (issue 39, item 3): a movie
preset's frames were stacked per member, so a seed sweep's env params grew
with frames x members. Shared leaves are broadcast by the members' ``vmap``,
and training with them gives the same numbers as stacking them did."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from plume_jax.plumes import save_movie
from plume_jax.train import loop as driver
from plume_jax.train.members import Shared, member_axes, member_of, stack_members, \
    vmap_members
from plume_jax.train.sweep import run_sweep, setup, sweep_config

FRAMES, ROWS, COLS = 12, 8, 16
MEMBERS = 3


def test_stack_members_keeps_equal_leaves_once_and_stacks_the_others():
    a = {"same": np.arange(6.0).reshape(2, 3), "differs": np.float32(1.0), "n": 5}
    b = {"same": np.arange(6.0).reshape(2, 3), "differs": np.float32(2.0), "n": 5}
    tree = stack_members([a, b])
    assert isinstance(tree["same"], Shared) and tree["same"].value.shape == (2, 3)
    assert isinstance(tree["n"], Shared)
    assert tree["differs"].shape == (2,)
    assert member_axes(tree) == {"same": None, "differs": 0, "n": None}
    np.testing.assert_array_equal(member_of(tree, 1)["same"], a["same"])
    assert float(member_of(tree, 1)["differs"]) == 2.0
    # a leaf equal in value but not in dtype or shape is not shared
    c = {"same": np.arange(6.0, dtype=np.float32).reshape(2, 3), "differs": np.float32(2.0),
         "n": 5}
    assert not isinstance(stack_members([a, c])["same"], Shared)


def test_vmap_members_broadcasts_shared_leaves_as_stacking_them_would():
    trees = [{"w": jnp.arange(4.0), "s": jnp.float32(i)} for i in range(3)]
    shared = stack_members(trees)
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *trees)

    def f(t):
        return t["w"] * t["s"] + t["w"].sum()

    np.testing.assert_array_equal(vmap_members(f, shared), jax.vmap(f)(stacked))


@pytest.fixture(scope="module")
def movie_sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("movie_sweep")
    path = folder / "tiny.npz"
    rng = np.random.default_rng(0)
    save_movie(path, rng.random((FRAMES, ROWS, COLS), dtype=np.float32), fps=10.0,
               source=[2, 4])
    base = {
        "env": {"id": "PlumeNav-Movie-v0",
                "overrides": {"grid_size": [COLS, ROWS], "max_steps": 16,
                              "plume": {"path": str(path)},
                              "start": {"type": "fixed", "position": [12, 4]}}},
        "algo": {"total_steps": 8 * 8 * 2, "num_envs": 8, "num_steps": 8, "update_epochs": 1,
                 "num_minibatches": 2},
        "network": {"hidden_sizes": [8]},
        "run": {"seed": 0, "log_every": 1},
        "eval": {"num_envs": 8},
    }
    return sweep_config({"base": base, "grid": {"run.seed": list(range(MEMBERS))}})


def test_a_movie_sweep_keeps_one_copy_of_the_frames_not_one_per_member(movie_sweep):
    program = setup(movie_sweep)
    frames = program.env_params.plume.frames
    assert isinstance(frames, Shared), "the frames were stacked per member"
    assert frames.value.shape == (FRAMES, ROWS, COLS)
    env_bytes = sum(np.asarray(x).nbytes for x in jax.tree.leaves(program.env_params))
    one_member = sum(np.asarray(x).nbytes
                     for x in jax.tree.leaves(member_of(program.env_params, 0)))
    assert env_bytes < one_member + 1024  # not members x frames


@pytest.mark.slow
def test_a_movie_sweep_with_shared_frames_trains_as_the_stacked_one_did(movie_sweep,
                                                                        monkeypatch):
    shared = run_sweep(movie_sweep, None, progress=False, evaluate_members=False)

    def stack_everything(trees):
        return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *trees)

    monkeypatch.setattr(driver, "stack_members", stack_everything)
    stacked = run_sweep(movie_sweep, None, progress=False, evaluate_members=False)
    assert not isinstance(setup(movie_sweep).env_params.plume.frames, Shared)
    a, b = shared.programs[0].metrics, stacked.programs[0].metrics
    assert a.keys() == b.keys() and a["loss"].shape == (2, MEMBERS)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
