"""A single run trained as lane 0 of a vmapped program of identical copies
(``run.lanes: N``).

The bits of a member of a vmapped program depend on the program's width
(its number of members): XLA picks other loop and tiling orders for other
shapes, so a member of a program of 3 and the single run of the same
config agree only to float tolerance (about 1e-7 after a few updates).
At one width they do not depend on the member's position or on the other
members' dynamic hyperparameters (measured: widths 2, 3, 4 and 8, first,
middle and last members, heterogeneous learning rates and entropy
coefficients against uniform batches). So a run reproduces such a member
bit for bit when it runs the same arithmetic: ``N`` copies of itself,
keeping lane 0. That is what ``run.lanes`` does, for every computation of
the run: ``init``, each chunk of updates (:class:`Lanes`) and the periodic
and final greedy evaluations (:func:`evaluate_in_lanes`). It costs ``N``
times the compute and memory of the run; its folder, checkpoints, exported
policy and resume rules are a single run's (the state of lane 0, which
every lane holds), and so are its env steps and steps/s figures (lane 0's):
``plume-jax train``'s closing lines say so
(:func:`~plume_jax.train.lane_schedule.lanes_line`).

A width schedule (``run.lanes: [{from_update: U, lanes: N}, ...]``,
:mod:`plume_jax.train.lane_schedule`) reproduces a tune trial that a
pruning rebuild continued in a narrower program: the driver compiles one
:class:`Lanes` program per width and switches at each ``from_update``
(its chunks end there), carrying lane 0's runner (parameters, optimiser
state, observation statistics, env batch, PRNG key, update count) across
unchanged, as the rebuild carries the survivors' slices of the stacked
runner; ``init`` runs at the first width, and each evaluation at the width
of the program that trained the update it evaluates.

The copies are made inside the compiled program (``broadcast_to``), the
hyperparameters stacked and the env params kept once (every leaf
:class:`~plume_jax.train.members.Shared`), as a sweep of identical members
would hold them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.train.evaluation import evaluate, member_evaluation
from plume_jax.train.members import Shared, vmap_members


def copies(tree: Any, lanes: int) -> Any:
    """``tree`` with a leading lane axis of ``lanes`` identical copies
    (``broadcast_to``; PRNG key arrays included)."""
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (lanes, *jnp.shape(x))), tree)


def shared(env_params: Any) -> Any:
    """``env_params`` with every leaf kept once for all lanes
    (:class:`~plume_jax.train.members.Shared`)."""
    return jax.tree.map(Shared, env_params)


def lane0(tree: Any) -> Any:
    """Lane 0 of a tree with a leading lane axis."""
    return jax.tree.map(lambda x: x[0], tree)


def init_in_lanes(algo: Any, key: jax.Array, hp: Any, env_params: Any, lanes: int) -> Any:
    """``algo.init`` of ``lanes`` copies of one member (``vmap``), lane 0's
    runner."""
    return lane0(vmap_members(algo.init, copies(key, lanes), copies(hp, lanes),
                              shared(env_params)))


class Lanes:
    """An :class:`~plume_jax.train.algorithms.base.Algorithm` (a sweepable
    one) whose ``run`` takes and gives one member's runner and metrics but
    trains ``lanes`` copies of it as one batched program, keeping lane 0.
    Every other attribute is the algorithm's."""

    def __init__(self, algo: Any, lanes: int):
        self.algo, self.lanes = algo, int(lanes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.algo, name)

    def run(self, runner: Any, hp: Any, env_params: Any, num_updates: int,
            callback: Any = None, log_every: int = 1, batched: bool = False,
            count: Any = None) -> tuple[Any, dict[str, Any]]:
        """``algo.run`` of ``lanes`` copies (``batched`` must be False: the
        arguments are one member's); lane 0's runner and metrics
        ``[updates, ...]``."""
        if batched:
            raise ValueError("Lanes.run takes one member's runner (batched=False)")
        inner = None if callback is None else (
            lambda m: callback(jax.tree.map(lambda x: np.asarray(x)[0], m)))
        out, metrics = self.algo.run(copies(runner, self.lanes), copies(hp, self.lanes),
                                     shared(env_params), num_updates, callback=inner,
                                     log_every=log_every, batched=True, count=count)
        return lane0(out), jax.tree.map(lambda x: x[:, 0], metrics)


def evaluate_in_lanes(env: Any, spec: dict, params: dict, env_params: Any, seed: int,
                      num_envs: int, num_steps: int, greedy: bool, lanes: int
                      ) -> dict[str, Any]:
    """:func:`~plume_jax.train.evaluation.evaluate` of one policy's
    ``params`` as ``lanes`` identical members of a batched evaluation:
    lane 0's figures (Python scalars, as
    :func:`~plume_jax.train.evaluation.member_evaluation` gives them)."""
    stacked = {k: np.broadcast_to(np.asarray(v), (lanes, *np.shape(v))) for k, v in
               params.items()}
    e = evaluate(env, spec, stacked, shared(env_params), seed, num_envs, num_steps,
                 greedy=greedy, batched=True)
    return member_evaluation(e, 0)


__all__ = ["Lanes", "copies", "evaluate_in_lanes", "init_in_lanes", "lane0", "shared"]
