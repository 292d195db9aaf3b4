"""``algo.weight_decay``: PyTorch Adam's coupled L2 penalty in PPO's optimiser
(Singh et al. 2023 trained with 1e-4)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms.epochs import adam
from plume_jax.train.algorithms.ppo import PPO, Hparams, PPOStatic
from plume_jax.train.config import train_config
from plume_jax.train.algorithms.networks import NetworkConfig

HP = dict(learning_rate=1e-2, ent_coef=0.0, vf_coef=0.5, gamma=0.99, gae_lambda=0.95,
          clip_eps=0.2, max_grad_norm=0.5)


@pytest.fixture(scope="module")
def ppo() -> PPO:
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], max_steps=20)
    static = PPOStatic(num_envs=2, num_steps=2, update_epochs=1, num_minibatches=1,
                       num_updates=1, network=NetworkConfig(type="mlp", hidden_sizes=(8,)))
    return PPO(env, params, static)


def _first_update(ppo: PPO, params, grads, weight_decay: float):
    hp = Hparams.create(**HP, weight_decay=weight_decay)
    tx = adam(hp, ppo.static, jnp.int32(0), hp.weight_decay)  # update 0: the full step size
    updates, _ = tx.update(grads, tx.init(params), params)
    return updates


def test_without_weight_decay_a_zero_gradient_moves_nothing(ppo):
    params = {"w": jnp.asarray([[0.5, -2.0], [1e-3, 3.0]], jnp.float32)}
    grads = jax.tree.map(jnp.zeros_like, params)
    updates = _first_update(ppo, params, grads, 0.0)
    np.testing.assert_array_equal(np.asarray(updates["w"]), 0.0)


def test_weight_decay_pulls_every_weight_towards_zero_as_torch_adam_does(ppo):
    # torch.optim.Adam(weight_decay=w): g <- g + w p, then Adam; on the first step Adam's
    # update is lr * g / (|g| + eps) per weight: a zero gradient moves each weight by about
    # lr towards 0.
    params = {"w": jnp.asarray([[0.5, -2.0], [1e-1, 3.0]], jnp.float32)}
    grads = jax.tree.map(jnp.zeros_like, params)
    updates = np.asarray(_first_update(ppo, params, grads, 1e-4)["w"])
    p = np.asarray(params["w"])
    np.testing.assert_array_equal(np.sign(updates), -np.sign(p))
    wd_grad = 1e-4 * np.abs(p)
    np.testing.assert_allclose(np.abs(updates), HP["learning_rate"] * wd_grad / (wd_grad + 1e-5),
                               rtol=1e-5)


def test_the_penalty_joins_the_gradient_after_the_norm_clip(ppo):
    # clipped first (as clip_grad_norm_ before optimizer.step()): with a huge gradient the
    # L2 term is not scaled down by the clip
    params = {"w": jnp.asarray([2.0, 0.0], jnp.float32)}
    grads = {"w": jnp.asarray([0.0, 1e6], jnp.float32)}
    updates = np.asarray(_first_update(ppo, params, grads, 0.1)["w"])
    # first weight: its gradient is only the penalty 0.2 (not 0.2 x the clip's factor 5e-7)
    wd_grad = 0.1 * 2.0
    assert updates[0] == pytest.approx(-HP["learning_rate"] * wd_grad / (wd_grad + 1e-5),
                                       rel=1e-5)


def test_weight_decay_is_a_sweepable_setting_with_a_default_of_zero():
    base = {"env": {"id": "PlumeNav-Gaussian-v0"}, "algo": {"total_steps": 100000}}
    assert train_config(base).algo["weight_decay"] == 0.0
    assert train_config({**base, "algo": {"total_steps": 100000, "weight_decay": 1e-4}}
                        ).algo["weight_decay"] == pytest.approx(1e-4)
    with pytest.raises(ValidationError, match="weight_decay"):
        train_config({**base, "algo": {"total_steps": 100000, "weight_decay": -1e-4}})


def test_a_weight_decay_grid_is_one_program():
    from plume_jax.train.sweep import program_groups, sweep_config

    sweep = sweep_config({"base": {"env": {"id": "PlumeNav-Gaussian-v0"},
                                   "algo": {"total_steps": 100000}},
                          "grid": {"algo.weight_decay": [0.0, 1e-4, 1e-3]}})
    assert program_groups(sweep) == [[0, 1, 2]]
