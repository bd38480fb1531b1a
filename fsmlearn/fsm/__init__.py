"""Layer 1: the machine (array-backed weighted FSMs) and its file formats.

Modules: machine (Machine, labels EPSILON and PHI), batch (MachineBatch: many
machines in one set of arrays with offsets), chain (ChainBatch: chains of label
layers whose weights are tied to a transition table and label rows), machine_files (its .npz and
OpenFst files, validated when read), symbols (SymbolTable),
openfst_io (OpenFst binary VectorFst), npz (NpzFile: reading fsmlearn .npz
files), strings (lists of strings as flat arrays), atomic (atomic writes),
hashing (int64 hash tables for numba kernels).
"""

from .batch import MachineBatch
from .chain import ChainBatch
from .machine import DEFAULT_OPENFST_PHI, EPSILON, PHI, Machine
from .symbols import SymbolTable

__all__ = ["Machine", "MachineBatch", "ChainBatch", "SymbolTable", "EPSILON", "PHI", "DEFAULT_OPENFST_PHI"]
