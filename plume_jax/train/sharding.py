"""Multi-device training with ``jax.sharding`` (a ``Mesh`` and
``NamedSharding``s; the compiler partitions the program).

- A single run shards the *env batch*: every leaf of the runner with a
  leading ``num_envs`` axis (env states, observations, recurrent states,
  episode counters) is split along the mesh axis ``"envs"``; network
  parameters and optimiser state are replicated. Each device steps its
  slice of the envs; the minibatch gathers and gradient reductions become
  cross-device collectives that XLA inserts. The program's meaning does not
  change, so sharded and unsharded training agree to float tolerance
  (reduction order differs).
- A sweep shards its *members* along the axis ``"members"``: each device
  trains its own members and nothing is communicated, so a sweep scales
  with the number of devices.

Several processes
-----------------
The same code runs on several hosts (GPU nodes, a TPU pod, or processes on
one machine) once every process has joined one JAX system
(:mod:`plume_jax.train.distributed`, which ``plume-jax train`` does from
its flags or the launcher's environment): ``jax.devices()`` then lists the
devices of every process, :func:`resolve_devices` uses all of them, and
:func:`mesh` over ``jax.devices()`` spans the processes, so the compiled
program is SPMD across them. Every process builds the same runner from the
same seed (or reads the same checkpoint) and :func:`shard_runner` keeps only
its own shards. Host-side outputs are written by process 0 after gathering
(:func:`plume_jax.train.distributed.host_copy`).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from plume_jax.core.errors import ValidationError
from plume_jax.train.members import Shared, is_shared


def resolve_devices(requested: Any, batch: int, what: str) -> int:
    """How many devices to use: ``requested`` (an int), or for ``"auto"`` the
    largest count ``<= jax.local_device_count()`` that divides ``batch``.

    With several processes (:mod:`plume_jax.train.distributed`) every
    device of every process is used: ``requested`` must be ``"auto"`` or
    ``jax.device_count()``, and it must divide ``batch``."""
    if jax.process_count() > 1:
        total = jax.device_count()
        if requested not in ("auto", total):
            raise ValidationError.for_parameter(
                "run.devices", requested, f"'auto' or {total}: a run of {jax.process_count()} "
                f"processes uses all their {total} devices")
        if batch % total:
            raise ValidationError.for_parameter(
                what, batch, f"a multiple of the {total} devices of the {jax.process_count()} "
                "processes, so that it splits evenly")
        return total
    available = jax.local_device_count()
    if requested == "auto":
        return max(d for d in range(1, available + 1) if batch % d == 0)
    if requested > available:
        raise ValidationError.for_parameter("run.devices", requested,
                                            f"at most the {available} local device(s)")
    if batch % requested:
        raise ValidationError.for_parameter(
            "run.devices", requested, f"a divisor of the {what} ({batch}) so it splits evenly")
    return int(requested)


def mesh(num_devices: int, axis: str, devices: Any = None) -> Mesh:
    """A 1-D mesh over the first ``num_devices`` devices (default
    ``jax.devices()``, which spans every host after
    ``jax.distributed.initialize``)."""
    devices = list(jax.devices() if devices is None else devices)[:num_devices]
    return Mesh(np.asarray(devices), (axis,))


def batch_sharding(m: Mesh, axis: str) -> NamedSharding:
    """Split the leading axis along ``axis``."""
    return NamedSharding(m, P(axis))


def replicated(m: Mesh) -> NamedSharding:
    return NamedSharding(m, P())


def constrain_batch(tree: Any, m: Mesh, axis: str) -> Any:
    """``with_sharding_constraint`` splitting the leading axis of every array
    leaf of ``tree`` along ``axis`` (inside jit)."""
    sharding = batch_sharding(m, axis)
    return jax.tree.map(
        lambda x: jax.lax.with_sharding_constraint(x, sharding) if np.ndim(x) >= 1 else x, tree)


#: The fields of ``plume_jax.train.algorithms.ppo.Runner`` (and of its
#: ``RewardScalingRunner``) with a leading env (or
#: env x agent row) axis.
BATCH_FIELDS = ("env_state", "obs", "hidden", "prev_action", "prev_obs", "start", "ep_return",
                "ep_length", "arrived", "discounted_return")


def runner_shardings(runner: Any, m: Mesh, axis: str) -> Any:
    """A tree of ``NamedSharding``s matching ``runner``: env-batch leaves
    split along ``axis``, everything else replicated."""
    rep, split = replicated(m), batch_sharding(m, axis)
    fields = {}
    for name in runner.keys():
        value = getattr(runner, name)
        if name in BATCH_FIELDS:
            fields[name] = jax.tree.map(lambda x: split if np.ndim(x) >= 1 else rep, value)
        else:
            fields[name] = jax.tree.map(lambda x: rep, value)
    return runner.replace(**fields)


def put(x: Any, sharding: NamedSharding) -> Any:
    """``jax.device_put(x, sharding)``, also for typed PRNG keys on a mesh
    that spans several processes (placed as their key data). Every process
    passes the same global value and keeps its own shards."""
    if isinstance(x, jax.Array) and jax.numpy.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(jax.device_put(jax.random.key_data(x), sharding))
    return jax.device_put(x, sharding)


def shard_runner(runner: Any, m: Mesh, axis: str) -> Any:
    """Place a runner on the mesh (see :func:`runner_shardings`)."""
    return jax.tree.map(put, runner, runner_shardings(runner, m, axis))


def shard_members(tree: Any, m: Mesh, axis: str) -> Any:
    """Place every leaf (leading sweep-member axis) split along ``axis``; a
    leaf every member shares (:class:`~plume_jax.train.members.Shared`)
    replicated."""
    split, rep = batch_sharding(m, axis), replicated(m)
    return jax.tree.map(lambda x: Shared(put(x.value, rep)) if is_shared(x) else put(x, split),
                        tree, is_leaf=is_shared)
