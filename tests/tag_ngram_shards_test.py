"""n-gram EM's passes partitioned over a real Dask LocalCluster (fsmlearn.algo.tied.shards):
the bound, the expected counts (the gradient in log theta), phi and the taggings equal the
one-process run, on 2 and 3 worker processes with memory limits, and with a worker
killed in the middle of an iteration."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from fsmlearn.data import iter_sentences
from fsmlearn.data.tagsets import tag_dictionary
from fsmlearn.lm.counts import count_ngrams
from fsmlearn.lm.estimate import estimate
from fsmlearn.lm.model import compile_lm
from fsmlearn.tag import tag_sentences
from fsmlearn.tag.ngram.approx import initial_theta, setup_from_lm, to_hmm
from fsmlearn.algo.tied import shards
from fsmlearn.tag.ngram.em import NGramEM
from tag_ngram_common import tiny


@pytest.fixture(scope="module", params=[2, 3])
def cluster(request):
    import dask
    from distributed import Client, LocalCluster
    # The tests kill a worker every few seconds. Dask closes a nanny when lost-worker-timeout
    # (15 s) after a worker of its name left none of that name is registered: the timer of
    # one test's kill fired while the nanny restarted the same worker after a later test's kill
    # (a CI run: "Only 2/3 workers arrived"). A local nanny always restarts; keep them all
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "30 days"}):
        lc = LocalCluster(n_workers=request.param, threads_per_worker=1, processes=True, memory_limit="1GiB",
                          dashboard_address=":0")
        client = Client(lc)
        yield request.param, client
        client.close()
        lc.close()


@pytest.fixture(scope="module")
def lm_setup():
    """A backoff trigram of real text: failure arcs, cycles, shadowed arcs at every order."""
    sents = [[w for w, _ in s] for s in iter_sentences("wsj-small")][:400]
    lm = compile_lm(estimate(count_ngrams(sents, 3), "absolute"))
    return setup_from_lm(lm, tagdict=tag_dictionary("tag17")), [[w for w, _ in s] for s in
                                                                 iter_sentences("wsj-small")][400:460]


def _run(st, iterations, **kw):
    lt, le = initial_theta(st)
    with NGramEM(st.cs, st.allowed, lt, le, **kw) as tr:
        tr.run(iterations)
        return tr, [r.bound for r in tr.history], tr.stats, tr.phi.copy()


def test_partitioned_run_equals_the_one_process_run(cluster, lm_setup, tmp_path):
    k, client = cluster
    st, held = lm_setup
    one, b1, s1, phi1 = _run(st, 3)
    shd, b2, s2, phi2 = _run(st, 3, scheduler=client, tmp=str(tmp_path))
    assert shd.parts == k
    assert np.allclose(b2, b1, rtol=1e-9, atol=0)
    assert np.allclose(s2.trans, s1.trans, rtol=1e-9, atol=1e-12)
    assert np.allclose(s2.emit, s1.emit, rtol=1e-9, atol=1e-12)
    assert np.allclose(phi2, phi1, rtol=1e-9, atol=1e-12)
    assert np.allclose(shd.log_trans, one.log_trans, rtol=1e-9, atol=1e-12)
    h1 = to_hmm(st, one.log_trans, one.log_emit)
    h2 = to_hmm(st, shd.log_trans, shd.log_emit)
    assert tag_sentences(h1, held) == tag_sentences(h2, held)
    assert not any(os.scandir(tmp_path)), "the parts' files are removed"


@pytest.mark.parametrize("seed", [1, 2])
def test_tiny_machines_with_more_parts_than_workers(cluster, seed, tmp_path):
    """Cyclic backoff machines of three orders, cut into more parts than there are workers
    (some parts without exclusions or shadowed arcs)."""
    k, client = cluster
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    runs = []
    for kw in ({}, {"scheduler": client, "parts": 5, "tmp": str(tmp_path)}):
        with NGramEM(cs, allowed, lt, le, **kw) as tr:
            tr.run(3)
            runs.append(([r.bound for r in tr.history], tr.stats.trans, tr.phi.copy()))
    assert np.allclose(runs[1][0], runs[0][0], rtol=1e-9)
    assert np.allclose(runs[1][1], runs[0][1], rtol=1e-9, atol=1e-12)
    assert np.allclose(runs[1][2], runs[0][2], rtol=1e-9, atol=1e-12)


class _KillOnce:
    """A progress callable that kills one worker process the ``nth`` time the pass named
    ``at`` is submitted (its tasks running or done, their results held by the workers)."""

    def __init__(self, client, at: str, nth: int = 1):
        self.client, self.at, self.nth, self.killed = client, at, nth, None

    def __call__(self, msg: str) -> None:
        if self.killed is None and self.at in msg:
            self.nth -= 1
            if self.nth == 0:
                pids = self.client.run(os.getpid)
                addr, pid = sorted(pids.items())[0]
                os.kill(pid, signal.SIGKILL)
                self.killed = addr


# the passes run 4 times in 3 iterations (the start's statistics, then 3 updates).  A worker is
# killed the nth time a pass is submitted; its part's pass 2 then runs again on another worker,
# which restores the part's phi from its checkpoint and replays the updates since: pass 2's 4th
# run updates phi from version 2 (2 updates to replay from version 0, none from version 2 with
# checkpoint=2), pass 3's 3rd run follows the update from version 1 (1 to replay).  Restores are
# counted in pass 2's tasks only.
@pytest.mark.parametrize("at,nth,checkpoint,updates", [("pass 2", 1, 10, 0), ("pass 2", 4, 10, 2),
                                                       ("pass 3", 3, 10, 1), ("pass 2", 4, 2, 0),
                                                       ("pass 3", 4, 2, 0)])
def test_a_worker_killed_mid_iteration_does_not_change_the_result(cluster, lm_setup, tmp_path, at, nth, checkpoint,
                                                                  updates):
    k, client = cluster
    st, _ = lm_setup
    _, b1, s1, phi1 = _run(st, 3)
    say = _KillOnce(client, at, nth)
    client.run(lambda: shards.REPLAYED.update(checkpoints=0, updates=0))
    shd, b2, s2, phi2 = _run(st, 3, scheduler=client, tmp=str(tmp_path), progress=say, checkpoint=checkpoint)
    assert say.killed is not None
    replayed = [sum(r[n] for r in client.run(lambda: dict(shards.REPLAYED)).values())
                for n in ("checkpoints", "updates")]
    # the lost part's pass 2 restarted from its checkpoint and replayed the updates since (Dask
    # may also move a part to the restarted worker, which restores it again)
    assert replayed[0] >= 1
    assert replayed[1] >= updates
    assert np.allclose(b2, b1, rtol=1e-9, atol=0)
    assert np.allclose(s2.trans, s1.trans, rtol=1e-9, atol=1e-12)
    assert np.allclose(phi2, phi1, rtol=1e-9, atol=1e-12)
    client.wait_for_workers(k, timeout=60)


def test_scheduler_needs_the_cpu_variational_path(lm_setup):
    from fsmlearn.errors import ArgumentError
    st, _ = lm_setup
    lt, le = initial_theta(st)
    with pytest.raises(ArgumentError, match="scheduler"):
        NGramEM(st.cs, st.allowed, lt, le, optimizer="gradient", scheduler="local")
