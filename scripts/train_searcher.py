#!/usr/bin/env python
"""Train Loisy & Eloy's belief searcher (``plume_jax.train.value_iteration``)
from a YAML config, in jitted chunks, with checkpoints and resume.

Usage::

    PYTHONPATH=$PWD python scripts/train_searcher.py \\
        --config configs/train_iso19x19_searcher.yaml --out runs/searcher19 \\
        [--iterations N] [--chunk K] [--resume] [--set algo.eval_searches=400 ...]

The config has three sections: ``env`` (``id`` and ``overrides``, passed to
``plume_jax.make``), ``algo`` (``BeliefValueIteration``'s settings) and
``run`` (``seed``, ``iterations``, ``chunk``). ``--set`` overrides any
dotted key (the value is read as YAML). The same command runs on CPU or GPU
(JAX picks the backend).

Each chunk of ``chunk`` iterations is one jitted ``lax.scan`` (the runner's
buffers donated); after it the script prints a progress line, appends one
row per iteration to ``OUT/metrics.jsonl`` and replaces
``OUT/checkpoint.msgpack`` (the whole runner, flax msgpack; its size,
iteration and SHA-256 in ``OUT/checkpoint.json``) and the exported policy
atomically; ``--time-limit`` stops after the first chunk past that many
seconds. ``--resume``
continues from the checkpoint (bit for bit: the runner holds the PRNG key
and every buffer); metrics rows past it are moved aside to
``metrics.jsonl.after-<iteration>`` first. The best evaluated parameters
are exported to ``OUT/policy/policy.npz`` + ``policy.json``
(:func:`plume_jax.train.value_iteration.policy_scores` runs them).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import pathlib
import sys
import time
from typing import Any

import numpy as np
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "configs" / "train_iso19x19_searcher.yaml"
SECTIONS = ("env", "algo", "run")
RUN_DEFAULTS = {"seed": 0, "iterations": 30_000, "chunk": 500}


class ConfigError(ValueError):
    pass


# --------------------------------------------------------------------------- config

def apply_set(config: dict, item: str) -> None:
    """``key.sub=value`` (value parsed as YAML) into ``config``, in place."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value, e.g. algo.eval_searches=400")
    key, raw = item.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if len(parts) < 2 or parts[0] not in SECTIONS:
        raise ConfigError(f"--set {item!r}: the key must start with one of {list(SECTIONS)} "
                          "and name a setting, e.g. algo.learning_rate")
    node = config
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {item!r}: {p} is not a section")
    node[parts[-1]] = yaml.safe_load(raw)


def load_config(path: pathlib.Path, sets: list[str], iterations: int | None,
                chunk: int | None) -> dict:
    with open(path) as fh:
        config = yaml.safe_load(fh) or {}
    if not isinstance(config, dict) or set(config) - set(SECTIONS):
        raise ConfigError(f"{path}: expected the sections {list(SECTIONS)}, got "
                          f"{sorted(config) if isinstance(config, dict) else config!r}")
    config = copy.deepcopy(config)
    for item in sets:
        apply_set(config, item)
    config.setdefault("env", {})
    config.setdefault("algo", {})
    config["run"] = {**RUN_DEFAULTS, **(config.get("run") or {})}
    if iterations is not None:
        config["run"]["iterations"] = iterations
    if chunk is not None:
        config["run"]["chunk"] = chunk
    if set(config["run"]) - set(RUN_DEFAULTS):
        raise ConfigError(f"run: unknown keys {sorted(set(config['run']) - set(RUN_DEFAULTS))}; "
                          f"known: {sorted(RUN_DEFAULTS)}")
    for name in ("iterations", "chunk"):
        v = config["run"][name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"run.{name}={v!r} is invalid: expected a positive integer")
    seed = config["run"]["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise ConfigError(f"run.seed={seed!r} is invalid: expected an integer in [0, 2**31)")
    if "id" not in config["env"]:
        raise ConfigError("env.id is missing (e.g. PlumeNav-Poisson-Iso19x19-v0)")
    return config


def identity(config: dict) -> dict:
    """What a resumed run must share with the checkpoint's (all but the
    iteration target and the chunking)."""
    out = copy.deepcopy(config)
    out["run"] = {k: v for k, v in out["run"].items() if k not in ("iterations", "chunk")}
    out["algo"] = {k: v for k, v in out["algo"].items() if k != "iterations"}
    return out


def build(config: dict):
    """``(env, env_params, algo)`` from a loaded config."""
    import plume_jax
    from plume_jax.train.value_iteration import BeliefValueIteration

    env, env_params = plume_jax.make(config["env"]["id"],
                                     **(config["env"].get("overrides") or {}))
    algo_settings = {k: v for k, v in config["algo"].items() if k != "iterations"}
    algo = BeliefValueIteration(env, env_params, iterations=config["run"]["iterations"],
                                **algo_settings)
    return env, env_params, algo


# --------------------------------------------------------------------------- files

def atomic_write(path: pathlib.Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def runner_to_bytes(runner: Any) -> bytes:
    import flax.serialization

    fields = {k: getattr(runner, k) for k in type(runner).__dataclass_fields__}
    return flax.serialization.to_bytes(fields)


def runner_from_bytes(template: Any, data: bytes) -> Any:
    import flax.serialization

    fields = {k: getattr(template, k) for k in type(template).__dataclass_fields__}
    restored = flax.serialization.from_bytes(fields, data)
    return type(template)(**restored)


def save_checkpoint(out: pathlib.Path, runner: Any, config: dict) -> dict:
    data = runner_to_bytes(runner)
    atomic_write(out / "checkpoint.msgpack", data)
    meta = {"update": int(np.asarray(runner.update)), "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "identity": identity(config),
            "saved": time.strftime("%Y-%m-%d %H:%M:%S")}
    atomic_write(out / "checkpoint.json", (json.dumps(meta, indent=2) + "\n").encode())
    return meta


def load_checkpoint(out: pathlib.Path, template: Any, config: dict) -> Any:
    meta = json.loads((out / "checkpoint.json").read_text())
    data = (out / "checkpoint.msgpack").read_bytes()
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise ConfigError(f"{out}/checkpoint.msgpack does not match the SHA-256 in "
                          "checkpoint.json (a partial copy?)")
    if meta["identity"] != json.loads(json.dumps(identity(config))):
        raise ConfigError(f"{out}: the checkpoint was made with another config:\n  saved: "
                          f"{json.dumps(meta['identity'], sort_keys=True)}\n  now:   "
                          f"{json.dumps(identity(config), sort_keys=True)}")
    runner = runner_from_bytes(template, data)
    if int(np.asarray(runner.update)) != meta["update"]:
        raise ConfigError(f"{out}: checkpoint.json says iteration {meta['update']}, the runner "
                          f"{int(np.asarray(runner.update))}")
    return runner


def align_metrics(out: pathlib.Path, update: int) -> None:
    """Rows of ``metrics.jsonl`` past iteration ``update`` (a run that died
    between its metrics and its checkpoint) are moved aside, whole file
    kept, before the kept rows replace it."""
    path = out / "metrics.jsonl"
    if not path.exists():
        return
    lines = path.read_text().splitlines()
    keep = [ln for ln in lines if ln.strip() and json.loads(ln).get("update", 0) <= update]
    if len(keep) == len([ln for ln in lines if ln.strip()]):
        return
    aside = out / f"metrics.jsonl.after-{update}"
    os.replace(path, aside)
    atomic_write(path, ("\n".join(keep) + ("\n" if keep else "")).encode())
    print(f"note: metrics rows past iteration {update} moved aside to {aside.name}", flush=True)


def export_policy(out: pathlib.Path, algo: Any, runner: Any, config: dict) -> pathlib.Path:
    import io

    from plume_jax.train.value_iteration import export_arrays, policy_spec

    folder = out / "policy"
    folder.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **export_arrays(algo, runner))
    atomic_write(folder / "policy.npz", buf.getvalue())
    spec = policy_spec(algo, runner, env_config=config["env"])
    atomic_write(folder / "policy.json", (json.dumps(spec, indent=2) + "\n").encode())
    return folder


def load_policy(folder: str | pathlib.Path) -> tuple[dict, dict]:
    """``(spec, arrays)`` of an exported policy folder."""
    folder = pathlib.Path(folder)
    spec = json.loads((folder / "policy.json").read_text())
    with np.load(folder / "policy.npz") as data:
        arrays = {k: data[k] for k in data.files}
    return spec, arrays


# --------------------------------------------------------------------------- main

def _fmt(x: float, spec: str = ".3f") -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, spec)


def train(config: dict, out: pathlib.Path, resume: bool, quiet: bool = False,
          time_limit: float | None = None) -> Any:
    """Train to ``run.iterations`` (or until a chunk ends past ``time_limit``
    seconds of wall time); the policy is exported after every chunk.
    Returns the final runner."""
    import jax

    out.mkdir(parents=True, exist_ok=True)
    ckpt = out / "checkpoint.msgpack"
    if ckpt.exists() and not resume:
        raise ConfigError(f"{out} already holds a checkpoint: pass --resume to continue it, "
                          "or choose another --out")
    env, env_params, algo = build(config)
    runner = algo.init(jax.random.key(config["run"]["seed"]), None, env_params)
    if resume and ckpt.exists():
        runner = load_checkpoint(out, runner, config)
        align_metrics(out, int(np.asarray(runner.update)))
        if not quiet:
            print(f"resumed at iteration {int(np.asarray(runner.update))}", flush=True)
    elif resume and not quiet:
        print(f"{out}: no checkpoint yet, starting fresh", flush=True)
    atomic_write(out / "config.yaml", yaml.safe_dump(config, sort_keys=False).encode())

    total, chunk = config["run"]["iterations"], config["run"]["chunk"]
    fn = jax.jit(lambda r, n: algo.run(r, None, env_params, chunk, count=n), donate_argnums=0)
    if not quiet:
        print(f"backend {jax.default_backend()} ({jax.devices()[0].device_kind}); "
              f"{algo.walkers} walkers x {algo.steps_per_iteration} steps, net "
              f"{algo.in_dim}->{'->'.join(map(str, algo.hidden_sizes))}->1, "
              f"{total} iterations in chunks of {chunk}", flush=True)
    done = int(np.asarray(runner.update))
    start = time.perf_counter()
    first = True
    while done < total:
        n = min(chunk, total - done)
        t0 = time.perf_counter()
        runner, metrics = fn(runner, np.int32(n))
        metrics = jax.device_get(metrics)
        seconds = time.perf_counter() - t0
        rows = [{k: float(v[i]) for k, v in metrics.items()} for i in range(n)]
        with open(out / "metrics.jsonl", "a") as fh:
            for row in rows:
                fh.write(json.dumps({k: (v if math.isfinite(v) else None)
                                     for k, v in row.items()}) + "\n")
        save_checkpoint(out, runner, config)
        export_policy(out, algo, runner, config)
        done = int(np.asarray(runner.update))
        if not quiet:
            last = rows[-1]
            evals = [r["eval_mean_steps"] for r in rows if math.isfinite(r["eval_mean_steps"])]
            print(f"it {done}/{total}  {n / seconds:.2f} it/s{' (incl. compile)' if first else ''}"
                  f"  loss {_fmt(float(np.mean([r['loss'] for r in rows])), '.4f')}"
                  f"  target {_fmt(last['target_mean'], '.2f')}  eps {last['epsilon']:.3f}"
                  f"  episodes {int(sum(r['episodes'] for r in rows))}"
                  f"  eval {_fmt(evals[-1] if evals else None)}"
                  f"  best {_fmt(last['best_eval_mean_steps'])} @{int(last['best_update'])}"
                  f"  ({time.perf_counter() - start:.0f} s)", flush=True)
        first = False
        if time_limit is not None and time.perf_counter() - start > time_limit and done < total:
            if not quiet:
                print(f"stopping: past --time-limit {time_limit:g} s (resume with --resume)",
                      flush=True)
            break
    folder = export_policy(out, algo, runner, config)
    if not quiet:
        print(f"policy: {folder} (best eval {_fmt(float(np.asarray(runner.best_score)))} at "
              f"iteration {int(np.asarray(runner.best_update))})", flush=True)
    return runner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=pathlib.Path, default=DEFAULT_CONFIG)
    parser.add_argument("--out", type=pathlib.Path, required=True, help="run folder")
    parser.add_argument("--iterations", type=int, default=None,
                        help="total iterations to reach (default: run.iterations)")
    parser.add_argument("--chunk", type=int, default=None,
                        help="iterations per jitted chunk and checkpoint (default: run.chunk)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from OUT/checkpoint.msgpack (fresh if there is none)")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="stop after the first chunk that ends past this wall time")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set algo.eval_searches=400")
    args = parser.parse_args(argv)
    from plume_jax.errors import ValidationError

    try:
        config = load_config(args.config, args.sets, args.iterations, args.chunk)
        train(config, args.out, args.resume, time_limit=args.time_limit)
    except (ConfigError, ValidationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
