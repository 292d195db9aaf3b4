"""Training (layer 5): algorithms, the run driver and run folders.

Any :class:`~plume_jax.train.algorithms.base.Algorithm` (PPO in flax +
optax, belief value iteration, lookahead value iteration, or a user's own)
trains as one jitted program: ``init`` once, then chunks of updates
(``lax.scan``), on single- and multi-agent envs. A sweep ``vmap``s whole
training runs over seeds, hyperparameters and env params in one program
per static structure; the env batch (single runs) or the sweep members
shard over all local devices, and several processes run one program.

- :mod:`plume_jax.train.config`: YAML configs, validated.
- :mod:`plume_jax.train.algorithms`: the ``Algorithm`` interface
  (``base``) and the algorithms (``ppo``, ``value_iteration``,
  ``lookahead``); :mod:`plume_jax.train.algorithms.networks`: the flax actor-critics.
- :mod:`plume_jax.train.driver`: programs of members (build, init or load,
  train in chunks, evaluate, export, write a member's folder).
- :mod:`plume_jax.train.run`: the one run function both front ends call
  (a train is a sweep of one member).
- :mod:`plume_jax.train.run_folder`: every folder rule (new or empty,
  ``--resume``, ``--overwrite``, locks, the write-ahead set-aside) and the
  list of outputs, for a single run and a sweep.
- :mod:`plume_jax.train.trainer`: ``train(config)`` (``plume-jax train``);
  :mod:`plume_jax.train.sweep`: ``run_sweep(config)`` (``plume-jax
  sweep``: the grid, the grouping into programs, the ranked summary);
  :mod:`plume_jax.train.member_names`: member folder names.
- :mod:`plume_jax.train.checkpoint`: save / resume, policy export
  (loaded by ``agents.trained``).
- :mod:`plume_jax.train.chunks`, :mod:`plume_jax.train.periodic_eval`,
  :mod:`plume_jax.train.evaluation`: chunking and signals, periodic
  evaluations and the best policy, the greedy evaluation.
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
