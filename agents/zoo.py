"""The zoo: trained agents shipped with plume_jax, loaded by name.

An entry is a folder ``configs/zoo/<name>/<version>/`` (of the checkout, else of
the copy an installed wheel carries: :func:`plume_jax.files.shipped.shipped_path`;
or of the folder ``$PLUME_JAX_ZOO`` names) holding

- ``config.yaml``: the training config that produced it
  (``plume-jax train --config configs/zoo/<name>/<version>/config.yaml``);
- ``policy/``: the exported policy (``policy.json``, ``policy.npz``) that
  :mod:`agents.trained` runs;
- ``entry.yaml``: what it is and what it cost — ``description``, the
  ``preset`` it was trained on, the training ``seed``, ``training``
  (``device``, ``wall_seconds``, ``env_steps``, ``finished_at``), the
  greedy ``evaluation`` of the run's own summary, optionally
  ``env_overrides`` (only ``sensor``: a policy that reads the preset's
  readings through another sensor, e.g. a belief) and ``reproducibility``
  (how the config was checked to reproduce the entry);
- optionally ``seeds/<seed>/``: the recipe over seeds — the same config
  trained with ``run.seed`` ``<seed>`` as one member of a seed sweep, its
  exported ``policy/`` and ``seed.yaml`` (the member's greedy evaluation
  and the sweep it came from). ``<seed>`` is a non-negative integer in
  ASCII digits without leading zeros (``0``, ``7``).

``<version>`` is a positive integer written in ASCII digits without
leading zeros (``1``, ``12``; a folder named ``01``, ``²`` or ``١`` is not a
version and is skipped); a re-trained entry is a new version
and the old one stays. A reference is ``zoo:<name>`` (the newest version),
``zoo:<name>@<version>``, or ``zoo:<name>@<version>#<seed>`` (one seed's
policy of that version's recipe; the version is spelt out, so the seed
cannot silently move to a newer version's). A folder holding only ``config.yaml`` (a
config not trained yet) is not an entry.

Where a reference works:

- ``agents.make_agent("zoo:filament-gru", env)`` and ``plume-jax evaluate
  --agent zoo:filament-gru`` (a functional :class:`~agents.trained.TrainedPolicy`,
  checked against the env; ``greedy`` is its one parameter);
- :func:`load_agent` for a Gymnasium env or one agent of the PettingZoo env
  (a stateful :class:`~agents.trained.TrainedAgent`).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from typing import Any

from plume_jax.core.errors import ValidationError
from plume_jax.files.shipped import describe_root, shipped_path

#: What starts a zoo reference.
ZOO_PREFIX = "zoo:"
#: The shipped zoo: the checkout's ``configs/zoo``, else the installed wheel's
#: copy (``plume_jax/data/configs/zoo``); :mod:`plume_jax.files.shipped` decides.
ZOO_ROOT = shipped_path("zoo")
#: The environment variable that points at another zoo folder (e.g. a zoo of
#: one's own, laid out as ``configs/zoo``).
ZOO_ENV = "PLUME_JAX_ZOO"


def zoo_root(root: str | os.PathLike | None = None) -> pathlib.Path:
    """The zoo folder: ``root`` when given, else ``$PLUME_JAX_ZOO`` when set,
    else :data:`ZOO_ROOT`."""
    if root is not None:
        return pathlib.Path(root)
    return pathlib.Path(os.environ[ZOO_ENV]) if os.environ.get(ZOO_ENV) else ZOO_ROOT
#: An entry name: lower-case letters, digits and ``-`` (matched whole,
#: with ``fullmatch``: ``$`` would also take a name ending in a newline).
ENTRY_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
#: A version folder's name: a positive integer in ASCII digits, no leading
#: zero (``str.isdigit`` also takes ``²`` and ``١``, which ``int`` refuses or
#: reads as another version's number).
VERSION_NAME = re.compile(r"[1-9][0-9]*")
#: A seed folder's name (``seeds/<seed>``): a non-negative integer in ASCII
#: digits, no leading zero.
SEED_NAME = re.compile(r"0|[1-9][0-9]*")
#: The folder of an entry's per-seed policies.
SEEDS_FOLDER = "seeds"
#: What describes one seed's policy (``seeds/<seed>/seed.yaml``).
SEED_FILE = "seed.yaml"
_REFERENCE = ("zoo:<name>, zoo:<name>@<version> or zoo:<name>@<version>#<seed> (version a "
              "positive integer, seed a non-negative integer, both without leading zeros)")


@dataclasses.dataclass(frozen=True)
class ZooEntry:
    """One trained version of a zoo agent.

    Attributes:
        name: the entry's name, e.g. ``"filament-gru"``.
        version: its version (a positive integer; higher is newer).
        folder: ``configs/zoo/<name>/<version>``.
        info: the contents of ``entry.yaml`` (description, preset, seed,
            training cost, evaluation).
        member_seed: ``None`` for the entry's own (headline) policy; a seed
            for that seed's policy of the recipe (``seeds/<seed>/``).
        member_info: the contents of that seed's ``seed.yaml`` (``{}`` for
            the headline policy).
    """

    name: str
    version: int
    folder: pathlib.Path
    info: dict[str, Any]
    member_seed: int | None = None
    member_info: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def reference(self) -> str:
        """``zoo:<name>@<version>``, or ``zoo:<name>@<version>#<seed>`` for
        one seed's policy."""
        seed = "" if self.member_seed is None else f"#{self.member_seed}"
        return f"{ZOO_PREFIX}{self.name}@{self.version}{seed}"

    @property
    def policy_path(self) -> pathlib.Path:
        """The headline ``policy/``, or ``seeds/<seed>/policy`` of a seed."""
        if self.member_seed is None:
            return self.folder / "policy"
        return self.folder / SEEDS_FOLDER / str(self.member_seed) / "policy"

    @property
    def seeds(self) -> list[int]:
        """The seeds whose policy the entry keeps (``seeds/<seed>/`` with
        ``policy/`` and ``seed.yaml``), ascending; ``[]`` for none."""
        return _seeds(self.folder)

    def seed_member(self, seed: int) -> "ZooEntry":
        """This version's policy of training seed ``seed``.

        Raises:
            ValidationError: (parameter ``agent``) a seed the entry does not
                keep, or an unreadable ``seed.yaml``.
        """
        kept = self.seeds
        if seed not in kept:
            base = f"{ZOO_PREFIX}{self.name}@{self.version}"
            allowed = (f"one of {[f'{base}#{k}' for k in kept]}" if kept else
                       f"no seed: {base} keeps no per-seed policies (only its own, {base})")
            raise ValidationError.for_parameter(
                "agent", f"{base}#{seed}", f"a seed kept under {self.folder / SEEDS_FOLDER}: "
                f"{allowed}")
        from plume_jax.files.safe_io import load_yaml_file

        path = self.folder / SEEDS_FOLDER / str(seed) / SEED_FILE
        info = load_yaml_file(path, "zoo seed")
        if not isinstance(info, dict):
            raise ValidationError.for_parameter(
                "zoo seed", str(path), "a YAML mapping (seed, evaluation, sweep)")
        return dataclasses.replace(self, member_seed=seed, member_info=info)

    @property
    def config_path(self) -> pathlib.Path:
        return self.folder / "config.yaml"

    @property
    def preset(self) -> str:
        """The preset the policy was trained on."""
        return str(self.info.get("preset", ""))

    @property
    def env_overrides(self) -> dict[str, Any]:
        """Settings the policy needs on top of its preset — only ``sensor``
        (e.g. a belief over the source built from the preset's own hits),
        so the task stays the preset's: ``plume_jax.make(entry.preset,
        **entry.env_overrides)``; ``{}`` for most entries."""
        return dict(self.info.get("env_overrides") or {})


def missing_zoo(root: pathlib.Path) -> str:
    """Why there is no zoo at ``root`` and where one comes from (when
    ``$PLUME_JAX_ZOO`` named it, that variable is what to fix)."""
    named = os.environ.get(ZOO_ENV)
    if named and pathlib.Path(named) == pathlib.Path(root):
        return (f"the zoo folder {root} named by {ZOO_ENV} does not exist: point {ZOO_ENV} at "
                f"a copy of configs/zoo, or unset it to use the shipped one ({ZOO_ROOT})")
    if pathlib.Path(root) == ZOO_ROOT:
        return (f"the shipped zoo folder {root} does not exist ({describe_root()} has no zoo/: "
                f"reinstall plume-jax, or set {ZOO_ENV} to a copy of configs/zoo)")
    return f"the zoo folder {root} does not exist"


def is_zoo_reference(name: Any) -> bool:
    """Whether ``name`` is meant as a zoo reference (starts with ``zoo:``)."""
    return isinstance(name, str) and name.startswith(ZOO_PREFIX)


def _children(folder: pathlib.Path) -> list[pathlib.Path]:
    """The folder's entries; none when it is not a readable folder (one
    unreadable folder of the zoo must not break every other agent)."""
    try:
        return list(folder.iterdir()) if folder.is_dir() else []
    except OSError:
        return []


def _versions(folder: pathlib.Path) -> list[int]:
    """The trained versions under ``configs/zoo/<name>``: folders named by
    :data:`VERSION_NAME` with ``entry.yaml`` and ``policy/``, ascending;
    other folders (``01``, ``²``, ``tmp``) are skipped."""
    found = []
    for child in _children(folder):
        try:
            trained = (child / "entry.yaml").is_file() and (child / "policy").is_dir()
        except OSError:
            trained = False
        if VERSION_NAME.fullmatch(child.name) and trained:
            found.append(int(child.name))
    return sorted(found)


def _seeds(folder: pathlib.Path) -> list[int]:
    """The kept seeds under ``<entry>/seeds``: folders named by
    :data:`SEED_NAME` with ``policy/`` and ``seed.yaml``, ascending."""
    found = []
    for child in _children(folder / SEEDS_FOLDER):
        try:
            kept = (child / SEED_FILE).is_file() and (child / "policy").is_dir()
        except OSError:
            kept = False
        if SEED_NAME.fullmatch(child.name) and kept:
            found.append(int(child.name))
    return sorted(found)


def _names(root: pathlib.Path) -> list[str]:
    """The entry names that have at least one trained version."""
    return sorted(child.name for child in _children(root)
                  if ENTRY_NAME.fullmatch(child.name) and _versions(child))


def _load(root: pathlib.Path, name: str, version: int) -> ZooEntry:
    from plume_jax.files.safe_io import load_yaml_file

    folder = root / name / str(version)
    info = load_yaml_file(folder / "entry.yaml", "zoo entry")
    if not isinstance(info, dict):
        raise ValidationError.for_parameter(
            "zoo entry", str(folder / "entry.yaml"), "a YAML mapping (description, preset, seed, "
            "training, evaluation)")
    extra = info.get("env_overrides") or {}
    if not isinstance(extra, dict) or set(extra) - {"sensor"}:
        raise ValidationError.for_parameter(
            "zoo entry", str(folder / "entry.yaml"), "env_overrides with the key sensor only "
            f"(the task must stay the preset's), not {extra!r:.200}")
    return ZooEntry(name=name, version=version, folder=folder, info=info)


def entries(root: str | os.PathLike | None = None, *, latest_only: bool = False
            ) -> list[ZooEntry]:
    """Every trained entry (every version, or only the newest of each name),
    sorted by name then version."""
    root = zoo_root(root)
    out = []
    for name in _names(root):
        versions = _versions(root / name)
        for version in versions[-1:] if latest_only else versions:
            out.append(_load(root, name, version))
    return out


def references(root: str | pathlib.Path | None = None) -> list[str]:
    """Every accepted reference: ``zoo:<name>`` and ``zoo:<name>@<version>``
    for each trained entry."""
    root = zoo_root(root)
    refs = []
    for name in _names(root):
        refs.append(f"{ZOO_PREFIX}{name}")
        refs += [f"{ZOO_PREFIX}{name}@{v}" for v in _versions(root / name)]
    return refs


def resolve(reference: str, root: str | pathlib.Path | None = None) -> ZooEntry:
    """The entry a reference names (``zoo:<name>``: its newest version).

    ``zoo:<name>@<version>#<seed>``: that version's policy of training seed
    ``<seed>`` (:meth:`ZooEntry.seed_member`).

    Raises:
        ValidationError: (parameter ``agent``) not a zoo reference, an
            unknown name (with the closest known ones), a version that is not
            a positive integer or not trained, a seed without its version, a
            seed that is not a non-negative integer or not kept, or an
            unreadable ``entry.yaml`` / ``seed.yaml``.
    """
    root = zoo_root(root)
    known = _names(root)
    if not is_zoo_reference(reference):
        raise ValidationError.for_parameter("agent", reference, _REFERENCE)
    body, hash_, seed_text = reference[len(ZOO_PREFIX):].partition("#")
    name, at, version_text = body.partition("@")
    if not root.is_dir():
        raise ValidationError.for_parameter("agent", reference,
                                            f"a zoo entry, but {missing_zoo(root)}")
    if name not in known:
        from plume_jax.settings.schema import did_you_mean

        refs = [ZOO_PREFIX + n for n in known]
        raise ValidationError.for_parameter(
            "agent", reference, f"{_REFERENCE} naming a trained zoo entry"
            f"{did_you_mean(ZOO_PREFIX + name, refs)}: one of {refs} (configs/zoo/)")
    versions = _versions(root / name)
    if hash_ and not at:
        raise ValidationError.for_parameter(
            "agent", reference, f"zoo:<name>@<version>#<seed> (a seed names one training run "
            f"of one version: spell the version, e.g. {ZOO_PREFIX}{name}@{versions[-1]}#"
            f"{seed_text or 0})")
    if not at:
        return _load(root, name, versions[-1])
    if not VERSION_NAME.fullmatch(version_text) or int(version_text) not in versions:
        raise ValidationError.for_parameter(
            "agent", reference, f"a trained version of zoo entry {name!r}: one of "
            f"{[f'{ZOO_PREFIX}{name}@{v}' for v in versions]}")
    entry = _load(root, name, int(version_text))
    if not hash_:
        return entry
    if not SEED_NAME.fullmatch(seed_text):
        raise ValidationError.for_parameter(
            "agent", reference, f"zoo:<name>@<version>#<seed>, the seed a non-negative integer "
            f"in ASCII digits without leading zeros: "
            f"{[f'{entry.reference}#{k}' for k in entry.seeds] or 'none is kept'}")
    return entry.seed_member(int(seed_text))


def policy_factory(reference: str, root: str | pathlib.Path | None = None) -> Any:
    """An agent factory ``factory(env, greedy=True)`` for the registry
    (:func:`agents.registry.make_agent`): the entry's policy, checked against
    ``env`` (:meth:`agents.trained.TrainedPolicy.for_env`).

    Raises:
        ValidationError: from :func:`resolve`.
    """
    entry = resolve(reference, root)

    def zoo_policy(env: Any, greedy: bool = True) -> Any:
        from agents.trained import TrainedPolicy

        return TrainedPolicy.for_env(env, entry.policy_path, greedy=greedy)

    return zoo_policy


def _functional_env(env: Any) -> Any:
    """The functional env under a Gymnasium env (also through ``gym.make``'s
    wrappers) or a PettingZoo env; a functional env as it is."""
    unwrapped = getattr(env, "unwrapped", env)
    return getattr(unwrapped, "env", None) if hasattr(unwrapped, "step") and hasattr(
        unwrapped, "env") else env


def load_agent(reference: str, env: Any = None, *, greedy: bool = True, seed: int = 0,
               root: str | pathlib.Path | None = None) -> Any:
    """A stateful agent (``act(obs)``, ``reset()``) of a zoo entry, for a
    Gymnasium env or one agent of a PettingZoo env.

    Args:
        reference: ``zoo:<name>``, ``zoo:<name>@<version>`` or
            ``zoo:<name>@<version>#<seed>``.
        env: optional; a functional env, a ``PlumeGymEnv`` (also wrapped by
            ``gymnasium.make``) or a ``PlumeParallelEnv``: the policy is
            checked against it before it acts.
        greedy: argmax / mean actions (``False`` samples).
        seed: the agent's key stream (sampled actions only).

    Raises:
        ValidationError: from :func:`resolve`, or an env the policy was not
            trained for.
    """
    from agents.trained import TrainedAgent, TrainedPolicy

    entry = resolve(reference, root)
    if env is None:
        policy = TrainedPolicy.load(entry.policy_path, greedy=greedy)
    else:
        policy = TrainedPolicy.for_env(_functional_env(env), entry.policy_path, greedy=greedy)
    return TrainedAgent(policy, seed=seed)
