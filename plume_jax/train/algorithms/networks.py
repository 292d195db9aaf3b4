"""Actor-critic networks (flax linen) and the action distributions PPO uses.

Every network maps ``(hidden, x, starts)`` to ``(hidden', policy_out, value)``
over a time-major sequence: ``x`` is f32[T, B, D], ``starts`` bool[T, B]
marks the first observation of an episode, ``hidden`` f32[B, H] is the
recurrent state before ``x[0]``. The feed-forward networks ignore
``hidden`` and ``starts`` (they pass ``hidden`` through), so rollout,
bootstrapping and training code is the same for all.

- ``mlp``: separate actor and critic MLPs (``hidden_sizes``, orthogonal
  init, ``tanh`` or ``relu``) on the input.
- ``gru``: a dense embedding (``hidden_sizes[0]`` units) -> a GRU
  (``gru_size``) whose state is zeroed wherever ``starts`` is True (an episode
  boundary) -> separate actor and critic MLP heads (``hidden_sizes[1:]``).
- ``rnn``: the same, with a vanilla (Elman) recurrent cell of ``rnn_size``
  units, ``h' = tanh(W_i e + b_i + W_h h)`` (``flax.linen.SimpleCell``; Singh
  et al. 2023 trained both), its state zeroed at episode starts as the GRU's.
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
the recurrent cell's output for a ``gru`` or ``rnn`` — concatenated in agent
order relative to the acting agent (its own first, then agents ``i+1, ...,
A-1, 0, ..., i-1``),
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

The computation is :func:`agents.actor_critic.actor_critic` (pure jax, layer 4):
the flax module only declares the parameters and their initialisers, and the
exported policy (``agents.trained``) runs the same function on the exported
arrays.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

import flax.linen as nn
from flax import traverse_util
import jax
from jax import custom_batching
import jax.numpy as jnp
import numpy as np

from agents.actor_critic import RECURRENT_WIDTH, actor_critic, hidden_width
from agents.actor_critic import joint_features  # noqa: F401 (re-exported)
from plume_jax.core.errors import ValidationError
from plume_jax.settings import setting
from plume_jax.settings.checks import boolean, choice, count, integer_list, real


def image_shape_check(name: str, value: Any, grid: Any = None) -> tuple[int, ...] | None:
    """``None`` or ``[rows, columns]`` / ``[channels, rows, columns]``."""
    if value is None:
        return None
    try:
        return integer_list(low=1, high=65536, lengths=(2, 3), whole_floats=True)(
            name, value, grid)
    except ValidationError:
        raise ValidationError.for_parameter(
            name, value, "null or [rows, columns] or [channels, rows, columns] (integers >= 1)"
        ) from None


_SIZE = count(low=1, high=65536)
_SIZES = integer_list(low=1, high=65536, whole_floats=True)
_CONV = integer_list(low=1, high=64, whole_floats=True)


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The ``network.*`` settings, each declared once here (default, check,
    doc: :func:`plume_jax.settings.setting`); static, so hashable and part of
    the compiled program. A recurrent network refuses the other cell's width
    set away from its default (it would size nothing)."""

    type: str = setting(
        "mlp", choice(("mlp", "gru", "rnn", "cnn")),
        doc="mlp | gru (recurrent: a GRU) | rnn (recurrent: a vanilla tanh RNN, "
        "flax.linen.SimpleCell) | cnn (conv torso over an image in the inputs; "
        "belief_value_iteration: mlp | cnn, its value network's conv layers then the "
        "hidden_sizes dense ReLU layers)")
    hidden_sizes: tuple[int, ...] = setting(
        (64, 64), _SIZES, doc="mlp: actor and critic layers; gru, rnn: the input embedding, "
        "then the actor / critic head layers; cnn: the actor / critic layers after the "
        "conv torso")
    gru_size: int = setting(64, _SIZE, doc="GRU hidden size (gru only; rnn refuses another "
                            "value, mlp and cnn ignore it)")
    rnn_size: int = setting(64, _SIZE, doc="vanilla RNN hidden size (rnn only; gru refuses "
                            "another value, mlp and cnn ignore it)")
    image_shape: tuple[int, ...] | None = setting(
        None, image_shape_check, doc="cnn: [rows, columns] or [channels, rows, columns] of "
        "the image in the first inputs (the belief sensor's window: rows = columns = "
        "2 * grid - 1)")
    conv_features: tuple[int, ...] = setting((8, 16, 16), _SIZES,
                                             doc="cnn: output channels of each conv layer")
    conv_kernels: tuple[int, ...] = setting((3, 3, 3), _CONV,
                                            doc="cnn: kernel side of each conv layer")
    conv_strides: tuple[int, ...] = setting((2, 2, 2), _CONV,
                                            doc="cnn: stride of each conv layer ('SAME' padding)")
    activation: str = setting("tanh", choice(("tanh", "relu")), doc="tanh | relu")
    obs_transform: str = setting("none", choice(("none", "log")),
                                 doc="none | log: log(obs + log_eps)")
    log_eps: float = setting(1e-6, real(low=0.0, high=1.0, low_inclusive=False),
                             doc="the offset of obs_transform: log")
    prev_action: bool = setting(False, boolean(), doc="feed the previous action to the network")
    obs_delta: bool = setting(False, boolean(), doc="also feed the change of the "
                              "(transformed) observation since the previous step")
    log_std_init: float = setting(0.0, real(low=-20.0, high=5.0),
                                  doc="Box actions: initial log std of the Gaussian policy")
    critic: str = setting(
        "decentralised", choice(("decentralised", "centralised")),
        doc="multi-agent envs: decentralised (the value sees the agent's own input, like the "
        "actor) | centralised (MAPPO-style: the value sees every agent's features, own "
        "first, then the others in agent order from the next one on)")

    def __post_init__(self):
        self._check_recurrent_width()
        if self.type != "cnn":
            return
        if self.image_shape is None:
            raise ValidationError.for_parameter(
                "network.image_shape", None,
                "[rows, columns] or [channels, rows, columns] for network.type 'cnn' (the image "
                "in the first inputs; the belief sensor's is [2H-1, 2W-1])")
        sizes = {"conv_features": len(self.conv_features), "conv_kernels": len(self.conv_kernels),
                 "conv_strides": len(self.conv_strides)}
        if len(set(sizes.values())) != 1:
            raise ValidationError.for_parameter(
                "network.conv_kernels", list(self.conv_kernels),
                f"one entry per conv layer, as many as conv_features and conv_strides ({sizes})")

    def _check_recurrent_width(self) -> None:
        """Refuse, on a ``gru`` or ``rnn`` network, the other cell's width
        set away from its default (a GRU's config with ``type: rnn`` keeps a
        ``gru_size`` that sizes nothing)."""
        if self.type not in RECURRENT_WIDTH:
            return
        own = RECURRENT_WIDTH[self.type]
        for kind, width in RECURRENT_WIDTH.items():
            value = getattr(self, width)
            default = NetworkConfig.__dataclass_fields__[width].default
            if kind != self.type and value != default:
                raise ValidationError.for_parameter(
                    f"network.{width}", value,
                    f"its default {default} for network.type {self.type!r}: {width} is "
                    f"the width of network.type {kind!r} only; the {self.type} cell's width "
                    f"is network.{own} (now {getattr(self, own)})")

    @property
    def recurrent(self) -> bool:
        """A ``gru`` or ``rnn``: a state carried over steps, zeroed at
        episode starts (training minibatches are whole env sequences)."""
        return self.type in RECURRENT_WIDTH

    @property
    def image_channels_rows_columns(self) -> tuple[int, int, int]:
        """``(channels, rows, columns)`` of the cnn's image."""
        shape = tuple(self.image_shape or ())
        if len(shape) == 3:
            return shape[0], shape[1], shape[2]
        return 1, shape[0], shape[1]

_LOG_2PI = math.log(2.0 * math.pi)

#: What :class:`ActorCritic` computes: ``(hidden' f32[B, H], (logits or mean
#: f32[T, B, A], log_std f32[A] or None), value f32[T, B])``.
NetworkOutput = tuple[jax.Array, tuple[jax.Array, jax.Array | None], jax.Array]



def _dense(features: int, scale: float, name: str) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale),
                    bias_init=nn.initializers.zeros_init(), name=name)


class _GRUParams(nn.Module):
    """Declares the GRU's parameters (``gru/cell/*``, ``flax.linen.GRUCell``'s
    names and initialisers)."""

    features: int

    @nn.compact
    def __call__(self, h: jax.Array, x: jax.Array) -> Any:
        return nn.GRUCell(self.features, name="cell")(h, x)


class _RNNParams(nn.Module):
    """Declares the vanilla RNN's parameters (``rnn/cell/i/{kernel,bias}``,
    ``rnn/cell/h/kernel``: ``flax.linen.SimpleCell``'s names and
    initialisers, ``tanh``)."""

    features: int

    @nn.compact
    def __call__(self, h: jax.Array, x: jax.Array) -> Any:
        return nn.SimpleCell(self.features, name="cell")(h, x)


class _TorsoParams(nn.Module):
    """Declares the conv torso's parameters (``torso/conv_i/*``)."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, channels: int) -> None:
        cfg = self.config
        for i, (features, kernel, stride) in enumerate(zip(cfg.conv_features, cfg.conv_kernels,
                                                           cfg.conv_strides)):
            nn.Conv(features, (kernel, kernel), strides=(stride, stride), padding="SAME",
                    kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)),
                    bias_init=nn.initializers.zeros_init(), name=f"conv_{i}")(
                jnp.zeros((1, 1, 1, channels), jnp.float32))
            channels = features


def torso_size(config: NetworkConfig, in_dim: int) -> int:
    """Features out of the ``cnn`` torso for ``in_dim`` inputs: the last
    feature map ('SAME' padding: ``ceil(side / stride)`` per layer), then
    the inputs after the image."""
    channels, rows, cols = config.image_channels_rows_columns
    size = channels * rows * cols
    if in_dim < size:
        raise ValidationError.for_parameter(
            "network.image_shape", list(config.image_shape or ()),
            f"an image that fits the {in_dim} network inputs (it needs {size})")
    for stride in config.conv_strides:
        rows, cols = -(-rows // stride), -(-cols // stride)
    return rows * cols * config.conv_features[-1] + in_dim - size


class ActorCritic(nn.Module):
    """See the module docstring. ``action_dim``: number of discrete actions,
    or the size of a ``Box`` action; ``num_agents``: agents per env (the
    batch is ``envs x num_agents`` rows; only the centralised critic reads
    it). ``value_only``: no actor head (the logits are zeros), for a value
    network acted on by look-ahead (:mod:`plume_jax.train.algorithms.lookahead`).

    The module declares the parameters (names, shapes, initialisers); the
    computation is :func:`agents.actor_critic.actor_critic`, which the
    exported policy runs too."""

    config: NetworkConfig
    action_dim: int
    discrete: bool
    num_agents: int = 1
    value_only: bool = False

    @nn.compact
    def __call__(self, hidden: jax.Array, x: jax.Array, starts: jax.Array) -> NetworkOutput:
        cfg = self.config
        self._declare(x.shape[-1])
        params = traverse_util.flatten_dict(self.variables["params"], sep="/")
        return actor_critic(cfg, params, hidden, x, starts, action_dim=self.action_dim,
                            discrete=self.discrete, num_agents=self.num_agents,
                            value_only=self.value_only)

    def _declare(self, in_dim: int) -> None:
        """Create every parameter (their values are what ``init`` returns;
        the dummy calls compute nothing that is used)."""
        cfg = self.config
        sqrt2 = math.sqrt(2.0)

        def layer(features: int, scale: float, name: str, width: int) -> None:
            _dense(features, scale, name)(jnp.zeros((1, width), jnp.float32))

        if cfg.recurrent:
            layer(cfg.hidden_sizes[0], sqrt2, "embed", in_dim)
            width, heads = hidden_size(cfg), cfg.hidden_sizes[1:]
            cell = _GRUParams if cfg.type == "gru" else _RNNParams
            cell(width, name=cfg.type)(jnp.zeros((1, width), jnp.float32),
                                       jnp.zeros((1, cfg.hidden_sizes[0]), jnp.float32))
        elif cfg.type == "cnn":
            _TorsoParams(cfg, name="torso")(cfg.image_channels_rows_columns[0])
            width, heads = torso_size(cfg, in_dim), cfg.hidden_sizes
        else:
            width, heads = in_dim, cfg.hidden_sizes
        if self.value_only:
            w = width
            for i, n in enumerate(heads):
                layer(n, sqrt2, f"critic_{i}", w)
                w = n
            layer(1, 0.0, "critic_out", w)  # starts at 0 (a correction)
            return
        w = width
        for i, n in enumerate(heads):
            layer(n, sqrt2, f"actor_{i}", w)
            w = n
        w = width * self.num_agents if cfg.critic == "centralised" else width
        for i, n in enumerate(heads):
            layer(n, sqrt2, f"critic_{i}", w)
            w = n
        layer(1, 1.0, "critic_out", w)
        layer(self.action_dim, 0.01, "actor_out", heads[-1] if heads else width)
        if not self.discrete:
            self.param("log_std", nn.initializers.constant(cfg.log_std_init), (self.action_dim,))


def apply_network(net: ActorCritic, variables: Any, hidden: jax.Array, x: jax.Array,
                  starts: jax.Array) -> NetworkOutput:
    """``net.apply(variables, hidden, x, starts)``: the network on parameters
    ``variables`` (``{"params": ...}``) over a sequence (module docstring)."""
    # flax declares Module.apply's result as the output or (output, mutated
    # variables); with no mutable collection it is the output
    return cast(NetworkOutput, net.apply(variables, hidden, x, starts))


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
        hidden = jnp.zeros((rows, hidden_size(net.config)), jnp.float32)
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
    """Width of the carried recurrent state: ``gru_size`` (gru), ``rnn_size``
    (rnn), 1 (unused) for the feed-forward networks."""
    return hidden_width(config)


def count_params(params: Any) -> int:
    return int(sum(np.prod(np.shape(x)) for x in jax.tree.leaves(params)))
