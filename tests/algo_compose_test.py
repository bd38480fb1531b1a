"""compose / intersect with ``return_pairs``: the state pairs behind the product's states; their
symbol tables must agree."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import backoff_machine, random_machine
from fsmlearn import Machine, SymbolTable
from fsmlearn.algo import compose, intersect, phi_expand
from fsmlearn.errors import SymbolTableError


def _same_machine(m1, m2):
    assert m1.num_states == m2.num_states and m1.start == m2.start
    for name in ("src_start", "dst", "ilabel", "olabel", "weight", "final"):
        assert np.array_equal(getattr(m1, name), getattr(m2, name)), name


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("connect", [True, False])
def test_pairs_name_the_states_each_product_arc_joins(seed, connect):
    rng = np.random.default_rng(seed)
    a = random_machine(rng, 5, 12, cyclic=bool(seed % 2), labels=4)
    b = backoff_machine(rng, V=4, order=3, normalised=bool(seed % 2))
    plain = compose(a, b, connect=connect)
    m, pairs = compose(a, b, connect=connect, return_pairs=True)
    _same_machine(m, plain)
    assert pairs.shape == (m.num_states, 2) and pairs.dtype == np.int64
    assert tuple(pairs[m.start]) == (a.start, b.start)
    # every product arc follows an arc of a between the pair's a-states, with its label, and
    # lands in a b-state that b's phi-free expansion reaches from the source's b-state on it
    e = phi_expand(b)
    src = m.arc_src
    for k in range(m.num_arcs):
        qa, qb = pairs[src[k]]
        da, db = pairs[m.dst[k]]
        arcs_a = range(a.src_start[qa], a.src_start[qa + 1])
        assert any(a.dst[x] == da and a.ilabel[x] == m.ilabel[k] for x in arcs_a)
        arcs_b = range(e.src_start[qb], e.src_start[qb + 1])
        assert any(e.dst[y] == db and e.ilabel[y] == a.olabel[next(
            x for x in arcs_a if a.dst[x] == da and a.ilabel[x] == m.ilabel[k])] for y in arcs_b)
    # a state's final weight is the sum of its pair's final weights
    fa, fb = a.neglog_weights()[1], e.neglog_weights()[1]
    assert np.allclose(m.final, fa[pairs[:, 0]] + fb[pairs[:, 1]])


def test_intersect_passes_the_pairs_through():
    rng = np.random.default_rng(3)
    a = random_machine(rng, 4, 9, labels=3)
    b = random_machine(rng, 3, 7, labels=3)
    m, pairs = intersect(a, b, return_pairs=True)
    _same_machine(m, intersect(a, b))
    assert pairs.shape == (m.num_states, 2)


# ---------------------------------------------------------------- symbol tables


def _with_tables(m, isyms=None, osyms=None):
    return m.replace(isyms=isyms, osyms=osyms)


WORDS = SymbolTable(["<eps>", "a", "b", "c", "d"], name="words")


def test_compose_with_one_side_lacking_a_table_is_an_error():
    rng = np.random.default_rng(5)
    a = random_machine(rng, 4, 9, labels=4)
    b = random_machine(rng, 3, 7, labels=4)
    for x, y, lacking in [(a, _with_tables(b, WORDS), "left machine's outputs"),
                          (_with_tables(a, WORDS), b, "right machine's inputs")]:
        with pytest.raises(SymbolTableError, match=f"{lacking} have no symbol table") as e:
            compose(x, y)
        assert "'words', 5 symbols" in str(e.value)
        with pytest.raises(SymbolTableError, match="no symbol table"):
            intersect(x, y)
    # neither side, or the same table on both: label ids are matched as they are
    plain = compose(a, b)
    _same_machine(compose(_with_tables(a, WORDS), _with_tables(b, WORDS)), plain)
    _same_machine(compose(_with_tables(a, WORDS), _with_tables(b, SymbolTable(list(WORDS.symbols)))), plain)


def test_compose_with_tables_that_differ_names_the_first_symbol_that_differs():
    rng = np.random.default_rng(6)
    a = _with_tables(random_machine(rng, 4, 9, labels=4), WORDS)
    other = SymbolTable(["<eps>", "a", "b", "x", "d"], name="other")
    b = _with_tables(random_machine(rng, 3, 7, labels=4), other)
    with pytest.raises(SymbolTableError, match=r"differ at label id 3: 'c' in the left machine's outputs "
                                               r"\('words', 5 symbols\), 'x' in the right machine's inputs "
                                               r"\('other', 5 symbols\)"):
        compose(a, b)
    with pytest.raises(SymbolTableError, match="differ at label id 3: 'c' .* 'x'"):
        intersect(a, b)
    # a key that only one table has
    longer = SymbolTable(["<eps>", "a", "b", "c", "d", "e"], name="longer")
    with pytest.raises(SymbolTableError, match="differ at label id 5: no symbol in the left .*, 'e' in the right"):
        compose(a, _with_tables(b, longer))
    # a transducer's output table is what meets b's input table
    t = random_machine(rng, 4, 9, labels=4)
    t = Machine.from_arcs(t.num_states, t.start, t.final, t.arc_src, t.dst, t.ilabel, t.ilabel % 4 + 1,
                          t.weight, isyms=other, osyms=WORDS)
    assert compose(t, _with_tables(b, WORDS)).isyms == other
    with pytest.raises(SymbolTableError, match="differ at label id 3: 'c' .* 'x'"):
        compose(t, b)
