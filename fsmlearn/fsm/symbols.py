"""Symbol tables: a bijection between int32 keys and strings.

Mirrors OpenFst's ``SymbolTable`` (keys need not be contiguous) and converts
losslessly to and from ``pynini.SymbolTable``.

Public names: SymbolTable.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np

from ..errors import SymbolTableError

_INT32_MAX = 2**31 - 1


class SymbolTable:
    """An immutable table mapping int32 keys to symbols.

    Args:
        symbols: the symbols, in key order when ``keys`` is None.
        keys: optional keys (int, one per symbol); default ``0..len-1``.
        name: the table's name (kept for OpenFst round trips).
        available_key: OpenFst's next free key; default ``max(keys) + 1``.

    Raises:
        SymbolTableError: duplicate keys or symbols, keys that are not
            integers or are out of int32 range, an available key that is not
            an integer, or a symbol that is not a string.
    """

    __slots__ = ("_keys", "_symbols", "_by_symbol", "_by_key", "name", "available_key")

    def __init__(self, symbols: Sequence[str], keys: Iterable[int] | None = None,
                 name: str = "", available_key: int | None = None):
        symbols = list(symbols)
        if keys is None:
            keys = np.arange(len(symbols), dtype=np.int64)
        else:
            keys = list(keys) if not isinstance(keys, np.ndarray) else keys
            if isinstance(keys, np.ndarray) and keys.dtype.kind not in "iu":
                raise SymbolTableError(f"symbol table {name!r}: keys must be integers, got {keys.dtype}")
            if not isinstance(keys, np.ndarray) and not all(isinstance(k, (int, np.integer))
                                                            and not isinstance(k, bool) for k in keys):
                bad = next(k for k in keys if not isinstance(k, (int, np.integer)) or isinstance(k, bool))
                raise SymbolTableError(f"symbol table {name!r}: key {bad!r} is not an integer")
            try:
                keys = np.asarray(keys, dtype=np.int64)
            except OverflowError:
                big = next(k for k in keys if not -2**63 <= int(k) < 2**63)
                raise SymbolTableError(f"symbol table {name!r}: key {big} is outside 0..{_INT32_MAX}") from None
        if available_key is not None and (not isinstance(available_key, (int, np.integer))
                                          or isinstance(available_key, bool)):
            raise SymbolTableError(f"symbol table {name!r}: available key {available_key!r} is not an integer")
        if keys.shape != (len(symbols),):
            raise SymbolTableError(f"symbol table {name!r}: {len(symbols)} symbols but {keys.size} keys")
        by_symbol = {}
        by_key = {}
        for k, s in zip(keys.tolist(), symbols):
            if not isinstance(s, str):
                raise SymbolTableError(f"symbol table {name!r}: key {k} has a non-string symbol {s!r}")
            if k < 0 or k > _INT32_MAX:
                raise SymbolTableError(f"symbol table {name!r}: key {k} for {s!r} is outside 0..{_INT32_MAX}")
            if s in by_symbol:
                raise SymbolTableError(f"symbol table {name!r}: symbol {s!r} has two keys, {by_symbol[s]} and {k}")
            if k in by_key:
                raise SymbolTableError(f"symbol table {name!r}: key {k} has two symbols, {by_key[k]!r} and {s!r}")
            by_symbol[s] = k
            by_key[k] = s
        self._keys = keys
        self._keys.setflags(write=False)
        self._symbols = tuple(symbols)
        self._by_symbol = by_symbol
        self._by_key = by_key
        self.name = str(name)
        self.available_key = int(available_key) if available_key is not None else (
            int(keys.max()) + 1 if keys.size else 0)

    # -- lookups -----------------------------------------------------------
    def __len__(self) -> int:
        return len(self._symbols)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        return zip(self._keys.tolist(), self._symbols)

    def __contains__(self, symbol: str) -> bool:
        return symbol in self._by_symbol

    @property
    def keys(self) -> np.ndarray:
        """int64 array of keys, in insertion order."""
        return self._keys

    @property
    def symbols(self) -> tuple[str, ...]:
        """The symbols, in insertion order."""
        return self._symbols

    def find(self, symbol: str, default: int | None = None) -> int:
        """Key of ``symbol``; ``default`` (or SymbolTableError) when absent."""
        k = self._by_symbol.get(symbol)
        if k is None:
            if default is not None:
                return default
            raise SymbolTableError(f"symbol {symbol!r} is not in symbol table {self.name!r}")
        return k

    def symbol(self, key: int) -> str:
        """Symbol of ``key``; SymbolTableError when absent."""
        s = self._by_key.get(int(key))
        if s is None:
            raise SymbolTableError(f"key {key} is not in symbol table {self.name!r}")
        return s

    def has_key(self, key: int) -> bool:
        return int(key) in self._by_key

    def encode(self, symbols: Iterable[str], unknown: int | None = None) -> np.ndarray:
        """int32 keys of ``symbols``; unknown symbols map to ``unknown`` or raise."""
        get = self._by_symbol.get
        out = []
        for s in symbols:
            k = get(s, unknown)
            if k is None:
                raise SymbolTableError(f"symbol {s!r} is not in symbol table {self.name!r}")
            out.append(k)
        return np.asarray(out, dtype=np.int32)

    def decode(self, keys: Iterable[int]) -> list[str]:
        by_key = self._by_key
        try:
            return [by_key[int(k)] for k in keys]
        except KeyError as e:
            raise SymbolTableError(f"key {e.args[0]} is not in symbol table {self.name!r}") from None

    # -- comparison ----------------------------------------------------------
    def __eq__(self, other) -> bool:
        if not isinstance(other, SymbolTable):
            return NotImplemented
        return self._by_key == other._by_key

    def __hash__(self):
        return hash(tuple(sorted(self._by_key.items())))

    def __repr__(self) -> str:
        return f"SymbolTable(name={self.name!r}, size={len(self)})"

    def same_as(self, other: "SymbolTable") -> bool:
        """Equality including name and available key (for round-trip tests)."""
        return (self == other and self.name == other.name
                and self.available_key == other.available_key
                and list(self) == list(other))

    # -- constructors / conversion -------------------------------------------
    @classmethod
    def from_symbols(cls, symbols: Iterable[str], name: str = "", epsilon: str | None = "<eps>") -> "SymbolTable":
        """A table with ``epsilon`` at key 0 (if given) then ``symbols`` in order, deduplicated."""
        seen = {}
        if epsilon is not None:
            seen[epsilon] = 0
        for s in symbols:
            if s not in seen:
                seen[s] = len(seen)
        return cls(list(seen), name=name)

    @classmethod
    def from_pynini(cls, table) -> "SymbolTable":
        """Convert a ``pynini.SymbolTable`` (or pywrapfst table), keeping keys and name."""
        items = list(table)
        keys = [k for k, _ in items]
        syms = [s for _, s in items]
        return cls(syms, keys, name=table.name(), available_key=table.available_key())

    def to_pynini(self):
        """Convert to a ``pynini.SymbolTable`` with the same keys and name."""
        import pynini
        t = pynini.SymbolTable(name=self.name)
        for k, s in self:
            t.add_symbol(s, k)
        return t
