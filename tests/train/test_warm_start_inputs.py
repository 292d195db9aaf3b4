"""``run.init_from`` against hostile and old policy folders (issue 54, items
12-14; issue 55, claim 1): a starting point is read by the policy loaders'
one reader with their checks and bounds, an empty path is refused, and
every zoo policy (every version, every kept seed) is accepted with its
entry's config (settings that do not apply to a network type, such as an
MLP's ``rnn_size``, do not make two policies incompatible). Nothing here
trains: :func:`check_init_from` traces ``init`` abstractly."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest

from plume_jax.core.errors import ValidationError
from plume_jax.train.config import load_train_config
from plume_jax.train.warm_start import check_init_from, check_member

ZOO = pathlib.Path(__file__).resolve().parents[2] / "configs" / "zoo"
MLP = ZOO / "gaussian-mlp" / "1"
#: Zoo algorithms that train no network to continue (refused by design).
NO_NETWORK = {"belief_value_iteration", "lookahead_vi"}


def mlp_config(init_from: str, **overrides):
    return load_train_config(MLP / "config.yaml", {"run.init_from": init_from, **overrides})


def copy_policy(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / "policy"
    shutil.copytree(MLP / "policy", folder)
    return folder


def arrays_of(folder: pathlib.Path) -> dict[str, np.ndarray]:
    with np.load(folder / "policy.npz") as data:
        return {k: np.asarray(data[k]) for k in data.files}


def _kernel(arrays):
    return next(k for k in arrays if k.endswith("kernel"))


def _poison(value):
    def change(arrays):
        name = _kernel(arrays)
        a = arrays[name].copy()
        a.flat[0] = value
        arrays[name] = a
    return change


def _dtype(dtype):
    def change(arrays):
        name = _kernel(arrays)
        arrays[name] = arrays[name].astype(dtype)
    return change


def _negative_var(arrays):
    arrays["obs_var"] = arrays["obs_var"].copy()
    arrays["obs_var"].flat[0] = -1.0


def _nan_mean(arrays):
    arrays["obs_mean"] = arrays["obs_mean"].copy()
    arrays["obs_mean"].flat[0] = np.nan


BAD_WEIGHTS = {
    "nan": (_poison(np.nan), "NaN or infinite"),
    "inf": (_poison(np.inf), "NaN or infinite"),
    "-inf": (_poison(-np.inf), "NaN or infinite"),
    "complex": (_dtype(np.complex64), "has dtype complex64"),
    "int8": (_dtype(np.int8), "has dtype int8"),
    "bool": (_dtype(np.bool_), "has dtype bool"),
    "negative obs_var": (_negative_var, "negative values"),
    "nan obs_mean": (_nan_mean, "'obs_mean' holds 1 NaN"),
}


@pytest.mark.parametrize("bad", list(BAD_WEIGHTS))
def test_a_policy_the_loaders_refuse_is_refused_as_a_starting_point(tmp_path, bad):
    """Issue 54 item 12: NaN, infinite, complex, int8 or bool weights, a
    negative obs_var and a NaN obs_mean were accepted (only names, shapes
    and the spec were compared)."""
    folder = copy_policy(tmp_path)
    arrays = arrays_of(folder)
    change, match = BAD_WEIGHTS[bad]
    change(arrays)
    np.savez(folder / "policy.npz", **arrays)
    with pytest.raises(ValidationError, match=match) as info:
        check_init_from(mlp_config(str(folder)))
    assert info.value.parameter == "run.init_from" and "\n" not in str(info.value)


def _truncated_npz(folder):
    data = (folder / "policy.npz").read_bytes()
    (folder / "policy.npz").write_bytes(data[: len(data) // 2])


def _oversized_npz(folder):
    """The network's arrays plus 2 MiB of zeros (a few KiB compressed)."""
    arrays = arrays_of(folder)
    arrays["padding"] = np.zeros(1 << 18)
    np.savez_compressed(folder / "policy.npz", **arrays)


DAMAGE = {
    "truncated npz": (_truncated_npz, "policy.npz.*cannot be read"),
    "deep json": (lambda f: (f / "policy.json").write_text("[" * 100_000 + "]" * 100_000),
                  "policy.json.*nested at most"),
    "list json": (lambda f: (f / "policy.json").write_text("[1, 2]"), "policy spec"),
    "huge json": (lambda f: (f / "policy.json").write_text(" " * (2 << 20) + "{}"),
                  "policy.json.*at most 1 MiB"),
    "npz larger than the network": (_oversized_npz, "policy.npz.*over what is left"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_or_oversized_policy_is_refused_as_a_starting_point_in_one_line(tmp_path,
                                                                                   damage):
    """Issue 54 item 13: a damaged policy.npz raised BadZipFile, a deep
    policy.json RecursionError, a list AttributeError, and a 50 MB
    policy.json or an 800 MB array was read whole."""
    folder = copy_policy(tmp_path)
    change, match = DAMAGE[damage]
    change(folder)
    with pytest.raises(ValidationError, match=match) as info:
        check_init_from(mlp_config(str(folder)))
    assert info.value.parameter == "run.init_from" and "\n" not in str(info.value)


@pytest.mark.parametrize("empty", ["", "   "])
def test_an_empty_init_from_is_refused_not_a_fresh_network(empty):
    """Issue 54 item 14: ``run.init_from: ''`` trained a fresh network
    without a word."""
    with pytest.raises(ValidationError, match="a path .not empty. or null") as info:
        mlp_config(empty)
    assert info.value.parameter == "run.init_from"


def test_a_bad_policy_is_refused_before_the_run_folder_is_written(tmp_path):
    """The reader's checks run in ``plume-jax train``'s pre-flight, not
    only when the runner is built."""
    from plume_jax.train.run import train

    folder = copy_policy(tmp_path)
    arrays = arrays_of(folder)
    _poison(np.nan)(arrays)
    np.savez(folder / "policy.npz", **arrays)
    cfg = mlp_config(str(folder), **{"algo.total_steps": 64 * 128, "eval.num_envs": 8})
    out = tmp_path / "out"
    with pytest.raises(ValidationError, match="NaN or infinite"):
        train(cfg, out, progress=False)
    assert not out.exists()


def zoo_policies() -> list[tuple[pathlib.Path, list[pathlib.Path]]]:
    """``(version folder, [its policy, each kept seed's policy])`` of the zoo."""
    out = []
    for config in sorted(ZOO.glob("*/*/config.yaml")):
        version = config.parent
        seeds = sorted((version / "seeds").glob("*/policy"), key=lambda p: int(p.parent.name))
        out.append((version, [version / "policy", *seeds]))
    return out


def test_every_zoo_policy_is_accepted_as_a_starting_point_with_its_entrys_config():
    """Issue 55 claim 1: ``run.init_from`` refused 16 of 23 zoo versions and
    69 of 119 seed policies (``expected ... {'rnn_size': 64}; it has
    {'rnn_size': None}`` for an MLP), though the docs list them as starting
    points. Every version and kept seed is checked; the zoo's planners
    (no network to continue) are refused by name."""
    from plume_jax.train.algorithms.base import algorithm_class

    checked, versions = 0, zoo_policies()
    assert len(versions) >= 20
    for version, policies in versions:
        base = load_train_config(version / "config.yaml")
        if base.algo["algorithm"] in NO_NETWORK:
            for policy in policies:
                cfg = load_train_config(version / "config.yaml", {"run.init_from": str(policy)})
                with pytest.raises(ValidationError, match="cannot start from a trained policy"):
                    check_init_from(cfg)
            continue
        # the version's policy as `plume-jax train` checks it; its seeds with the same
        # env and algorithm (built once per version: what check_init_from builds)
        cfg = load_train_config(version / "config.yaml", {"run.init_from": str(policies[0])})
        assert check_init_from(cfg) == policies[0], policies[0]
        env, env_params = base.make_env()
        algo = algorithm_class(base.algo["algorithm"]).build(base, env, env_params)
        for policy in policies[1:]:
            cfg = load_train_config(version / "config.yaml", {"run.init_from": str(policy)})
            assert check_member(algo, cfg, env_params) == policy, policy
        checked += len(policies)
    assert checked >= 100


def test_a_setting_that_does_not_apply_to_the_network_type_does_not_make_policies_incompatible():
    """An MLP's rnn_size and gru_size (a GRU's conv settings) are not
    compared; a setting that shapes the network still is."""
    assert check_init_from(mlp_config(str(MLP / "policy"), **{"network.rnn_size": 16,
                                                               "network.gru_size": 8}))
    with pytest.raises(ValidationError, match="hidden_sizes") as info:
        check_init_from(mlp_config(str(MLP / "policy"), **{"network.hidden_sizes": [32, 32]}))
    assert info.value.parameter == "run.init_from"
    gru = ZOO / "gaussian-gru" / "1"
    cfg = load_train_config(gru / "config.yaml", {"run.init_from": str(gru / "policy"),
                                                  "network.conv_features": [4]})
    assert check_init_from(cfg) == gru / "policy"
    cfg = load_train_config(gru / "config.yaml", {"run.init_from": str(gru / "policy"),
                                                  "network.gru_size": 7})
    with pytest.raises(ValidationError, match="gru_size"):
        check_init_from(cfg)
