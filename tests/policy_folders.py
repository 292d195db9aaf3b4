"""Exported-policy folders for tests, without training: a PPO network of the
right shapes for an env (random weights from a fixed seed, no program
compiled), written in the format ``plume-jax train`` exports
(``policy.json`` + ``policy.npz``, the training env's settings recorded)."""

from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np


def write_policy_folder(folder: pathlib.Path, env, params, hidden=(8,), seed: int = 0
                        ) -> pathlib.Path:
    """Write a policy for ``env`` into ``folder`` and return the folder."""
    from plume_jax.train.algorithms import networks
    from plume_jax.train.algorithms.base import network_spec
    from plume_jax.train.checkpoint import policy_arrays
    from plume_jax.train.config import NetworkConfig
    from plume_jax.train.algorithms.ppo import PPO, PPOStatic

    algo = PPO(env, params, PPOStatic(num_envs=2, num_steps=4, update_epochs=1,
                                      num_minibatches=1, num_updates=1, normalize_obs=False,
                                      network=NetworkConfig(hidden_sizes=tuple(hidden))))
    shapes = jax.eval_shape(lambda k: networks.init_params(algo.net, k, algo.in_dim),
                            jax.random.key(0))
    rng = np.random.default_rng(seed)
    weights = jax.tree.map(
        lambda x: jnp.asarray(rng.normal(0.0, 0.5, x.shape).astype(np.float32)), shapes)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "policy.npz", **policy_arrays(weights, None))
    (folder / "policy.json").write_text(json.dumps(
        {**network_spec(algo, algo.static.network), "env": env.settings}, indent=2))
    return folder
