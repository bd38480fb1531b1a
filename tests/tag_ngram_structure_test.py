"""cq's structure (fsmlearn.algo.tied.structure): malformed inputs raise MachineError."""

from __future__ import annotations

import numpy as np
import pytest

from fsmlearn.errors import MachineError
from fsmlearn.algo.tied.structure import TiedStructure
from tag_ngram_common import tiny


def test_bad_inputs_raise():
    rng, c, cs, allowed, lt, le = tiny(9)
    with pytest.raises(MachineError, match="no allowed tag"):
        TiedStructure.build(c, np.maximum(c.ilabel - 1, 0), np.zeros_like(allowed))
    with pytest.raises(MachineError, match="shape"):
        TiedStructure.build(c, np.zeros(3, np.int32), allowed)
    eps = c.replace(ilabel=np.where(c.ilabel == 1, 0, c.ilabel))
    with pytest.raises(MachineError, match="epsilon"):
        TiedStructure.build(eps, np.maximum(c.ilabel - 1, 0), allowed)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_exclusions_read_off_c_and_the_matrix_free_alpha_equal_the_engines(seed):
    """The structure built without the engine's signed system (exclusions read off c's
    sorted labels, alpha by GMRES and plain steps) equals the one built through it."""
    from conftest import backoff_machine
    rng = np.random.default_rng(seed)
    c = backoff_machine(rng, V=4, order=3, normalised=True, p_final=0.3)
    allowed = np.ones((5, 2), bool)
    aw = np.maximum(c.ilabel - 1, 0)
    a = TiedStructure.build(c, aw, allowed, tol=1e-12)
    b = TiedStructure.build(c, aw, allowed, tol=1e-12, system="engine")
    assert np.allclose(a.alpha, b.alpha, rtol=1e-10, atol=1e-14)
    for x, y in ((a.ev_src, b.ev_src), (a.ev_dst, b.ev_dst), (a.ev_arc, b.ev_arc)):
        assert sorted(zip(a.ev_src, a.ev_arc, a.ev_dst)) == sorted(zip(b.ev_src, b.ev_arc, b.ev_dst))
    ka = dict(zip(zip(a.ev_src.tolist(), a.ev_arc.tolist()), a.ev_k))
    kb = dict(zip(zip(b.ev_src.tolist(), b.ev_arc.tolist()), b.ev_k))
    assert ka.keys() == kb.keys() and all(abs(ka[k] - kb[k]) <= 1e-15 * abs(kb[k]) for k in ka)
    fa = sorted(zip(a.fin_state.tolist(), a.fin_k.tolist()))
    fb = sorted(zip(b.fin_state.tolist(), b.fin_k.tolist()))
    assert [q for q, _ in fa] == [q for q, _ in fb] and np.allclose([k for _, k in fa], [k for _, k in fb],
                                                                      rtol=1e-15)


def test_alpha_of_a_real_lm_equals_the_engines():
    from fsmlearn.data import iter_sentences
    from fsmlearn.lm.counts import count_ngrams
    from fsmlearn.lm.estimate import estimate
    from fsmlearn.lm.model import compile_lm
    sents = [[w for w, _ in s] for s in iter_sentences("wsj-small")][:500]
    c = compile_lm(estimate(count_ngrams(sents, 4), "kneser-ney")).machine
    allowed = np.ones((int(c.ilabel.max()) + 1, 2), bool)
    aw = np.maximum(c.ilabel - 1, 0)
    a = TiedStructure.build(c, aw, allowed, tol=1e-10)
    b = TiedStructure.build(c, aw, allowed, tol=1e-10, system="engine")
    # both stop within tol (relative, on the largest value) of the solution
    assert np.max(np.abs(a.alpha - b.alpha)) <= 1e-9 * np.max(b.alpha)
    assert a.num_exclusions == b.num_exclusions
    assert np.array_equal(a.sh_arc, b.sh_arc) and np.array_equal(a.ex_ptr, b.ex_ptr)
