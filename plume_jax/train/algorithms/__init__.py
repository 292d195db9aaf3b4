"""The training algorithms: the :class:`~plume_jax.train.algorithms.base.Algorithm`
interface every learner implements, and the learners that ship (PPO, value
iteration on the belief, the look-ahead value iteration)."""
