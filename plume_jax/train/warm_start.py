"""Starting a training run from a trained policy (``run.init_from``), the
building block of a curriculum: train stage 1, then stage 2 on another env
from stage 1's policy (a sweep member from the stage-1 member of its name).

The network's parameters carry over, and normalised observations' statistics
(:meth:`Algorithm.warm_start`); the optimiser, the learning-rate schedule,
the envs and the PRNG key start fresh. The policy must be the same network on
the same spaces (:func:`check_compatible`), or a ``ValidationError`` names
what differs before anything trains; :func:`check_init_from` makes these
checks without training (``train``, ``sweep`` and ``tune`` before any folder
is written). A resumed run continues from its own checkpoint and does not
read ``run.init_from`` again.
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
#: What a spec field an earlier version's export lacks stands for.
_SPEC_DEFAULTS = {"num_agents": 1}
#: Network settings that apply only to some network types.
_ONLY_FOR_TYPE = {"gru_size": ("gru",), "rnn_size": ("rnn",), "image_shape": ("cnn",),
                  "conv_features": ("cnn",), "conv_kernels": ("cnn",), "conv_strides": ("cnn",)}
#: Bytes allowed in ``policy.npz`` beyond the new network's arrays in float64.
_NPZ_SLACK_BYTES = 1 << 20


def _comparable(spec: dict[str, Any], key: str) -> Any:
    """``spec[key]`` as compared: a missing field at :data:`_SPEC_DEFAULTS`;
    the network settings with those an earlier export lacks at their
    defaults, without those that do not apply to its type
    (:data:`_ONLY_FOR_TYPE`; ``log_eps`` without ``obs_transform: log``) and
    ``log_std_init``."""
    value = spec.get(key, _SPEC_DEFAULTS.get(key))
    if key != "network" or not isinstance(value, dict):
        return value
    defaults = {f.name: f.default for f in dataclasses.fields(NetworkConfig)}
    net = {**json.loads(json.dumps(defaults)), **value}  # tuples as lists, as policy.json
    for name, types in _ONLY_FOR_TYPE.items():
        if net.get("type") not in types:
            net.pop(name, None)
    if net.get("obs_transform") != "log":
        net.pop("log_eps", None)
    net.pop("log_std_init", None)
    return net


def policy_folder(source: str, member: str = "") -> pathlib.Path:
    """The policy folder ``run.init_from: source`` names for the sweep
    member ``member`` (``""``: a single run): ``source`` itself, its
    ``policy/`` or its ``members/<member>/policy``; else ``ValidationError``."""
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
    """The arrays of the policy in ``folder`` (read by
    :func:`agents.trained.load_policy_files`, at most the new network's
    arrays in float64 plus :data:`_NPZ_SLACK_BYTES`), checked by
    :func:`check_compatible` against ``(new_spec, new_arrays)``."""
    from agents.trained import MAX_POLICY_NPZ_BYTES, load_policy_files

    wanted = 8 * sum(int(np.prod(np.shape(a), dtype=np.int64)) for a in new_arrays.values())
    spec, arrays = load_policy_files(folder, SETTING, max_bytes=min(
        wanted + _NPZ_SLACK_BYTES, MAX_POLICY_NPZ_BYTES))
    check_compatible(folder, spec, arrays, new_spec, new_arrays)
    return arrays


def check_compatible(folder: pathlib.Path, spec: dict[str, Any], arrays: dict[str, np.ndarray],
                     new_spec: dict[str, Any], new_arrays: dict[str, Any]) -> None:
    """``ValidationError`` unless the policy ``(spec, arrays)`` read from
    ``folder`` has the new run's (``Algorithm.policy`` of its fresh runner)
    :data:`_SAME` fields (as :func:`_comparable` gives them; ``algorithm``
    only where the spec records it) and array names and shapes."""
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
    ``config`` (``member``: its name in a sweep); nothing compiles.
    ``ValidationError`` (``run.init_from``) if the algorithm cannot start
    from a policy, or the policy is missing, unreadable or incompatible.
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
    """:func:`check_member` for a ``TrainConfig``, building its env and
    algorithm first."""
    if config.run.get("init_from") is None:
        return None
    from plume_jax.train.algorithms.base import algorithm_class

    env, env_params = config.make_env()
    algo = algorithm_class(config.algo["algorithm"]).build(config, env, env_params)
    return check_member(algo, config, env_params, member)


def start_notes(p: Any) -> list[str]:
    """One note per member of program ``p`` (a fresh start) whose
    ``run.init_from`` is set, naming the policy folder."""
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
    """Program ``p``'s fresh runner with every member whose
    ``run.init_from`` is set started from its policy
    (:meth:`Algorithm.warm_start` of one member's unbatched runner)."""
    def start(one: Any, source: str, member: str) -> Any:
        return p.algo.warm_start(one, read_checked(policy_folder(source, member),
                                                   *p.algo.policy(one)))

    sources = [m.config.run.get("init_from") for m in p.runs]
    if not any(sources):
        return runner
    if not p.batched:
        return start(runner, sources[0], p.runs[0].name)
    for j, (m, source) in enumerate(zip(p.runs, sources)):
        if source:
            one = start(p.runner_of(runner, j), source, m.name)
            runner = jax.tree.map(lambda all_, x, j=j: all_.at[j].set(x), runner, one)
    return runner
