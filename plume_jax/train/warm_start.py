"""Starting a training run from a trained policy (``run.init_from``), the
building block of a curriculum: train stage 1, then train stage 2 on
another env from stage 1's policy (layer 5).

``run.init_from`` names an exported policy (``policy.json`` +
``policy.npz``, as ``plume-jax train`` writes them) by one of:

- the policy folder itself (``runs/stage1/policy``, a zoo entry's
  ``configs/zoo/NAME/V/policy`` or ``seeds/S/policy``);
- a run folder (``runs/stage1``: its ``policy/``);
- a sweep folder (``runs/seeds_stage1``): each member of the sweep that
  starts from it takes the policy of the stage-1 member of the same name
  (``members/<name>/policy``), so a seed sweep of stage 2 continues a seed
  sweep of stage 1 seed by seed (the two grids must name their members
  alike).

What is carried over: the network's parameters (actor, critic and, for a
Gaussian policy, its log standard deviation), and, when observations are
normalised, the observation statistics' mean and variance, weighted as one
update's worth of observations (``num_envs x num_steps`` per agent row)
so that they follow the new env within a few updates. The optimiser state,
the learning-rate schedule (it restarts over the new run's
``total_steps``), the env batch and the PRNG key start fresh, as in a new
run. The policy must be the same network on the same spaces: the network
settings, observation and action sizes, action bounds, the normalisation
and every array's name and shape are checked against the new config's, and
a mismatch is a ``ValidationError`` naming what differs, before anything
trains. Network settings that do not apply to the network's type (an MLP's
``rnn_size`` or ``gru_size``, a non-CNN's ``conv_*`` and ``image_shape``,
``log_eps`` without the ``log`` transform) are not compared, nor is
``log_std_init`` (the log standard deviation carries over); a setting
that a policy exported by an earlier version lacks is read at its default.
The policy folder is read by the one reader of policy folders,
:func:`agents.trained.load_policy_files`, with its checks (finite real
floating-point weights, ``obs_var >= 0``, bounded ``policy.json`` and
``policy.npz``), and ``policy.npz`` may unpack to no more than the new
network's arrays would take in float64 (plus 1 MiB).

:func:`check_init_from` checks a config's ``run.init_from`` this way
without training anything (building the env and the algorithm, tracing
``init`` abstractly): the check ``plume-jax train``, ``sweep`` and
``tune`` make before any folder is written.

A run that resumes (``--resume``) continues from its own checkpoint and
does not read ``run.init_from`` again.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

import jax
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms.base import cannot_continue

SETTING = "run.init_from"
#: The spec fields two policies must share for one to start the other's training.
_SAME = ("algorithm", "network", "discrete", "action_dim", "action_low", "action_high",
         "obs_dim", "normalize_obs", "num_agents")
#: What a spec field that a policy exported by an earlier version lacks
#: stands for (``algorithm``: not recorded then, not compared).
_SPEC_DEFAULTS = {"num_agents": 1}
#: Network settings that apply only to some network types.
_ONLY_FOR_TYPE = {"gru_size": ("gru",), "rnn_size": ("rnn",), "image_shape": ("cnn",),
                  "conv_features": ("cnn",), "conv_kernels": ("cnn",), "conv_strides": ("cnn",)}
#: Bytes allowed in ``policy.npz`` beyond the new network's arrays in float64.
_NPZ_SLACK_BYTES = 1 << 20


def _network_defaults() -> dict[str, Any]:
    from plume_jax.train.algorithms.networks import NetworkConfig

    net = {f.name: f.default for f in dataclasses.fields(NetworkConfig)}
    return json.loads(json.dumps(net))  # as policy.json holds it (tuples as lists)


def applicable_network(network: Any) -> Any:
    """The network settings of a policy spec that make its network what it
    is: settings missing from an earlier version's export filled in at
    their defaults, then those that do not apply to its type dropped
    (:data:`_ONLY_FOR_TYPE`; ``log_eps`` without ``obs_transform: log``)
    and ``log_std_init`` (the trained log standard deviation replaces it).
    ``network`` as it is when it is not a mapping."""
    if not isinstance(network, dict):
        return network
    net = {**_network_defaults(), **network}
    kind = net.get("type")
    for key, types in _ONLY_FOR_TYPE.items():
        if kind not in types:
            net.pop(key, None)
    if net.get("obs_transform") != "log":
        net.pop("log_eps", None)
    net.pop("log_std_init", None)
    return net


def _comparable(spec: dict[str, Any], key: str) -> Any:
    value = spec.get(key, _SPEC_DEFAULTS.get(key))
    return applicable_network(value) if key == "network" else value


def policy_folder(source: str, member: str = "") -> pathlib.Path:
    """The policy folder ``run.init_from: source`` names for the sweep
    member ``member`` (``""``: a single run); ``ValidationError`` saying
    what was looked for otherwise."""
    if not isinstance(source, str) or not source.strip():
        raise ValidationError.for_parameter(SETTING, source, "a path (not empty) or null")
    root = pathlib.Path(source).expanduser()
    candidates = [root, root / "policy"]
    if member:
        candidates.insert(0, root / "members" / member / "policy")
    for folder in candidates:
        if (folder / "policy.json").is_file() and (folder / "policy.npz").is_file():
            return folder
    if (root / "members").is_dir() and not member:
        raise ValidationError.for_parameter(
            SETTING, source, "a policy or run folder for a single run; this is a sweep's "
            "folder: name one member's folder (members/<name>)")
    looked = ", ".join(str(c) for c in candidates)
    raise ValidationError.for_parameter(
        SETTING, source, "a policy folder (policy.json and policy.npz), a run folder with "
        f"policy/, or a sweep folder with members/<name>/policy; looked in {looked}")


def read_policy(folder: pathlib.Path, max_bytes: int | None = None
                ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(spec, arrays)`` of the exported policy in ``folder``, read and
    checked by :func:`agents.trained.load_policy_files` (errors name
    ``run.init_from``); ``max_bytes``: the most array data ``policy.npz``
    may unpack to (``None``: that reader's bound)."""
    from agents.trained import MAX_POLICY_NPZ_BYTES, load_policy_files

    bound = MAX_POLICY_NPZ_BYTES if max_bytes is None else min(max_bytes, MAX_POLICY_NPZ_BYTES)
    return load_policy_files(folder, SETTING, max_bytes=bound)


def npz_bound(new_arrays: dict[str, Any]) -> int:
    """Bytes ``policy.npz`` may unpack to for a network whose arrays are
    ``new_arrays``: each value in float64 (the widest weight the reader
    takes), plus :data:`_NPZ_SLACK_BYTES`."""
    return 8 * sum(int(np.prod(np.shape(a), dtype=np.int64)) for a in new_arrays.values()) \
        + _NPZ_SLACK_BYTES


def check_compatible(folder: pathlib.Path, spec: dict[str, Any], arrays: dict[str, np.ndarray],
                     new_spec: dict[str, Any], new_arrays: dict[str, Any]) -> None:
    """``ValidationError`` unless the policy ``(spec, arrays)`` read from
    ``folder`` is the same network, on the same spaces, as the new run's
    ``(new_spec, new_arrays)`` (``Algorithm.policy`` of its fresh runner).
    Network settings are compared as :func:`applicable_network` gives them;
    a policy whose spec does not record its ``algorithm`` (an earlier
    version's export) is compared on everything else."""
    new_spec = json.loads(json.dumps(new_spec))  # as policy.json holds it (tuples as lists)
    for key in _SAME:
        if key == "algorithm" and "algorithm" not in spec:
            continue
        theirs, ours = _comparable(spec, key), _comparable(new_spec, key)
        if theirs != ours:
            if isinstance(ours, dict) and isinstance(theirs, dict):
                keys = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
                ours = {k: ours.get(k) for k in keys}
                theirs = {k: theirs.get(k) for k in keys}
            raise ValidationError.for_parameter(
                SETTING, str(folder), f"a policy with this run's {key} ({str(ours)[:300]}); "
                f"it has {str(theirs)[:300]}")
    shapes = {name: tuple(np.shape(a)) for name, a in arrays.items()}
    wanted = {name: tuple(np.shape(a)) for name, a in new_arrays.items()}
    if shapes != wanted:
        missing = sorted(set(wanted) - set(shapes))
        extra = sorted(set(shapes) - set(wanted))
        wrong = sorted(n for n in set(shapes) & set(wanted) if shapes[n] != wanted[n])
        raise ValidationError.for_parameter(
            SETTING, str(folder), "a policy whose arrays are this network's "
            f"(missing {missing[:10]}, unexpected {[n[:100] for n in extra[:10]]}, other "
            f"shapes {[(n, shapes[n], wanted[n]) for n in wrong[:10]]})")


def expected_policy(algo: Any, config: Any, env_params: Any) -> tuple[dict[str, Any],
                                                                      dict[str, np.ndarray]]:
    """``(spec, arrays)`` that ``algo.policy`` gives for a fresh runner of
    ``config`` (one member, unbatched), with every array zero: ``init`` is
    traced abstractly (``jax.eval_shape``), nothing runs or compiles."""
    from plume_jax.core.seeding import seed_key

    hp = algo.hparams(config, env_params)
    shapes = jax.eval_shape(lambda: algo.init(seed_key(0), hp, env_params))
    runner = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes)
    return algo.policy(runner)


def check_member(algo: Any, config: Any, env_params: Any, member: str = "") -> pathlib.Path | None:
    """The policy folder a member's ``run.init_from`` names (``None``: not
    set), once read and checked against the network ``algo`` builds for
    ``config`` (``member``: its name in a sweep, ``""`` for a single run).

    Raises:
        ValidationError: (parameter ``run.init_from``) the algorithm cannot
            start from a policy; no policy folder there; a policy the
            reader refuses; or one of another network or spaces.
    """
    source = config.run.get("init_from")
    if source is None:
        return None
    if not algo.can_warm_start():
        raise cannot_continue(algo.name, source)
    folder = policy_folder(source, member)
    new_spec, new_arrays = expected_policy(algo, config, env_params)
    spec, arrays = read_policy(folder, npz_bound(new_arrays))
    check_compatible(folder, spec, arrays, new_spec, new_arrays)
    return folder


def check_init_from(config: Any, member: str = "") -> pathlib.Path | None:
    """Check a training config's ``run.init_from`` without training: the
    policy folder it names (``None``: not set), after building the
    config's env and algorithm and checking the policy as
    :func:`check_member` does (what ``plume-jax train`` checks before any
    folder is written). ``config``: a :class:`~plume_jax.train.config.TrainConfig`;
    ``member``: its name in a sweep (``members/<name>/policy`` of a sweep
    folder), ``""`` for a single run.

    Raises:
        ValidationError: as :func:`check_member`, or the config's env or
            algorithm cannot be built.
    """
    if config.run.get("init_from") is None:
        return None
    from plume_jax.train.algorithms.base import algorithm_class

    env, env_params = config.make_env()
    algo = algorithm_class(config.algo["algorithm"]).build(config, env, env_params)
    return check_member(algo, config, env_params, member)


def warm_start_member(algo: Any, runner: Any, source: str, member: str = "") -> Any:
    """``runner`` (one member's, unbatched) with the policy ``run.init_from:
    source`` names for ``member`` loaded into it (:meth:`Algorithm.warm_start`)."""
    folder = policy_folder(source, member)
    new_spec, new_arrays = algo.policy(runner)
    spec, arrays = read_policy(folder, npz_bound(new_arrays))
    check_compatible(folder, spec, arrays, new_spec, new_arrays)
    return algo.warm_start(runner, arrays)


def start_notes(p: Any) -> list[str]:
    """What the members of program ``p`` (a fresh start, not a resume)
    start from: one line per member whose ``run.init_from`` is set, naming
    the policy folder (for the console and the run's summary)."""
    notes = []
    for m in p.runs:
        source = m.config.run.get("init_from")
        if source:
            who = f"{m.name}: " if p.batched and m.name else ""
            carried = ("network weights and observation statistics"
                       if m.config.algo.get("normalize_obs") else "network weights")
            notes.append(f"{who}started from the policy in {policy_folder(source, m.name)} "
                         f"(run.init_from: {carried}; the optimiser, the learning-rate "
                         "schedule and the envs start fresh)")
    return notes


def warm_start_program(p: Any, runner: Any) -> Any:
    """The fresh runner of program ``p`` (a :class:`~plume_jax.train.driver.Program`)
    with every member whose ``run.init_from`` is set started from its policy."""
    sources = [m.config.run.get("init_from") for m in p.runs]
    if not any(sources):
        return runner
    if not p.batched:
        return warm_start_member(p.algo, runner, sources[0], p.runs[0].name)
    for j, (m, source) in enumerate(zip(p.runs, sources)):
        if source:
            one = warm_start_member(p.algo, p.runner_of(runner, j), source, m.name)
            runner = jax.tree.map(lambda all_, x, j=j: all_.at[j].set(x), runner, one)
    return runner
