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
trains.

A run that resumes (``--resume``) continues from its own checkpoint and
does not read ``run.init_from`` again.
"""

from __future__ import annotations

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


def check_source(algo: Any, source: str, member: str = "") -> None:
    """``ValidationError`` now, before any folder is written, unless
    ``algo`` can start from a policy and ``source`` names one for
    ``member`` (:func:`policy_folder`)."""
    if not algo.can_warm_start():
        raise cannot_continue(algo.name, source)
    policy_folder(source, member)


def policy_folder(source: str, member: str = "") -> pathlib.Path:
    """The policy folder ``run.init_from: source`` names for the sweep
    member ``member`` (``""``: a single run); ``ValidationError`` saying
    what was looked for otherwise."""
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


def read_policy(folder: pathlib.Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(spec, arrays)`` of the exported policy in ``folder``."""
    try:
        spec = json.loads((folder / "policy.json").read_text())
        with np.load(folder / "policy.npz") as data:
            arrays = {name: np.asarray(data[name]) for name in data.files}
    except (OSError, ValueError) as err:
        raise ValidationError.for_parameter(
            SETTING, str(folder), f"a readable exported policy ({err})") from err
    return spec, arrays


def check_compatible(folder: pathlib.Path, spec: dict[str, Any], arrays: dict[str, np.ndarray],
                     new_spec: dict[str, Any], new_arrays: dict[str, Any]) -> None:
    """``ValidationError`` unless the policy ``(spec, arrays)`` read from
    ``folder`` is the same network, on the same spaces, as the new run's
    ``(new_spec, new_arrays)`` (``Algorithm.policy`` of its fresh runner)."""
    new_spec = json.loads(json.dumps(new_spec))  # as policy.json holds it (tuples as lists)
    for key in _SAME:
        if spec.get(key) != new_spec.get(key):
            ours, theirs = new_spec.get(key), spec.get(key)
            if isinstance(ours, dict) and isinstance(theirs, dict):
                keys = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
                ours = {k: ours.get(k) for k in keys}
                theirs = {k: theirs.get(k) for k in keys}
            raise ValidationError.for_parameter(
                SETTING, str(folder), f"a policy with this run's {key} ({ours}); it has {theirs}")
    shapes = {name: tuple(np.shape(a)) for name, a in arrays.items()}
    wanted = {name: tuple(np.shape(a)) for name, a in new_arrays.items()}
    if shapes != wanted:
        missing = sorted(set(wanted) - set(shapes))
        extra = sorted(set(shapes) - set(wanted))
        wrong = sorted(n for n in set(shapes) & set(wanted) if shapes[n] != wanted[n])
        raise ValidationError.for_parameter(
            SETTING, str(folder), "a policy whose arrays are this network's "
            f"(missing {missing}, unexpected {extra}, other shapes "
            f"{[(n, shapes[n], wanted[n]) for n in wrong]})")


def warm_start_member(algo: Any, runner: Any, source: str, member: str = "") -> Any:
    """``runner`` (one member's, unbatched) with the policy ``run.init_from:
    source`` names for ``member`` loaded into it (:meth:`Algorithm.warm_start`)."""
    folder = policy_folder(source, member)
    spec, arrays = read_policy(folder)
    new_spec, new_arrays = algo.policy(runner)
    check_compatible(folder, spec, arrays, new_spec, new_arrays)
    return algo.warm_start(runner, arrays)


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
