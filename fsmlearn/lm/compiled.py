"""The compiled backoff LM: a failure-arc acceptor stored as what scoring reads, memory-mapped.

A compiled model (:func:`fsmlearn.lm.model.compile_lm`) is saved as what
scoring reads (:meth:`CompiledLM.save`, format :data:`LM_FORMAT`): the
(state, label) arc hash, the backoff states and weights, the final weights,
the history lengths and the vocabulary's byte-level hash, each an array of a
:mod:`fsmlearn.lm.mapfile` file that :meth:`CompiledLM.load` memory-maps, so
that a model opens in milliseconds and its first sentences are scored at
once, reading only the pages they touch (as KenLM's binary format does); the
machine is rebuilt from those arrays when something asks for it.

Public names: CompiledLM, sort_arcs, LM_FORMAT, LM_VERSION, PARALLEL_ENCODE_BYTES.
"""

from __future__ import annotations

import dataclasses

import numba as nb
import numpy as np

from ..algo.phi import phi_depths
from ..algo.score import WALK_OK, ScoreTables, _read_label, _walk_error, score_sequences, score_tables, seed_label_hash
from ..errors import ArgumentError, MachineError, ModelFormatError
from ..fsm.hashing import table_capacity
from ..fsm.machine import PHI, Machine
from ..fsm.symbols import SymbolTable
from .mapfile import MappedFile, write_mapped
from .vocab import (BOS, LN10, UNK, ByteVocab, WordIndex, build_table, count_lines, encode_lines, encode_span,
                    slot_keys, token_room, vocab_find)


@nb.njit(cache=True)
def sort_arcs(src, dst, lab, wt, src_start):
    """The arcs' (dst as int32, label, weight) sorted by (source, label), stably:
    a counting sort by source, then each state's arcs sorted by label
    (insertion sort for short runs, a merge sort for long ones); the same
    order as ``np.lexsort((lab, src))``.

    Args:
        src, dst: int64 [E], the arcs' source and destination states.
        lab: int32 [E], labels; wt: float64 [E], weights.
        src_start: int64 [n_states + 1], CSR offsets of each state's arcs
            (the cumulative counts of ``src``).

    Returns:
        (dst int32 [E], label int32 [E], weight float64 [E]) in CSR order.
    """
    n = src_start.shape[0] - 1
    E = src.shape[0]
    pos = src_start[:-1].copy()
    d = np.empty(E, np.int32)
    x = np.empty(E, np.int32)
    w = np.empty(E, np.float64)
    for a in range(E):
        s = src[a]
        p = pos[s]
        d[p] = dst[a]
        x[p] = lab[a]
        w[p] = wt[a]
        pos[s] = p + 1
    for s in range(n):
        lo = src_start[s]
        hi = src_start[s + 1]
        if hi - lo <= 32:
            for i in range(lo + 1, hi):
                di = d[i]
                xi = x[i]
                wi = w[i]
                j = i - 1
                while j >= lo and x[j] > xi:
                    d[j + 1] = d[j]
                    x[j + 1] = x[j]
                    w[j + 1] = w[j]
                    j -= 1
                d[j + 1] = di
                x[j + 1] = xi
                w[j + 1] = wi
        else:
            idx = np.argsort(x[lo:hi], kind="mergesort") + lo
            dd = d[idx]
            xx = x[idx]
            ww = w[idx]
            d[lo:hi] = dd
            x[lo:hi] = xx
            w[lo:hi] = ww
    return d, x, w


#: the compiled-LM file: its format name and version (a :mod:`fsmlearn.lm.mapfile` container)


LM_FORMAT = "fsmlearn-compiled-lm"
#: 2: the word table hashed by :func:`~fsmlearn.lm.vocab.word_hash` (eight bytes at a time);
#: a version-1 file (FNV-1a) is read with its word table built again at load (O(V))
LM_VERSION = 2


@nb.njit(cache=True)
def _machine_arcs(T, L, n, back, back_cost):
    """The acceptor's arcs from a compiled-LM file's tables, unsorted: one per hash row (key
    state * L + label, destination, weight) and one phi arc per state with a failure state.

    Returns (src int64, dst int64, label int32, weight float64, status, where): status 1 when
    hash row ``where`` has a key or destination out of range (or label 0), 2 when state
    ``where``'s failure state is; 0 when all are good.
    """
    cap = T.shape[0]
    lim = float(n) * L
    m = 0
    for j in range(cap):
        if T[j, 0] >= 0.0:
            m += 1
    for s in range(n):
        if back[s] >= 0:
            m += 1
    src = np.empty(m, np.int64)
    dst = np.empty(m, np.int64)
    lab = np.empty(m, np.int32)
    wt = np.empty(m, np.float64)
    a = 0
    for j in range(cap):
        k = T[j, 0]
        if not k >= 0.0:
            continue
        d = T[j, 1]
        if not (k < lim and k == np.floor(k) and d >= 0.0 and d < n and d == np.floor(d)):
            return src, dst, lab, wt, 1, j
        key = np.int64(k)
        s = key // L
        x = key - s * L
        if x < 1:
            return src, dst, lab, wt, 1, j
        src[a] = s
        dst[a] = np.int64(d)
        lab[a] = x
        wt[a] = T[j, 2]
        a += 1
    for s in range(n):
        b = back[s]
        if b >= 0:
            if b >= n:
                return src, dst, lab, wt, 2, s
            src[a] = s
            dst[a] = b
            lab[a] = PHI
            wt[a] = back_cost[s]
            a += 1
        elif b != -1:
            return src, dst, lab, wt, 2, s
    return src, dst, lab, wt, 0, -1


@nb.njit(cache=True, parallel=True)
def _encode_parts(buf, cuts, table, keys, wbuf, woff, mask, unk):
    """:func:`~fsmlearn.lm.vocab.encode_lines` of a text cut into parts of whole lines
    (``cuts``: int64 [P + 1] byte offsets, each part after a newline), the parts' lines
    counted and then their tokens encoded in parallel, each part into room for the most
    tokens it can hold, then packed (:func:`~fsmlearn.lm.vocab.count_lines`,
    :func:`~fsmlearn.lm.vocab.token_room` and :func:`~fsmlearn.lm.vocab.encode_span`,
    inlined); the same (ptr, ids, oov)."""
    if keys.shape[0] != table.shape[0]:
        raise ValueError("_encode_parts: keys must have one row per slot of the table (vocab.slot_keys)")
    P = cuts.shape[0] - 1
    ns = np.zeros(P + 1, np.int64)
    room = np.zeros(P + 1, np.int64)
    for j in nb.prange(P):
        ns[j + 1] = count_lines(buf, cuts[j], cuts[j + 1])
        room[j + 1] = token_room(cuts[j], cuts[j + 1])
    for j in range(P):
        ns[j + 1] += ns[j]
        room[j + 1] += room[j]
    ptr = np.zeros(ns[P] + 1, np.int64)
    spread = np.empty(room[P], np.int32)
    oov = np.zeros(ns[P], np.int64)
    nt = np.zeros(P + 1, np.int64)
    for j in nb.prange(P):
        _, t = encode_span(buf, cuts[j], cuts[j + 1], table, keys, wbuf, woff, mask, unk, ptr, spread, oov, ns[j],
                           room[j])
        nt[j + 1] = t - room[j]
    for j in range(P):
        nt[j + 1] += nt[j]
    ids = np.empty(nt[P], np.int32)
    for j in nb.prange(P):
        shift = room[j] - nt[j]
        for s in range(ns[j] + 1, ns[j + 1] + 1):
            ptr[s] -= shift
        for k in range(nt[j + 1] - nt[j]):
            ids[nt[j] + k] = spread[room[j] + k]
    return ptr, ids, oov


#: texts of at least this many bytes are encoded in parallel parts when threads are asked for
PARALLEL_ENCODE_BYTES = 1 << 20


@nb.njit(cache=True)
def _check_tables(T, L, n, back, back_cost, final, hist_len, order):
    """Every value of a compiled-LM file's tables, checked (:meth:`CompiledLM.verify`).

    Returns (status, where): 1 hash row ``where``'s key is not a free slot (-1) nor
    state * L + label with state < n and 1 <= label < L; 2 its destination is out of
    range; 3 state ``where``'s failure state is out of range; 4 its history length is
    not in [0, order); 5 its failure state's history is not shorter than its own
    (which rules out cycles); 6 hash row ``where``'s cost is not a -ln probability
    (finite, >= 0); 7 state ``where``'s failure cost is not finite; 8 its final cost
    is NaN or negative (+inf: not final); 0 when all are good.
    """
    lim = float(n) * L
    for j in range(T.shape[0]):
        k = T[j, 0]
        if k == -1.0:
            continue
        if not (k >= 0.0 and k < lim and k == np.floor(k)) or np.int64(k) % L == 0:
            return 1, j
        d = T[j, 1]
        if not (d >= 0.0 and d < n and d == np.floor(d)):
            return 2, j
        c = T[j, 2]
        if not (c >= 0.0 and c < np.inf):
            return 6, j
    for s in range(n):
        b = back[s]
        if b < -1 or b >= n:
            return 3, s
        h = hist_len[s]
        if h < 0 or h >= order:
            return 4, s
        if b >= 0 and not np.isfinite(back_cost[s]):
            return 7, s
        if not final[s] >= 0.0:
            return 8, s
    for s in range(n):
        b = back[s]
        if b >= 0 and hist_len[b] >= hist_len[s]:
            return 5, s
    return 0, -1


class CompiledLM(WordIndex):
    """A backoff LM compiled to an acceptor with failure arcs.

    Built by :func:`compile_lm`, or opened by :meth:`load` from a file that
    :meth:`save` wrote, whose arrays are memory-mapped (nothing is read or
    built at load: scoring probes the mapped hash, and the machine and the
    word list are made on first use).

    Args and attributes:
        machine: the acceptor (log semiring, labels = word id + 1); made from
            the file's tables on first access for a loaded model.
        vocab: the model's words (word id = label - 1); decoded from the file
            on first access for a loaded model.
        unk_label: label of ``<unk>``.
        order: the model's order.
        state_gid, ngram_words, ngram_ptr: for each state the id of its
            history n-gram in the model (-1 for the empty history), and the
            n-grams' words (flat, with offsets): known for a model compiled
            in this process (:meth:`history`), empty for a loaded one.
        hist_len: int8 [states], each state's history length (0 for the
            empty history; the n-gram length that an arc of the state
            scores is one more); for an old-format file, each state's depth
            in the phi forest, which is the same when every history's
            suffixes are histories (as in lmplz's and fsmlearn's models).
        path: the file of a loaded model, else None.
        epsilon: True for an :func:`epsilon_approximation` (scored by
            composition, never saved).
    """

    def __init__(self, machine, vocab, unk_label: int, order: int, state_gid=None, ngram_words=None,
                 ngram_ptr=None, *, hist_len=None):
        self._machine = machine
        self._vocab = vocab
        self.unk_label = int(unk_label)
        self.order = int(order)
        self.state_gid = np.zeros(0, np.int64) if state_gid is None else state_gid
        self.ngram_words = np.zeros(0, np.int32) if ngram_words is None else ngram_words
        self.ngram_ptr = np.zeros(1, np.int64) if ngram_ptr is None else ngram_ptr
        self._hist_len = hist_len
        self._tables = None
        self._words = None       # (wbuf, woff, table, mask): the byte-level word hash
        self._keys = None        # its slots' keys (vocab.slot_keys), for the encoder
        self._file = None        # a loaded model's MappedFile and header values
        self.path = None
        self.epsilon = False

    def __repr__(self) -> str:
        where = f", file {str(self.path)!r}" if self.path is not None else ""
        return f"CompiledLM(order={self.order}, words={self.num_words}, states={self.num_states}{where})"

    # ------------------------------------------------------------ the parts
    @property
    def machine(self) -> Machine:
        """The acceptor (made from a loaded model's tables on first access, the same machine
        as :func:`compile_lm` made: phi arc first in each state, then labels ascending)."""
        if self._machine is None:
            self._machine = self._rebuild_machine()
        return self._machine

    @property
    def vocab(self) -> list:
        """The words, word id = position (decoded from a loaded model's file on first access)."""
        if self._vocab is None:
            self._vocab = self._decode_vocab()
        return self._vocab

    @property
    def num_words(self) -> int:
        """The vocabulary's size (without decoding a loaded model's words)."""
        if self._vocab is None and self._file is not None:
            return self._file["vocab_size"]
        return len(self.vocab)

    @property
    def num_states(self) -> int:
        return self.tables.num_states if self._machine is None else self._machine.num_states

    @property
    def tables(self) -> ScoreTables:
        """What scoring reads (:class:`~fsmlearn.algo.score.ScoreTables`): a loaded model's
        mapped arrays, else the machine's (built once)."""
        if self._tables is None:
            self._tables = score_tables(self.machine)
        return self._tables

    @property
    def hist_len(self) -> np.ndarray:
        """int8 [states]: each state's history length (see the class docstring)."""
        if self._hist_len is None:
            t = self.tables
            depth, order = phi_depths(t.back, t.num_states)
            if t.num_states and order.size == 0:
                raise MachineError("the phi (failure) arcs of the model form a cycle")
            if depth.size and depth.max() > 126:
                raise MachineError(f"a failure chain of {int(depth.max())} arcs: not a backoff model")
            h = depth.astype(np.int8)
            h.setflags(write=False)
            self._hist_len = h
        return self._hist_len

    def history(self, state: int) -> list[str]:
        """The words of a state's history (a model compiled in this process only)."""
        if self.state_gid.size == 0:
            raise ArgumentError("histories are known only for a model compiled in this process, not a loaded one")
        g = int(self.state_gid[state])
        if g < 0:
            return []
        return [self.vocab[w] for w in self.ngram_words[self.ngram_ptr[g]:self.ngram_ptr[g + 1]]]

    # ------------------------------------------------------------ words
    def _word_arrays(self):
        if self._words is None:
            bv = ByteVocab(self.vocab)
            self._words = (bv.wbuf, bv.woff, bv.table, bv.mask)
        return self._words

    def _word_keys(self):
        """The slots' keys of the word hash (:func:`~fsmlearn.lm.vocab.slot_keys`), made on
        first use: derived from the hash and the words, so not stored in the file."""
        if self._keys is None:
            wbuf, woff, table, _ = self._word_arrays()
            self._keys = slot_keys(wbuf, woff, table)
        return self._keys

    def word_id(self, word: str) -> int:
        """The id of ``word``, -1 when it is not in the vocabulary (a probe of the byte-level
        hash; no word list is built)."""
        wbuf, woff, table, mask = self._word_arrays()
        b = np.frombuffer(word.encode("utf-8"), np.uint8)
        w, _ = vocab_find(b, 0, b.size, table, wbuf, woff, mask)
        return int(w)

    def encode_bytes(self, text: bytes, threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Label sequences of UTF-8 text, one sentence per line, tokens separated by ASCII
        whitespace (a last line without a newline counts; an empty text has none).

        Args:
            text: the text.
            threads: 1, or more (0: all of numba's) to encode a text of at
                least :data:`PARALLEL_ENCODE_BYTES` in parts of whole lines in
                parallel; the same result.

        Returns:
            (ptr int64 [S+1], labels int32, oov int64 [S]): out-of-vocabulary
            tokens get the ``<unk>`` label and are counted.
        """
        wbuf, woff, table, mask = self._word_arrays()
        keys = self._word_keys()
        buf = np.frombuffer(text, np.uint8)
        k = nb.config.NUMBA_NUM_THREADS if threads == 0 else min(int(threads), nb.config.NUMBA_NUM_THREADS)
        if k <= 1 or len(text) < PARALLEL_ENCODE_BYTES:
            ptr, ids, oov = encode_lines(buf, table, keys, wbuf, woff, mask, self.unk_label - 1)
        else:
            n = len(text)
            cuts = [0]
            for j in range(1, 4 * k):
                c = text.find(b"\n", j * n // (4 * k)) + 1
                cuts.append(max(cuts[-1], c if c > 0 else n))
            cuts.append(n)
            before = nb.get_num_threads()
            nb.set_num_threads(k)
            try:
                ptr, ids, oov = _encode_parts(buf, np.array(cuts, np.int64), table, keys, wbuf, woff, mask,
                                              self.unk_label - 1)
            finally:
                nb.set_num_threads(before)
        ids += 1
        return ptr, ids, oov

    def encode(self, sentences, threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Label sequences of whitespace-tokenised sentences.

        Args:
            sentences: strings (tokens separated by whitespace; a string may
                not contain a newline) or lists of tokens.
            threads: as for :meth:`encode_bytes`.

        Returns:
            (ptr int64 [S+1], labels int32, oov int64 [S]): out-of-vocabulary
            words get the ``<unk>`` label and are counted.
        """
        if not isinstance(sentences, (list, tuple)):
            sentences = list(sentences)
        if not sentences:
            return np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64)
        try:        # strings, as they come (the usual case: no copy of the list, no strip)
            text = "\n".join(sentences).encode("utf-8") + b"\n"
        except TypeError:
            text = None
        ptr = None
        if text is not None:
            ptr, labels, oov = self.encode_bytes(text, threads)
        if ptr is None or ptr.size - 1 != len(sentences):
            # lists of tokens, or a string ending in a newline: the careful way
            sentences = [s if isinstance(s, str) else " ".join(s) for s in sentences]
            text = "\n".join(s.rstrip("\n") for s in sentences).encode("utf-8") + b"\n"
            ptr, labels, oov = self.encode_bytes(text, threads)
            if ptr.size - 1 != len(sentences):
                raise ArgumentError("a sentence contains a newline; give one sentence per string")
        return ptr, labels, oov

    # ------------------------------------------------------------ scoring
    def walk(self, ptr, labels, final: bool = True, threads: int = 1, per_word: bool = False,
             null_context: bool = False):
        """:func:`~fsmlearn.algo.score.score_sequences` of label sequences on the model's
        tables (-ln weights).

        Args:
            ptr, labels: the sequences (as :meth:`encode` gives them).
            final: add ``</s>`` (the final weight, failing over).
            threads: 1, or more to score blocks of sentences on numba's
                threads (0: all of them); the same results.
            per_word: also each word's weight and the state that served it.
            null_context: start from the empty history instead of ``<s>``
                (KenLM's ``query -n``).

        Raises:
            ModelFormatError: a loaded model's arrays are corrupt where the
                walk read them (the array, index and value are named).
        """
        t = self.tables
        if null_context:
            t = dataclasses.replace(t, start=0)
        try:
            return score_sequences(None, ptr, labels, phi_final=True, final=final, tables=t, threads=threads,
                                   per_word=per_word)
        except MachineError as e:
            if self.path is None or not hasattr(e, "array"):
                raise
            raise ModelFormatError(f"array {e.array!r} at index {e.index}: value {e.value!r}: {e}",
                                   self.path) from None

    def advance(self, state: int, word_ids) -> int:
        """The state reached from ``state`` by reading the word ids in turn (failure arcs
        followed): the longest suffix of ``state``'s history plus the words that the model
        keeps as a history.  State 0 is the empty history; ``machine.start`` is ``<s>``'s.

        Raises:
            ArgumentError: a state out of range, or a word id the model does not know.
        """
        t = self.tables
        if not 0 <= int(state) < t.num_states:
            raise ArgumentError(f"state {state} is out of range for a model of {t.num_states} states")
        ids = np.asarray(word_ids, np.int64).ravel()
        bad = np.flatnonzero((ids < 0) | (ids >= self.num_words))
        if bad.size:
            raise ArgumentError(f"word id {int(ids[bad[0]])} is outside 0..{self.num_words - 1}")
        out, err = _advance(int(state), ids + 1, t.arcs, t.mask, t.num_labels, t.back, t.back_cost, t.max_back)
        if err[0] != WALK_OK:
            raise _walk_error(int(err[0]), int(err[1]), t)
        return int(out)

    def next_costs(self, states, num_words: int | None = None) -> np.ndarray:
        """float64 [len(states), W]: -ln p(w | h) of each word id w < W (default: every word)
        after each state's history h, failure arcs followed (inf where the model gives none).

        Raises:
            ArgumentError: a state out of range, or W larger than the vocabulary.
        """
        t = self.tables
        states = np.asarray(states, np.int64).ravel()
        W = self.num_words if num_words is None else int(num_words)
        if not 0 <= W <= self.num_words:
            raise ArgumentError(f"num_words {W} is outside 0..{self.num_words}")
        bad = np.flatnonzero((states < 0) | (states >= t.num_states))
        if bad.size:
            raise ArgumentError(f"state {int(states[bad[0]])} is out of range for a model of {t.num_states} states")
        out = np.empty((states.size, W))
        err = _next_costs(states, W, t.arcs, t.mask, t.num_labels, t.back, t.back_cost, t.max_back, out)
        if err[0] != WALK_OK:
            raise _walk_error(int(err[0]), int(err[1]), t)
        return out

    def score(self, sentences, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """log10 probability of each sentence, ``</s>`` included, and its OOV count.

        Equals ``kenlm.Model.score(sentence, bos=True, eos=True)`` (for an
        :func:`epsilon_approximation`, the approximation's sum over paths).
        ``threads`` as for :meth:`walk`.
        """
        ptr, lab, oov = self.encode(sentences, threads)
        return self._score_labels(ptr, lab, oov, threads)

    def score_bytes(self, text: bytes, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`score` of text, one sentence per line, tokens separated by ASCII whitespace
        (as KenLM reads it: bytes that are not UTF-8 make a word the model does not know;
        a last line without a newline counts)."""
        ptr, lab, oov = self.encode_bytes(text, threads)
        return self._score_labels(ptr, lab, oov, threads)

    def _score_labels(self, ptr, lab, oov, threads):
        if not self.epsilon:
            r = self.walk(ptr, lab, final=True, threads=threads)
            return -r.weight / LN10, oov
        from ..algo.shortest import total_weight
        out = np.empty(ptr.size - 1)
        for i in range(ptr.size - 1):
            seq = lab[ptr[i]:ptr[i + 1]]
            n = seq.size
            acc = Machine.from_arcs(n + 1, 0, {n: 0.0}, np.arange(n), np.arange(1, n + 1), seq,
                                    weight=np.zeros(n), isyms=self.machine.isyms, check_symbols=False)
            from ..algo.compose import compose     # only epsilon-approximated models need it
            c = compose(acc, self.machine)
            out[i] = -(total_weight(c) if c.start >= 0 else np.inf) / LN10
        return out, oov

    # ------------------------------------------------------------ files
    def save(self, path) -> int:
        """Write the model as a compiled-LM file, atomically; its size in bytes.

        The file (format :data:`LM_FORMAT`, version :data:`LM_VERSION`, a
        :mod:`fsmlearn.lm.mapfile` container) holds what scoring reads, so
        that :meth:`load` maps it and scores at once:

        * ``arcs`` float64 [cap, 3]: the (state, label) hash of
          :func:`~fsmlearn.algo.score.label_hash` (rows key = state * L +
          label, destination, -ln p; key -1 free; cap = hash_mask + 1);
        * ``back`` int32 [n], ``back_cost`` float64 [n]: each state's backoff
          state (-1 for the empty history) and -ln of its backoff weight;
        * ``final`` float64 [n]: -ln p(</s> | h) where the model lists
          ``h </s>``, inf elsewhere (it fails over like a word);
        * ``hist_len`` int8 [n]: each state's history length;
        * ``words`` uint8, ``word_offsets`` int64 [V + 1], ``word_table``
          int64 [word_table_mask + 1]: the vocabulary's UTF-8 bytes and its
          byte-level hash (:class:`~fsmlearn.lm.vocab.ByteVocab`);
        * header values order, num_states, start, unk_label, num_labels (L),
          vocab_size, hash_mask, word_table_mask, max_back (the longest
          backoff chain) and num_arcs (of the machine).

        The machine is not stored: its arcs are the hash's rows and the
        backoff arcs (:attr:`machine` rebuilds it, exactly).

        Raises:
            ArgumentError: an epsilon approximation, or a machine that is not
                a deterministic acceptor with failure arcs (two arcs with one
                label at a state, epsilon arcs): the format cannot hold it.
        """
        if self.epsilon:
            raise ArgumentError("an epsilon approximation cannot be saved as a compiled LM")
        t = self.tables
        m = self._machine
        if m is not None:
            if m.semiring != "log" or not m.is_acceptor or bool(np.any(m.ilabel == 0)):
                raise ArgumentError("only a log-semiring acceptor without epsilon arcs can be saved as a compiled LM")
            rows = int(np.count_nonzero(t.arcs[:, 0] >= 0.0))
            phis = int(np.count_nonzero(t.back >= 0))
            if rows + phis != m.num_arcs:
                raise ArgumentError(f"the machine has {m.num_arcs} arcs but {rows} distinct (state, label) pairs "
                                    f"and {phis} phi arcs: not deterministic, cannot be saved as a compiled LM")
            num_arcs = m.num_arcs
        else:
            num_arcs = self._file["num_arcs"]
        wbuf, woff, table, mask = self._word_arrays()
        V = int(woff.size - 1)
        meta = dict(order=self.order, num_states=t.num_states, start=t.start, unk_label=self.unk_label,
                    num_labels=t.num_labels, vocab_size=V, hash_mask=t.mask, word_table_mask=int(mask),
                    max_back=t.max_back, num_arcs=int(num_arcs))
        arrays = dict(arcs=t.arcs, back=t.back, back_cost=t.back_cost, final=t.final, hist_len=self.hist_len,
                      words=wbuf, word_offsets=woff, word_table=table)
        return write_mapped(path, LM_FORMAT, LM_VERSION, meta, arrays)

    @classmethod
    def load(cls, path, verify: bool = False) -> "CompiledLM":
        """Open a model written by :meth:`save` (or ``fsmlearn lm compile``), mapped.

        The header, every array's dtype, shape and place in the file, and
        the vocabulary's arrays (offsets and word hash, O(V)) are checked
        here; the large arrays are checked where scoring reads them (see
        :meth:`walk`), or whole with ``verify`` (:meth:`verify`, O(file)).
        A file of the previous format (a machine ``.npz``, fsmlearn before
        the compiled-LM format) is read whole as before, and its tables are
        built on first use.

        Raises:
            ModelFormatError: no such file, not a compiled LM, another version,
                a truncated file, a missing array or one of the wrong dtype or
                shape, a header value out of range, corrupt vocabulary arrays
                (named: array, index, value).
            NpzFormatError, MachineError: an old-format file that is corrupt.
        """
        if not _is_zip(path):      # a compiled-LM file, or not a model at all (named as such)
            lm = cls._load_mapped(path)
            if verify:
                lm.verify()
            return lm
        m = Machine.load(path)
        t = m.isyms
        if t is None or UNK not in t or BOS not in t:
            raise MachineError(f"{path}: not a compiled language model (no word symbol table with <unk> and <s>)")
        keys = np.asarray(t.keys)
        V = int(keys.max())
        vocab = [""] * V
        for k, w in t:
            if k > 0:
                vocab[k - 1] = w
        lm = cls(m, vocab, t.find(UNK), 0)
        lm.order = int(lm.hist_len.max(initial=0)) + 1
        return lm

    @classmethod
    def _load_mapped(cls, path) -> "CompiledLM":
        f = MappedFile(path, ModelFormatError, kind="compiled language model", fmt=LM_FORMAT, version=LM_VERSION,
                       older=(1,))
        order = f.integer("order", 1, 127)
        n = f.integer("num_states", 1, 2**31 - 1)
        V = f.integer("vocab_size", 1, 2**31 - 2)
        L = f.integer("num_labels", 1, V + 1)
        start = f.integer("start", 0, n - 1)
        unk = f.integer("unk_label", 1, V)
        mask = f.integer("hash_mask", 0, 2**62)
        vmask = f.integer("word_table_mask", 0, 2**62)
        max_back = f.integer("max_back", 0, order)
        num_arcs = f.integer("num_arcs", 0, 2**62)
        for key, v in (("hash_mask", mask), ("word_table_mask", vmask)):
            if (v + 1) & v:
                raise f.fail(f"header value {key!r} is {v}; expected a power of two minus one")
        if n * L >= 2**53:
            raise f.fail(f"{n} states x {L} labels do not make exact hash keys (at most 2**53)")
        arcs = f.need("arcs", np.float64, (mask + 1, 3))
        back = f.need("back", np.int32, (n,))
        back_cost = f.need("back_cost", np.float64, (n,))
        final = f.need("final", np.float64, (n,))
        hist_len = f.need("hist_len", np.int8, (n,))
        wbuf = f.need("words", np.uint8, (None,))
        woff = f.need("word_offsets", np.int64, (V + 1,))
        table = f.need("word_table", np.int64, (vmask + 1,))
        # the word hash is read without bounds checks (vocab.encode_lines): check it whole, O(V)
        if woff[0] != 0:
            raise f.bad("word_offsets", f"entry 0 is {int(woff[0])}; must be 0")
        fall = np.flatnonzero(woff[1:] < woff[:-1])
        if fall.size:
            i = int(fall[0]) + 1
            raise f.bad("word_offsets", f"entry {i} is {int(woff[i])}, below entry {i - 1} ({int(woff[i - 1])})")
        if woff[-1] != wbuf.size:
            raise f.bad("word_offsets", f"last entry (index {V}) is {int(woff[-1])}; must be the {wbuf.size} "
                                        f"bytes of array 'words'")
        out = np.flatnonzero((table < -1) | (table >= V))
        if out.size:
            i = int(out[0])
            raise f.bad("word_table", f"entry {i} is {int(table[i])}; expected -1 (free) or a word id below {V}")
        if not np.any(table == -1):
            raise f.bad("word_table", "has no free slot (a lookup of an unknown word would not end)")
        if f.version == 1:      # hashed by FNV-1a: the table again, by word_hash
            vmask = table_capacity(V) - 1
            table = np.full(vmask + 1, -1, np.int64)
            build_table(wbuf, woff, table, vmask)
        try:
            tables = ScoreTables(start, arcs, mask, L, back, back_cost, final, max_back)
        except MachineError as e:
            raise f.fail(str(e)) from None
        lm = cls(None, None, unk, order, hist_len=hist_len)
        lm._tables = tables
        lm._words = (wbuf, woff, table, vmask)
        lm._file = dict(file=f, vocab_size=V, num_arcs=num_arcs)
        lm.path = f.path
        return lm

    def release_pages(self) -> bool:
        """Drop a mapped model's pages from this process's resident memory (they are read again
        from the file when scoring touches them): for a caller that keeps only the machine
        (:attr:`machine`, built from the tables on first access), e.g. n-gram EM, whose c
        would otherwise hold the whole file resident.  False when nothing is mapped."""
        if self._file is None:
            return False
        return self._file["file"].release()

    def verify(self) -> None:
        """Check every value of a loaded model's arrays (O(file size); :meth:`load` checks
        only what is cheap and the walk the rest as it reads it).

        Raises:
            ModelFormatError: the first bad value (array, index, value).
        """
        if self._file is None:
            return
        t = self.tables
        f = self._file["file"]
        status, where = _check_tables(t.arcs, t.num_labels, t.num_states, t.back, t.back_cost, t.final,
                                      self.hist_len, self.order)
        if status == 1:
            raise f.bad("arcs", f"row {where}: key {float(t.arcs[where, 0])!r} is neither -1 (free) nor "
                                f"state * {t.num_labels} + label with a state below {t.num_states} and a label >= 1")
        if status == 2:
            raise f.bad("arcs", f"row {where}: destination {float(t.arcs[where, 1])!r} is out of range for "
                                f"{t.num_states} states")
        if status == 3:
            raise f.bad("back", f"entry {where} is {int(t.back[where])}; expected -1 or a state below {t.num_states}")
        if status == 4:
            raise f.bad("hist_len", f"entry {where} is {int(self.hist_len[where])}; expected 0..{self.order - 1}")
        if status == 6:
            raise f.bad("arcs", f"row {where}: cost {float(t.arcs[where, 2])!r} is not a -ln probability "
                                "(finite, >= 0)")
        if status == 7:
            raise f.bad("back_cost", f"entry {where} is {float(t.back_cost[where])!r}; expected a finite -ln weight")
        if status == 8:
            raise f.bad("final", f"entry {where} is {float(t.final[where])!r}; expected a -ln weight >= 0 "
                                 "(inf: not final)")
        if status == 5:
            b = int(t.back[where])
            raise f.bad("back", f"entry {where} is {b}, whose history ({int(self.hist_len[b])} words) is not "
                                f"shorter than state {where}'s ({int(self.hist_len[where])})")

    def _decode_vocab(self) -> list:
        wbuf, woff, _, _ = self._word_arrays()
        data = wbuf.tobytes()
        off = woff.tolist()
        try:
            return [data[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)]
        except UnicodeDecodeError as e:
            i = next(i for i in range(len(off) - 1) if not _utf8(data[off[i]:off[i + 1]]))
            raise ModelFormatError(f"array 'words': word {i} is not UTF-8 ({e.reason})", self.path) from None

    def _rebuild_machine(self) -> Machine:
        t = self.tables
        n = t.num_states
        src, dst, lab, wt, status, where = _machine_arcs(t.arcs, t.num_labels, n, t.back, t.back_cost)
        if status:
            f = self._file["file"]
            if status == 1:
                raise f.bad("arcs", f"row {where}: key {float(t.arcs[where, 0])!r} or destination "
                                    f"{float(t.arcs[where, 1])!r} out of range for {n} states, {t.num_labels} labels")
            raise f.bad("back", f"entry {where} is {int(t.back[where])}; expected -1 or a state below {n}")
        if src.size != self._file["num_arcs"]:
            raise self._file["file"].fail(f"the tables hold {src.size} arcs; the header says "
                                          f"{self._file['num_arcs']}")
        counts = np.bincount(src, minlength=n)
        src_start = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=src_start[1:])
        dst, lab, wt = sort_arcs(src, dst, lab, wt, src_start)
        del src
        for a in (src_start, dst, lab, wt):
            a.setflags(write=False)     # fresh arrays handed over, so that the machine need not copy them
        syms = SymbolTable(["<eps>"] + list(self.vocab), name="words")
        try:
            m = Machine(start=t.start, final=t.final, src_start=src_start, dst=dst, ilabel=lab, weight=wt,
                        isyms=syms, semiring="log", arc_type="log64", check_symbols=False)
        except MachineError as e:
            raise ModelFormatError(f"the tables do not make a machine: {e}", self.path) from None
        seed_label_hash(m, t.arcs, t.mask, t.num_labels)
        return m


def _is_zip(path) -> bool:
    """Whether the file starts like a zip archive (the previous format, a machine ``.npz``)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")
    except OSError:
        return False


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@nb.njit(cache=True)
def _advance(r, labels, T, mask, L, back, back_cost, max_back):
    """The state after reading ``labels`` from state r (an unknown label: the empty history,
    state 0), and (status, where) of :func:`~fsmlearn.algo.score._read_label`."""
    n = back.shape[0]
    err = np.zeros(2, np.int64)
    for i in range(labels.shape[0]):
        row, _, _, status, where = _read_label(labels[i], r, T, mask, L, back, back_cost, n, max_back)
        if status != WALK_OK:
            err[0] = status
            err[1] = where
            return r, err
        r = np.int64(T[row, 1]) if row >= 0 else np.int64(0)
    return r, err


@nb.njit(cache=True)
def _next_costs(states, W, T, mask, L, back, back_cost, max_back, out):
    """out[k, w] = the cost of word id w (label w + 1) from states[k], failure arcs included."""
    n = back.shape[0]
    err = np.zeros(2, np.int64)
    for k in range(states.shape[0]):
        for w in range(W):
            row, acc, _, status, where = _read_label(w + 1, states[k], T, mask, L, back, back_cost, n, max_back)
            if status != WALK_OK:
                err[0] = status
                err[1] = where
                return err
            out[k, w] = acc + T[row, 2] if row >= 0 else np.inf
    return err
