"""Layer 1: the machine (array-backed weighted FSMs) and its file formats."""

from .machine import DEFAULT_OPENFST_PHI, EPSILON, PHI, Machine
from .symbols import SymbolTable

__all__ = ["Machine", "SymbolTable", "EPSILON", "PHI", "DEFAULT_OPENFST_PHI"]
