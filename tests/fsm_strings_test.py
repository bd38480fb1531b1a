"""Tests of fsmlearn.fsm.strings: string lists as a UTF-8 blob and offsets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsmlearn.errors import FileFormatError, ModelFormatError, NpzFormatError
from fsmlearn.fsm.strings import pack_strings, unpack_strings


@given(st.lists(st.text(max_size=8), max_size=10))
def test_round_trip(strings):
    blob, offs = pack_strings(strings)
    assert blob.dtype == np.uint8 and offs.dtype == np.int64
    assert offs.shape == (len(strings) + 1,) and offs[0] == 0 and offs[-1] == blob.size
    assert unpack_strings(blob, offs) == strings


def test_round_trip_of_empty_and_non_ascii_strings():
    strings = ["", "naïve", "", "日本語", "<unk>", "\u00a0", "😀", ""]
    blob, offs = pack_strings(strings)
    assert unpack_strings(blob, offs) == strings
    blob, offs = pack_strings([])
    assert blob.size == 0 and offs.tolist() == [0]
    assert unpack_strings(blob, offs) == []


@pytest.mark.parametrize("error", [NpzFormatError, ModelFormatError])
def test_bad_blobs_raise_the_callers_error(error, tmp_path):
    blob, offs = pack_strings(["ab", "ç", "d"])
    path = tmp_path / "f.npz"
    bad = [
        (blob, offs[:-1], "do not rise from 0"),                         # does not reach the end
        (blob, offs[::-1].copy(), "do not rise from 0"),                 # falls
        (blob, offs + 1, "do not rise from 0"),                          # does not start at 0
        (blob, np.zeros(0, np.int64), "at least one offset"),
        (blob.reshape(1, -1), offs, "1-d blob"),
        (np.frombuffer(b"ab\xff\xfed", np.uint8), offs, "string 1 is not UTF-8"),
    ]
    for b, o, msg in bad:
        with pytest.raises(error, match=msg) as e:
            unpack_strings(b, o, error=error, path=path)
        assert str(path) in str(e.value)
        assert isinstance(e.value, FileFormatError) and isinstance(e.value, ValueError)


def test_default_error_is_a_file_format_error():
    with pytest.raises(FileFormatError, match="do not rise"):
        unpack_strings(np.zeros(3, np.uint8), np.array([0, 2], np.int64))
