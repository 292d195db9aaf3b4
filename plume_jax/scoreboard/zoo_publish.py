"""Put a finished training run into the zoo (:mod:`agents.zoo`).

``python -m plume_jax.scoreboard.zoo_publish RUN NAME [--device TEXT]``
copies ``RUN/policy`` to ``configs/zoo/NAME/<version>/policy`` and writes
``entry.yaml`` beside it from the run's ``summary.json`` (preset, seed,
training cost: device, seconds, env steps; the greedy evaluation).

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

import argparse
import json
import os
import pathlib
import shutil
import sys
from typing import Any

from plume_jax.errors import ValidationError

#: The most bytes an entry's exported policy may take (zoo entries ship in
#: the repository; the ones trained so far take about 50 KB).
MAX_POLICY_BYTES = 1 << 20


def _run_files(run: pathlib.Path) -> tuple[dict[str, Any], pathlib.Path]:
    """``(summary, policy folder)`` of a finished run.

    Raises:
        ValidationError: (parameter ``run``) a folder without ``summary.json``,
            ``config.yaml`` or ``policy/``.
    """
    from plume_jax.safe_io import load_json_file

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


def pick_version(folder: pathlib.Path) -> int:
    """The version a new policy of the entry folder ``configs/zoo/<name>`` gets."""
    numbers = sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) \
        if folder.is_dir() else []
    for number in numbers:
        if (folder / str(number) / "config.yaml").is_file() and \
                not (folder / str(number) / "policy").exists():
            return number
    return (numbers[-1] + 1) if numbers else 1


def entry_info(name: str, version: int, summary: dict[str, Any], policy_bytes: int,
               device: str | None, description: str) -> dict[str, Any]:
    """The contents of ``entry.yaml``."""
    config = summary["config"]
    machine = summary.get("machine", {})
    return {
        "name": name, "version": version,
        "description": description,
        "preset": summary["env"],
        "network": config["network"]["type"],
        "seed": config["run"]["seed"],
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


def publish(run: str | os.PathLike, name: str, *, device: str | None = None,
            description: str = "", root: str | os.PathLike | None = None) -> pathlib.Path:
    """Add the run folder ``run`` to the zoo as entry ``name``; returns the
    version folder written.

    Raises:
        ValidationError: a bad name, an unfinished run, a policy over
            :data:`MAX_POLICY_BYTES`, or a run whose config differs from the
            ``config.yaml`` already in the version folder. Nothing is written
            then.
    """
    import yaml

    from agents.zoo import ENTRY_NAME, ZOO_ROOT
    from plume_jax.train.config import load_train_config, read_yaml

    if not isinstance(name, str) or not ENTRY_NAME.match(name):
        raise ValidationError.for_parameter(
            "name", name, "a zoo name of lower-case letters, digits and '-', e.g. filament-gru")
    run = pathlib.Path(run)
    summary, policy = _run_files(run)
    size = sum(f.stat().st_size for f in policy.iterdir() if f.is_file())
    if size > MAX_POLICY_BYTES:
        raise ValidationError.for_parameter(
            "run", str(run), f"a policy of at most {MAX_POLICY_BYTES} bytes (zoo entries ship "
            f"in the repository); {policy} holds {size}")
    entry_root = pathlib.Path(root) if root is not None else ZOO_ROOT
    version = pick_version(entry_root / name)
    folder = entry_root / name / str(version)
    unchecked: list[str] = []
    if (folder / "config.yaml").is_file():
        committed = load_train_config(folder / "config.yaml").to_dict()
        differing, unchecked = config_differences(committed, read_yaml(run / "config.yaml",
                                                                        "run"))
        if differing:
            raise ValidationError.for_parameter(
                "run", str(run), f"a run of {folder / 'config.yaml'} (its {differing} differ)")
    else:
        load_train_config(run / "config.yaml")  # a config this version can run again
    staging = folder.with_name(f".{version}.publishing-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(policy, staging / "policy")
    info = entry_info(name, version, summary, size, device, description)
    if unchecked:
        info["settings_not_checked"] = unchecked  # the run's version knew them, this one not
    (staging / "entry.yaml").write_text(yaml.safe_dump(info, sort_keys=False), encoding="utf-8")
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "config.yaml").is_file():
        shutil.copy2(run / "config.yaml", folder / "config.yaml")
    os.replace(staging / "policy", folder / "policy")
    os.replace(staging / "entry.yaml", folder / "entry.yaml")
    shutil.rmtree(staging, ignore_errors=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a finished run folder of plume-jax train")
    parser.add_argument("name", help="the zoo name, e.g. filament-gru")
    parser.add_argument("--device", default=None,
                        help="what it was trained on (default: from the run's summary.json)")
    parser.add_argument("--description", default="", help="one line saying what it is")
    args = parser.parse_args(argv)
    try:
        folder = publish(args.run, args.name, device=args.device, description=args.description)
    except ValidationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"written": str(folder)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
