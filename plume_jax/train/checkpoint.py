"""Checkpoints (save / resume a whole training run) and policy export.

A checkpoint is a folder: ``runner.msgpack``, every leaf of the runner with
its metadata (the resolved config, the update, the tree structure) and their
SHA-256s, checked on every load, so a damaged file is a ``ValidationError``
naming it rather than a resume with other weights; and ``meta.json``, a
readable copy no resume trusts (format /1 kept its metadata only there).
Writes are atomic (:func:`save_checkpoint`), and a resume restores the exact
runner: it continues bit for bit (docs/training.md, "Kills"). An exported
policy (``policy.npz``, ``policy.json``) is read by ``agents.trained``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import re
import shutil
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization, traverse_util

from plume_jax.core.errors import ValidationError
from plume_jax.files import atomic_write, fsync_folder, is_temporary, new_folder
from plume_jax.files.safe_io import load_json_bounded, load_json_file, read_bytes_bounded

#: The largest checkpoint metadata and checkpoint file read (bytes): bounds, not targets.
MAX_META_BYTES = 16 << 20
MAX_CHECKPOINT_BYTES = 16 << 30

CHECKPOINT_FORMAT = "plume_jax.checkpoint/3"
#: Earlier checkpoints still load: /2 (no checksum) and /1 (metadata only in meta.json).
_FORMAT_WITHOUT_CHECKSUM = "plume_jax.checkpoint/2"
_FORMATS = (CHECKPOINT_FORMAT, _FORMAT_WITHOUT_CHECKSUM, "plume_jax.checkpoint/1")
POLICY_FORMAT = "plume_jax.trained_policy/1"

#: Temporary files of an interrupted write by earlier versions
#: (``NAME.XXXXXXXX``, ``tmpXXXXXXXX.npz``); ours (``.NAME.tmp-XXXX``) are
#: :func:`plume_jax.files.is_temporary`.
_OLD_TEMPORARY = re.compile(r"^((runner\.msgpack|meta\.json|policy\.json)"
                            r"\.[A-Za-z0-9_]{8}|tmp[A-Za-z0-9_]{8}\.npz)$")


def partial_folder_prefix(name: str) -> str:
    """The name prefix of the hidden folder a new checkpoint folder ``name``
    is written whole in before it is renamed into place."""
    return f".{name}.partial-"


def remove_temporaries(directory: str | pathlib.Path) -> list[pathlib.Path]:
    """Delete the temporary files an interrupted write left in ``directory``
    (:func:`~plume_jax.files.is_temporary`, :data:`_OLD_TEMPORARY`); returns
    what was removed."""
    directory = pathlib.Path(directory)
    removed = []
    if directory.is_dir():
        for path in directory.iterdir():
            if path.is_file() and (is_temporary(path.name) or _OLD_TEMPORARY.match(path.name)):
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def _leaf_to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(jax.device_get(x))


def save_checkpoint(directory: str | pathlib.Path, runner: Any, meta: dict[str, Any]
                    ) -> pathlib.Path:
    """Write ``runner`` (any pytree) and ``meta`` (JSON) to ``directory``: a
    new folder is written whole in a hidden sibling (``.NAME.partial-*``) and
    renamed into place; an existing one gets ``runner.msgpack`` replaced
    atomically first (the checkpoint is whole as soon as it is), then
    ``meta.json``. First removes what a kill left: the partial folders
    beside it, for whatever NAME (never renamed into place, so nothing read
    them; the folder's lock keeps other writers out), and temporary files."""
    directory = pathlib.Path(directory)
    leaves, treedef = jax.tree.flatten(runner)
    payload = serialization.msgpack_serialize(
        {str(i): _leaf_to_numpy(x) for i, x in enumerate(leaves)})
    meta = {"format": CHECKPOINT_FORMAT, **meta, "treedef": str(treedef),
            "num_leaves": len(leaves), "payload_sha256": hashlib.sha256(payload).hexdigest()}
    text = json.dumps(meta)
    state = {"meta": text, "meta_sha256": hashlib.sha256(text.encode()).hexdigest(),
             "payload": payload}
    data = serialization.msgpack_serialize(state)
    readable = json.dumps(meta, indent=2).encode()
    if directory.parent.is_dir():
        for path in directory.parent.glob(partial_folder_prefix("*") + "*"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
    if directory.is_dir():
        remove_temporaries(directory)
        atomic_write(directory / "runner.msgpack", data)
        atomic_write(directory / "meta.json", readable)
        return directory
    tmp = new_folder(directory.parent, partial_folder_prefix(directory.name))
    try:
        atomic_write(tmp / "runner.msgpack", data)
        atomic_write(tmp / "meta.json", readable)
        os.rename(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_folder(directory.parent)
    return directory


def _bad_file(path: pathlib.Path, what: str) -> ValidationError:
    return ValidationError.for_parameter("checkpoint", str(path), what)


def _meta_json(directory: pathlib.Path) -> dict[str, Any]:
    """A format /1 checkpoint's metadata: ``meta.json``."""
    path = directory / "meta.json"
    if not path.exists():
        raise _bad_file(path, "an existing file (a checkpoint of format plume_jax.checkpoint/1 "
                        "keeps its metadata only there)")
    try:
        meta = load_json_file(path, "checkpoint", max_bytes=MAX_META_BYTES)
    except ValidationError as exc:
        raise _bad_file(path, f"the JSON metadata of a checkpoint (it is damaged: {exc})") \
            from None
    if not isinstance(meta, dict) or meta.get("format") not in _FORMATS:
        raise _bad_file(path, f"the metadata of a {CHECKPOINT_FORMAT} checkpoint")
    return meta


def _runner_state(directory: pathlib.Path) -> tuple[pathlib.Path, dict[str, Any],
                                                     dict[str, Any]]:
    """``(path, state, meta)`` of ``directory/runner.msgpack``: the file
    read whole and its metadata checked against the SHA-256 stored with it
    (the embedded metadata; ``meta.json``'s for a format /1 checkpoint)."""
    if not directory.is_dir():
        raise _bad_file(directory, "a checkpoint folder (holding runner.msgpack)")
    path = directory / "runner.msgpack"
    if not path.exists():
        raise _bad_file(path, "an existing file (the checkpoint's runner state; is this a "
                        "checkpoint folder?)")
    data = read_bytes_bounded(path, MAX_CHECKPOINT_BYTES, "checkpoint")
    if not data:
        raise _bad_file(path, "a checkpoint's runner state (the file is empty)")
    try:
        state = serialization.msgpack_restore(data)
    except Exception as exc:  # msgpack raises ValueError subclasses and more
        raise _bad_file(path, f"a checkpoint's runner state (it is truncated or damaged: "
                        f"{exc})") from None
    if not isinstance(state, dict):
        raise _bad_file(path, "a checkpoint's runner state (no leaves found)")
    if "meta" not in state:  # format /1: the metadata is only in meta.json
        return path, state, _meta_json(directory)
    if not isinstance(state["meta"], str) or ("meta_sha256" in state and hashlib.sha256(
            state["meta"].encode()).hexdigest() != state["meta_sha256"]):
        raise _bad_file(path, "a checkpoint whose metadata matches the SHA-256 recorded with it "
                        "(it does not: the file is damaged)")
    try:
        meta = load_json_bounded(state["meta"], "checkpoint", max_bytes=MAX_META_BYTES)
    except (TypeError, ValidationError):
        raise _bad_file(path, "a checkpoint's runner state (damaged metadata)") from None
    if not isinstance(meta, dict) or meta.get("format") not in _FORMATS:
        raise _bad_file(path, f"the runner state of a {CHECKPOINT_FORMAT} checkpoint")
    if "meta_sha256" not in state and meta["format"] != _FORMAT_WITHOUT_CHECKSUM:
        # only format /2 was written without a checksum: a later one without it is damaged
        raise _bad_file(path, "a checkpoint whose metadata matches the SHA-256 recorded with it "
                        "(none is recorded: the file is damaged)")
    return path, state, meta


def read_meta(directory: str | pathlib.Path) -> dict[str, Any]:
    """The checked metadata of the checkpoint in ``directory`` (from inside
    ``runner.msgpack``; ``ValidationError`` naming the file otherwise)."""
    return _runner_state(pathlib.Path(directory))[2]


def checkpoint_update(directory: str | pathlib.Path) -> int:
    """The update the checkpoint in ``directory`` holds (:func:`read_meta`);
    ``ValidationError`` naming the file if it does not say."""
    meta = read_meta(directory)
    update = meta.get("update", 0)
    if isinstance(update, bool) or not isinstance(update, int) or update < 0:
        raise _bad_file(pathlib.Path(directory) / "runner.msgpack",
                        f"a checkpoint whose metadata holds its update (found {update!r})")
    return update


def read_checkpoint(directory: str | pathlib.Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(meta, leaves)`` of the checkpoint in ``directory``, checked;
    ``leaves`` maps the leaf index (a string) to its array. Removes
    temporary files of an interrupted write."""
    directory = pathlib.Path(directory)
    path, state, meta = _runner_state(directory)
    remove_temporaries(directory)
    if "payload" in state:  # format 3: the leaves' bytes under a checksum
        payload = state["payload"]
        digest = hashlib.sha256(payload).hexdigest() if isinstance(payload, bytes) else None
        if digest is None or digest != meta.get("payload_sha256"):
            raise _bad_file(path, "a checkpoint whose leaves match the SHA-256 its metadata "
                            "records (they do not: the file is damaged)")
        try:
            state["leaves"] = serialization.msgpack_restore(payload)
        except Exception as exc:
            raise _bad_file(path, f"a checkpoint's runner state (damaged leaves: {exc})") \
                from None
    if not isinstance(state.get("leaves"), dict):
        raise _bad_file(path, "a checkpoint's runner state (no leaves found)")
    if sorted(state["leaves"]) != sorted(str(i) for i in range(len(state["leaves"]))):
        raise _bad_file(path, "a checkpoint's runner state (its leaves are not numbered "
                        "0..N-1: the file is damaged)")
    if meta.get("num_leaves") != len(state["leaves"]):
        raise _bad_file(path, f"{meta.get('num_leaves')} runner leaves as its metadata says "
                        f"(found {len(state['leaves'])})")
    return meta, state["leaves"]


def load_checkpoint(directory: str | pathlib.Path, template: Any) -> tuple[Any, dict[str, Any]]:
    """``(runner, meta)`` saved by :func:`save_checkpoint`, shaped as
    ``template`` (a runner or its ``jax.eval_shape``); ``ValidationError``
    if the checkpoint is damaged or of another network, env or batch size."""
    directory = pathlib.Path(directory)
    meta, stored = read_checkpoint(directory)
    leaves, treedef = jax.tree.flatten(template)
    if meta.get("num_leaves") != len(leaves) or meta.get("treedef") != str(treedef):
        raise ValidationError.for_parameter(
            "checkpoint", str(directory),
            "a checkpoint of the same network, env and batch sizes as this config")
    restored = []
    for i, t in enumerate(leaves):
        value = np.asarray(stored[str(i)])
        if jnp.issubdtype(t.dtype, jax.dtypes.prng_key):
            restored.append(jax.random.wrap_key_data(jnp.asarray(value)))
            continue
        if value.shape != tuple(t.shape) or value.dtype != np.dtype(t.dtype):
            raise ValidationError.for_parameter(
                "checkpoint", str(directory),
                f"leaf {i} of shape {tuple(t.shape)} {np.dtype(t.dtype)} "
                f"(found {value.shape} {value.dtype})")
        restored.append(jnp.asarray(value))
    return jax.tree.unflatten(treedef, restored), meta


def find_checkpoint(path: str | pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """``(run folder, checkpoint folder)`` for what ``--resume`` names: a
    run folder (its ``checkpoint/``), a checkpoint folder (``RUN/checkpoint``
    or ``RUN/checkpoints/update_N``) or ``ValidationError``."""
    path = pathlib.Path(path)
    if not path.is_dir():
        raise ValidationError.for_parameter("--resume", str(path),
                                            "an existing run folder or checkpoint folder")
    if (path / "checkpoint").is_dir():
        return path, path / "checkpoint"
    if (path / "runner.msgpack").exists() or (path / "meta.json").exists():
        run = path.parent.parent if path.parent.name == "checkpoints" else path.parent
        return run, path
    raise ValidationError.for_parameter(
        "--resume", str(path), "a run folder with a checkpoint/ folder (written by plume-jax "
        "train or sweep), or a checkpoint folder itself; a run killed before its first "
        "checkpoint cannot resume: start it again with --overwrite")


# ------------------------------------------------------------------- export
def policy_arrays(params: Any, obs_stats: Any | None) -> dict[str, np.ndarray]:
    """Flat ``name -> array`` of a network's parameters (and observation
    statistics), also with a leading sweep axis."""
    flat = traverse_util.flatten_dict(jax.device_get(params["params"]), sep="/")
    arrays = {name: np.asarray(v) for name, v in flat.items()}
    if obs_stats is not None:
        arrays["obs_mean"] = np.asarray(obs_stats.mean)
        arrays["obs_var"] = np.asarray(obs_stats.var)
    return arrays


def export_policy(directory: str | pathlib.Path, algo: Any, runner: Any,
                  env_settings: dict[str, Any] | None = None,
                  extra: dict[str, Any] | None = None) -> pathlib.Path:
    """Write ``policy.npz`` and ``policy.json``: ``algo.policy(runner)``,
    with the env settings and ``extra`` added to the spec."""
    directory = pathlib.Path(directory)
    remove_temporaries(directory)
    spec, arrays = algo.policy(runner)
    arrays = {k: _leaf_to_numpy(v) for k, v in arrays.items()}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write(directory / "policy.npz", buffer.getvalue())
    spec = {**spec, "env": env_settings or {}, **(extra or {})}
    atomic_write(directory / "policy.json", json.dumps(spec, indent=2))
    return directory
