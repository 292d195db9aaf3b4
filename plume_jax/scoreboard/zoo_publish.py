"""Put a finished training run into the zoo (:mod:`agents.zoo`); the command
``plume-jax zoo publish`` (:mod:`plume_jax.cli.zoo`) calls it.

``plume-jax zoo publish RUN NAME [--device TEXT]``
copies ``RUN/policy`` to ``configs/zoo/NAME/<version>/policy`` and writes
``entry.yaml`` beside it from the run's ``summary.json`` (preset, seed,
algorithm, training cost: device, seconds, env steps; the greedy
evaluation). A run that read its preset through another sensor (a
``belief_value_iteration`` or ``lookahead_vi`` run's ``env.overrides.sensor``,
a belief built from the preset's hits) gets ``env_overrides: {sensor: ...}``
in ``entry.yaml``, the sensor as its exported policy records it, so the
entry loads on ``plume_jax.make(preset, **env_overrides)``.

An exported policy whose run folder is gone (only ``policy.json`` and
``policy.npz``, e.g. one trained on a lent GPU) is published with the
config that trained it and its measured training facts::

    plume-jax zoo publish POLICY NAME --config CONFIG --facts FACTS

``FACTS`` is a YAML mapping: ``training`` (``device``, ``wall_seconds``,
``env_steps``, ``finished_at``, and any other measured facts, e.g.
``iterations``), optionally ``evaluation`` (``episodes``, ``seed``,
``success_rate``, ``mean_steps_to_goal``) and ``reproducibility`` (how a
re-run was checked). The policy must load on the env ``CONFIG`` builds
(:meth:`agents.trained.TrainedPolicy.for_env`).

An entry's policy ships in the repository, so it may take at most
:data:`MAX_POLICY_BYTES` unless ``--max-policy-bytes`` allows more (up to
:data:`POLICY_BYTES_CEILING`) for that one entry.

A finished seed sweep of an entry's own config (``run.seed`` the only swept
setting, e.g. ``configs/sweep_seeds_<name>.yaml``) keeps every member's
policy under the entry, loadable as ``zoo:<name>@<version>#<seed>``::

    plume-jax zoo publish SWEEP NAME@VERSION --seeds

(:func:`publish_seeds`: ``seeds/<seed>/policy`` and ``seeds/<seed>/seed.yaml``
with the member's greedy evaluation; the members' policies only, no
checkpoints, each within :data:`MAX_POLICY_BYTES`).

The version is the lowest one whose folder holds a ``config.yaml`` and no
policy yet (a config committed before it was trained), else one more than
the newest. When that folder already holds a ``config.yaml``, the run's
own resolved config must agree with it (environment, algorithm, network and
seed, on every key both know: a run made by a newer plume_jax may know more
settings, listed in ``entry.yaml`` as ``settings_not_checked``), so an
entry's config is the one that produced it; otherwise the run's
``config.yaml`` is copied there.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from typing import Any

from plume_jax.core.errors import ValidationError

#: The most bytes an entry's exported policy may take by default (zoo
#: entries ship in the repository; the PPO ones take 40-200 KB).
MAX_POLICY_BYTES = 1 << 20
#: The most ``--max-policy-bytes`` may allow (the learned Poisson searcher's
#: 3 x 512 value network takes 4.8 MB).
POLICY_BYTES_CEILING = 8 << 20
#: The training facts ``--facts`` must give (``training:``), with their types.
REQUIRED_FACTS: dict[str, type | tuple[type, ...]] = {
    "device": str, "wall_seconds": (int, float), "env_steps": int, "finished_at": str}


def _run_files(run: pathlib.Path) -> tuple[dict[str, Any], pathlib.Path]:
    """``(summary, policy folder)`` of a finished run.

    Raises:
        ValidationError: (parameter ``run``) a folder without ``summary.json``,
            ``config.yaml`` or ``policy/``.
    """
    from plume_jax.files.safe_io import load_json_file

    allowed = "a finished run folder of plume-jax train (summary.json, config.yaml, policy/)"
    for part in ("summary.json", "config.yaml", "policy/policy.json", "policy/policy.npz"):
        if not (run / part).is_file():
            raise ValidationError.for_parameter("run", str(run), f"{allowed}; {part} is missing")
    return load_json_file(run / "summary.json", "run"), run / "policy"


def config_differences(committed: dict[str, Any], ran: dict[str, Any]) -> tuple[list[str],
                                                                               list[str]]:
    """``(differing, unchecked)`` dotted keys between a committed config
    (resolved by this version) and the resolved ``config.yaml`` a run wrote
    (maybe by another version of plume_jax): the environment, algorithm,
    network and seed must agree on every key both know; keys only the run's
    version knows (settings added since) are listed as unchecked."""
    differing, unchecked = [], []
    for section in ("env", "algo", "network"):
        mine, theirs = committed.get(section) or {}, ran.get(section) or {}
        for key in sorted(set(mine) | set(theirs)):
            if key not in theirs:
                differing.append(f"{section}.{key}")
            elif key not in mine:
                unchecked.append(f"{section}.{key}")
            elif mine[key] != theirs[key] and not (
                    isinstance(mine[key], (list, tuple)) and list(mine[key]) == theirs[key]):
                differing.append(f"{section}.{key}")
    if committed["run"]["seed"] != (ran.get("run") or {}).get("seed"):
        differing.append("run.seed")
    return differing, unchecked


def differing_values(committed: dict[str, Any], ran: dict[str, Any],
                     keys: list[str]) -> str:
    """``": algo.total_steps: entry 2000000, member 16384; ..."`` for the first
    four dotted ``keys`` (:func:`config_differences`), each value quoted
    through ``bounded_repr``; ``""`` for no keys."""
    from plume_jax.core.errors import bounded_repr

    def value(config: dict[str, Any], key: str) -> str:
        section, _, name = key.partition(".")
        mapping = config.get(section) or {}
        return bounded_repr(mapping[name], 60) if name in mapping else "(not set)"

    shown = [f"{k}: entry {value(committed, k)}, member {value(ran, k)}" for k in keys[:4]]
    more = f"; and {len(keys) - 4} more" if len(keys) > 4 else ""
    return f": {'; '.join(shown)}{more}" if shown else ""


def pick_version(folder: pathlib.Path) -> int:
    """The version a new policy of the entry folder ``configs/zoo/<name>``
    gets (only folders named as versions count: ``agents.zoo.VERSION_NAME``)."""
    from agents.zoo import VERSION_NAME

    numbers = sorted(int(p.name) for p in folder.iterdir() if VERSION_NAME.fullmatch(p.name)) \
        if folder.is_dir() else []
    for number in numbers:
        if (folder / str(number) / "config.yaml").is_file() and \
                not (folder / str(number) / "policy").exists():
            return number
    return (numbers[-1] + 1) if numbers else 1


def own_sensor(config: dict[str, Any], policy: pathlib.Path) -> dict[str, Any]:
    """``entry.yaml``'s ``env_overrides``: ``{"sensor": ...}`` when the run's
    config (``config``, resolved) overrides the preset's sensor — the sensor
    as the exported policy in ``policy`` records it, every setting resolved;
    else ``{}``."""
    from plume_jax.files.safe_io import load_json_file

    overrides = (config.get("env") or {}).get("overrides") or {}
    if "sensor" not in overrides:
        return {}
    spec = load_json_file(policy / "policy.json", "run")
    sensor = (spec.get("env") or {}).get("sensor")
    if not isinstance(sensor, dict):
        raise ValidationError.for_parameter(
            "run", str(policy), "an exported policy whose policy.json records its env's sensor "
            "(env.sensor), since the run overrode the preset's sensor")
    return {"sensor": sensor}


def entry_header(name: str, version: int, description: str, preset: str,
                 config: dict[str, Any], env_overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The first keys of ``entry.yaml``, from the resolved training ``config``:
    what the entry is and how it was trained; ``env_overrides``
    (:func:`own_sensor`) when not empty."""
    return {
        "name": name, "version": version,
        "description": description,
        "preset": preset,
        "algorithm": str((config.get("algo") or {}).get("algorithm") or "ppo"),
        "network": config["network"]["type"],
        "seed": config["run"]["seed"],
        **({"env_overrides": env_overrides} if env_overrides else {}),
    }


def entry_info(name: str, version: int, summary: dict[str, Any], policy_bytes: int,
               device: str | None, description: str,
               env_overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The contents of ``entry.yaml`` for a run folder's ``summary.json``;
    ``env_overrides`` (:func:`own_sensor`) when not empty."""
    machine = summary.get("machine", {})
    return {
        **entry_header(name, version, description, summary["env"], summary["config"],
                       env_overrides),
        "training": {
            "device": device or f"{machine.get('backend', '?')} "
                                f"({', '.join(machine.get('devices', []))}; "
                                f"{machine.get('cpu_count', '?')} CPU cores)",
            "wall_seconds": round(float(summary["wall_seconds"]), 1),
            "compile_seconds": round(float(summary.get("compile_seconds", 0.0)), 1),
            "env_steps": int(summary["env_steps_total"]),
            "finished_at": summary.get("finished_at"),
            "jax": machine.get("jax"),
        },
        "evaluation": {k: summary["evaluation"][k] for k in
                       ("episodes", "seed", "success_rate", "mean_steps_to_goal")
                       if k in summary.get("evaluation", {})},
        "policy_bytes": policy_bytes,
    }


def _policy_bytes(policy: pathlib.Path, parameter: str, max_policy_bytes: int) -> int:
    """The size of the policy folder, checked against ``max_policy_bytes``.

    Raises:
        ValidationError: a limit outside ``1..POLICY_BYTES_CEILING`` (parameter
            ``--max-policy-bytes``) or a larger policy (``parameter``).
    """
    if isinstance(max_policy_bytes, bool) or not isinstance(max_policy_bytes, int) \
            or not 1 <= max_policy_bytes <= POLICY_BYTES_CEILING:
        raise ValidationError.for_parameter(
            "--max-policy-bytes", max_policy_bytes,
            f"an integer from 1 to {POLICY_BYTES_CEILING} (zoo entries ship in the repository)")
    size = sum(f.stat().st_size for f in policy.iterdir() if f.is_file())
    if size > max_policy_bytes:
        raise ValidationError.for_parameter(
            parameter, str(policy.parent if parameter == "run" else policy),
            f"a policy of at most {max_policy_bytes} bytes (zoo entries ship in the "
            f"repository; --max-policy-bytes allows up to {POLICY_BYTES_CEILING}); {policy} "
            f"holds {size}")
    return size


def _check_committed(folder: pathlib.Path, ran: dict[str, Any], parameter: str,
                     source: pathlib.Path) -> list[str]:
    """The unchecked keys of ``ran`` (a resolved config) against the version
    folder's committed ``config.yaml``, if it has one.

    Raises:
        ValidationError: (``parameter``) the two differ.
    """
    from plume_jax.train.config import load_train_config

    if not (folder / "config.yaml").is_file():
        return []
    committed = load_train_config(folder / "config.yaml").to_dict()
    differing, unchecked = config_differences(committed, ran)
    if differing:
        raise ValidationError.for_parameter(
            parameter, str(source), f"a run of {folder / 'config.yaml'} (its {differing} "
            "differ)")
    return unchecked


def _write_entry(folder: pathlib.Path, policy: pathlib.Path, info: dict[str, Any],
                 config_file: pathlib.Path) -> None:
    """Write the version folder: the policy and ``entry.yaml`` staged beside
    it and moved in, ``config_file`` copied when the folder has no
    ``config.yaml`` yet."""
    import yaml

    from plume_jax.files.safe_io import YAMLDumper

    staging = folder.with_name(f".{folder.name}.publishing-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(policy, staging / "policy")
    (staging / "entry.yaml").write_text(yaml.dump(info, Dumper=YAMLDumper, sort_keys=False),
                                        encoding="utf-8")
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "config.yaml").is_file():
        shutil.copy2(config_file, folder / "config.yaml")
    os.replace(staging / "policy", folder / "policy")
    os.replace(staging / "entry.yaml", folder / "entry.yaml")
    shutil.rmtree(staging, ignore_errors=True)


def _check_name(name: Any) -> None:
    from agents.zoo import ENTRY_NAME

    if not isinstance(name, str) or not ENTRY_NAME.fullmatch(name):
        raise ValidationError.for_parameter(
            "name", name, "a zoo name of lower-case letters, digits and '-', e.g. filament-gru")


def publish(run: str | os.PathLike, name: str, *, device: str | None = None,
            description: str = "", root: str | os.PathLike | None = None,
            max_policy_bytes: int = MAX_POLICY_BYTES) -> pathlib.Path:
    """Add the run folder ``run`` to the zoo as entry ``name``; returns the
    version folder written.

    Raises:
        ValidationError: a bad name, an unfinished run, a policy over
            ``max_policy_bytes``, or a run whose config differs from the
            ``config.yaml`` already in the version folder. Nothing is written
            then.
    """
    from agents.zoo import zoo_root
    from plume_jax.train.config import current_form, load_train_config, read_yaml

    _check_name(name)
    run = pathlib.Path(run)
    summary, policy = _run_files(run)
    size = _policy_bytes(policy, "run", max_policy_bytes)
    entry_root = zoo_root(root)
    version = pick_version(entry_root / name)
    folder = entry_root / name / str(version)
    ran = current_form(read_yaml(run / "config.yaml", "run"))  # an earlier version's, as read now
    unchecked = _check_committed(folder, ran, "run", run)
    if not (folder / "config.yaml").is_file():
        load_train_config(run / "config.yaml", written=True)  # one this version can run again
    info = entry_info(name, version, summary, size, device, description,
                      own_sensor(ran, policy))
    if unchecked:
        info["settings_not_checked"] = unchecked  # the run's version knew them, this one not
    _write_entry(folder, policy, info, run / "config.yaml")
    return folder


def check_facts(facts: Any, source: str = "--facts") -> dict[str, Any]:
    """The measured facts of a policy published without its run folder
    (see the module docstring), checked: ``training`` with
    :data:`REQUIRED_FACTS` (positive numbers), optionally ``evaluation``
    (``success_rate`` in [0, 1]) and ``reproducibility`` (text).

    Raises:
        ValidationError: (parameter ``--facts``) naming the fact that is
            missing or wrong and what it must be.
    """
    allowed = ("a YAML mapping with training: {device, wall_seconds, env_steps, finished_at, "
               "...}, optionally evaluation: {episodes, seed, success_rate, "
               "mean_steps_to_goal} and reproducibility: text")
    if not isinstance(facts, dict) or not isinstance(facts.get("training"), dict):
        raise ValidationError.for_parameter("--facts", source, allowed)
    unknown = set(facts) - {"training", "evaluation", "reproducibility"}
    if unknown:
        raise ValidationError.for_parameter("--facts", source,
                                            f"{allowed}; not {sorted(unknown)}")
    training = facts["training"]
    for key, kind in REQUIRED_FACTS.items():
        value = training.get(key)
        negative = isinstance(value, (int, float)) and value < 0
        if isinstance(value, bool) or not isinstance(value, kind) or value in ("", 0) or negative:
            raise ValidationError.for_parameter(
                "--facts", source, f"training.{key}: a measured "
                f"{'text' if kind is str else 'positive number'}, not {value!r}")
    evaluation = facts.get("evaluation", {})
    if not isinstance(evaluation, dict) or not (
            isinstance(evaluation.get("success_rate", 0.0), (int, float))
            and 0.0 <= evaluation.get("success_rate", 0.0) <= 1.0):
        raise ValidationError.for_parameter(
            "--facts", source, "evaluation: a mapping whose success_rate is in [0, 1]")
    if not isinstance(facts.get("reproducibility", ""), str):
        raise ValidationError.for_parameter("--facts", source, "reproducibility: text")
    return facts


def publish_policy(policy: str | os.PathLike, name: str, *, config: str | os.PathLike,
                   facts: dict[str, Any], description: str = "",
                   root: str | os.PathLike | None = None,
                   max_policy_bytes: int = MAX_POLICY_BYTES) -> pathlib.Path:
    """Add an exported policy folder whose run folder is gone to the zoo as
    entry ``name``, with the training ``config`` that produced it and its
    measured ``facts`` (:func:`check_facts`); returns the version folder.
    ``config`` is copied as written (comments kept) unless the version
    folder already holds one, which must then agree with it.

    Raises:
        ValidationError: a bad name, a folder without ``policy.json`` /
            ``policy.npz``, a policy over ``max_policy_bytes``, bad facts, a
            config this version cannot run, a policy that does not load on
            the env the config builds, or a config that differs from the
            version folder's. Nothing is written then.
    """
    from agents.trained import TrainedPolicy
    from agents.zoo import zoo_root
    from plume_jax.train.config import load_train_config

    _check_name(name)
    policy = pathlib.Path(policy)
    for part in ("policy.json", "policy.npz"):
        if not (policy / part).is_file():
            raise ValidationError.for_parameter(
                "policy", str(policy), f"an exported policy folder (policy.json, policy.npz); "
                f"{part} is missing")
    size = _policy_bytes(policy, "policy", max_policy_bytes)
    facts = check_facts(facts)
    cfg = load_train_config(config)
    resolved = cfg.to_dict()
    env, _ = cfg.make_env()
    TrainedPolicy.for_env(env, policy)  # trained on the env this config builds
    entry_root = zoo_root(root)
    version = pick_version(entry_root / name)
    folder = entry_root / name / str(version)
    _check_committed(folder, resolved, "--config", pathlib.Path(config))
    info: dict[str, Any] = {
        **entry_header(name, version, description, resolved["env"]["id"], resolved,
                       own_sensor(resolved, policy)),
        "training": facts["training"], "evaluation": facts.get("evaluation", {}),
        "policy_bytes": size}
    if facts.get("reproducibility"):
        info["reproducibility"] = facts["reproducibility"]
    _write_entry(folder, policy, info, pathlib.Path(config))
    return folder


def _sweep_members(sweep: pathlib.Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(results, members)`` of a finished sweep that swept ``run.seed`` only.

    Raises:
        ValidationError: (parameter ``sweep``) an unfinished sweep, one that
            swept other settings, or a member without its policy or summary.
    """
    from plume_jax.files.safe_io import load_json_file

    allowed = "a finished seed sweep folder of plume-jax sweep (results.json, members/)"
    if not (sweep / "results.json").is_file():
        raise ValidationError.for_parameter("sweep", str(sweep),
                                            f"{allowed}; results.json is missing")
    results = load_json_file(sweep / "results.json", "sweep")
    if list(results.get("grid") or {}) != ["run.seed"]:
        raise ValidationError.for_parameter(
            "sweep", str(sweep), f"a sweep of run.seed only (its grid: "
            f"{list(results.get('grid') or {})})")
    members = results.get("results") or []
    for m in members:
        for part in ("summary.json", "config.yaml", "policy/policy.json", "policy/policy.npz"):
            if not (sweep / "members" / m["name"] / part).is_file():
                raise ValidationError.for_parameter(
                    "sweep", str(sweep), f"{allowed}; members/{m['name']}/{part} is missing "
                    "(a sweep keeps its members' policies since issue 39)")
    return results, members


def seed_info(results: dict[str, Any], summary: dict[str, Any], seed: int, size: int,
              sweep: pathlib.Path) -> dict[str, Any]:
    """``seed.yaml`` of one sweep member: its training seed, greedy
    evaluation and training facts, and the sweep it came from."""
    ev = summary.get("evaluation") or {}
    return {
        "seed": seed,
        "evaluation": {k: ev[k] for k in ("episodes", "seed", "greedy", "success_rate",
                                          "successes", "mean_steps_to_goal") if k in ev},
        "training": {"env_steps": summary.get("env_steps_total"),
                     "finished_at": summary.get("finished_at"),
                     "device": ", ".join((results.get("machine") or {}).get("devices") or []),
                     "jax": (results.get("machine") or {}).get("jax")},
        "sweep": {"members": len(results.get("results") or []),
                  "train_seconds_all_members": results.get("train_seconds"),
                  "folder": sweep.name},
        "policy_bytes": size,
    }


def publish_seeds(sweep: str | os.PathLike, reference: str,
                  root: str | os.PathLike | None = None) -> list[pathlib.Path]:
    """Keep every member of the finished seed sweep ``sweep`` under the
    zoo entry ``reference`` (``zoo:<name>@<version>``, or ``<name>@<version>``):
    ``seeds/<seed>/policy`` (copied as exported) and ``seeds/<seed>/seed.yaml``
    (:func:`seed_info`); returns the seed folders written. A seed already
    kept is replaced.

    Raises:
        ValidationError: an entry that does not exist, a sweep that is not
            a finished sweep of the entry's own config over ``run.seed``
            alone (every member's config is checked), or a member's policy
            over :data:`MAX_POLICY_BYTES`. Nothing is written then.
    """
    import yaml

    from agents.zoo import SEED_FILE, SEEDS_FOLDER, ZOO_PREFIX, resolve
    from plume_jax.files.safe_io import YAMLDumper, load_json_file
    from plume_jax.train.config import current_form, load_train_config, read_yaml

    ref = reference if reference.startswith(ZOO_PREFIX) else ZOO_PREFIX + reference
    if "@" not in ref or "#" in ref:
        raise ValidationError.for_parameter("entry", reference,
                                            "zoo:<name>@<version> (the version spelled out)")
    entry = resolve(ref, None if root is None else pathlib.Path(root))
    sweep = pathlib.Path(sweep)
    results, members = _sweep_members(sweep)
    committed = load_train_config(entry.config_path).to_dict()
    staged = []
    for m in members:
        folder = sweep / "members" / m["name"]
        seed = m["run.seed"]
        # a member written by an earlier version, in this version's form
        # (settings added since filled in at the defaults it trained with)
        ran = current_form(read_yaml(folder / "config.yaml", "sweep"))
        differing, _ = config_differences(committed, ran)
        differing = [k for k in differing if k != "run.seed"]
        bad_seed = (ran.get("run") or {}).get("seed") != seed or isinstance(seed, bool) \
            or not isinstance(seed, int) or seed < 0
        if differing or bad_seed:
            raise ValidationError.for_parameter(
                "sweep", str(sweep), f"a seed sweep of {entry.reference}'s own config "
                f"(member {m['name']} differs in {differing or ['run.seed']}"
                f"{differing_values(committed, ran, differing)}; sweep only run.seed over "
                f"{entry.config_path}, its budget included)")
        size = _policy_bytes(folder / "policy", "policy", MAX_POLICY_BYTES)
        summary = load_json_file(folder / "summary.json", "sweep")
        staged.append((seed, folder / "policy", seed_info(results, summary, seed, size, sweep)))
    seeds_dir = entry.folder / SEEDS_FOLDER
    staging = entry.folder / f".{SEEDS_FOLDER}.publishing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    for seed, policy, info in staged:  # everything staged before anything moves in
        shutil.copytree(policy, staging / str(seed) / "policy")
        (staging / str(seed) / SEED_FILE).write_text(
            yaml.dump(info, Dumper=YAMLDumper, sort_keys=False), encoding="utf-8")
    seeds_dir.mkdir(exist_ok=True)
    written = []
    for seed, _, _ in staged:
        target = seeds_dir / str(seed)
        if target.exists():
            old = staging / f"old-{seed}"
            os.replace(target, old)
        os.replace(staging / str(seed), target)
        written.append(target)
    shutil.rmtree(staging, ignore_errors=True)
    return written
