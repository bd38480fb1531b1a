"""Atomic writes: all or nothing, ordinary file modes."""

from __future__ import annotations

import os
import stat

import pytest

from fsmlearn.fsm.atomic import atomic_write


def test_new_file_gets_an_ordinary_mode_and_old_modes_are_kept(tmp_path):
    p = tmp_path / "a.bin"
    mask = os.umask(0o022)
    try:
        atomic_write(p, lambda f: f.write(b"x"))
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
        os.chmod(p, 0o600)
        atomic_write(p, lambda f: f.write(b"y"))
        assert stat.S_IMODE(p.stat().st_mode) == 0o600 and p.read_bytes() == b"y"
    finally:
        os.umask(mask)


def test_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "a.bin"
    p.write_bytes(b"old")

    def boom(f):
        f.write(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(p, boom)
    assert p.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["a.bin"]


def test_a_missing_folder_is_an_os_error_naming_the_target_not_the_temporary(tmp_path):
    target = tmp_path / "no" / "such" / "model.hmm"
    with pytest.raises(FileNotFoundError) as e:
        atomic_write(target, lambda f: f.write(b"x"))
    assert e.value.filename == str(target) and "no such folder" in str(e.value)
    assert ".tmp" not in str(e.value) and not (tmp_path / "no").exists()


def test_the_cli_names_the_model_file_when_its_folder_is_missing(tmp_path, capsys):
    from fsmlearn.cli.main import main
    data = tmp_path / "t.txt"
    data.write_text("the/DT cat/NN sat/VBD ./.\na/DT dog/NN ran/VBD ./.\n")
    target = tmp_path / "missing" / "m.hmm"
    assert main(["tag", "train", "--data", str(data), "-o", str(target), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"fsmlearn: error: {target}: cannot write here: no such folder")


def test_a_directory_in_the_way_is_named_not_the_temporary(tmp_path):
    (tmp_path / "adir").mkdir()
    with pytest.raises(IsADirectoryError) as e:
        atomic_write(tmp_path / "adir", lambda f: f.write(b"x"))
    assert e.value.filename == str(tmp_path / "adir") and ".tmp" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]
