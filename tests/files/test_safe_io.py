"""Bounded readers (plume_jax.files.safe_io) and bounded error messages
(plume_jax.core.errors.bounded_repr): every file and text the package parses is
bounded in size and nesting before it is parsed, and no error message
quotes a value without a size limit (issue 26, defect 5)."""

from __future__ import annotations

import os
import time
import tracemalloc

import numpy as np
import pytest
import yaml

from plume_jax import cli
from plume_jax.envs.config_files import make_from_config
from plume_jax.core.errors import REPR_LIMIT, ValidationError, bounded_repr
from plume_jax.files.safe_io import (MAX_DEPTH, json_depth, load_json_bounded, load_json_file,
                               load_npz_bounded, load_yaml_bounded, load_yaml_file,
                               read_bytes_bounded, read_text_bounded)


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs": ``width ** levels`` leaves from ~1 KB of YAML."""
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


BOMB = alias_bomb()


def test_yaml_alias_bomb_is_refused_before_expanding():
    # 9**30 leaves: only a loader that never expands it can refuse it quickly
    bomb = alias_bomb(levels=30)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ValidationError) as info:
            load_yaml_bounded(bomb, "--set")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 5.0 and peak < 20 * 2**20
    assert info.value.parameter == "--set"
    assert "at most 100,000 nodes once aliases are expanded" in str(info.value)
    assert len(str(info.value)) < 600


def test_recursive_yaml_alias_is_refused():
    with pytest.raises(ValidationError, match="alias that contains itself"):
        load_yaml_bounded("&a [1, *a]", "--set")
    with pytest.raises(ValidationError, match="alias that contains itself"):
        load_yaml_bounded("&a {x: *a}", "--set")


def test_deep_yaml_is_refused_without_a_recursion_error():
    deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(ValidationError, match=f"nested at most {MAX_DEPTH} levels"):
        load_yaml_bounded(deep, "--set")
    # nesting made deep through aliases counts too
    nested = "a: &a " + "[" * 40 + "1" + "]" * 40 + "\nb: " + "[" * 40 + "*a" + "]" * 40
    with pytest.raises(ValidationError, match="levels of nesting once aliases are expanded"):
        load_yaml_bounded(nested, "--set")


def test_ordinary_yaml_still_loads_with_anchors_and_merge_keys():
    text = "base: &b {sigma: 10, grid_size: [8, 8]}\nrun: {<<: *b, sigma: 5}\nlist: [*b, *b]\n"
    assert load_yaml_bounded(text, "x") == yaml.safe_load(text)
    assert load_yaml_bounded("", "x") is None
    assert load_yaml_bounded("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") is not None


def test_a_repeated_merge_key_is_refused_not_silently_dropped():
    """Issue 54 item 17: ``{<<: {x: 1}, <<: {x: 2}}`` read as ``{x: 1}``
    (PyYAML keeps the first ``<<``); merge keys are kept, one per mapping."""
    text = "a: &a {x: 1}\nb: &b {x: 2, y: 3}\nc:\n  <<: *a\n  <<: *b\n"
    with pytest.raises(ValidationError, match=r"the key '<<' is on line 4 and again on line 5; "
                                              r"merge several mappings with one") as info:
        load_yaml_bounded(text, "--config")
    assert info.value.parameter == "--config"
    with pytest.raises(ValidationError, match="the key '<<'"):
        load_yaml_bounded("{<<: {x: 1}, <<: {x: 2}}", "--set")
    # one << per mapping, with a list of mappings, still merges (the first listed wins)
    merged = load_yaml_bounded("a: &a {x: 1}\nb: &b {x: 2, y: 3}\nc: {<<: [*a, *b], z: 0}\n", "x")
    assert merged["c"] == {"x": 1, "y": 3, "z": 0}


@pytest.mark.parametrize("text, message", [
    ("!!python/object/apply:os.system ['echo owned']", "tags that build Python objects"),
    ("1" * 5000, "whose values can be read"),
    ("x" * (2**20 + 1), "of at most 1 MiB"),
    ("a: [1, 2", "YAML ("),
])
def test_bad_yaml_text_is_a_validation_error(text, message):
    with pytest.raises(ValidationError, match=message.replace("(", r"\(")) as info:
        load_yaml_bounded(text, "--set")
    assert info.value.parameter == "--set" and len(str(info.value)) < 800


def test_deep_json_is_refused_without_a_recursion_error():
    with pytest.raises(ValidationError, match="nested at most 64 levels deep"):
        load_json_bounded("[" * 100_000 + "]" * 100_000, "meta.json")
    with pytest.raises(ValidationError, match="nested at most 64 levels deep"):
        load_json_bounded(b'{"a": ' * 70 + b"1" + b"}" * 70, "meta.json")


def test_json_brackets_inside_strings_do_not_count_as_nesting():
    text = '{"a": "' + "[{" * 500 + '", "b": ["\\"]"]}'
    assert json_depth(text) == 2
    assert load_json_bounded(text, "x")["b"] == ['"]']


def test_bad_json_is_a_validation_error():
    with pytest.raises(ValidationError, match=r"JSON \(Expecting"):
        load_json_bounded('{"a": ', "meta.json")
    with pytest.raises(ValidationError, match="in UTF-8"):
        load_json_bounded(b"\xff\xfe", "meta.json")


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(2**31)  # sparse: 2 GiB declared, nothing to read
    with pytest.raises(ValidationError, match="at most 1 MiB .this one is 2 GiB.") as info:
        load_yaml_file(big, "--config")
    assert info.value.parameter == "--config" and info.value.value == str(big)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_dev_zero_is_refused_after_reading_just_over_the_limit():
    t0 = time.perf_counter()
    with pytest.raises(ValidationError, match="more than that could be read"):
        read_text_bounded("/dev/zero", 2**20, "--config")
    assert time.perf_counter() - t0 < 2.0


def test_a_folder_and_a_missing_file_are_refused(tmp_path):
    with pytest.raises(ValidationError, match="this is a folder"):
        read_bytes_bounded(tmp_path, 100, "policy")
    with pytest.raises(ValidationError, match="No such file"):
        load_json_file(tmp_path / "none.json", "meta")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_without_a_writer_is_not_waited_for(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_text_bounded(fifo, 100, "--config") == ""


def test_binary_file_is_refused_as_not_utf8_text(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    with pytest.raises(ValidationError, match="a readable text file in UTF-8"):
        load_yaml_file(path, "--config")


def _npz_with(path, header_shape, data: bytes, dtype="<f4"):
    import io
    import zipfile

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": dtype, "fortran_order": False, "shape": header_shape})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("w.npy", buffer.getvalue() + data)
    return path


def test_npz_of_weights_loads_within_its_bound(tmp_path):
    np.savez(tmp_path / "p.npz", w=np.ones((3, 4), np.float32), b=np.zeros(4, np.int8))
    arrays = load_npz_bounded(tmp_path / "p.npz", "path", max_bytes=1000)
    assert sorted(arrays) == ["b", "w"] and arrays["w"].shape == (3, 4)
    with pytest.raises(ValidationError, match="over what is left of the bound"):
        load_npz_bounded(tmp_path / "p.npz", "path", max_bytes=50)


@pytest.mark.parametrize("make, message", [
    (lambda p: np.savez(p, w=np.array([None], dtype=object)), "has dtype object"),
    (lambda p: _npz_with(p, (10**6, 10**6), b"\0" * 16), r"declares \(1000000, 1000000\)"),
    (lambda p: _npz_with(p, (2, 2), b"\0" * (4 << 20)), "unpacks to"),
    (lambda p: _npz_with(p, (100,), b"\0" * 16), "unpacks to"),
    (lambda p: p.write_bytes(b"garbage" * 10), "cannot be read .BadZipFile"),
    (lambda p: p.write_bytes(b""), "cannot be read .BadZipFile"),
    (lambda p: p.mkdir(), "this is a folder"),
])
def test_malformed_npz_is_refused_before_it_is_decompressed(make, message, tmp_path):
    path = tmp_path / "p.npz"
    make(path)
    with pytest.raises(ValidationError, match=message) as info:
        load_npz_bounded(path, "path", max_bytes=1 << 20)
    assert info.value.parameter == "path" and str(path) in str(info.value)


# ----------------------------------------------------------- bounded messages
def test_validation_error_quotes_a_bounded_excerpt_of_a_huge_value():
    shared = ["lol"] * 9
    for _ in range(40):  # 9**41 leaves by reference: repr() would never end
        shared = [shared] * 9
    t0 = time.perf_counter()
    error = ValidationError.for_parameter("x" * 10_000, shared, "y" * 10_000)
    assert time.perf_counter() - t0 < 1.0
    assert len(str(error)) < 3000 and error.value is shared
    assert len(bounded_repr("z" * 10**6)) <= REPR_LIMIT
    assert bounded_repr(10**20_000) == f"<int of {(10**20_000).bit_length()} bits>"
    assert bounded_repr({"a": 1, "b": [1, 2]}) == "{'a': 1, 'b': [1, 2]}"


def test_bounded_repr_survives_a_value_whose_repr_raises():
    class Broken:
        def __repr__(self):
            raise RuntimeError("no")

    assert bounded_repr(Broken()) == "<Broken (repr failed: RuntimeError)>"


def test_env_config_of_a_text_file_quotes_an_excerpt_not_the_whole_file(tmp_path):
    """``env.config=/etc/passwd`` echoed the whole file in the error."""
    path = tmp_path / "passwd"
    path.write_text("".join(f"user{i}:x:{i}:{i}::/home/user{i}:/bin/sh " for i in range(500)))
    with pytest.raises(ValidationError, match="expected a YAML mapping of settings") as info:
        make_from_config(path)
    message = str(info.value)
    assert str(path) in message and "user0:x:0" in message and "user250:" not in message
    assert len(message) < 400


def test_train_env_config_etc_passwd_echoes_only_an_excerpt(tmp_path, capsys):
    text = tmp_path / "passwd"
    text.write_text("".join(f"user{i}:x:{i}:{i}::/home/user{i}:/bin/sh\n" for i in range(500)))
    config = tmp_path / "train.yaml"
    config.write_text(f"env: {{config: {text}}}\nalgo: {{total_steps: 10000}}\n")
    assert cli.main(["train", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "expected a YAML mapping of settings" in err and "user0:x:0" in err
    assert "user250:" not in err and len(err) < 400


# ------------------------------------------------------------ every CLI door
@pytest.fixture()
def bomb_file(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    return path


@pytest.fixture()
def scenario_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("env: {preset: PlumeNav-Gaussian-v0, overrides: {grid_size: [8, 8]}}\n"
                    "agent: klinotaxis\nepisodes: 2\n")
    return path


@pytest.mark.parametrize("door", ["train --config", "sweep --config", "train --set",
                                  "sweep --set", "demo --set", "evaluate --scenario",
                                  "evaluate --agent-param"])
def test_yaml_alias_bomb_through_every_cli_door_is_a_clean_error(door, bomb_file, scenario_file,
                                                                 tmp_path, capsys):
    config = tmp_path / "train.yaml"
    config.write_text("env: {id: PlumeNav-Gaussian-v0}\nalgo: {total_steps: 1000}\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"base: {config}\ngrid: {{run.seed: [0, 1]}}\n")
    out = str(tmp_path / "out")
    bomb_value = "{" + BOMB.strip().replace("\n", ", ") + "}"
    args = {
        "train --config": ["train", "--config", str(bomb_file), "--out", out],
        "sweep --config": ["sweep", "--config", str(bomb_file), "--out", out],
        "train --set": ["train", "--config", str(config), "--out", out,
                        "--set", f"algo.learning_rate={bomb_value}"],
        "sweep --set": ["sweep", "--config", str(sweep), "--out", out,
                        "--set", f"grid.run.seed={bomb_value}"],
        "demo --set": ["demo", "--out", "", "--set", f"sigma={bomb_value}"],
        "evaluate --scenario": ["evaluate", "--scenario", str(bomb_file), "--out", out],
        "evaluate --agent-param": ["evaluate", "--scenario", str(scenario_file), "--out", out,
                                   "--agent", "klinotaxis", "--agent-param",
                                   f"klinotaxis.threshold={bomb_value}"],
    }[door]
    assert len(bomb_value) < 1200
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("plume-jax: error:") and "nodes once aliases are expanded" in err, err
    assert len(err) < 2000
    assert not os.path.exists(out) or not os.listdir(out)



def test_numbers_with_an_exponent_read_as_numbers_not_strings():
    """PyYAML (YAML 1.1) reads ``3e-4`` and ``1e6`` as strings, which every
    setting then refused as "not a number"; plume_jax's reader follows YAML
    1.2 there, and leaves strings and non-numbers alone."""
    from plume_jax.files.safe_io import load_yaml_bounded

    data = load_yaml_bounded("a: 3e-4\nb: 1e6\nc: -2.5E+3\nd: .5e1\ne: 12\nf: '1e3'\n"
                             "g: e5\nh: 1.2.3\ni: 0x10\nj: 1.0e-3\n", "x")
    assert data == {"a": 3e-4, "b": 1e6, "c": -2500.0, "d": 5.0, "e": 12, "f": "1e3",
                    "g": "e5", "h": "1.2.3", "i": 16, "j": 1e-3}
    assert isinstance(data["b"], float) and isinstance(data["e"], int)
