"""Fuzzing the reified-context-model file reader (issue 16's harness, tests/fuzz.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given

from fuzz import check_reader, fuzz_settings, mutated
from fsmlearn.rcm import BOS, NGramRCM
from fsmlearn.rcm.io import load_rcm


def random_model(rng, Y, n, outside=0.0):
    import itertools
    from fsmlearn.rcm import STAR
    symbols = list(range(Y)) + [STAR, BOS]
    theta = {k + (y,): rng.normal() for k in itertools.product(symbols, repeat=n) for y in range(Y)}
    return NGramRCM(Y, n, theta, outside)


def _valid_rcm_bytes():
    import tempfile
    from pathlib import Path

    from fsmlearn.rcm.io import save_rcm
    with tempfile.TemporaryDirectory() as d:
        save_rcm(random_model(np.random.default_rng(2), 2, 1, outside=-0.5), Path(d) / "m.rcm", ["x", "y"])
        return (Path(d) / "m.rcm").read_bytes()


VALID_RCM = _valid_rcm_bytes()


def _check(result):
    m, labels = result
    assert all(np.isfinite(w) for w in m.theta.values())
    assert all(len(k) == m.n + 1 and all(BOS <= s < m.num_labels for s in k) for k in m.theta)
    assert labels is None or len(labels) == m.num_labels


@fuzz_settings()
@given(data=mutated(VALID_RCM))
def test_fuzz_rcm_files(data):
    """A located error, or a model whose weights are finite and keys in range."""
    check_reader("RCM model", load_rcm, data, "m.rcm", check=_check)


def _valid_align_bytes():
    import tempfile
    from pathlib import Path

    from fsmlearn.rcm.align import AlignRCM
    from fsmlearn.rcm.io import save_align_rcm
    rng = np.random.default_rng(4)
    m = AlignRCM(3, 2, n=1, hash_bits=6)
    m.theta[rng.choice(64, 12, replace=False)] = rng.normal(size=12)
    with tempfile.TemporaryDirectory() as d:
        save_align_rcm(m, Path(d) / "a.json", "xyz", ["P", "Q"])
        return (Path(d) / "a.json").read_bytes()


VALID_ALIGN = _valid_align_bytes()


def _check_align(result):
    m, chars, phonemes = result
    assert m.theta.shape == (1 << m.hash_bits,) and np.isfinite(m.theta).all()
    assert chars is None or len(chars) == m.num_chars
    assert phonemes is None or len(phonemes) == m.num_phonemes


@fuzz_settings()
@given(data=mutated(VALID_ALIGN))
def test_fuzz_alignment_rcm_files(data):
    """A located error, or an alignment model whose weights are finite and tables the right size."""
    from fsmlearn.rcm.io import load_align_rcm
    check_reader("alignment RCM model", load_align_rcm, data, "a.json", check=_check_align)
