"""End-to-end jitted training (layer 5): PPO in flax + optax.

Rollout, GAE and the minibatch epochs of every update run inside one
``jax.jit`` (``lax.scan`` over updates), for feed-forward (MLP) and
recurrent (GRU) actor-critics over discrete or ``Box`` action spaces, on
single-agent envs and on multi-agent envs (one network shared by every
agent, an optional centralised critic); sweeps
``vmap`` whole training runs over seeds, hyperparameters and env params in
one program; the env batch (single runs) or the sweep members shard over
all local devices.

- :mod:`plume_jax.train.config`: YAML configs, validated.
- :mod:`plume_jax.train.algorithms.ppo`: the algorithm (``PPO``, ``gae``).
- :mod:`plume_jax.train.networks`: the flax actor-critics and distributions.
- :mod:`plume_jax.train.trainer`: ``train(config)`` (``plume-jax train``):
  chunked runs of one compiled program, periodic checkpoints, resume.
- :mod:`plume_jax.train.sweep`: ``run_sweep(config)`` (``plume-jax sweep``):
  one program per static structure, member run folders, ranked summary.
- :mod:`plume_jax.train.checkpoint`: save / resume, policy export
  (loaded by ``agents.trained``).
- :mod:`plume_jax.train.run_folder`: output folders are never replaced
  silently (``--resume`` / ``--overwrite``).
- :mod:`plume_jax.train.progress`, :mod:`plume_jax.train.loggers`,
  :mod:`plume_jax.train.plots`: progress from inside the program, metrics
  files, TensorBoard / W&B, figures.
- :mod:`plume_jax.train.sharding`: the device mesh (env batch or members).
- :mod:`plume_jax.train.distributed`: one run across several processes
  (hosts): joining ``jax.distributed``, process 0 writes.
"""

from plume_jax.train.config import TrainConfig, load_train_config, train_config
from plume_jax.train.algorithms.ppo import PPO, Hparams, PPOStatic, Runner, gae
from plume_jax.train.trainer import TrainResult, train

__all__ = ["Hparams", "PPO", "PPOStatic", "Runner", "TrainConfig", "TrainResult", "gae",
           "load_train_config", "train", "train_config"]
