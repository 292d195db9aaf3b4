"""The actor-critic forward pass, one implementation (layer 4, jax only).

Training (:class:`plume_jax.train.algorithms.networks.ActorCritic`, a flax module that
declares the parameters and their initialisers, then calls
:func:`actor_critic`) and the exported policy (``agents.trained``, from the
``policy.npz`` arrays) run this same code, so an exported policy acts
exactly as the network it was trained as.

Parameters are a flat mapping ``"layer/param" -> array`` (flax's names
joined with ``/``: ``actor_0/kernel``, ``gru/cell/ir/bias``,
``rnn/cell/i/kernel``, ``torso/conv_0/kernel``, ``log_std``). ``net`` is the
``network`` section (a ``NetworkConfig`` or its dict): ``type`` (mlp | gru |
rnn | cnn), ``hidden_sizes``, ``gru_size`` / ``rnn_size`` (the recurrent
state's width, :data:`RECURRENT_WIDTH`), ``image_shape``, ``conv_strides``,
``activation``, ``critic``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


#: The recurrent network types and the setting that holds each one's state
#: width: ``gru`` (``flax.linen.GRUCell``) and ``rnn`` (a vanilla Elman
#: cell, ``flax.linen.SimpleCell``: ``tanh``).
RECURRENT_WIDTH = {"gru": "gru_size", "rnn": "rnn_size"}


def _get(net: Any, name: str, default: Any = None) -> Any:
    if isinstance(net, Mapping):
        return net.get(name, default)
    return getattr(net, name, default)


def activation(net: Any):
    """The activation function of ``net``."""
    return {"tanh": jnp.tanh, "relu": jax.nn.relu}[_get(net, "activation", "tanh")]


def dense(p: Mapping[str, jax.Array], name: str, x: jax.Array) -> jax.Array:
    """``x @ kernel + bias`` of layer ``name`` (``flax.linen.Dense``)."""
    return jnp.dot(x, p[f"{name}/kernel"]) + p[f"{name}/bias"]


def gru_cell(p: Mapping[str, jax.Array], h: jax.Array, x: jax.Array,
             prefix: str = "gru/cell") -> jax.Array:
    """One step of ``flax.linen.GRUCell`` (its parameter names): the new state."""
    r = jax.nn.sigmoid(dense(p, f"{prefix}/ir", x) + jnp.dot(h, p[f"{prefix}/hr/kernel"]))
    z = jax.nn.sigmoid(dense(p, f"{prefix}/iz", x) + jnp.dot(h, p[f"{prefix}/hz/kernel"]))
    n = jnp.tanh(dense(p, f"{prefix}/in", x) + r * dense(p, f"{prefix}/hn", h))
    return (1.0 - z) * n + z * h


def simple_cell(p: Mapping[str, jax.Array], h: jax.Array, x: jax.Array,
                prefix: str = "rnn/cell") -> jax.Array:
    """One step of ``flax.linen.SimpleCell`` (its parameter names, ``tanh``,
    no residual): ``tanh(x @ i/kernel + i/bias + h @ h/kernel)``, the new
    state f32[B, H] from ``h`` f32[B, H] and ``x`` f32[B, E]."""
    return jnp.tanh(dense(p, f"{prefix}/i", x) + jnp.dot(h, p[f"{prefix}/h/kernel"]))


def hidden_width(net: Any) -> int:
    """Width ``H`` of the carried recurrent state: ``gru_size`` (gru),
    ``rnn_size`` (rnn), else 1 (carried through, unused)."""
    setting = RECURRENT_WIDTH.get(_get(net, "type", "mlp"))
    return int(_get(net, setting)) if setting else 1


def image_channels_rows_columns(net: Any) -> tuple[int, int, int]:
    """``(channels, rows, columns)`` of the ``cnn`` network's image."""
    shape = tuple(int(v) for v in _get(net, "image_shape"))
    channels, rows, columns = shape if len(shape) == 3 else (1,) + shape
    return channels, rows, columns


def conv_torso(p: Mapping[str, jax.Array], net: Any, x: jax.Array) -> jax.Array:
    """The ``cnn`` network's shared conv layers (``flax.linen.Conv``, 'SAME'
    padding): f32[..., D] whose first ``C * R * K`` entries are an image
    ``[C, R, K]`` -> f32[..., F], the flattened last feature map then the
    other inputs."""
    channels, rows, cols = image_channels_rows_columns(net)
    size = channels * rows * cols
    act = activation(net)
    lead = x.shape[:-1]
    image = jnp.reshape(x[..., :size], (-1, channels, rows, cols)).transpose(0, 2, 3, 1)
    for i, stride in enumerate(_get(net, "conv_strides")):
        image = jax.lax.conv_general_dilated(
            image, p[f"torso/conv_{i}/kernel"], (stride, stride), "SAME",
            dimension_numbers=("NHWC", "HWIO", "NHWC"))
        image = act(image + p[f"torso/conv_{i}/bias"])
    return jnp.concatenate([jnp.reshape(image, lead + (-1,)), x[..., size:]], axis=-1)


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


def actor_critic(net: Any, p: Mapping[str, jax.Array], hidden: jax.Array, x: jax.Array,
                 starts: jax.Array, *, action_dim: int, discrete: bool, num_agents: int = 1,
                 value_only: bool = False, with_value: bool = True):
    """The network over a time-major sequence.

    Args:
        net: the network settings (module docstring).
        p: the flat parameters.
        hidden: f32[B, H], the recurrent state before ``x[0]`` (passed
            through by the feed-forward networks).
        x: f32[T, B, D] inputs; ``starts`` bool[T, B]: the first observation
            of an episode (the recurrent state is zeroed there, before
            the cell reads it).
        action_dim, discrete: the action head; ``num_agents``: agents per env
            (rows ``B = envs x agents``, for the centralised critic);
            ``value_only``: no actor head (zero logits); ``with_value``
            False: no critic (the value is None; one agent's exported policy
            cannot compute a centralised critic, which reads every agent).

    Returns:
        ``(hidden' f32[B, H], (logits or mean f32[T, B, A], log_std or
        None), value f32[T, B])``.
    """
    act = activation(net)
    kind = _get(net, "type", "mlp")
    sizes = tuple(_get(net, "hidden_sizes"))
    if kind in RECURRENT_WIDTH:
        emb = act(dense(p, "embed", x))
        cell = gru_cell if kind == "gru" else simple_cell

        def step(h, inputs):
            e, start = inputs
            h = cell(p, jnp.where(start[:, None], jnp.zeros_like(h), h), e)
            return h, h

        hidden, feats = jax.lax.scan(step, hidden, (emb, starts))
        heads = sizes[1:]
    elif kind == "cnn":
        feats, heads = conv_torso(p, net, x), sizes
    else:
        feats, heads = x, sizes
    value: jax.Array | None
    if value_only:
        c = feats
        for i in range(len(heads)):
            c = act(dense(p, f"critic_{i}", c))
        value = dense(p, "critic_out", c)[..., 0]
        return hidden, (jnp.zeros(value.shape + (action_dim,), jnp.float32), None), value
    a = feats
    for i in range(len(heads)):
        a = act(dense(p, f"actor_{i}", a))
    value = None
    if with_value:
        c = joint_features(feats, num_agents) if _get(net, "critic") == "centralised" else feats
        for i in range(len(heads)):
            c = act(dense(p, f"critic_{i}", c))
        value = dense(p, "critic_out", c)[..., 0]
    out = dense(p, "actor_out", a)
    if discrete:
        return hidden, (out, None), value
    return hidden, (out, jnp.broadcast_to(p["log_std"], out.shape)), value


__all__ = ["RECURRENT_WIDTH", "activation", "actor_critic", "conv_torso", "dense", "gru_cell",
           "hidden_width", "image_channels_rows_columns", "joint_features", "simple_cell"]
