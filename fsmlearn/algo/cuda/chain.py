"""The dense-chain schedule on the device: a thread per chain of a :class:`~fsmlearn.fsm.ChainBatch`.

The kernel :func:`chain_fb` runs :func:`fsmlearn.algo.chain_arith.chain_fb_py`,
the same function the CPU kernel runs, compiled with ``cuda.jit(device=True)``
and its sums into the shared tables bound to atomic adds
(:func:`~fsmlearn.algo.chain_arith.retarget`); each thread keeps its chain's
forward values, backward values and scales in the batch's numbering (the
arrays are as long as the batch's nodes and positions).

Public names: chain_fb, chain_fb_device.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..chain_arith import chain_cost_py, chain_fb_py, chain_forward_py
from ..flow_arith import retarget
from . import kernels as K
from .solve import launch

__all__ = ["chain_fb", "chain_fb_device"]


_forward_dev = cuda.jit(device=True)(chain_forward_py)
_cost_dev = cuda.jit(device=True)(chain_cost_py)
_chain_fb_dev = cuda.jit(device=True)(retarget(chain_fb_py, _forward=_forward_dev, _cost=_cost_dev, _add1=K.atomic_add1,
                                               _add2=K.atomic_add2))


@cuda.jit
def chain_fb(ptr, pos_row, row_ptr, row_label, row_p, Tp, t_shift, row_shift, node_ptr, want_nodes,
             cost, TP, EP, NP, TV, EV, X, A, C, B):
    """Thread s: forward-backward over chain s (:func:`~fsmlearn.algo.chain_arith.chain_fb_py`)."""
    s = cuda.grid(1)
    if s < ptr.shape[0] - 1:
        _chain_fb_dev(s, ptr, pos_row, row_ptr, row_label, row_p, Tp, t_shift, row_shift, node_ptr, want_nodes,
                      cost, TP, EP, NP, TV, EV, X, A, node_ptr[ptr[s]], C, ptr[s], B)


def chain_fb_device(ptr, pos_row, row_ptr, row_label, row_p, Tp, t_shift, row_shift, node_ptr, want_nodes,
                    cost, TP, EP, NP, TV, EV, X):
    """Run :func:`chain_fb` over every chain: the host arrays in, the outputs (cost, TP,
    EP, NP, X: TP and EP added to, as on the CPU) copied back in place."""
    S = ptr.shape[0] - 1
    d = {k: cuda.to_device(np.ascontiguousarray(v)) for k, v in
         (("ptr", ptr), ("pos_row", pos_row), ("row_ptr", row_ptr), ("row_label", row_label), ("row_p", row_p),
          ("Tp", Tp), ("row_shift", row_shift), ("node_ptr", node_ptr), ("TV", TV), ("EV", EV))}
    out = {k: cuda.to_device(v) for k, v in (("cost", cost), ("TP", TP), ("EP", EP), ("NP", NP), ("X", X))}
    n_nodes = max(int(node_ptr[-1]), 1)
    A = cuda.device_array(n_nodes)
    B = cuda.device_array(n_nodes)
    C = cuda.device_array(max(int(pos_row.shape[0]), 1))
    launch(chain_fb, S, d["ptr"], d["pos_row"], d["row_ptr"], d["row_label"], d["row_p"], d["Tp"], float(t_shift),
           d["row_shift"], d["node_ptr"], bool(want_nodes), out["cost"], out["TP"], out["EP"], out["NP"], d["TV"],
           d["EV"], out["X"], A, C, B)
    for k, host in (("cost", cost), ("TP", TP), ("EP", EP), ("NP", NP), ("X", X)):
        out[k].copy_to_host(host)
