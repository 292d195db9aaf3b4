"""Checkpoints (save / resume a whole training run) and policy export.

A checkpoint is a folder::

    runner.msgpack   every leaf of the Runner (network, optimiser state,
                     observation statistics, env batch, recurrent states,
                     PRNG key, update counter), flax msgpack serialisation
    meta.json        the resolved training config, the update count, the
                     runner's tree structure (checked on load)

Resuming restores the exact runner, so a run resumed from a checkpoint
continues bit-for-bit like an uninterrupted one on the same machine.

An exported policy is a folder readable without flax (``agents.trained``)::

    policy.npz       network parameters, flattened with '/'-joined names,
                     plus ``obs_mean`` / ``obs_var`` when observations are
                     normalised
    policy.json      what the forward pass needs: network settings, action
                     space, observation transform, and the env it was
                     trained on
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization, traverse_util

from plume_jax.errors import ValidationError

CHECKPOINT_FORMAT = "plume_jax.checkpoint/1"
POLICY_FORMAT = "plume_jax.trained_policy/1"


def _atomic_write(path: pathlib.Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def _leaf_to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(jax.device_get(x))


def save_checkpoint(directory: str | pathlib.Path, runner: Any, meta: dict[str, Any]) -> pathlib.Path:
    """Write ``runner`` (any pytree) and ``meta`` (JSON) to ``directory``."""
    directory = pathlib.Path(directory)
    leaves, treedef = jax.tree.flatten(runner)
    state = {"leaves": {str(i): _leaf_to_numpy(x) for i, x in enumerate(leaves)}}
    _atomic_write(directory / "runner.msgpack", serialization.msgpack_serialize(state))
    meta = {"format": CHECKPOINT_FORMAT, **meta, "treedef": str(treedef),
            "num_leaves": len(leaves)}
    _atomic_write(directory / "meta.json", json.dumps(meta, indent=2).encode())
    return directory


def read_meta(directory: str | pathlib.Path) -> dict[str, Any]:
    path = pathlib.Path(directory) / "meta.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValidationError.for_parameter("checkpoint", str(directory),
                                            f"a checkpoint folder with meta.json ({exc})") from None
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise ValidationError.for_parameter("checkpoint", str(directory),
                                            f"a {CHECKPOINT_FORMAT} checkpoint")
    return meta


def load_checkpoint(directory: str | pathlib.Path, template: Any) -> tuple[Any, dict[str, Any]]:
    """Restore a runner saved by :func:`save_checkpoint`.

    ``template``: a runner (or ``jax.eval_shape`` of one) with the same
    structure, shapes and dtypes. Raises ``ValidationError`` if the
    checkpoint does not match it (another network, env or batch size).
    """
    directory = pathlib.Path(directory)
    meta = read_meta(directory)
    leaves, treedef = jax.tree.flatten(template)
    if meta.get("num_leaves") != len(leaves) or meta.get("treedef") != str(treedef):
        raise ValidationError.for_parameter(
            "checkpoint", str(directory),
            "a checkpoint of the same network, env and batch sizes as this config")
    state = serialization.msgpack_restore((directory / "runner.msgpack").read_bytes())
    restored = []
    for i, t in enumerate(leaves):
        value = np.asarray(state["leaves"][str(i)])
        if jnp.issubdtype(t.dtype, jax.dtypes.prng_key):
            restored.append(jax.random.wrap_key_data(value))
            continue
        if value.shape != tuple(t.shape) or value.dtype != np.dtype(t.dtype):
            raise ValidationError.for_parameter(
                "checkpoint", str(directory),
                f"leaf {i} of shape {tuple(t.shape)} {np.dtype(t.dtype)} "
                f"(found {value.shape} {value.dtype})")
        restored.append(jnp.asarray(value))
    return jax.tree.unflatten(treedef, restored), meta


# ------------------------------------------------------------------- export
def policy_arrays(params: Any, obs_stats: Any | None) -> dict[str, np.ndarray]:
    """Flat ``name -> array`` of a network's parameters (and observation
    statistics). Works on a leading sweep axis too."""
    flat = traverse_util.flatten_dict(jax.device_get(params["params"]), sep="/")
    arrays = {name: np.asarray(v) for name, v in flat.items()}
    if obs_stats is not None:
        arrays["obs_mean"] = np.asarray(obs_stats.mean)
        arrays["obs_var"] = np.asarray(obs_stats.var)
    return arrays


def policy_spec(algo: Any, env_settings: dict[str, Any] | None = None,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON spec of the policy trained by ``algo`` (a ``PPO``)."""
    import dataclasses

    net = dataclasses.asdict(algo.static.network)
    net["hidden_sizes"] = list(net["hidden_sizes"])
    return {
        "format": POLICY_FORMAT,
        "network": net,
        "discrete": algo.discrete,
        "action_dim": algo.action_dim,
        "action_low": None if algo.discrete else [float(v) for v in algo.action_low],
        "action_high": None if algo.discrete else [float(v) for v in algo.action_high],
        "obs_dim": algo.obs_dim,
        "normalize_obs": algo.static.normalize_obs,
        "num_agents": algo.num_agents,  # agents per env in training (one agent's network)
        "env": env_settings or {},
        **(extra or {}),
    }


def export_policy(directory: str | pathlib.Path, algo: Any, runner: Any,
                  env_settings: dict[str, Any] | None = None,
                  extra: dict[str, Any] | None = None) -> pathlib.Path:
    """Write ``policy.npz`` and ``policy.json`` for ``agents.trained``."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = policy_arrays(runner.params,
                           runner.obs_stats if algo.static.normalize_obs else None)
    with tempfile.NamedTemporaryFile(dir=directory, suffix=".npz", delete=False) as f:
        np.savez(f, **arrays)
    os.replace(f.name, directory / "policy.npz")
    spec = policy_spec(algo, env_settings, extra)
    _atomic_write(directory / "policy.json", json.dumps(spec, indent=2).encode())
    return directory
