"""Actor-critic networks (flax linen) and the action distributions PPO uses.

Both networks map ``(hidden, x, starts)`` to ``(hidden', policy_out, value)``
over a time-major sequence: ``x`` is f32[T, B, D], ``starts`` bool[T, B]
marks the first observation of an episode, ``hidden`` f32[B, H] is the
recurrent state before ``x[0]``. The feed-forward network ignores
``hidden`` and ``starts`` (it passes ``hidden`` through), so rollout,
bootstrapping and training code is the same for both.

- ``mlp``: separate actor and critic MLPs (``hidden_sizes``, orthogonal
  init, ``tanh`` or ``relu``) on the input.
- ``gru``: a dense embedding (``hidden_sizes[0]`` units) -> a GRU
  (``gru_size``) whose state is zeroed wherever ``starts`` is True (an episode
  boundary) -> separate actor and critic MLP heads (``hidden_sizes[1:]``).
- ``cnn``: the first ``channels * rows * columns`` inputs are an image
  (``image_shape``, channel-major, row-major: the ``belief`` sensor's
  posterior window) -> a conv torso shared by actor and critic (per layer:
  ``conv_features[i]`` channels, a ``conv_kernels[i]`` square kernel,
  stride ``conv_strides[i]``, ``'SAME'`` padding, the activation) ->
  flattened, followed by the remaining inputs (e.g. the previous action) ->
  separate actor and critic MLP heads (``hidden_sizes``).

Many agents (``num_agents`` > 1) share one network: the batch axis ``B``
is ``envs x agents``, agent-minor (the rows of one env are contiguous).
With ``critic="centralised"`` (MAPPO-style) the critic head reads the
features of every agent of the acting agent's env — the input for an MLP,
the GRU output for a GRU — concatenated in agent order relative to the
acting agent (its own first, then agents ``i+1, ..., A-1, 0, ..., i-1``),
so one set of critic weights serves every agent; the actor still reads only
the agent's own features (:func:`joint_features`).

Inputs are built by ``PPO``: the (optionally log-transformed) observation,
optionally its change since the previous step (``obs_delta``), optionally
normalised, optionally followed by the previous action (``prev_action``).

The policy head gives categorical logits (``Discrete``) or the mean of a
diagonal Gaussian with a state-independent learned log standard deviation
(``Box``). Gaussian samples live in ``[-1, 1]``-normalised action
coordinates; :func:`to_env_action` clips them and maps them into the box
(the log-probability is that of the unclipped sample, as usual for PPO).

``agents/trained.py`` re-implements the forward pass without flax (agents
may not import flax); ``tests/test_train_checkpoint.py`` checks both agree.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import flax.linen as nn
import jax
from jax import custom_batching
import jax.numpy as jnp
import numpy as np

from plume_jax.train.config import NetworkConfig

_LOG_2PI = math.log(2.0 * math.pi)


def _act(name: str):
    return {"tanh": jnp.tanh, "relu": jax.nn.relu}[name]


def _dense(features: int, scale: float, name: str) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale),
                    bias_init=nn.initializers.zeros_init(), name=name)


class _GRUSequence(nn.Module):
    """A GRU cell scanned over time, resetting its state where ``starts``."""

    features: int

    @functools.partial(nn.scan, variable_broadcast="params", split_rngs={"params": False},
                       in_axes=0, out_axes=0)
    @nn.compact
    def __call__(self, h, inputs):
        x, start = inputs
        h = jnp.where(start[:, None], jnp.zeros_like(h), h)
        h, y = nn.GRUCell(self.features, name="cell")(h, x)
        return h, y


class ConvTorso(nn.Module):
    """The ``cnn`` network's shared conv layers: f32[..., D] inputs whose first
    ``C * R * K`` entries are an image ``[C, R, K]`` -> f32[..., F] features
    (the flattened last feature map, then the other inputs)."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.config
        channels, rows, cols = cfg.image_channels_rows_columns
        size = channels * rows * cols
        if x.shape[-1] < size:
            from plume_jax.errors import ValidationError

            raise ValidationError.for_parameter(
                "network.image_shape", list(cfg.image_shape),
                f"an image that fits the {x.shape[-1]} network inputs (it needs {size})")
        lead = x.shape[:-1]
        image = jnp.reshape(x[..., :size], (-1, channels, rows, cols)).transpose(0, 2, 3, 1)
        act = _act(cfg.activation)
        for i, (features, kernel, stride) in enumerate(zip(cfg.conv_features, cfg.conv_kernels,
                                                           cfg.conv_strides)):
            image = act(nn.Conv(features, (kernel, kernel), strides=(stride, stride),
                                padding="SAME", kernel_init=nn.initializers.orthogonal(
                                    math.sqrt(2.0)),
                                bias_init=nn.initializers.zeros_init(), name=f"conv_{i}")(image))
        feats = jnp.reshape(image, lead + (-1,))
        return jnp.concatenate([feats, x[..., size:]], axis=-1)


def joint_features(feats: jax.Array, num_agents: int) -> jax.Array:
    """The centralised critic's input: f32[..., B, F] (``B = envs x
    num_agents``, agent-minor) -> f32[..., B, num_agents * F], where row
    ``(env, i)`` holds the features of agents ``i, i+1, ..., i-1`` (mod
    ``num_agents``) of the same env."""
    lead, (rows, size) = feats.shape[:-2], feats.shape[-2:]
    per_env = jnp.reshape(feats, lead + (rows // num_agents, num_agents, size))
    order = (np.arange(num_agents)[:, None] + np.arange(num_agents)[None, :]) % num_agents
    joint = per_env[..., order, :]  # [..., envs, A (acting), A (relative), F]
    return jnp.reshape(joint, lead + (rows, num_agents * size))


class ActorCritic(nn.Module):
    """See the module docstring. ``action_dim``: number of discrete actions,
    or the size of a ``Box`` action; ``num_agents``: agents per env (the
    batch is ``envs x num_agents`` rows; only the centralised critic reads
    it). ``value_only``: no actor head (the logits are zeros), for a value
    network acted on by look-ahead (:mod:`plume_jax.train.lookahead`)."""

    config: NetworkConfig
    action_dim: int
    discrete: bool
    num_agents: int = 1
    value_only: bool = False

    @nn.compact
    def __call__(self, hidden: jax.Array, x: jax.Array, starts: jax.Array):
        cfg = self.config
        act = _act(cfg.activation)
        sqrt2 = math.sqrt(2.0)
        if cfg.recurrent:
            emb = act(_dense(cfg.hidden_sizes[0], sqrt2, "embed")(x))
            hidden, feats = _GRUSequence(cfg.gru_size, name="gru")(hidden, (emb, starts))
            head_sizes = cfg.hidden_sizes[1:]
        elif cfg.type == "cnn":
            feats = ConvTorso(cfg, name="torso")(x)
            head_sizes = cfg.hidden_sizes
        else:
            feats = x
            head_sizes = cfg.hidden_sizes
        if self.value_only:
            c = feats
            for i, n in enumerate(head_sizes):
                c = act(_dense(n, sqrt2, f"critic_{i}")(c))
            value = _dense(1, 0.0, "critic_out")(c)[..., 0]  # starts at 0 (a correction)
            return hidden, (jnp.zeros(value.shape + (self.action_dim,), jnp.float32), None), value
        a = feats
        for i, n in enumerate(head_sizes):
            a = act(_dense(n, sqrt2, f"actor_{i}")(a))
        c = joint_features(feats, self.num_agents) if cfg.critic == "centralised" else feats
        for i, n in enumerate(head_sizes):
            c = act(_dense(n, sqrt2, f"critic_{i}")(c))
        value = _dense(1, 1.0, "critic_out")(c)[..., 0]
        out = _dense(self.action_dim, 0.01, "actor_out")(a)
        if self.discrete:
            return hidden, (out, None), value
        log_std = self.param("log_std", nn.initializers.constant(cfg.log_std_init),
                             (self.action_dim,))
        return hidden, (out, jnp.broadcast_to(log_std, out.shape)), value


# ----------------------------------------------------------------- distributions
def sample(discrete: bool, dist: tuple, key: jax.Array) -> jax.Array:
    """A sampled action: i32[...] (discrete) or f32[..., A] (Gaussian)."""
    mean_or_logits, log_std = dist
    if discrete:
        return jax.random.categorical(key, mean_or_logits, axis=-1).astype(jnp.int32)
    return mean_or_logits + jnp.exp(log_std) * jax.random.normal(key, mean_or_logits.shape)


def mode(discrete: bool, dist: tuple) -> jax.Array:
    """The greedy action: argmax of the logits, or the Gaussian mean."""
    mean_or_logits, _ = dist
    if discrete:
        return jnp.argmax(mean_or_logits, axis=-1).astype(jnp.int32)
    return mean_or_logits


def log_prob(discrete: bool, dist: tuple, action: jax.Array) -> jax.Array:
    mean_or_logits, log_std = dist
    if discrete:
        logp = jax.nn.log_softmax(mean_or_logits, axis=-1)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]
    z = (action - mean_or_logits) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * jnp.square(z) - log_std - 0.5 * _LOG_2PI, axis=-1)


def entropy(discrete: bool, dist: tuple) -> jax.Array:
    mean_or_logits, log_std = dist
    if discrete:
        logp = jax.nn.log_softmax(mean_or_logits, axis=-1)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)
    return jnp.sum(log_std + 0.5 * (1.0 + _LOG_2PI), axis=-1)


def to_env_action(discrete: bool, action: jax.Array, low: Any = None, high: Any = None):
    """The env's action: the id itself, or a normalised Gaussian sample
    clipped to ``[-1, 1]`` and mapped affinely onto ``[low, high]``."""
    if discrete:
        return action
    low = jnp.asarray(low, jnp.float32)
    high = jnp.asarray(high, jnp.float32)
    u = jnp.clip(action, -1.0, 1.0)
    return low + 0.5 * (u + 1.0) * (high - low)


def action_features(discrete: bool, action_dim: int, action: jax.Array) -> jax.Array:
    """The previous action as a network input: one-hot, or the clipped
    normalised vector."""
    if discrete:
        return jax.nn.one_hot(action, action_dim, dtype=jnp.float32)
    return jnp.clip(action, -1.0, 1.0).astype(jnp.float32)


def input_size(obs_dim: int, config: NetworkConfig, action_dim: int) -> int:
    return obs_dim + (action_dim if config.prev_action else 0)


def init_params(net: ActorCritic, key: jax.Array, in_dim: int) -> Any:
    """Network parameters for inputs of size ``in_dim`` (initialised on one
    env's rows, ``net.num_agents`` of them).

    Under ``jax.vmap`` (a sweep's members, ``vmap(PPO.init)``) the members
    are initialised one after another (``lax.map``), with the same values as
    a batched initialisation: the orthogonal initialiser's QR is a LAPACK
    call, and jaxlib 0.10.2's CPU LAPACK kernels split a *batched* call over
    XLA's intra-op thread pool and block waiting for the parts; two such
    calls running at once (one per layer) can occupy every thread of the
    pool and wait for each other forever (seen on 2 cores: ``plume-jax
    sweep`` and the vmapped probe training hung at their first result).
    Unbatched LAPACK calls do not split, so they cannot deadlock.
    """

    @custom_batching.custom_vmap
    def init(key: jax.Array) -> Any:
        rows = net.num_agents
        hidden = jnp.zeros((rows, net.config.gru_size if net.config.recurrent else 1),
                           jnp.float32)
        return net.init(key, hidden, jnp.zeros((1, rows, in_dim), jnp.float32),
                        jnp.zeros((1, rows), bool))

    @init.def_vmap
    def one_member_at_a_time(axis_size, in_batched, keys):
        (keys_batched,) = in_batched
        if not keys_batched:  # every member gets the same parameters
            params = init(keys)
            return params, jax.tree.map(lambda _: False, params)
        params = jax.lax.map(init, keys)
        return params, jax.tree.map(lambda _: True, params)

    return init(key)


def hidden_size(config: NetworkConfig) -> int:
    """Width of the carried recurrent state (1, unused, for the MLP)."""
    return config.gru_size if config.recurrent else 1


def count_params(params: Any) -> int:
    return int(sum(np.prod(np.shape(x)) for x in jax.tree.leaves(params)))
