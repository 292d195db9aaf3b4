"""The one atomic file writer (issue 41, item 5): whole or not at all, the
umask's mode, a temporary name the checkpoint clean-up knows, and no second
copy of it anywhere in the package."""

from __future__ import annotations

import ast
import os
import pathlib

import pytest

import plume_jax
from plume_jax.files import atomic_create, atomic_write, is_temporary, new_folder
from plume_jax.train.checkpoint import remove_temporaries

PACKAGE = pathlib.Path(plume_jax.__file__).parent


def test_bytes_text_and_a_writer_function_are_written_whole(tmp_path):
    atomic_write(tmp_path / "a" / "b.bin", b"\x00\x01")
    atomic_write(tmp_path / "t.txt", "héllo\n")
    atomic_write(tmp_path / "f.txt", lambda tmp: pathlib.Path(tmp).write_text("via a function"))
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "t.txt").read_text(encoding="utf-8") == "héllo\n"
    assert (tmp_path / "f.txt").read_text() == "via a function"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "f.txt", "t.txt"]


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path, error):
    path = tmp_path / "report.json"
    atomic_write(path, "old")

    def fails(tmp):
        pathlib.Path(tmp).write_text("half of the new")
        raise error

    with pytest.raises(type(error)):
        atomic_write(path, fails)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_a_new_file_gets_the_umask_s_mode_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        for content in (b"x", lambda tmp: pathlib.Path(tmp).write_bytes(b"y")):
            path = atomic_write(tmp_path / f"f{id(content)}", content)
            assert path.stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)


def test_a_temporary_a_kill_left_is_removed_by_the_checkpoint_clean_up(tmp_path, monkeypatch):
    """A SIGKILL between the write and the rename leaves the temporary file:
    its name is one remove_temporaries recognises."""
    def killed(src, dst):
        raise SystemExit("killed before the rename")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(SystemExit):
        atomic_write(tmp_path / "runner.msgpack", b"state")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []  # an exception cleans up; a SIGKILL would not:
    leftover = tmp_path / ".runner.msgpack.tmp-1234_deadbeef"
    leftover.write_bytes(b"state")
    assert remove_temporaries(tmp_path) == [leftover]


def test_no_module_writes_files_atomically_on_its_own():
    """Issue 41: atomic writing existed in five copies (checkpoint, scenario
    reports, scoreboard record, two in the capture files); every writer now
    calls plume_jax.files.atomic_write."""
    own = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "files":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and "atomic" in node.name:
                own.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert own == []


def test_new_folder_is_a_fresh_folder_with_the_umask_s_mode(tmp_path):
    old = os.umask(0o002)
    try:
        a = new_folder(tmp_path / "p", ".x.partial-")
        b = new_folder(tmp_path / "p", ".x.partial-")
    finally:
        os.umask(old)
    assert a != b and a.name.startswith(".x.partial-") and list(a.iterdir()) == []
    assert a.stat().st_mode & 0o777 == 0o775


def test_atomic_create_writes_only_where_no_file_is_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "record.json"
    assert atomic_create(path, "first") is True
    assert atomic_create(path, "second") is False
    assert path.read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]
    assert is_temporary(".record.json.tmp-1234_deadbeef") and not is_temporary("record.json")


def test_of_threads_creating_one_file_at_once_exactly_one_creates_it_and_all_read_it_whole(
        tmp_path):
    import threading

    path, barrier, results = tmp_path / "record.json", threading.Barrier(8), {}

    def create(i):
        barrier.wait()
        results[i] = (atomic_create(path, f"writer {i} " * 1000), path.read_text())

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, (created, _) in results.items() if created]
    assert len(winners) == 1
    assert {text for _, text in results.values()} == {f"writer {winners[0]} " * 1000}
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]
