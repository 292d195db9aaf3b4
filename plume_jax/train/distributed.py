"""The devices and processes of one run or sweep: the device mesh, and
``jax.distributed`` for several processes (``plume-jax train`` and ``sweep``).

A single run shards its env batch along the mesh axis ``"envs"`` (the
:data:`BATCH_FIELDS` leaves; XLA inserts the collectives, so sharded and
unsharded training agree to float tolerance); a sweep shards its members along
``"members"``. Several processes form one JAX system (:func:`join`, by
:func:`requested_launch`'s rule; docs/training.md, "Several processes") whose
mesh spans all their devices; process 0 writes the outputs, and a resume reads
the checkpoint on every process, so the run folder must be on a shared disk.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.train.config import DISTRIBUTED_MODES
from plume_jax.train.members import Shared, is_shared

_JAX_VARIABLES = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
_SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID",
                    "SLURM_LOCALID")


@dataclasses.dataclass(frozen=True)
class Launch:
    """How this process joins a multi-process JAX system: ``source`` (what
    asked for it: ``"SLURM"``, ...), process 0's ``coordinator``
    ``HOST:PORT``, ``num_processes``, ``process_id`` (None: JAX detects it).
    Counts JAX would misread (``True``, ``"2"``, negative) are refused."""

    source: str
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None

    def __post_init__(self) -> None:
        for name, value, low in (("num_processes", self.num_processes, 1),
                                 ("process_id", self.process_id, 0)):
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, numbers.Integral) or value < low):
                raise ValidationError.for_parameter(
                    name, value, f"an integer >= {low}, or None (detected)")
        if self.num_processes is not None and self.process_id is not None \
                and self.process_id >= self.num_processes:
            raise ValidationError.for_parameter(
                "process_id", self.process_id, f"an integer in [0, {self.num_processes})")


def _count(parameter: str, value: Any, low: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(value, bool) or number < low or str(number) != str(
            value).strip():
        raise ValidationError.for_parameter(parameter, value, f"an integer >= {low}")
    return number


def _explicit(source: str, names: tuple[str, str, str], coordinator: Any, num_processes: Any,
              process_id: Any) -> Launch:
    values = (coordinator, num_processes, process_id)
    missing = [name for name, value in zip(names, values) if value is None]
    if missing:
        given = ", ".join(n for n, v in zip(names, values) if v is not None)
        raise ValidationError.for_parameter(
            missing[0], None, f"set together with {given}: a multi-process run needs "
            f"{', '.join(names)}")
    if not isinstance(coordinator, str) or not coordinator.rpartition(":")[0] \
            or not coordinator.rpartition(":")[2].isdigit():
        raise ValidationError.for_parameter(names[0], coordinator,
                                            "HOST:PORT of process 0 (e.g. 10.0.0.1:12345)")
    count = _count(names[1], num_processes, 1)
    index = _count(names[2], process_id, 0)
    if index >= count:
        raise ValidationError.for_parameter(names[2], process_id,
                                            f"an integer in [0, {count}) ({names[1]}={count})")
    return Launch(source, coordinator, count, index)


def requested_launch(mode: str, *, coordinator: str | None = None,
                     num_processes: int | None = None, process_id: int | None = None,
                     environ: Mapping[str, str] | None = None) -> Launch | None:
    """The multi-process system this process should join, or None (a single
    process): the three flags, always; for ``mode`` ``"auto"`` the
    ``JAX_*`` variables, a SLURM job step of more than one task or a
    multi-host Cloud TPU VM; ``"cluster"``: JAX's own detection; ``"off"``:
    never. Pure (``environ`` defaults to ``os.environ``). ``ValidationError``
    for an unknown ``mode``, flags given in part or with ``"off"``, or
    malformed values.
    """
    environ = os.environ if environ is None else environ
    if mode not in DISTRIBUTED_MODES:
        raise ValidationError.for_parameter("run.distributed", mode,
                                            f"one of {list(DISTRIBUTED_MODES)}")
    flags = (coordinator, num_processes, process_id)
    if any(v is not None for v in flags):
        if mode == "off":
            raise ValidationError.for_parameter(
                "run.distributed", mode, "'auto' or 'cluster' when --coordinator, "
                "--num-processes or --process-id is given")
        return _explicit("command line", ("--coordinator", "--num-processes", "--process-id"),
                         *flags)
    if mode == "off":
        return None
    if mode == "cluster":
        return Launch("run.distributed: cluster")
    if any(name in environ for name in _JAX_VARIABLES):
        return _explicit("JAX_* variables", _JAX_VARIABLES,
                         *(environ.get(name) for name in _JAX_VARIABLES))
    if all(name in environ for name in _SLURM_VARIABLES) \
            and _count("SLURM_NTASKS", environ["SLURM_NTASKS"], 1) > 1:
        return Launch("SLURM")
    hosts = [h for h in environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
    if len(hosts) > 1:
        return Launch("Cloud TPU")
    return None


def initialize(launch: Launch | None, *, discard_import_backends: bool = False) -> bool:
    """Join the system ``launch`` describes (``jax.distributed.initialize``
    with gloo CPU collectives; nothing for None or when already joined);
    returns whether the process is one of several. ``discard_import_backends``:
    first clear the backends that importing ``plume_jax`` started (arrays
    made before are unusable after). ``StateError`` if JAX has already run a
    computation here; ``ValidationError`` (``run.distributed``) if JAX could
    not tell the missing settings.
    """
    if launch is not None and not jax.distributed.is_initialized():
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        if discard_import_backends:
            from jax._src import xla_bridge
            from jax.extend.backend import clear_backends

            if xla_bridge.backends_are_initialized():
                clear_backends()
        try:
            jax.distributed.initialize(coordinator_address=launch.coordinator,
                                       num_processes=launch.num_processes,
                                       process_id=launch.process_id)
        except RuntimeError as error:
            raise StateError(f"jax.distributed.initialize (asked for by {launch.source}) must "
                             f"run before any other JAX computation in the process: {error}"
                             ) from None
        except ValueError as error:
            raise ValidationError.for_parameter(
                "run.distributed", launch.source, "a launcher JAX can read the coordinator, "
                f"process count and process id from, or the --coordinator, --num-processes and "
                f"--process-id flags ({error})") from None
    return jax.distributed.is_initialized() and jax.process_count() > 1


def join(mode: str = "auto", *, coordinator: str | None = None,
         num_processes: int | None = None, process_id: int | None = None) -> bool:
    """Join the multi-process system :func:`requested_launch` names, if any:
    every process of a script calls it first, before any JAX computation
    (docs/training.md, "Several processes"); returns whether it is one of
    several."""
    return initialize(requested_launch(mode, coordinator=coordinator,
                                       num_processes=num_processes, process_id=process_id),
                      discard_import_backends=True)


def check_joined(mode: str) -> None:
    """``StateError`` if ``mode`` (``run.distributed``) and the launcher's
    environment ask for several processes but this process is alone: it
    would train the whole run by itself, beside the others."""
    launch = requested_launch(mode)
    if launch is not None and jax.process_count() == 1:
        raise StateError(
            f"{launch.source} asks for a run of several processes (run.distributed: {mode}) but "
            "this process has joined none: call plume_jax.train.distributed.join() at the "
            "start of the script, before any JAX computation, use plume-jax train, or set "
            "run.distributed=off")


def is_main_process() -> bool:
    """True in process 0 (the one that writes outputs and shows progress)."""
    return jax.process_index() == 0


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def host_copy(tree: Any) -> Any:
    """``tree`` with every array as a NumPy array of its global value (typed
    PRNG keys stay keys); with several processes a collective every process
    calls with the same tree."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    leaves, treedef = jax.tree.flatten(tree)
    keys = [_is_key(x) for x in leaves]
    data = [jax.random.key_data(x) if k else x for x, k in zip(leaves, keys)]
    gathered = multihost_utils.process_allgather(data, tiled=True)
    out = [jax.random.wrap_key_data(jnp.asarray(x)) if k else np.asarray(x)
           for x, k in zip(gathered, keys)]
    return jax.tree.unflatten(treedef, out)


def agree(value: int | bool) -> int:
    """Process 0's ``value`` in every process: a host-side decision that
    changes which program calls run must be the same everywhere."""
    if jax.process_count() == 1:
        return int(value)
    from jax.experimental import multihost_utils

    return int(multihost_utils.broadcast_one_to_all(np.asarray(int(value), np.int32)))


def barrier(name: str) -> None:
    """Wait until every process reaches the barrier ``name``."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


# ------------------------------------------------------------------ devices
def resolve_devices(requested: Any, batch: int, what: str) -> int:
    """How many devices to use: ``requested`` (an int), or for ``"auto"`` the
    most local devices that divide ``batch``; with several processes all
    ``jax.device_count()`` devices (``requested`` "auto" or that count)."""
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


def mesh(num_devices: int, axis: str) -> Mesh:
    """A 1-D mesh over the first ``num_devices`` of every process's devices."""
    return Mesh(np.asarray(jax.devices()[:num_devices]), (axis,))


def constrain_batch(tree: Any, m: Mesh, axis: str) -> Any:
    """``with_sharding_constraint`` splitting the leading axis of every array
    leaf of ``tree`` along ``axis`` (inside jit)."""
    split = NamedSharding(m, P(axis))
    return jax.tree.map(
        lambda x: jax.lax.with_sharding_constraint(x, split) if np.ndim(x) >= 1 else x, tree)


#: The runner fields (PPO's ``Runner`` and ``RewardScalingRunner``) with a
#: leading env (or env x agent row) axis.
BATCH_FIELDS = ("env_state", "obs", "hidden", "prev_action", "prev_obs", "start", "ep_return",
                "ep_length", "arrived", "discounted_return")


def put(x: Any, sharding: NamedSharding) -> Any:
    """``jax.device_put(x, sharding)``, also for typed PRNG keys on a mesh
    of several processes (placed as their key data)."""
    if _is_key(x):
        return jax.random.wrap_key_data(jax.device_put(jax.random.key_data(x), sharding))
    return jax.device_put(x, sharding)


def shard_runner(runner: Any, m: Mesh, axis: str) -> Any:
    """Place a runner on the mesh: its :data:`BATCH_FIELDS` leaves split
    along ``axis``, everything else replicated."""
    split, rep = NamedSharding(m, P(axis)), NamedSharding(m, P())
    return runner.replace(**{
        name: jax.tree.map(lambda x: put(x, split if name in BATCH_FIELDS and np.ndim(x) >= 1
                                         else rep), getattr(runner, name))
        for name in runner.keys()})


def shard_members(tree: Any, m: Mesh, axis: str) -> Any:
    """Place every leaf (leading member axis) split along ``axis``; a
    :class:`~plume_jax.train.members.Shared` leaf replicated."""
    split, rep = NamedSharding(m, P(axis)), NamedSharding(m, P())
    return jax.tree.map(lambda x: Shared(put(x.value, rep)) if is_shared(x) else put(x, split),
                        tree, is_leaf=is_shared)
