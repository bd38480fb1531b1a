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
