"""Starting a training run from a trained policy (``run.init_from``), the
building block of a curriculum: train stage 1, then stage 2 on another env
from stage 1's policy.

``run.init_from`` names an exported policy (``policy.json`` + ``policy.npz``)
by its policy folder, a run folder (its ``policy/``) or a sweep folder: there
each member takes the policy of the stage-1 member of the same name
(``members/<name>/policy``), so a seed sweep continues a seed sweep seed by
seed.

The network's parameters carry over, and normalised observations' mean and
variance, weighted as one update's worth of observations so that they follow
the new env within a few updates (:meth:`Algorithm.warm_start`); the
optimiser, the learning-rate schedule, the envs and the PRNG key start fresh.
The policy must be the same network on the same spaces (:data:`_SAME`, every
array's name and shape; network settings that do not apply to its type, and
``log_std_init``, are not compared; a setting an earlier export lacks is read
at its default): a mismatch is a ``ValidationError`` naming what differs,
before anything trains. The policy is read by
:func:`agents.trained.load_policy_files`, with its checks, and ``policy.npz``
may unpack to at most the new network's arrays in float64 plus 1 MiB.
:func:`check_init_from` makes these checks without training (what ``train``,
``sweep`` and ``tune`` check before any folder is written). A resumed run
continues from its own checkpoint and does not read ``run.init_from`` again.
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
from plume_jax.train.algorithms.networks import NetworkConfig

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


def applicable_network(network: Any) -> Any:
    """The network settings of a policy spec that make its network what it
    is: those an earlier export lacks filled in at their defaults, those that
    do not apply to its type (:data:`_ONLY_FOR_TYPE`; ``log_eps`` without
    ``obs_transform: log``) and ``log_std_init`` dropped; not a mapping: as
    it is."""
    if not isinstance(network, dict):
        return network
    defaults = {f.name: f.default for f in dataclasses.fields(NetworkConfig)}
    net = {**json.loads(json.dumps(defaults)), **network}  # tuples as lists, as policy.json
    for key, types in _ONLY_FOR_TYPE.items():
        if net.get("type") not in types:
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


def read_checked(folder: pathlib.Path, new_spec: dict[str, Any], new_arrays: dict[str, Any]
                 ) -> dict[str, np.ndarray]:
    """The arrays of the policy in ``folder``, read by
    :func:`agents.trained.load_policy_files` (errors name ``run.init_from``;
    at most the new network's arrays in float64 plus :data:`_NPZ_SLACK_BYTES`)
    and checked by :func:`check_compatible` against ``(new_spec, new_arrays)``."""
    from agents.trained import MAX_POLICY_NPZ_BYTES, load_policy_files

    wanted = 8 * sum(int(np.prod(np.shape(a), dtype=np.int64)) for a in new_arrays.values())
    spec, arrays = load_policy_files(folder, SETTING, max_bytes=min(
        wanted + _NPZ_SLACK_BYTES, MAX_POLICY_NPZ_BYTES))
    check_compatible(folder, spec, arrays, new_spec, new_arrays)
    return arrays


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


def check_member(algo: Any, config: Any, env_params: Any, member: str = "") -> pathlib.Path | None:
    """The policy folder a member's ``run.init_from`` names (``None``: not
    set), read and checked against the network ``algo`` builds for
    ``config`` (``member``: its name in a sweep, ``""`` for a single run):
    ``init`` is traced abstractly (``jax.eval_shape``), nothing compiles.

    Raises:
        ValidationError: (parameter ``run.init_from``) the algorithm cannot
            start from a policy; no policy folder there; a policy the
            reader refuses; or one of another network or spaces.
    """
    from plume_jax.core.seeding import seed_key

    source = config.run.get("init_from")
    if source is None:
        return None
    if not algo.can_warm_start():
        raise cannot_continue(algo.name, source)
    folder = policy_folder(source, member)
    hp = algo.hparams(config, env_params)
    shapes = jax.eval_shape(lambda: algo.init(seed_key(0), hp, env_params))
    read_checked(folder, *algo.policy(jax.tree.map(lambda s: np.zeros(s.shape, s.dtype),
                                                   shapes)))
    return folder


def check_init_from(config: Any, member: str = "") -> pathlib.Path | None:
    """:func:`check_member` for a :class:`~plume_jax.train.config.TrainConfig`,
    building its env and algorithm first (``ValidationError`` also when they
    cannot be built)."""
    if config.run.get("init_from") is None:
        return None
    from plume_jax.train.algorithms.base import algorithm_class

    env, env_params = config.make_env()
    algo = algorithm_class(config.algo["algorithm"]).build(config, env, env_params)
    return check_member(algo, config, env_params, member)


def warm_start_member(algo: Any, runner: Any, source: str, member: str = "") -> Any:
    """``runner`` (one member's, unbatched) with the policy ``run.init_from:
    source`` names for ``member`` loaded into it (:meth:`Algorithm.warm_start`)."""
    return algo.warm_start(runner, read_checked(policy_folder(source, member),
                                                *algo.policy(runner)))


def start_notes(p: Any) -> list[str]:
    """What the members of program ``p`` (a fresh start, not a resume)
    start from: one line per member whose ``run.init_from`` is set, naming
    the policy folder (for the console and the run's summary)."""
    notes = []
    for m in p.runs:
        source = m.config.run.get("init_from")
        if source:
            who = f"{m.name}: " if p.batched and m.name else ""
            notes.append(f"{who}started from the policy in {policy_folder(source, m.name)} "
                         "(run.init_from: its network weights and any observation statistics; "
                         "the optimiser, the learning-rate schedule and the envs start fresh)")
    return notes


def warm_start_program(p: Any, runner: Any) -> Any:
    """The fresh runner of program ``p`` (a :class:`~plume_jax.train.loop.Program`)
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
