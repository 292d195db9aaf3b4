"""Training (layer 5): algorithms, the training loop and run folders.

Any :class:`~plume_jax.train.algorithms.base.Algorithm` (PPO in flax +
optax, belief value iteration, lookahead value iteration, or a user's own)
trains as one jitted program: ``init`` once, then chunks of updates
(``lax.scan``), on single- and multi-agent envs. A sweep ``vmap``s whole
training runs over seeds, hyperparameters and env params in one program
per static structure; the env batch (single runs) or the sweep members
shard over all local devices, and several processes run one program.

docs/architecture.md names every module of the package and the need it serves.
"""

from plume_jax.train.config import TrainConfig, load_train_config, train_config
from plume_jax.train.algorithms.ppo import PPO, Hparams, PPOStatic, Runner
from plume_jax.train.algorithms.returns import gae
from plume_jax.train.run import TrainResult, train

__all__ = ["Hparams", "PPO", "PPOStatic", "Runner", "TrainConfig", "TrainResult", "gae",
           "load_train_config", "train", "train_config"]
