"""The look-ahead policy of a value network on the belief (layer 4): the
decision of Loisy & Eloy's searcher, shared by training
(:mod:`plume_jax.train.algorithms.value_iteration`, which imports it) and the exported
policy (``agents.trained`` runs it for ``policy: belief_lookahead`` specs),
so both run the same code.

From a ``belief`` sensor observation (centred posterior f32[R, K], then the
grid channel, then optional summaries), each move ``m`` is scored
``1 + Σ_h P(h | b, m) V(b'_{m,h})`` — the expected number of steps to the
source after it (the found branch costs the step only) — with ``V`` a ReLU
network averaged over the symmetries of the square; the move of least score
is taken (first in move order on ties).

The network (:func:`network_values`) is a dict of arrays: optional
convolution layers ``conv_i/kernel`` f32[k, k, C_in, C_out] (HWIO; the
first reads the belief image as one channel) and ``conv_i/bias``
f32[C_out], each ``'SAME'``-padded with its stride (``conv_strides``, not
an array: it fixes shapes) and ReLU, then the flattened features (row,
column, channel order) through dense ReLU layers ``dense_i/*`` and one
linear output ``out/*``. Without ``conv_*`` arrays it is the MLP on the
flattened belief.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from plume_jax.plumes.poisson_posterior import predict_readings


def _hidden_layers(arrays: dict) -> int:
    n = 0
    while f"dense_{n}/kernel" in arrays:
        n += 1
    return n


def conv_layers(arrays: dict) -> int:
    """The number of convolution layers (``conv_i/kernel`` arrays) of a network."""
    n = 0
    while f"conv_{n}/kernel" in arrays:
        n += 1
    return n


def conv_features(arrays: dict, x: jax.Array, image_shape: tuple[int, int],
                  conv_strides: tuple[int, ...]) -> jax.Array:
    """f32[N, F]: the flattened output of the convolution layers on flattened
    centred beliefs ``x`` f32[N, R*K] (``image_shape`` ``(R, K)``)."""
    n_conv = conv_layers(arrays)
    if len(conv_strides) != n_conv:
        raise ValueError(f"conv_strides {tuple(conv_strides)} must give one stride per "
                         f"convolution layer of the network ({n_conv})")
    rows, cols = (int(v) for v in image_shape)
    h = x.reshape(x.shape[0], rows, cols, 1)
    for i, stride in enumerate(conv_strides):
        h = jax.lax.conv_general_dilated(
            h, arrays[f"conv_{i}/kernel"], (int(stride), int(stride)), "SAME",
            dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jax.nn.relu(h + arrays[f"conv_{i}/bias"])
    return h.reshape(h.shape[0], -1)


def network_values(arrays: dict, x: jax.Array, image_shape: tuple[int, int] | None = None,
                   conv_strides: tuple[int, ...] = ()) -> jax.Array:
    """f32[N]: ``V_θ`` of flattened centred beliefs ``x`` f32[N, R*K].

    ``image_shape`` ``(R, K)`` and ``conv_strides`` (one int per layer) are
    needed by a network with convolution layers (module docstring) and
    ignored by an MLP."""
    if conv_layers(arrays):
        if image_shape is None:
            raise ValueError("a network with convolution layers needs the belief's "
                             "image_shape (rows, columns)")
        x = conv_features(arrays, x, image_shape, conv_strides)
    for i in range(_hidden_layers(arrays)):
        x = jax.nn.relu(x @ arrays[f"dense_{i}/kernel"] + arrays[f"dense_{i}/bias"])
    return (x @ arrays["out/kernel"] + arrays["out/bias"])[..., 0]


def belief_values(arrays: dict, images: jax.Array, perm: jax.Array | None,
                  image_shape: tuple[int, int] | None = None,
                  conv_strides: tuple[int, ...] = ()) -> jax.Array:
    """f32[N]: the value of beliefs ``images`` f32[N, R*K]; averaged over
    the symmetries ``perm`` i32[S, R*K] (``image[perm[s]]`` is the image
    under symmetry ``s``) unless ``perm`` is None (``image_shape``,
    ``conv_strides``: :func:`network_values`)."""
    if perm is None:
        return network_values(arrays, images, image_shape, conv_strides)
    n, s = images.shape[0], perm.shape[0]
    v = network_values(arrays, images[:, perm].reshape(n * s, -1), image_shape,
                       conv_strides).reshape(n, s)
    return jnp.mean(v, axis=1)


def valid_moves(grid: jax.Array, deltas: jax.Array) -> jax.Array:
    """bool[M]: which moves stay on the grid, from the centred grid image f32[R, K]."""
    rows, cols = grid.shape
    return grid[(rows - 1) // 2 + deltas[:, 1], (cols - 1) // 2 + deltas[:, 0]] > 0.5


def move_values(arrays: dict, likelihood: jax.Array, deltas: jax.Array, belief: jax.Array,
                valid: jax.Array, perm: jax.Array | None, conv_strides: tuple[int, ...] = ()
                ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The one-step look-ahead from a centred belief f32[R, K].

    A move off the grid (``valid`` False) leaves the agent in place (delta 0).
    ``conv_strides``: those of the network's convolution layers, if any.

    Returns ``(q f32[M], mass f32[M, h_max], posteriors f32[M, h_max, R, K])``:
    ``q[m] = 1 + Σ_h mass[m, h] V(posteriors[m, h])`` (the found branch costs
    the step and nothing after), ``mass[m, h]`` the probability of not finding
    the source and reading ``h``.
    """
    eff = jnp.where(valid[:, None], deltas, 0)
    mass, post = jax.vmap(lambda d: predict_readings(belief, likelihood, d))(eff)
    m, h = mass.shape
    rows, cols = belief.shape
    v = belief_values(arrays, post.reshape(m * h, -1), perm, (rows, cols),
                      conv_strides).reshape(m, h)
    return 1.0 + jnp.sum(mass * v, axis=-1), mass, post


# --------------------------------------------------------------------------- exported policy

def policy_scores(arrays: dict, obs: jax.Array, conv_strides: tuple[int, ...] = ()
                  ) -> jax.Array:
    """f32[M]: the expected number of steps to the source after each move
    (``1 + Σ_h P(h | b, move) V(b')``, ``V`` averaged over the symmetries in
    ``arrays["symmetry_perm"]``), from a ``belief`` sensor observation f32[D]
    (centred, full window, grid channel; summaries after the images ignored).

    ``arrays`` (:func:`plume_jax.train.algorithms.value_iteration.export_arrays`): the network (``conv_i/*`` with
    their strides ``conv_strides``, ``dense_i/*``, ``out/*``),
    ``likelihood`` f32[h_max, R, K], ``move_deltas`` i32[M, 2],
    ``move_ids`` i32[M], ``symmetry_perm`` i32[S, R*K]."""
    lik = jnp.asarray(arrays["likelihood"])
    rows, cols = lik.shape[1:]
    size = rows * cols
    obs = jnp.asarray(obs, jnp.float32).reshape(-1)
    belief, grid = obs[:size].reshape(rows, cols), obs[size:2 * size].reshape(rows, cols)
    deltas = jnp.asarray(arrays["move_deltas"], jnp.int32)
    q, _, _ = move_values(arrays, lik, deltas, belief, valid_moves(grid, deltas),
                          jnp.asarray(arrays["symmetry_perm"], jnp.int32), conv_strides)
    return q


def act(arrays: dict, obs: jax.Array, conv_strides: tuple[int, ...] = ()) -> jax.Array:
    """i32[]: the env action id of the move with the lowest :func:`policy_scores`."""
    return jnp.asarray(arrays["move_ids"], jnp.int32)[
        jnp.argmin(policy_scores(arrays, obs, conv_strides))]


def spec_conv_strides(spec: dict) -> tuple[int, ...]:
    """The convolution strides an exported policy's ``policy.json`` records
    (``network.conv_strides`` of a ``cnn``; ``()`` for an MLP)."""
    net = spec.get("network", {})
    if net.get("type", "mlp") != "cnn":
        return ()
    return tuple(int(v) for v in net["conv_strides"])


__all__ = ["act", "belief_values", "conv_features", "conv_layers", "move_values",
           "network_values", "policy_scores", "spec_conv_strides", "valid_moves"]
