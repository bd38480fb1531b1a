"""relax_block_system (the tagged product's solver, fsmlearn.algo.product): X = P(B + A X) with matrix-valued rows, against a dense solve."""

import numpy as np
import pytest

from fsmlearn.algo import phi_pass_rows, relax_block_system
from fsmlearn.errors import DivergenceError, NotConvergedError, SemiringError


def random_system(rng, n=7, m=3, E=12, nb=4, mass=0.6, one_col=False, trans=None):
    """A random forest (parents of lower index), block arcs with nonnegative weights scaled so
    that the iteration contracts (mass < 1), constant rows B; ``one_col``: rows' weights
    independent of the input column; ``trans``: a dense factor [m, m] on (input, output)."""
    parent = np.array([-1] + [int(rng.integers(-1, q)) for q in range(1, n)], np.int64)
    depth = np.zeros(n, int)
    for q in range(n):
        depth[q] = 0 if parent[q] < 0 else depth[parent[q]] + 1
    order = np.argsort(-depth, kind="stable").astype(np.int64)          # deepest first
    weight = rng.uniform(0.1, 0.5, n)
    sizes = rng.integers(1, m + 1, nb)
    blk_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    blk_col = np.concatenate([rng.choice(m, s, replace=False) for s in sizes]).astype(np.int64)
    pad = 2
    blk_w = rng.uniform(0, 1, (blk_ptr[-1] + pad, 1 if one_col else m))
    blk_row0 = np.full(nb, pad, np.int64)                                 # rows start after the padding
    src = rng.integers(0, n, E)
    dst = rng.integers(0, n, E)
    block = rng.integers(0, nb, E)
    scale = rng.uniform(0.2, 1.0, E)
    B = rng.uniform(0, 1, (n, m))
    args = [B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, parent, weight, order]
    # scale the arcs so that the spectral radius of P A is `mass`
    M = dense_operator(args, False, trans)
    args[3] = scale * mass / max(abs(np.linalg.eigvals(M)))
    return args


def dense_operator(args, transpose, trans=None):
    """The matrix of X -> P (A X) (or P^T A^T X) on X.ravel(), built from the definitions."""
    B, src, dst, scale, block, blk_ptr, blk_col, blk_w, blk_row0, parent, weight, order = args
    n, m = B.shape
    A = np.zeros((n * m, n * m))
    for e in range(len(src)):
        b = block[e]
        for j in range(blk_ptr[b], blk_ptr[b + 1]):
            w = blk_w[blk_row0[b] + j]
            for tp in range(m):
                f = 1.0 if trans is None else trans[tp, blk_col[j]]
                A[dst[e] * m + blk_col[j], src[e] * m + tp] += scale[e] * w[0 if w.shape[0] == 1 else tp] * f
    P = np.eye(n * m)
    for q in order:                       # P = product of the elementary passes, deepest first
        if parent[q] >= 0:
            Eq = np.eye(n * m)
            for t in range(m):
                Eq[parent[q] * m + t, q * m + t] = weight[q]
            P = Eq @ P
    return (P @ A) if not transpose else (P.T @ A.T)


def dense_solve(args, transpose, trans=None):
    B, parent, weight, order = args[0], args[9], args[10], args[11]
    n, m = B.shape
    P = np.eye(n * m)
    for q in order:
        if parent[q] >= 0:
            Eq = np.eye(n * m)
            for t in range(m):
                Eq[parent[q] * m + t, q * m + t] = weight[q]
            P = Eq @ P
    Pb = (P if not transpose else P.T) @ B.ravel()
    x = np.linalg.solve(np.eye(n * m) - dense_operator(args, transpose, trans), Pb)
    return x.reshape(n, m)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("transpose", [False, True])
def test_matches_the_dense_solve(seed, transpose):
    args = random_system(np.random.default_rng(seed), mass=0.7)
    X, info = relax_block_system(*args, transpose=transpose, tol=1e-13)
    ref = dense_solve(args, transpose)
    assert np.allclose(X, ref, rtol=1e-10, atol=1e-12)
    assert info.sweeps > 2 and 0 < info.rate < 1
    # a warm start at the answer stops at once, one from a perturbed answer converges faster
    Y, info2 = relax_block_system(*args, transpose=transpose, tol=1e-13, init=ref * 1.001)
    assert np.allclose(Y, ref, rtol=1e-10, atol=1e-12) and info2.sweeps <= info.sweeps


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("one_col,with_trans", [(True, False), (True, True), (False, True)])
def test_rows_independent_of_the_input_column_and_a_dense_factor(seed, transpose, one_col, with_trans):
    """The tagged product's shapes: rows with one weight for every input column (the
    separable path, O(rows + n m^2) a sweep) and a dense factor on (input, output) columns."""
    rng = np.random.default_rng(seed + 10)
    trans = rng.uniform(0.2, 1.0, (3, 3)) if with_trans else None
    args = random_system(rng, mass=0.7, one_col=one_col, trans=trans)
    X, info = relax_block_system(*args, trans=trans, transpose=transpose, tol=1e-13)
    assert np.allclose(X, dense_solve(args, transpose, trans), rtol=1e-10, atol=1e-12)
    assert info.sweeps > 2


def test_phi_pass_rows_is_P_and_its_transpose():
    args = random_system(np.random.default_rng(9))
    B, parent, weight, order = args[0], args[9], args[10], args[11]
    up = B.copy()
    phi_pass_rows(up, order, parent, weight, False)
    down = B.copy()
    phi_pass_rows(down, order, parent, weight, True)
    # with no arcs the system is X = P B
    no_arcs = list(args)
    no_arcs[1:5] = [np.zeros(0, np.int64)] * 2 + [np.zeros(0)] + [np.zeros(0, np.int64)]
    assert np.allclose(up, dense_solve(no_arcs, False)) and np.allclose(down, dense_solve(no_arcs, True))


def test_stopping_at_the_sweep_limit_raises():
    args = random_system(np.random.default_rng(1), mass=0.9)
    for transpose in (False, True):
        with pytest.raises(NotConvergedError, match=r"alpha2: relaxation .* within 1 sweeps"):
            relax_block_system(*args, transpose=transpose, max_sweeps=1, what="alpha2")


def test_a_divergent_system_raises():
    args = random_system(np.random.default_rng(2), mass=1.5)
    with pytest.raises(DivergenceError, match="diverge"):
        relax_block_system(*args, max_sweeps=100_000)


def test_bad_arrays_are_named():
    args = random_system(np.random.default_rng(3))
    bad = list(args)
    bad[2] = args[2].copy()
    bad[2][0] = 99
    with pytest.raises(SemiringError, match="arc states"):
        relax_block_system(*bad)
    bad = list(args)
    bad[8] = args[8] + 100
    with pytest.raises(SemiringError, match="outside blk_w"):
        relax_block_system(*bad)
    with pytest.raises(SemiringError, match="init has shape"):
        relax_block_system(*args, init=np.zeros((2, 2)))
