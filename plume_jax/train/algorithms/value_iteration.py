"""Model-based value iteration on the belief: Loisy & Eloy's searcher
(``BeliefValueIteration``).

The Poisson grid search is a POMDP whose belief ``b`` (the exact posterior
over the source cell, centred on the agent: the ``belief`` sensor's image)
is a sufficient statistic and whose hit model is known. From ``b`` a move
``a`` finds the source with probability ``1 - Σ_h U_h(b, a)`` or reads hit
class ``h`` with probability ``U_h(b, a)`` and leads to the posterior
``b'_{a,h}`` (:func:`plume_jax.plumes.poisson_posterior.predict_readings`).
The expected number of steps still needed obeys

    V(b) = min_a [ 1 + Σ_h U_h(b, a) V(b'_{a,h}) ],   V = 0 once found.

This module fits a network ``V_θ`` to that equation the way otto does
(Loisy & Eloy, *Proc. R. Soc. A* 478, 20220118, 2022; code
``github.com/C0PEP0D/otto``: ``otto/learn/learn.py``,
``otto/classes/training.py``, ``otto/classes/valuemodel.py``, defaults in
``otto/learn/parameters/__defaults.py``). One iteration (:meth:`update`):

1. ``epsilon = max(epsilon_start · exp(-iteration / epsilon_decay), epsilon_floor)``;
2. ``walkers`` training searches each make ``steps_per_iteration`` steps
   (otto: ``BATCH_SIZE · N_GD_STEPS / REPLAY_NTIMES`` = 64 · 12 / 4 = 192 new
   transitions per iteration). Before each step the walker's belief is
   replaced by a random symmetry of the square (otto's
   ``SYM_TRAIN_RANDOMIZE``, drawn every step), then it moves greedily by the
   current network's look-ahead (no symmetry averaging, as otto) or, with
   probability ``epsilon``, uniformly at random among the 4 moves. A move
   into a wall leaves the agent in place and reads again (otto's ``_move``;
   the env clamps the same way). The walker is simulated on its posterior
   (otto's Bayesian mode, no drawn source): the hit class is drawn from the
   predictive distribution given that the source is not found, and
   ``P(not found)`` is multiplied by ``1 - P(found now)``. A search ends when
   ``P(not found) < stop_p`` (before the step, as otto), when the source is
   found with certainty, after ``max_episode_steps`` steps, or when the
   agent has gone back and forth for more than 8 steps (otto's
   ``agent_stuck``); it restarts from ``env.reset`` (otto's start: the
   benchmark preset's). Every belief a walker decides from enters the replay
   memory (a ring of ``memory_size`` beliefs, oldest overwritten);
3. the frozen copy ``θ⁻ ← θ`` (every ``target_update_every`` iterations);
4. ``gd_steps`` Adam steps (``learning_rate``; ``adam_eps`` added to the
   root of the second moment) on mini-batches of ``batch_size`` beliefs
   drawn uniformly from the memory, loss ``Σ_batch (V_θ(b) - y(b))²``
   (Keras with an unreduced loss differentiates the sum) with
   ``y(b) = min_a [1 + Σ_h U_h V_θ⁻(b'_{a,h})]`` computed exactly; the
   output layer's kernel and bias are clipped to ``>= 0`` after each step
   (Keras' ``NonNeg`` constraint), so ``V_θ >= 0``. The ablation
   ``frozen_target: false`` computes each step's ``y`` from the current
   parameters instead (under ``stop_gradient``, after the previous step's
   update);
5. every ``eval_every`` iterations, the symmetry-averaged greedy policy is
   evaluated on ``eval_searches`` fixed searches (same starts and hit keys
   every time: paired), as otto's ``compute_stats`` does it: on the
   posterior, the search time's distribution ``P(T = t) = P(not found before
   t) P(found at t)``; the score is ``E[min(T, max_episode_steps)]`` (the
   mass not found by then counted at ``max_episode_steps``). The best score's
   parameters are kept (``best_params``).

The network is otto's ``ValueModel``: the agent-centred posterior (the
``(2H-1) x (2W-1)`` window, raw probabilities, the belief channel only),
flattened, ``hidden_sizes`` dense ReLU layers (He-uniform kernels, zero
biases), one linear output (kernel uniform in ``[0, 0.1]``, bias 0, both
kept ``>= 0``). The ablation ``network.type: cnn`` puts ``'SAME'``-padded
ReLU convolution layers (``network.conv_features`` / ``conv_kernels`` /
``conv_strides``) on the belief image before the flattening, so the
``hidden_sizes`` dense layers read their features; its forward pass is the
same function decisions and the exported policy run
(:func:`agents.belief_lookahead.network_values`). At decision time
(evaluation, the exported policy) the value of each successor belief is
averaged over the symmetries of the square (otto's
``SYM_EVAL_ENSEMBLE_AVG``): ``V(b) = mean_g V_θ(g b)``.

The exported policy is a dict of plain arrays (:func:`export_arrays`) run
by :func:`policy_scores` / :func:`act` from the ``belief`` sensor's
observation (centred, full window, grid channel: the walls are read from
the grid channel).

Requirements (``ValidationError`` otherwise): one agent; a ``belief``
sensor, centred, full window, with ``grid_channel``; ``discrete_grid``
moves of one cell (``step_size`` 1: the env clamps a longer move at a wall
to the edge, which the look-ahead does not model).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from plume_jax.core.errors import ValidationError
from agents.belief_lookahead import (act, belief_values, move_values, network_values,
                                     policy_scores, valid_moves)
from plume_jax.plumes.poisson_posterior import shift_centred
from plume_jax.core.pytree import Pytree
from plume_jax.core.seeding import seed_key
from plume_jax.train.algorithms.lookahead import BeliefSearchAlgorithm, _apply_symmetry, _symmetries, \
    belief_searcher
from plume_jax.settings.schema import dynamic_part, static_part
from plume_jax.train.algorithms.base import declared, typed_key
from plume_jax.train.members import vmap_members
from plume_jax.settings import boolean, count, optional, real, resolve_keys, setting

#: otto's ``agent_stuck``: more than this many consecutive steps back to the
#: cell of two steps before ends a training search.
STUCK_STEPS = 8
#: otto's ``EPSILON``: a successor or a search whose probability is below this is over.
TINY_PROBABILITY = 1e-10
#: Value networks of ``belief_value_iteration`` (``network.type``).
NETWORK_TYPES = ("mlp", "cnn")
#: Format tag of the settings record in the exported policy (``settings``).
POLICY_FORMAT = "plume_jax.belief_value_iteration/1"
#: The exported policy is an ``agents.trained`` policy (``policy: belief_lookahead``).
TRAINED_POLICY_FORMAT = "plume_jax.trained_policy/1"


# --------------------------------------------------------------------------- network

def conv_output_size(image_shape: tuple[int, int], conv_features: tuple[int, ...],
                     conv_strides: tuple[int, ...]) -> int:
    """Flattened size of the convolution layers' output on an image
    ``(R, K)`` (``'SAME'`` padding: each side becomes ``ceil(side / stride)``)."""
    rows, cols = (int(v) for v in image_shape)
    for stride in conv_strides:
        rows, cols = -(-rows // stride), -(-cols // stride)
    return rows * cols * int(conv_features[-1])


def init_network(key: jax.Array, in_dim: int, hidden_sizes: tuple[int, ...],
                 image_shape: tuple[int, int] | None = None,
                 conv_features: tuple[int, ...] = (), conv_kernels: tuple[int, ...] = (),
                 conv_strides: tuple[int, ...] = ()) -> dict:
    """``{"dense_i/kernel", "dense_i/bias", ..., "out/kernel", "out/bias"}``:
    otto's initialisation (He-uniform hidden kernels, zero biases, output
    kernel uniform in ``[0, 0.1]``). With ``conv_features`` (the ``cnn``
    value network), first ``conv_i/kernel`` f32[k_i, k_i, C_in, C_out]
    (He-uniform) and ``conv_i/bias`` (zeros) on the one-channel image
    ``image_shape`` ``(R, K)``; the dense layers then read their flattened
    output (``in_dim`` is ignored)."""
    params = {}
    if conv_features:
        if image_shape is None:
            raise ValidationError.for_parameter(
                "image_shape", None, "(rows, columns) of the image the conv layers read")
        key, k_conv = jax.random.split(key)
        channels = 1
        for i, (features, kernel, k) in enumerate(zip(
                conv_features, conv_kernels, jax.random.split(k_conv, len(conv_features)))):
            params[f"conv_{i}/kernel"] = jax.nn.initializers.he_uniform()(
                k, (kernel, kernel, channels, features), jnp.float32)
            params[f"conv_{i}/bias"] = jnp.zeros((features,), jnp.float32)
            channels = features
        in_dim = conv_output_size(image_shape, conv_features, conv_strides)
    keys = jax.random.split(key, len(hidden_sizes) + 1)
    width = in_dim
    for i, units in enumerate(hidden_sizes):
        params[f"dense_{i}/kernel"] = jax.nn.initializers.he_uniform()(
            keys[i], (width, units), jnp.float32)
        params[f"dense_{i}/bias"] = jnp.zeros((units,), jnp.float32)
        width = units
    params["out/kernel"] = jax.random.uniform(keys[-1], (width, 1), jnp.float32, 0.0, 0.1)
    params["out/bias"] = jnp.zeros((1,), jnp.float32)
    return params


def project_nonnegative(params: dict) -> dict:
    """The output layer's kernel and bias clipped to ``>= 0`` (Keras' ``NonNeg``)."""
    return {**params, "out/kernel": jnp.maximum(params["out/kernel"], 0.0),
            "out/bias": jnp.maximum(params["out/bias"], 0.0)}


# --------------------------------------------------------------------------- symmetries

def symmetry_tables(sensor: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(perm i32[S, R*K], maps i32[S, 2, 2])`` for the image symmetries that
    leave the searcher's plume law unchanged (``plume_jax.train.algorithms.lookahead._symmetries``;
    the identity first): ``image.reshape(-1)[perm[s]]`` is the centred image
    under symmetry ``s``, and ``maps[s] @ (dx, dy)`` where an offset goes."""
    rows, cols = sensor.image_shape
    ry, rx = (rows - 1) // 2, (cols - 1) // 2
    perms, maps = [], []
    for transpose, turns in _symmetries(sensor):
        def f(image):
            return np.asarray(_apply_symmetry(jnp.asarray(image)[None], transpose, turns)[0])
        perms.append(f(np.arange(rows * cols, dtype=np.int32).reshape(rows, cols)).reshape(-1))
        columns = []
        for offset in ((1, 0), (0, 1)):
            probe = np.zeros((rows, cols), np.float32)
            probe[ry + offset[1], rx + offset[0]] = 1.0
            j, i = np.argwhere(f(probe) > 0.5)[0]
            columns.append((i - rx, j - ry))
        maps.append(np.asarray(columns, np.int32).T)
    return np.stack(perms).astype(np.int32), np.stack(maps).astype(np.int32)


# --------------------------------------------------------------------------- runner

@chex.dataclass(frozen=True)
class SearcherRunner(Pytree):
    """Everything training carries from one iteration to the next.

    Attributes:
        params, frozen: the network and its frozen copy (the target's).
        opt_state: Adam state of ``params``.
        memory: f32[C, R, K], replay memory of centred beliefs.
        memory_moves: bool[C, M], which moves stay on the grid from each.
        memory_count: i32[], entries filled (``<= C``; entries ``[0, count)``).
        memory_next: i32[], the slot the next belief goes to.
        belief, grid: f32[W, R, K], each walker's centred belief and grid image.
        p_not_found: f32[W], each walker's probability of not having found the source.
        ep_steps: i32[W], steps of each walker's running search.
        prev_disp: i32[W, 2], its last displacement (cells, current frame).
        back_count: i32[W], consecutive steps back to the cell of two steps before.
        update: i32[], iterations done.
        epsilon: f32[], the exploration of the last iteration.
        transitions: i32[], beliefs generated so far.
        episodes: i32[], training searches finished so far.
        best_params: the parameters with the best evaluation score.
        best_score: f32[], that score (mean search steps; +inf before any evaluation).
        best_update: i32[], the iteration it was reached at (0: none yet).
        key: u32[2], raw PRNG key data.
    """

    params: Any
    frozen: Any
    opt_state: Any
    memory: jax.Array
    memory_moves: jax.Array
    memory_count: jax.Array
    memory_next: jax.Array
    belief: jax.Array
    grid: jax.Array
    p_not_found: jax.Array
    ep_steps: jax.Array
    prev_disp: jax.Array
    back_count: jax.Array
    update: jax.Array
    epsilon: jax.Array
    transitions: jax.Array
    episodes: jax.Array
    best_params: Any
    best_score: jax.Array
    best_update: jax.Array
    key: jax.Array


#: The metrics of one iteration (all f32[] scalars in the metrics dict).
METRIC_NAMES = ("update", "env_steps", "episodes", "episode_length_mean", "loss",
                "target_mean", "value_mean", "epsilon", "memory_fill", "eval_mean_steps",
                "eval_p_not_found", "best_eval_mean_steps", "best_update")


@dataclasses.dataclass(frozen=True)
class ValueIterationStatic:
    """The compiled-in ``algo.*`` settings of ``algorithm:
    belief_value_iteration`` (otto's defaults for the 19x19 isotropic case).
    The walkers are ``algo.num_envs``, their steps per iteration
    ``algo.num_steps``, the iterations ``algo.total_steps / (num_envs x
    num_steps)``, the iterations between evaluations ``eval.every`` (null:
    never), the hidden layers ``network.hidden_sizes`` (ReLU:
    ``network.activation: relu``); with ``network.type: cnn`` the value
    network is ``network.conv_features`` / ``conv_kernels`` /
    ``conv_strides`` convolution layers first. Each is declared here only;
    the constructor reads these declarations (defaults and checks)."""

    adam_eps: float = setting(1e-7, real(low=0.0, high=1.0, low_inclusive=False),
                              doc="Adam epsilon (Keras' default)")
    batch_size: int = setting(64, count(low=1, high=1 << 20), doc="beliefs per gradient step")
    gd_steps: int = setting(12, count(low=1, high=10_000), doc="gradient steps per iteration")
    memory_size: int = setting(1000, count(low=1, high=1 << 24),
                               doc="beliefs in the replay memory")
    epsilon_start: float = setting(1.0, real(low=0.0, high=1.0), doc="exploration at iteration 0")
    epsilon_floor: float = setting(0.1, real(low=0.0, high=1.0), doc="exploration floor")
    epsilon_decay: float = setting(10_000.0, real(low=0.0, high=1e12, low_inclusive=False),
                                   doc="decay time of the exploration, iterations")
    target_update_every: int = setting(1, count(low=1, high=10**9),
                                       doc="iterations between refreshes of the frozen copy")
    stop_p: float = setting(1e-6, real(low=0.0, high=1.0, low_inclusive=False),
                            doc="a training search ends when P(not found) is below this")
    max_episode_steps: int | None = setting(
        None, optional(count(low=1, high=10**7)),
        doc="steps after which a search ends; null: the env's max_steps")
    symmetry_augment: bool = setting(True, boolean(),
                                     doc="a random symmetry of the square per stored belief")
    symmetry_average: bool = setting(
        True, boolean(), doc="decisions on the value averaged over the square's symmetries")
    frozen_target: bool = setting(
        True, boolean(), doc="Bellman targets from the frozen copy, once per iteration (false: "
        "from the current parameters under stop_gradient, recomputed at every gradient step; "
        "the no-frozen-target ablation)")
    eval_searches: int = setting(3200, count(low=1, high=1 << 20),
                                 doc="searches per evaluation (every eval.every iterations)")
    eval_seed: int = setting(1_000_003, count(low=0, high=2**63 - 1),
                             doc="seed of the evaluation searches")


@chex.dataclass(frozen=True)
class ValueIterationHparams(Pytree):
    """The hyperparameters of ``belief_value_iteration`` (f32[] leaves: a
    sweep over them runs its members as one program)."""

    learning_rate: jax.Array = setting(1e-3, real(low=0.0, high=1.0, low_inclusive=False),
                                       doc="Adam step size")


#: The ``algo.*`` settings of ``algorithm: belief_value_iteration``, its own
#: (:class:`ValueIterationStatic`, :class:`ValueIterationHparams`).
VALUE_ITERATION_SETTINGS = declared(ValueIterationStatic, ValueIterationHparams)


class BeliefValueIteration(BeliefSearchAlgorithm):
    """Loisy & Eloy's model-based value iteration on the belief (module
    docstring), an :class:`~plume_jax.train.algorithms.base.Algorithm`
    (``algo.algorithm: belief_value_iteration``; ``hp`` is a
    :class:`ValueIterationHparams`, or None for the constructor's
    ``learning_rate``). Sweepable: the members of a sweep over seeds or over
    the learning rate train together as one vmapped program
    (:meth:`batched_step`).

    Args:
        env, env_params: a ``PlumeEnv`` with a ``belief`` sensor (centred, full
            window, grid channel) and ``discrete_grid`` moves; its params.
        iterations: iterations planned (training runs as many as ``run`` is
            asked for).
        hidden_sizes: units of each hidden ReLU layer (otto: 3 x 512 for 19x19).
        network_type: ``"mlp"`` (otto's network on the flattened belief) or
            ``"cnn"``: ``'SAME'``-padded ReLU convolution layers on the belief
            image (``conv_features[i]`` channels, ``conv_kernels[i]`` square
            kernel, stride ``conv_strides[i]``), flattened, then the
            ``hidden_sizes`` dense ReLU layers and the non-negative linear output.
        conv_features, conv_kernels, conv_strides: the cnn's layers (one entry
            each per layer; ignored for the mlp).
        walkers: training searches run in parallel (``algo.num_envs``).
        steps_per_iteration: steps each walker makes per iteration
            (``algo.num_steps``; ``walkers x steps_per_iteration`` new beliefs
            per iteration, at most 0.8 ``memory_size`` as otto requires).
        eval_every: iterations between evaluations (``eval.every``; 0: never).
        **settings: the settings of :data:`VALUE_ITERATION_SETTINGS` (by
            name; checked and defaulted by their declarations there), e.g.
            ``memory_size``, ``frozen_target`` (the ablation: an iteration's
            Bellman targets from the current parameters, under
            ``stop_gradient``, at each gradient step, rather than from the
            frozen copy in one batch), ``eval_seed`` (keep it apart from
            training seeds and from the seeds of final comparisons).

    Raises:
        ValidationError: an env it cannot plan on, or a bad or unknown
            setting, named bare (``memory_size``).
    """

    name = "belief_value_iteration"
    SETTINGS = VALUE_ITERATION_SETTINGS

    @classmethod
    def from_config(cls, config: Any, env: Any, env_params: Any, mesh: Any = None
                    ) -> "BeliefValueIteration":
        net = config.network
        if net.type not in NETWORK_TYPES:
            raise ValidationError.for_parameter(
                "network.type", net.type,
                f"one of {list(NETWORK_TYPES)} for algo.algorithm 'belief_value_iteration' "
                "(its value network reads the raw centred posterior)")
        wanted = {"activation": "relu", "obs_transform": "none",
                  "prev_action": False, "obs_delta": False}
        for key, value in wanted.items():
            if getattr(net, key) != value:
                raise ValidationError.for_parameter(
                    f"network.{key}", getattr(net, key),
                    f"{value!r} for algo.algorithm 'belief_value_iteration' (its value network "
                    "is a ReLU network on the raw centred posterior)")
        a = config.algo
        own = {k: a[k] for k in VALUE_ITERATION_SETTINGS}
        conv = {} if net.type == "mlp" else dict(
            conv_features=net.conv_features, conv_kernels=net.conv_kernels,
            conv_strides=net.conv_strides)
        algo = cls(env, env_params, iterations=config.num_updates,
                   hidden_sizes=net.hidden_sizes, network_type=net.type, walkers=a["num_envs"],
                   steps_per_iteration=a["num_steps"], eval_every=config.eval["every"] or 0,
                   **conv, **own)
        if net.type == "cnn" and tuple(net.image_channels_rows_columns) \
                != (1,) + algo.image_shape:
            raise ValidationError.for_parameter(
                "network.image_shape", list(net.image_shape),
                f"{list(algo.image_shape)} or {[1, *algo.image_shape]}: the belief sensor's "
                "centred window (rows, columns), one channel")
        return algo

    def hparams(self, config: Any, env_params: Any) -> ValueIterationHparams:
        return dynamic_part(ValueIterationHparams, config.algo)

    def policy(self, runner: "SearcherRunner") -> tuple[dict[str, Any], dict[str, Any]]:
        return policy_spec(self, runner), export_arrays(self, runner)

    def __init__(self, env: Any, env_params: Any, *, iterations: int = 100_000,
                 hidden_sizes: Any = (512, 512, 512), network_type: str = "mlp",
                 conv_features: Any = (8, 16), conv_kernels: Any = (3, 3),
                 conv_strides: Any = (2, 2), walkers: int = 192, steps_per_iteration: int = 1,
                 eval_every: int = 1000, **settings: Any):
        sensor = env.sensor
        belief_searcher(self, env, env_params, self.name)
        actions = env.settings["actions"]
        if int(actions.get("step_size", 1)) != 1:
            # A longer move that would cross a wall is clamped to the edge by the
            # env, while the look-ahead (and the walkers) model it as staying put.
            raise ValidationError.for_parameter(
                "env.actions.step_size", actions.get("step_size"),
                "1 (a longer move clamped at a wall is not modelled by the look-ahead)")
        self._network(hidden_sizes, network_type, conv_features, conv_kernels, conv_strides)
        self.iterations = count(low=1, high=10**9)("iterations", iterations, None)
        self.walkers = count(low=1, high=1 << 20)("walkers", walkers, None)
        self.steps_per_iteration = count(low=1, high=10_000)("steps_per_iteration",
                                                              steps_per_iteration, None)
        self.eval_every = count(low=0, high=10**9)("eval_every", eval_every, None)
        #: the resolved :data:`VALUE_ITERATION_SETTINGS` (a record of them)
        self.own_settings = resolve_keys("", VALUE_ITERATION_SETTINGS, settings,
                                         what="a setting of belief_value_iteration")
        #: the compiled-in settings
        self.static = static_part(ValueIterationStatic, self.own_settings)
        #: the hyperparameters :meth:`update` uses when it is given none
        self.hp = dynamic_part(ValueIterationHparams, self.own_settings)
        if self.walkers * self.steps_per_iteration > 0.8 * self.static.memory_size:
            raise ValidationError.for_parameter(
                "memory_size", self.static.memory_size,
                f"at least walkers x steps_per_iteration / 0.8 = "
                f"{math.ceil(self.walkers * self.steps_per_iteration / 0.8)} (the new beliefs "
                "of one iteration fill at most 80 % of the memory, as otto requires)")
        steps = self.static.max_episode_steps
        #: steps after which a search ends (the setting, or the env's max_steps)
        self.max_episode_steps: int = int(env.settings["max_steps"]) if steps is None else steps
        self.num_updates = self.iterations
        self.steps_per_update = self.walkers * self.steps_per_iteration
        self.image_shape = (int(sensor.image_shape[0]), int(sensor.image_shape[1]))  # (R, K)
        self.symmetry_perm, self.symmetry_maps = symmetry_tables(sensor)
        self.in_dim = self.image_shape[0] * self.image_shape[1]

    def _network(self, hidden_sizes: Any, network_type: str, conv_features: Any,
                 conv_kernels: Any, conv_strides: Any) -> None:
        """Check and set the value network's layers (``hidden_sizes``,
        ``network_type``, ``conv_*``; named bare in errors)."""
        if network_type not in NETWORK_TYPES:
            raise ValidationError.for_parameter("network_type", network_type,
                                                f"one of {list(NETWORK_TYPES)}")
        self.network_type = network_type
        self.hidden_sizes = _layers("hidden_sizes", hidden_sizes, 65536)
        self.conv_features: tuple[int, ...] = ()
        self.conv_kernels: tuple[int, ...] = ()
        self.conv_strides: tuple[int, ...] = ()
        if network_type != "cnn":
            return
        layers = {name: _layers(name, values, high) for name, values, high in (
            ("conv_features", conv_features, 4096), ("conv_kernels", conv_kernels, 64),
            ("conv_strides", conv_strides, 64))}
        if len({len(v) for v in layers.values()}) != 1:
            raise ValidationError.for_parameter(
                "conv_kernels", list(layers["conv_kernels"]),
                "one entry per convolution layer, as many as conv_features and "
                f"conv_strides ({ {k: len(v) for k, v in layers.items()} })")
        self.conv_features = layers["conv_features"]
        self.conv_kernels = layers["conv_kernels"]
        self.conv_strides = layers["conv_strides"]

    # ------------------------------------------------------------ settings
    def settings(self) -> dict[str, Any]:
        """The constructor's settings (JSON-safe), for records and checks:
        :attr:`own_settings` (``max_episode_steps`` resolved) and the
        network, iterations, walkers and evaluation period."""
        return {**self.own_settings, "max_episode_steps": self.max_episode_steps,
                "iterations": self.iterations, "hidden_sizes": list(self.hidden_sizes),
                "walkers": self.walkers, "steps_per_iteration": self.steps_per_iteration,
                "network_type": self.network_type, "conv_features": list(self.conv_features),
                "conv_kernels": list(self.conv_kernels),
                "conv_strides": list(self.conv_strides), "eval_every": self.eval_every}

    def epsilon(self, iteration: Any) -> jax.Array:
        """f32[]: ``max(epsilon_start · exp(-iteration / epsilon_decay), epsilon_floor)``."""
        it = jnp.asarray(iteration, jnp.float32)
        return jnp.maximum(self.static.epsilon_start * jnp.exp(-it / self.static.epsilon_decay),
                           self.static.epsilon_floor).astype(jnp.float32)

    def init_network(self, key: jax.Array) -> dict:
        """Fresh value-network parameters (:func:`init_network`)."""
        if self.network_type == "cnn":
            return init_network(key, self.in_dim, self.hidden_sizes, self.image_shape,
                                self.conv_features, self.conv_kernels, self.conv_strides)
        return init_network(key, self.in_dim, self.hidden_sizes)

    def values(self, params: dict, x: jax.Array) -> jax.Array:
        """f32[N]: the network's value of flattened centred beliefs f32[N, R*K]
        (:func:`~agents.belief_lookahead.network_values`, no symmetry average)."""
        return network_values(params, x, self.image_shape, self.conv_strides)

    def tx(self, hp: ValueIterationHparams | None = None) -> optax.GradientTransformation:
        """Adam (otto's Keras settings) at ``hp.learning_rate`` (``hp``: default
        :attr:`hp`, the constructor's)."""
        hp = self.hp if hp is None else hp
        return optax.adam(hp.learning_rate, b1=0.9, b2=0.999, eps=self.static.adam_eps)

    def model_arrays(self) -> dict[str, np.ndarray]:
        """The look-ahead's model, for :func:`policy_scores`."""
        perm = self.symmetry_perm if self.static.symmetry_average else self.symmetry_perm[:1]
        return {"likelihood": self.likelihood, "move_deltas": self.move_deltas,
                "move_ids": self.move_ids, "symmetry_perm": perm}

    # ------------------------------------------------------------ pieces
    def _starts(self, key: jax.Array, env_params: Any, n: int) -> tuple[jax.Array, jax.Array]:
        """``(belief, grid)`` f32[n, R, K]: fresh searches from ``env.reset``."""
        rows, cols = self.image_shape
        size = rows * cols
        obs, _ = jax.vmap(self.env.reset, in_axes=(0, None))(jax.random.split(key, n), env_params)
        return obs[:, :size].reshape(n, rows, cols), obs[:, size:2 * size].reshape(n, rows, cols)

    def _q(self, params: dict, belief: jax.Array, grid_or_valid: jax.Array, *,
           symmetric: bool, from_grid: bool = True):
        """vmapped :func:`move_values` over a batch of centred beliefs."""
        lik = jnp.asarray(self.likelihood)
        deltas = jnp.asarray(self.move_deltas)
        perm = jnp.asarray(self.model_arrays()["symmetry_perm"]) if symmetric else None

        def one(b, g):
            valid = valid_moves(g, deltas) if from_grid else g
            q, mass, post = move_values(params, lik, deltas, b, valid, perm, self.conv_strides)
            return q, mass, post, valid

        return jax.vmap(one)(belief, grid_or_valid)

    def greedy_actions(self, params: dict, belief: jax.Array, grid: jax.Array,
                       symmetric: bool = True) -> jax.Array:
        """i32[B]: the env action ids the greedy look-ahead picks from centred
        beliefs and grid images f32[B, R, K] (with the symmetry average: the
        evaluation's and the exported policy's decision)."""
        q, _, _, _ = self._q(params, belief, grid, symmetric=symmetric)
        return jnp.asarray(self.move_ids)[jnp.argmin(q, axis=-1)]

    def targets(self, frozen: dict, belief: jax.Array, valid: jax.Array) -> jax.Array:
        """f32[B]: ``min_a [1 + Σ_h U_h V_frozen(b'_{a,h})]`` of centred beliefs
        f32[B, R, K] with their valid moves bool[B, M] (no symmetry average, as otto)."""
        q, _, _, _ = self._q(frozen, belief, valid, symmetric=False, from_grid=False)
        return jnp.min(q, axis=-1)

    def _transform(self, key: jax.Array, belief, grid, prev_disp):
        """Each walker under a random symmetry (``symmetry_augment``)."""
        if not self.static.symmetry_augment or self.symmetry_perm.shape[0] == 1:
            return belief, grid, prev_disp
        w = belief.shape[0]
        rows, cols = self.image_shape
        which = jax.random.randint(key, (w,), 0, self.symmetry_perm.shape[0])
        perm = jnp.asarray(self.symmetry_perm)[which]  # [W, R*K]
        gather = jax.vmap(lambda img, p: img.reshape(-1)[p].reshape(rows, cols))
        maps = jnp.asarray(self.symmetry_maps)[which]  # [W, 2, 2]
        return gather(belief, perm), gather(grid, perm), jnp.einsum("wij,wj->wi", maps, prev_disp)

    def _walk(self, runner: SearcherRunner, key: jax.Array, eps: jax.Array, env_params: Any):
        """One step of every walker; returns the runner's walker fields,
        the decided-from beliefs and valid moves, and episode stats."""
        w = self.walkers
        k_sym, k_explore, k_rand, k_hit, k_reset = jax.random.split(key, 5)
        belief, grid, prev_disp = self._transform(k_sym, runner.belief, runner.grid,
                                                  runner.prev_disp)
        q, mass, post, valid = self._q(runner.params, belief, grid, symmetric=False)
        greedy = jnp.argmin(q, axis=-1)
        random_move = jax.random.randint(k_rand, (w,), 0, self.move_ids.shape[0])
        explore = jax.random.uniform(k_explore, (w,)) < eps
        a = jnp.where(explore, random_move, greedy)
        rows_ = jnp.arange(w)
        m = mass[rows_, a]  # [W, h]
        total = jnp.sum(m, axis=-1)
        p_end = jnp.clip(1.0 - total, 0.0, 1.0)
        logits = jnp.where(m > 0, jnp.log(jnp.where(m > 0, m, 1.0)), -jnp.inf)
        logits = jnp.where((total > 0)[:, None], logits, 0.0)
        h = jax.random.categorical(k_hit, logits, axis=-1)
        new_belief = post[rows_, a, h]
        disp = jnp.where(valid[rows_, a][:, None], jnp.asarray(self.move_deltas)[a], 0)
        new_grid = jax.vmap(shift_centred)(grid, disp)
        steps = runner.ep_steps + 1
        back = jnp.all(disp + prev_disp == 0, axis=-1)
        back_count = jnp.where(back, runner.back_count + 1, 0)
        stop = (runner.p_not_found < self.static.stop_p) | (total < TINY_PROBABILITY) \
            | (steps >= self.max_episode_steps) | (back_count > STUCK_STEPS)
        p_nf = runner.p_not_found * (1.0 - p_end)
        fresh_belief, fresh_grid = self._starts(k_reset, env_params, w)
        sel = stop[:, None, None]
        fields = dict(
            belief=jnp.where(sel, fresh_belief, new_belief),
            grid=jnp.where(sel, fresh_grid, new_grid),
            p_not_found=jnp.where(stop, 1.0, p_nf),
            ep_steps=jnp.where(stop, 0, steps),
            prev_disp=jnp.where(stop[:, None], _NO_DISP, disp),
            back_count=jnp.where(stop, 0, back_count))
        return fields, (belief, valid, stop, steps)

    def _remember(self, runner: SearcherRunner, beliefs: jax.Array, valid: jax.Array):
        """The memory after writing ``beliefs`` f32[N, R, K] (oldest overwritten)."""
        c = self.static.memory_size
        n = beliefs.shape[0]
        slots = (runner.memory_next + jnp.arange(n)) % c
        return dict(memory=runner.memory.at[slots].set(beliefs),
                    memory_moves=runner.memory_moves.at[slots].set(valid),
                    memory_count=jnp.minimum(runner.memory_count + n, c),
                    memory_next=(runner.memory_next + n) % c)

    def evaluate(self, params: dict, env_params: Any) -> tuple[jax.Array, jax.Array]:
        """``(mean steps f32[], mean P(not found) f32[])`` of the greedy
        policy (symmetry-averaged with ``symmetry_average``) on the fixed
        evaluation searches: each search's ``E[min(T, max_episode_steps)]``
        on its posterior, as otto's ``compute_stats``; a search stops when
        ``P(not found) < stop_p``."""
        n, horizon = self.static.eval_searches, self.max_episode_steps
        k_reset, k_hits = jax.random.split(seed_key(self.static.eval_seed))
        belief, grid = self._starts(k_reset, env_params, n)
        hit_keys = jax.random.split(k_hits, n)
        rows_ = jnp.arange(n)
        deltas = jnp.asarray(self.move_deltas)

        def cond(c):
            t, _, _, _, _, done = c
            return (t < horizon) & ~jnp.all(done)

        def body(c):
            t, belief, grid, p_nf, expected, done = c
            q, mass, post, valid = self._q(params, belief, grid, symmetric=True)
            a = jnp.argmin(q, axis=-1)
            m = mass[rows_, a]
            total = jnp.sum(m, axis=-1)
            p_end = jnp.clip(1.0 - total, 0.0, 1.0)
            logits = jnp.where(m > 0, jnp.log(jnp.where(m > 0, m, 1.0)), -jnp.inf)
            logits = jnp.where((total > 0)[:, None], logits, 0.0)
            keys = jax.vmap(lambda k: jax.random.fold_in(k, t))(hit_keys)
            h = jax.vmap(jax.random.categorical)(keys, logits)
            disp = jnp.where(valid[rows_, a][:, None], deltas[a], 0)
            live = ~done
            expected = expected + jnp.where(live, (t + 1).astype(jnp.float32) * p_nf * p_end, 0.0)
            p_nf = jnp.where(live, p_nf * (1.0 - p_end), p_nf)
            sel = live[:, None, None]
            belief = jnp.where(sel, post[rows_, a, h], belief)
            grid = jnp.where(sel, jax.vmap(shift_centred)(grid, disp), grid)
            done = done | (p_nf < self.static.stop_p) | (total < TINY_PROBABILITY)
            return t + 1, belief, grid, p_nf, expected, done

        init = (jnp.asarray(0, jnp.int32), belief, grid, jnp.ones(n, jnp.float32),
                jnp.zeros(n, jnp.float32), jnp.zeros(n, bool))
        _, _, _, p_nf, expected, _ = jax.lax.while_loop(cond, body, init)
        expected = expected + p_nf * horizon
        return jnp.mean(expected), jnp.mean(p_nf)

    # ------------------------------------------------------------ training
    def init(self, key: jax.Array, hp: Any = None, env_params: Any = None) -> SearcherRunner:
        """A fresh runner: network init, walkers reset, empty memory."""
        if env_params is None:
            raise ValidationError.for_parameter("env_params", None, "the env's params")
        key = typed_key(key)
        k_net, k_walk, k_run = jax.random.split(key, 3)
        params = self.init_network(k_net)
        rows, cols = self.image_shape
        w, c, m = self.walkers, self.static.memory_size, self.move_ids.shape[0]
        belief, grid = self._starts(k_walk, env_params, w)
        return SearcherRunner(
            params=params, frozen=_copy(params), opt_state=self.tx(hp).init(params),
            memory=jnp.zeros((c, rows, cols), jnp.float32),
            memory_moves=jnp.zeros((c, m), bool),
            memory_count=jnp.asarray(0, jnp.int32), memory_next=jnp.asarray(0, jnp.int32),
            belief=belief, grid=grid, p_not_found=jnp.ones(w, jnp.float32),
            ep_steps=jnp.zeros(w, jnp.int32), prev_disp=jnp.broadcast_to(_NO_DISP, (w, 2)),
            back_count=jnp.zeros(w, jnp.int32), update=jnp.asarray(0, jnp.int32),
            epsilon=self.epsilon(0), transitions=jnp.asarray(0, jnp.int32),
            episodes=jnp.asarray(0, jnp.int32), best_params=_copy(params),
            best_score=jnp.asarray(jnp.inf, jnp.float32), best_update=jnp.asarray(0, jnp.int32),
            key=jax.random.key_data(k_run))

    def scheduled_evaluation(self, params: dict, update: jax.Array, env_params: Any
                             ) -> tuple[jax.Array, jax.Array]:
        """``(score, p_not_found)`` of :meth:`evaluate` when iteration
        ``update`` is a multiple of ``eval_every``, else ``(NaN, NaN)`` (a
        ``lax.cond``: the evaluation runs only on those iterations, as long
        as ``update`` is not batched)."""
        nan = jnp.float32(jnp.nan)
        if self.eval_every == 0:
            return nan, nan
        return jax.lax.cond(update % self.eval_every == 0,
                            lambda _: self.evaluate(params, env_params),
                            lambda _: (nan, nan), None)

    def keep_best(self, runner: SearcherRunner, metrics: dict, score: jax.Array,
                  p_nf: jax.Array) -> tuple[SearcherRunner, dict]:
        """The runner of an iteration whose parameters scored ``score``
        (NaN: not evaluated) with the best parameters so far kept, and its
        metrics with the evaluation's (``eval_*``, ``best_*``)."""
        better = score < runner.best_score  # False for NaN: not evaluated
        best_score = jnp.where(better, score, runner.best_score)
        best_update = jnp.where(better, runner.update, runner.best_update)
        runner = runner.replace(
            best_params=jax.tree.map(lambda new, old: jnp.where(better, new, old),
                                     runner.params, runner.best_params),
            best_score=best_score, best_update=best_update)
        return runner, {**metrics, "eval_mean_steps": score, "eval_p_not_found": p_nf,
                        "best_eval_mean_steps": best_score,
                        "best_update": best_update.astype(jnp.float32)}

    def update(self, runner: SearcherRunner, hp: Any = None, env_params: Any = None
               ) -> tuple[SearcherRunner, dict]:
        """One otto iteration (module docstring); returns the runner and the
        scalar metrics :data:`METRIC_NAMES` (``loss`` the mean squared Bellman
        error over the iteration's gradient steps; ``eval_*`` NaN when not
        evaluated)."""
        new, metrics = self.iterate(runner, hp, env_params)
        score, p_nf = self.scheduled_evaluation(new.params, new.update, env_params)
        return self.keep_best(new, metrics, score, p_nf)

    def batched_step(self, runner: SearcherRunner, hp: Any, env_params: Any
                     ) -> tuple[SearcherRunner, dict]:
        """One iteration of every member of a sweep: :meth:`iterate` vmapped,
        then the evaluation once for all members, outside the vmap (their
        iteration counts are equal, so it stays a ``lax.cond`` rather than a
        ``select`` that would evaluate at every iteration), vmapped over
        their parameters."""
        new, metrics = vmap_members(self.iterate, runner, hp, env_params)
        nan = jnp.full(new.update.shape, jnp.nan, jnp.float32)
        if self.eval_every == 0:
            score, p_nf = nan, nan
        else:
            score, p_nf = jax.lax.cond(
                new.update[0] % self.eval_every == 0,
                lambda _: vmap_members(self.evaluate, new.params, env_params),
                lambda _: (nan, nan), None)
        return vmap_members(self.keep_best, new, metrics, score, p_nf)

    def iterate(self, runner: SearcherRunner, hp: ValueIterationHparams | None, env_params: Any
                ) -> tuple[SearcherRunner, dict]:
        """Steps 1-4 of an iteration (module docstring: the walkers' steps,
        the memory, the frozen copy, the gradient steps), no evaluation:
        the runner (its ``best_*`` fields unchanged) and the metrics but
        the evaluation's."""
        if env_params is None:
            raise ValidationError.for_parameter("env_params", None, "the env's params")
        key = typed_key(runner.key)
        key, k_walk, k_batch = jax.random.split(key, 3)
        eps = self.epsilon(runner.update)

        def walk(r, k):
            fields, out = self._walk(r, k, eps, env_params)
            return r.replace(**fields), out

        runner_w, (beliefs, valid, stops, lengths) = jax.lax.scan(
            walk, runner, jax.random.split(k_walk, self.steps_per_iteration))
        rows, cols = self.image_shape
        n_new = self.walkers * self.steps_per_iteration
        runner_w = runner_w.replace(**self._remember(
            runner_w, beliefs.reshape(n_new, rows, cols), valid.reshape(n_new, -1)))

        refresh = runner.update % self.static.target_update_every == 0
        frozen = jax.tree.map(lambda p, f: jnp.where(refresh, p, f), runner.params, runner.frozen)

        g, b = self.static.gd_steps, self.static.batch_size
        idx = jax.random.randint(k_batch, (g * b,), 0, runner_w.memory_count)
        xb = runner_w.memory[idx]
        tx = self.tx(hp)

        def loss_fn(p, x, y):
            err = self.values(p, x) - y
            return jnp.sum(jnp.square(err)), (jnp.mean(jnp.square(err)), jnp.mean(err + y))

        def gd(carry, batch):
            p, opt = carry
            x, y = batch
            (_, (mse, vmean)), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, x, y)
            upd, opt = tx.update(grads, opt, p)
            return (project_nonnegative(optax.apply_updates(p, upd)), opt), (mse, vmean)

        if self.static.frozen_target:  # otto: one batch of targets from the frozen copy
            yb = self.targets(frozen, xb, runner_w.memory_moves[idx])
            (params, opt_state), (mses, vmeans) = jax.lax.scan(
                gd, (runner.params, runner.opt_state),
                (xb.reshape(g, b, rows * cols), yb.reshape(g, b)))
        else:  # the ablation: each step's targets from the current parameters

            def gd_current(carry, batch):
                x, valid = batch
                y = jax.lax.stop_gradient(self.targets(carry[0], x, valid))
                carry, (mse, vmean) = gd(carry, (x.reshape(b, rows * cols), y))
                return carry, (mse, vmean, y)

            (params, opt_state), (mses, vmeans, yb) = jax.lax.scan(
                gd_current, (runner.params, runner.opt_state),
                (xb.reshape(g, b, rows, cols), runner_w.memory_moves[idx].reshape(g, b, -1)))
        update = runner.update + 1
        nan = jnp.float32(jnp.nan)

        stops = stops.astype(jnp.float32)
        finished = jnp.sum(stops)
        episodes = runner.episodes + finished.astype(jnp.int32)
        transitions = runner.transitions + n_new
        new_runner = runner_w.replace(
            params=params, frozen=frozen, opt_state=opt_state, update=update, epsilon=eps,
            transitions=transitions, episodes=episodes, key=jax.random.key_data(key))
        metrics = {
            "update": update,
            "env_steps": transitions.astype(jnp.float32),
            "episodes": finished,
            "episode_length_mean": jnp.where(
                finished > 0, jnp.sum(stops * lengths) / jnp.maximum(finished, 1.0), nan),
            "loss": jnp.mean(mses),
            "target_mean": jnp.mean(yb),
            "value_mean": jnp.mean(vmeans),
            "epsilon": eps,
            "memory_fill": runner_w.memory_count.astype(jnp.float32) / self.static.memory_size,
        }
        return new_runner, metrics


def _layers(name: str, values: Any, high: int) -> tuple[int, ...]:
    """A non-empty list of layer sizes in ``[1, high]``, as a tuple."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) < 1:
        raise ValidationError.for_parameter(name, values, "a non-empty list, one entry per layer")
    return tuple(count(low=1, high=high)(name, v, None) for v in values)


_NO_DISP = np.asarray([1 << 20, 1 << 20], np.int32)  # "no previous move" (never cancels one)


def _copy(tree: Any) -> Any:
    """Fresh buffers (the runner's fields must not share any: jit donates them)."""
    return jax.tree.map(lambda x: jnp.array(x, copy=True), tree)


def _evaluated(runner: SearcherRunner) -> np.ndarray:
    """bool[] (bool[N] for a runner of N sweep members): whether the
    parameters were evaluated at least once (a finite best score)."""
    return np.isfinite(np.asarray(runner.best_score))


def export_arrays(algo: BeliefValueIteration, runner: SearcherRunner) -> dict[str, np.ndarray]:
    """The exported policy's arrays (:func:`policy_scores`): the best
    evaluated parameters (the current ones if none was evaluated yet) and
    the look-ahead's model, as NumPy arrays. For a runner of N sweep members
    (a leading member axis) every array has that axis, the model's repeated."""
    evaluated = _evaluated(runner)

    def pick(best: Any, current: Any) -> np.ndarray:
        best, current = np.asarray(best), np.asarray(current)
        return np.where(evaluated.reshape(evaluated.shape + (1,) * (best.ndim
                                                                    - evaluated.ndim)),
                        best, current)

    out = {k: pick(runner.best_params[k], runner.params[k]) for k in runner.params}
    out.update({k: np.broadcast_to(np.asarray(v), evaluated.shape + np.shape(v))
                for k, v in algo.model_arrays().items()})
    return out


def policy_spec(algo: BeliefValueIteration, runner: SearcherRunner,
                env_config: dict | None = None) -> dict[str, Any]:
    """The exported policy's JSON side: format, settings, where the
    parameters come from, the env's action names. For a runner of N sweep
    members, ``parameters``, ``best_eval_mean_steps``, ``best_update`` and
    ``updates`` are lists of N (the members are exported one by one)."""
    evaluated = _evaluated(runner)
    score, best, updates = (np.asarray(runner.best_score), np.asarray(runner.best_update),
                            np.asarray(runner.update))

    def each(fn: Any) -> Any:
        if evaluated.ndim == 0:
            return fn(bool(evaluated), score, best, updates)
        return [fn(bool(e), s, b, u) for e, s, b, u in zip(evaluated, score, best, updates)]

    network = {"type": algo.network_type, "hidden_sizes": list(algo.hidden_sizes),
               "activation": "relu", "critic": "none"}
    if algo.network_type == "cnn":  # agents.trained passes the strides to the forward pass
        network.update(image_shape=list(algo.image_shape),
                       conv_features=list(algo.conv_features),
                       conv_kernels=list(algo.conv_kernels), conv_strides=list(algo.conv_strides))
    return {"format": TRAINED_POLICY_FORMAT, "algorithm": "belief_value_iteration",
            "policy": "belief_lookahead", "network": network,
            "discrete": True, "action_dim": algo.action_dim, "action_low": None,
            "action_high": None, "obs_dim": algo.obs_dim, "normalize_obs": False,
            "num_agents": 1,
            "settings": algo.settings(), "hidden_sizes": list(algo.hidden_sizes),
            "image_shape": list(algo.image_shape), "action_names": list(algo.env.action_names),
            "parameters": each(lambda e, s, b, u: "best evaluated" if e
                               else "latest (never evaluated)"),
            "best_eval_mean_steps": each(lambda e, s, b, u: float(s) if e else None),
            "best_update": each(lambda e, s, b, u: int(b) if e else None),
            "updates": each(lambda e, s, b, u: int(u)), "env": env_config}


__all__ = ["BeliefValueIteration", "SearcherRunner", "METRIC_NAMES", "NETWORK_TYPES",
           "POLICY_FORMAT", "act", "belief_values", "conv_output_size", "export_arrays",
           "init_network", "move_values", "network_values",
           "policy_scores", "policy_spec", "project_nonnegative", "symmetry_tables",
           "valid_moves"]
