"""Layer 1: the machine (array-backed weighted FSMs) and its file formats.

Modules: machine (Machine, labels EPSILON and PHI), batch (MachineBatch: many
machines in one set of arrays with offsets), machine_files (its .npz and
OpenFst files, validated when read), symbols (SymbolTable),
openfst_io (OpenFst binary VectorFst), npz (NpzFile: reading fsmlearn .npz
files), strings (lists of strings as flat arrays), atomic (atomic writes),
hashing (int64 hash tables for numba kernels).
"""

from .batch import MachineBatch
from .machine import DEFAULT_OPENFST_PHI, EPSILON, PHI, Machine
from .symbols import SymbolTable

__all__ = ["Machine", "MachineBatch", "SymbolTable", "EPSILON", "PHI", "DEFAULT_OPENFST_PHI"]
