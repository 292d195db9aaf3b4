"""Evaluation (layer 5): jitted, vmapped rollouts of policies over many episodes."""

from plume_jax.evaluate.rollout import RolloutResult, rollout

__all__ = ["RolloutResult", "rollout"]
