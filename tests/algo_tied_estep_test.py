"""The engine's E-step over a tied product (fsmlearn.algo.tied.TiedEStep): every schedule
it picks gives the same blocks and statistics as the generic routines over the implicit
product (fsmlearn.algo.product_block_update, product_posteriors, product_expectation),
and the generic block update is the block optimum it claims to be."""

from __future__ import annotations

import numpy as np
import pytest

from fsmlearn.algo import product_block_update, tag_product
from fsmlearn.algo.tied import TiedEStep
from fsmlearn.algo.tied.general import bound_product, cq_product, d_bound_d_phi_product
from fsmlearn.errors import ArgumentError, SemiringError
from fsmlearn.tag.ngram.em import NGramEM, mstep
from tag_ngram_common import random_phi, tiny


def _same_stats(a, b, rel=1e-9):
    assert a.bound == pytest.approx(b.bound, rel=rel, abs=1e-9)
    assert a.entropy == pytest.approx(b.entropy, rel=rel, abs=1e-9)
    assert np.allclose(a.trans, b.trans, rtol=rel, atol=1e-11)
    assert np.allclose(a.emit, b.emit, rtol=rel, atol=1e-11)


def test_the_engine_picks_the_schedule():
    rng, c, cs, allowed, lt, le = tiny(1, V=3, T=3)
    assert TiedEStep(cs).schedule == "sweep"
    assert TiedEStep(cs, gradients=True).schedule == "events"
    assert TiedEStep(cs, cond="roots").schedule == "cond"
    assert TiedEStep(cs, schedule="general").schedule == "general"
    with pytest.raises(ArgumentError, match="gives no gradients"):
        TiedEStep(cs, gradients=True, schedule="sweep")
    with pytest.raises(ArgumentError, match="'cond' schedule"):
        TiedEStep(cs, cond="roots", schedule="events")
    with pytest.raises(ArgumentError, match="needs blocks conditioned"):
        TiedEStep(cs, schedule="cond")
    with pytest.raises(ArgumentError, match="Dask client"):
        TiedEStep(cs, schedule="shards")
    with pytest.raises(ArgumentError, match="schedule must be one of"):
        TiedEStep(cs, schedule="fast")
    with pytest.raises(ArgumentError, match="no gradients"):
        TiedEStep(cs).d_bound_d_phi(lt, le)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_every_schedule_updates_like_the_generic_product(seed):
    """Three updates with M-steps between them: the fused passes (one thread and two),
    the per-event kernels and the generic routines give the same blocks, counts and bound,
    on backoff trigrams with failure arcs, exclusions and cycles."""
    rng, c, cs, allowed, lt0, le0 = tiny(seed, V=3, T=3, p_final=0.3)
    assert cs.num_exclusions > 0
    phi0 = random_phi(rng, cs)
    runs = {}
    for name, kw in {"sweep-1": dict(schedule="sweep", threads=1), "sweep-2": dict(schedule="sweep", threads=2),
                     "events": dict(schedule="events", threads=1), "general": dict(schedule="general")}.items():
        est = TiedEStep(cs, phi0.copy(), **kw)
        lt, le = lt0, le0
        out = []
        st = None
        for _ in range(3):
            st = est.update(lt, le, st)
            out.append((est.phi.copy(), st))
            lt, le = mstep(st.trans, st.emit, allowed)
            st = est.stats(lt, le)
        runs[name] = out
    ref = runs["general"]
    for name, out in runs.items():
        for (phi, st), (phi_r, st_r) in zip(out, ref):
            assert np.allclose(phi, phi_r, rtol=1e-9, atol=1e-12), name
            _same_stats(st, st_r)
    # the updates moved the blocks
    assert not np.allclose(ref[0][0], phi0, atol=1e-3)


def test_ngram_em_on_the_general_schedule_equals_the_fused_passes():
    """The model only calls the engine: NGramEM's bounds are the same whichever schedule
    the engine runs (the model asks for none; ``estep`` swapped to the generic one)."""
    rng, c, cs, allowed, lt, le = tiny(5, V=3, T=3, p_final=0.3)
    a = NGramEM(cs, allowed, lt, le)
    assert a.estep.schedule == "sweep"
    b = NGramEM(cs, allowed, lt, le)
    b.estep = TiedEStep(cs, schedule="general")
    ha = [r.bound for r in a.run(4)]
    hb = [r.bound for r in b.run(4)]
    assert np.allclose(ha, hb, rtol=1e-9)
    assert all(y >= x - 1e-9 for x, y in zip(ha, ha[1:]))        # vEM raises the bound


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_block_update_is_the_block_optimum(seed):
    """Updating one block alone (the others held) by product_block_update gives a bound at
    least that of any other point of the block's simplex, tried at random, for the blocks
    whose destination does not fail over to their source (where the update is exact)."""
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    est = TiedEStep(cs, phi.copy(), schedule="general")
    est.update(lt, le)
    new = est.phi
    sizes = np.diff(cs.blk_start)
    tried = 0
    for a in np.flatnonzero(sizes > 1):
        sources = set(cs.ev_src[cs.ev_arc == a].tolist())
        if _chain(c, int(c.dst[a])) & sources:
            continue
        lo, hi = cs.blk_start[a], cs.blk_start[a + 1]
        one = phi.copy()
        one[lo:hi] = new[lo:hi]
        best = bound_product(cs, one, lt, le, tol=1e-13)
        # the optimum's condition: the bound's gradient is the same on every entry of the block
        g = d_bound_d_phi_product(cs, one, lt, le, tol=1e-13)[lo:hi]
        assert np.ptp(g) <= 1e-7 * max(1.0, float(np.abs(g).max())), (a, g)
        for _ in range(8):
            other = phi.copy()
            other[lo:hi] = rng.dirichlet(np.ones(hi - lo))
            assert bound_product(cs, other, lt, le, tol=1e-13) <= best + 1e-9 * abs(best)
        tried += 1
        if tried == 6:
            break
    assert tried >= 3


def _chain(c, q):
    """State q and the states its failure chain reaches."""
    from fsmlearn.fsm.machine import PHI
    out = set()
    while q >= 0 and q not in out:
        out.add(q)
        nxt = -1
        for a in range(c.src_start[q], c.src_start[q + 1]):
            if c.ilabel[a] == PHI:
                nxt = int(c.dst[a])
        q = nxt
    return out


def test_the_block_update_refuses_what_it_is_not():
    rng, c, cs, allowed, lt, le = tiny(2, V=3, T=3)
    phi = random_phi(rng, cs)
    p = cq_product(cs, phi * 1.5)
    with pytest.raises(SemiringError, match="normalised blocks"):
        product_block_update(p, np.zeros(cs.num_params))
    p2 = tag_product(cs.machine, cs.T, cs.blk_start, cs.blk_tag, np.repeat(phi[:, None], cs.T + 1, axis=1))
    with pytest.raises(SemiringError, match="one column"):
        product_block_update(p2, np.zeros(cs.num_params))
    p3 = tag_product(cs.machine, cs.T, cs.blk_start, cs.blk_tag, phi, np.ones((cs.T + 1, cs.T + 1)))
    with pytest.raises(SemiringError, match="transition factor"):
        product_block_update(p3, np.zeros(cs.num_params))
    # blocks whose mass is at most min_mass keep their entries, the others move
    p = cq_product(cs, phi)
    ev = np.random.default_rng(0).normal(size=cs.num_params)
    assert np.array_equal(product_block_update(p, ev, min_mass=1e300), phi)
    moved = product_block_update(p, ev)
    assert not np.allclose(moved, phi, atol=1e-3)


def test_ngram_em_without_conditioned_blocks_is_n_q_1():
    """A mask that conditions no block is n_q = 1 (any optimizer); estep_passes=0 runs the
    M-step on the current blocks' counts."""
    rng, c, cs, allowed, lt, le = tiny(3, V=3, T=3)
    none = np.zeros(cs.machine.num_states, bool)
    a = NGramEM(cs, allowed, lt, le, optimizer="gradient", cond=none)
    b = NGramEM(cs, allowed, lt, le, optimizer="gradient")
    assert a.cond is None and a.estep.schedule == "events"
    assert np.allclose([r.bound for r in a.run(2)], [r.bound for r in b.run(2)], rtol=1e-12)
    z = NGramEM(cs, allowed, lt, le, estep_passes=0)
    st = z.estep.stats(lt, le)
    z.iterate()
    assert np.allclose(z.log_trans, mstep(st.trans, st.emit, allowed)[0])


def test_a_scheduler_with_what_it_cannot_run_names_it():
    """NGramEM refuses a scheduler with conditioned blocks or the gradient optimizer before
    any cluster starts, naming the offending argument."""
    rng, c, cs, allowed, lt, le = tiny(1, V=3, T=3)
    with pytest.raises(ArgumentError, match="not with cond='roots'"):
        NGramEM(cs, allowed, lt, le, scheduler="local", cond="roots")
    with pytest.raises(ArgumentError, match="not with optimizer='gradient'"):
        NGramEM(cs, allowed, lt, le, scheduler="local", optimizer="gradient")
