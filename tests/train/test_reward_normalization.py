"""``algo.normalize_rewards``: rewards scaled by the running spread of the
discounted return, as baselines' VecNormalize does (Singh et al. 2023
trained behind it)."""

from __future__ import annotations

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.train.algorithms.ppo import PPO, Hparams, PPOStatic, RewardScalingRunner, Runner
from plume_jax.train.algorithms.returns import REWARD_CLIP, scale_rewards
from plume_jax.train.config import train_config
from plume_jax.train.algorithms.networks import NetworkConfig
from plume_jax.train.algorithms.normalize import ObsStats


def _vecnormalize_oracle(rewards: np.ndarray, dones: np.ndarray, gamma: float) -> np.ndarray:
    """The reference in float64: baselines' RunningMeanStd over the returns of
    the whole batch at each step (count starting at 1e-4)."""
    mean, var, count = 0.0, 1.0, 1e-4
    ret = np.zeros(rewards.shape[1])
    out = np.zeros_like(rewards)
    for t in range(rewards.shape[0]):
        ret = ret * gamma + rewards[t]
        b_mean, b_var, b_count = ret.mean(), ret.var(), ret.size
        delta, total = b_mean - mean, count + b_count
        mean = mean + delta * b_count / total
        var = (var * count + b_var * b_count + delta ** 2 * count * b_count / total) / total
        count = total
        out[t] = np.clip(rewards[t] / np.sqrt(var + 1e-8), -10.0, 10.0)
        ret[dones[t]] = 0.0
    return out


def _scan(rewards, dones, gamma):
    scaling = (ObsStats.create(1), jnp.zeros(rewards.shape[1], jnp.float32))

    def body(carry, inp):
        r, d = inp
        scaled, carry = scale_rewards(r, d, carry, gamma)
        return carry, scaled

    return np.asarray(jax.lax.scan(body, scaling, (jnp.asarray(rewards, jnp.float32),
                                                   jnp.asarray(dones)))[1])


def test_rewards_are_divided_by_the_running_spread_of_the_discounted_return():
    rng = np.random.default_rng(0)
    rewards = rng.normal(-0.5, 2.0, (40, 6)) + (rng.random((40, 6)) < 0.05) * 100.0
    dones = rng.random((40, 6)) < 0.1
    np.testing.assert_allclose(_scan(rewards, dones, 0.99),
                               _vecnormalize_oracle(rewards, dones, 0.99), rtol=2e-4, atol=1e-5)


def test_scaling_keeps_each_rewards_sign_and_clips_at_ten():
    rewards = np.zeros((30, 20))
    rewards[:, 0] = -0.01
    rewards[-1, 1] = 1e4  # one huge reward after a long quiet spell (1e4 / std ~ 25)
    scaled = _scan(rewards, np.zeros((30, 20), bool), 0.99)
    assert np.all(scaled[:, 0] < 0)
    assert scaled[-1, 1] == REWARD_CLIP


def test_without_scaling_rewards_are_untouched():
    r = jnp.asarray([1.0, -3.0])
    scaled, carry = scale_rewards(r, jnp.asarray([False, True]), None, 0.99)
    assert scaled is r and carry is None


@pytest.fixture(scope="module")
def env():
    return plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], sigma=4.0, max_steps=12,
                          reward={"type": "step_penalty", "goal_reward": 50.0,
                                  "step_penalty": 2.0})


def _algo(env, normalize_rewards: bool) -> PPO:
    static = PPOStatic(num_envs=4, num_steps=16, update_epochs=1, num_minibatches=1,
                       num_updates=2, normalize_rewards=normalize_rewards,
                       network=NetworkConfig(type="mlp", hidden_sizes=(8,)))
    return PPO(env[0], env[1], static)


def test_a_rollout_trains_on_scaled_rewards_and_reports_the_raw_returns(env):
    """The same key gives the same actions and raw episode returns with and
    without scaling; only the rewards GAE reads are scaled, as the oracle
    says, and the runner carries the statistics to the next update."""
    hp = Hparams.create(learning_rate=1e-3, ent_coef=0.0, vf_coef=0.5, gamma=0.9,
                        gae_lambda=0.95, clip_eps=0.2, max_grad_norm=0.5)
    plain, scaled = _algo(env, False), _algo(env, True)
    r0, r1 = plain.init(jax.random.key(0), hp, env[1]), scaled.init(jax.random.key(0), hp, env[1])
    # without scaling the runner keeps its old structure (old checkpoints load)
    assert type(r0) is Runner and isinstance(r1, RewardScalingRunner)
    _, t0, _ = plain.rollout(r0, hp, env[1], jax.random.key(1))
    after, t1, _ = scaled.rollout(r1, hp, env[1], jax.random.key(1))
    np.testing.assert_array_equal(np.asarray(t0.action), np.asarray(t1.action))
    np.testing.assert_array_equal(np.asarray(t0.ep_return), np.asarray(t1.ep_return))
    raw = np.asarray(t0.reward)
    assert np.abs(raw).max() >= 2.0
    np.testing.assert_allclose(np.asarray(t1.reward),
                               _vecnormalize_oracle(raw, np.asarray(t0.done), 0.9),
                               rtol=2e-4, atol=1e-5)
    assert float(after.return_stats.count) == pytest.approx(16 * 4, rel=1e-3)
    assert after.discounted_return.shape == (4,)


RUN = {
    "env": {"id": "PlumeNav-Gaussian-v0",
            "overrides": {"grid_size": [16, 16], "sigma": 4.0, "max_steps": 20}},
    "algo": {"total_steps": 4 * 16 * 4, "num_envs": 4, "num_steps": 16, "update_epochs": 1,
             "num_minibatches": 1, "normalize_rewards": True},
    "network": {"hidden_sizes": [8]},
    "run": {"seed": 0, "log_every": 1, "checkpoint_every": 1, "tensorboard": False},
    "eval": {"num_envs": 8},
}


@pytest.mark.slow
def test_a_run_with_normalized_rewards_resumes_bit_for_bit(tmp_path):
    """The return statistics and each env's running return are in the
    checkpoint: a resume from update 2 trains as the uninterrupted run."""
    from plume_jax.train.run import train

    out = tmp_path / "run"
    train(train_config(RUN), out, progress=False)
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    train(train_config(RUN), copy, progress=False,
          resume=copy / "checkpoints" / "update_00000002")

    def rows(folder):
        return [{k: v for k, v in json.loads(line).items() if "second" not in k
                 and k not in ("sps", "elapsed")}
                for line in (folder / "metrics.jsonl").read_text().splitlines()]

    assert rows(copy) == rows(out)
    a, b = np.load(out / "policy" / "policy.npz"), np.load(copy / "policy" / "policy.npz")
    for key in a.files:
        assert np.array_equal(a[key], b[key]), key
