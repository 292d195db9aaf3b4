"""The settings and pieces shared by the algorithms that fit a network by
epochs of minibatch Adam steps on each update's batch, annealing the step
size (PPO, look-ahead value iteration; layer 5).

Each shared setting is declared once, here, as a field
(:func:`plume_jax.settings.setting`) of :class:`EpochStatic` (compiled in)
or of :class:`AdamHparams` (f32[] leaves); an algorithm adds its own by
deriving from them, and its ``SETTINGS`` is
:func:`~plume_jax.train.algorithms.base.declared` of the two classes. The
step size reaches optax in one place, :func:`adam`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.settings import boolean, count, optional, real, setting
from plume_jax.settings.schema import dynamic_part, static_part
from plume_jax.train.algorithms.networks import NetworkConfig


@dataclasses.dataclass(frozen=True)
class EpochStatic:
    """The compiled-in settings of an epochs-of-minibatches algorithm: the
    shared ``algo.*`` settings it is given (``num_envs``, ``num_steps``),
    ``num_updates`` and ``network`` (the config's), and its own declared
    settings (the fields made with ``setting``)."""

    num_envs: int
    num_steps: int
    num_updates: int
    update_epochs: int = setting(4, count(low=1, high=1024), doc="passes over each update's batch")
    num_minibatches: int = setting(4, count(low=1, high=1 << 20), doc="minibatches per pass")
    anneal_lr: bool = setting(True, boolean(),
                              doc="linear decay of the step size to 0 over the run")
    adam_eps: float = setting(1e-5, real(low=0.0, high=1.0, low_inclusive=False),
                              doc="Adam epsilon")
    normalize_obs: bool = setting(False, boolean(), doc="running mean/std of observations")
    network: NetworkConfig = NetworkConfig()

    @classmethod
    def from_config(cls, config: Any) -> Any:
        """The compiled-in settings of a validated ``TrainConfig``."""
        a = config.algo
        return static_part(cls, a, num_envs=a["num_envs"], num_steps=a["num_steps"],
                               num_updates=config.num_updates, network=config.network)


@chex.dataclass(frozen=True)
class AdamHparams(Pytree):
    """The hyperparameters (f32[] leaves, sweepable under ``vmap``) every
    epochs-of-minibatches algorithm reads."""

    learning_rate: jax.Array = setting(3e-4, real(low=0.0, high=1.0, low_inclusive=False),
                                       doc="Adam step size")
    gamma: jax.Array = setting(None, optional(real(low=0.0, high=1.0, low_inclusive=False)),
                               doc="discount; null: the reward's shaping discount, else 0.99")
    max_grad_norm: jax.Array = setting(0.5, real(low=0.0, high=1e6, low_inclusive=False),
                                       doc="global gradient norm clip")

    @classmethod
    def create(cls, **values: float) -> Any:
        """f32[] leaves from Python numbers; a setting left out takes its
        declared default (``gamma`` has none: give it)."""
        return dynamic_part(cls, values)

    @classmethod
    def from_config(cls, config: Any, env: Any, env_params: Any) -> Any:
        """The hyperparameters of a validated ``TrainConfig`` on ``env``
        (``gamma`` resolved by :func:`resolve_gamma`)."""
        return dynamic_part(cls, config.algo,
                               gamma=resolve_gamma(env, env_params, config.algo["gamma"]))


def learning_rate_at(hp: Any, static: EpochStatic, update: jax.Array) -> jax.Array:
    """The step size of update ``update`` (i32[], updates done): with
    ``anneal_lr`` it decays linearly from ``hp.learning_rate`` to 0 over
    ``num_updates``."""
    frac = 1.0 - update.astype(jnp.float32) / static.num_updates
    return hp.learning_rate * frac if static.anneal_lr else hp.learning_rate


def clip_then_l2(max_norm: Any, weight_decay: Any) -> optax.GradientTransformation:
    """The gradient clipped to global norm ``max_norm``, then
    ``weight_decay x params`` added: what PyTorch's
    ``Adam(weight_decay=...)`` sees after ``clip_grad_norm_`` (coupled L2,
    not AdamW's decoupled decay). One stage with ``clip_by_global_norm``'s
    (empty) state, so the optimiser state, and the checkpoints written
    before PPO's ``algo.weight_decay`` existed, keep their structure."""
    clip = optax.clip_by_global_norm(max_norm)

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        clipped, state = clip.update(updates, state, params)
        return jax.tree.map(lambda g, p: g + weight_decay * p, clipped, params), state

    return optax.GradientTransformation(clip.init, update)


def adam(hp: Any, static: EpochStatic, update: jax.Array, weight_decay: Any = None
         ) -> optax.GradientTransformation:
    """The optimiser of update ``update`` (i32[], updates done): the gradient
    clipped to global norm ``hp.max_grad_norm`` (then ``weight_decay x
    params`` added when given: :func:`clip_then_l2`), Adam with
    ``static.adam_eps``, and the step :func:`learning_rate_at`. The only
    place the step size reaches optax; the state does not depend on
    ``update``."""
    clip = (optax.clip_by_global_norm(hp.max_grad_norm) if weight_decay is None
            else clip_then_l2(hp.max_grad_norm, weight_decay))
    return optax.chain(clip, optax.scale_by_adam(eps=static.adam_eps),
                       optax.scale(-learning_rate_at(hp, static, update)))


def annealing_resume_notes(algo: Any, update: int, old_updates: int, new_updates: int
                           ) -> list[str]:
    """``Algorithm.resume_notes`` of an epochs algorithm: with ``anneal_lr``
    the step size decays linearly to 0 over the whole budget, so a resume
    under a new budget makes it jump; one line saying to what (none
    otherwise)."""
    if not algo.get("anneal_lr") or old_updates == new_updates:
        return []
    lr = algo["learning_rate"]
    before = lr * (1.0 - update / old_updates)
    after = lr * (1.0 - update / new_updates)
    return [f"algo.anneal_lr: the learning rate decays linearly to 0 over the whole budget, "
            f"now {new_updates} updates instead of {old_updates}: at update {update + 1} it "
            f"is {after:.3g} (it would have been {before:.3g} under the old budget)"]


def divide_batch(name: str, num_envs: int, num_steps: int, num_minibatches: int,
                 recurrent: bool) -> None:
    """``num_minibatches`` divides the batch: whole env sequences
    (``num_envs``) for a recurrent network, else ``num_envs * num_steps``
    transitions (``ValidationError`` naming ``name`` otherwise)."""
    if recurrent:
        if num_envs % num_minibatches:
            raise ValidationError.for_parameter(
                name, num_minibatches,
                f"a divisor of algo.num_envs={num_envs} (a recurrent policy trains on "
                "whole env sequences, split into minibatches of envs)")
    elif (num_envs * num_steps) % num_minibatches:
        raise ValidationError.for_parameter(
            name, num_minibatches, f"a divisor of num_envs * num_steps = {num_envs * num_steps}")


def check_minibatches(config: Any) -> None:
    """``algo.num_minibatches`` divides a config's batch (:func:`divide_batch`)."""
    a = config.algo
    divide_batch("algo.num_minibatches", a["num_envs"], a["num_steps"], a["num_minibatches"],
                 config.network.recurrent)


def resolve_gamma(env: Any, env_params: Any, gamma: float | None) -> float:
    """The training discount: ``gamma`` if given, else the reward's shaping
    discount (``env.reward.discount``) when it is below 1, else 0.99.

    Raises ``ValidationError`` when ``gamma`` contradicts a potential-based
    shaping reward's discount (training with another γ would change the
    optimal policy, Ng et al. 1999)."""
    reward = getattr(env, "reward", None)
    shaped = None
    if reward is not None and hasattr(reward, "discount"):
        d = float(np.asarray(reward.discount(env_params.reward)))
        shaped = d if d < 1.0 else None
    if gamma is None:
        return shaped if shaped is not None else 0.99
    if shaped is not None and abs(gamma - shaped) > 1e-6:
        raise ValidationError.for_parameter(
            "algo.gamma", gamma,
            f"the shaping reward's gamma {shaped} (or null to use it): potential-based shaping "
            "keeps the optimal policy only under its own discount")
    return float(gamma)


__all__ = ["AdamHparams", "EpochStatic", "adam", "annealing_resume_notes", "check_minibatches",
           "clip_then_l2", "divide_batch", "learning_rate_at", "resolve_gamma"]
