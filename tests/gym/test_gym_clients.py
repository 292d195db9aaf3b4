"""Gymnasium and SB3 code that other people wrote, run on plume_jax (issue 44,
items 10, 11 and 12): an id given to a tool that never imports plume_jax,
CleanRL's vector loop, and SB3's ``SubprocVecEnv`` with the ``fork`` start
method. Each test is named after what broke."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import gymnasium
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from plume_jax import StateError, cli

GAUSSIAN = "plume_jax/PlumeNav-Gaussian-v0"
SMALL = {"grid_size": [12, 12], "sigma": 3.0, "goal_radius": 1.5, "max_episode_steps": 8}


def test_gymnasium_make_reaches_the_env_by_module_colon_id_in_a_fresh_interpreter():
    """CleanRL's ``--env-id plume_jax/...`` gave "Namespace plume_jax not
    found" (Gymnasium 1.x loads no plugins); ``plume_jax:plume_jax/...`` is
    the form that works where plume_jax was never imported."""
    code = textwrap.dedent(f"""
        import sys, gymnasium
        try:
            gymnasium.make({GAUSSIAN!r})
        except gymnasium.error.Error as exc:
            print("bare:", type(exc).__name__, exc)
        assert "plume_jax" not in sys.modules
        env = gymnasium.make("plume_jax:" + {GAUSSIAN!r}, grid_size=[8, 8])
        obs, info = env.reset(seed=0)
        print("made:", env.spec.id, obs.shape, "episode_count" in info)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "bare: NamespaceNotFound" in out.stdout, out.stdout
    assert f"made: {GAUSSIAN} (1,) True" in out.stdout, out.stdout


def test_plume_jax_list_shows_the_module_colon_id_form(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "plume_jax:plume_jax/<preset>" in out and "--env-id" in out


def _cleanrl_style_loop(envs, steps: int) -> list[float]:
    """The episode scan of CleanRL's ``ppo.py`` (Gymnasium 0.29 form: iterate
    ``infos["final_info"]``) and of its Gymnasium 1.x form (``infos["episode"]``
    with its mask), over random actions; the returns it logs."""
    returns = []
    envs.reset(seed=0)
    for _ in range(steps):
        _, _, _, _, infos = envs.step(envs.action_space.sample())
        if "final_info" in infos:
            for info in infos["final_info"]:
                if info and "episode" in info:
                    returns.append(float(info["episode"]["r"]))
        if "episode" in infos:
            returns.extend(float(r) for r in infos["episode"]["r"][infos["_episode"]])
    return returns


def test_make_vec_defaults_to_next_step_autoreset_as_cleanrl_expects():
    """``gymnasium.make_vec`` defaulted to same-step autoreset; CleanRL's loop,
    written for Gymnasium's default (next-step), crashed on it with
    ``TypeError: string indices must be integers``."""
    envs = gymnasium.make_vec(GAUSSIAN, num_envs=3, **SMALL)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    envs.action_space.seed(0)
    returns = _cleanrl_style_loop(RecordEpisodeStatistics(envs), 20)
    assert len(returns) >= 3, returns  # 20 steps of 8-step episodes: each env ended some


def test_episode_count_stays_in_info_though_cleanrl_s_same_step_scan_trips_on_it():
    """Documented, not renamed: the contract (gymnasium_api.md) names
    ``episode_count`` a stable info key. In same-step mode ``final_info`` is a
    dict of arrays, so a scan that iterates it meets the key ``episode_count``
    and indexes a string (docs/gymnasium.md says so and what to do)."""
    envs = gymnasium.make_vec(GAUSSIAN, num_envs=3, autoreset_mode="SameStep", **SMALL)
    _, info = envs.reset(seed=0)
    assert "episode_count" in info
    envs.action_space.seed(0)
    with pytest.raises(TypeError, match="string indices"):
        _cleanrl_style_loop(RecordEpisodeStatistics(envs), 20)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_sb3_subproc_vec_env_with_fork_raises_the_state_error_in_the_parent():
    """SB3's ``SubprocVecEnv(start_method="fork")`` surfaced as
    ``ConnectionResetError``: the refusal happened in the worker, which died
    without a word to its parent."""
    subproc = pytest.importorskip("stable_baselines3.common.vec_env")

    def make_env():
        return gymnasium.make(GAUSSIAN, grid_size=[8, 8])

    with pytest.raises(StateError, match=r"SubprocVecEnv with the 'fork' start method.*"
                                         r"start_method='forkserver'"):
        subproc.SubprocVecEnv([make_env], start_method="fork")
    gymnasium.make(GAUSSIAN, grid_size=[8, 8]).close()  # the parent still builds envs
