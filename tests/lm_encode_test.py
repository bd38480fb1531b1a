"""The byte tokeniser of the compiled LM (lm.vocab.encode_lines, count_span and encode_span, and the
parallel encoder of lm.compiled) against the definition: one sentence per line, tokens split at
ASCII whitespace as ``bytes.split`` splits, a last line without a newline counted."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmlearn.lm.compiled import _encode_parts
from fsmlearn.lm.vocab import ByteVocab, count_span, encode_lines

WORDS = ["a", "bb", "<unk>", "ccc", "é", "a\x00b"]
UNK = 2
BV = ByteVocab(WORDS)


def reference(text: bytes):
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()                     # the text's last newline ends a line; it starts none
    idx = {w.encode(): i for i, w in enumerate(WORDS)}
    ptr, ids, oov = [0], [], []
    for line in lines:
        toks = line.split()             # bytes.split: space, tab, CR, VT, FF (and no newline here)
        ws = [idx.get(t, -1) for t in toks]
        oov.append(sum(w < 0 or w == UNK for w in ws))
        ids += [UNK if w < 0 else w for w in ws]
        ptr.append(len(ids))
    return ptr, ids, oov


pieces = st.sampled_from([b"a", b"bb", b"<unk>", b"ccc", "é".encode(), b"zz", b"a\x00b", b" ", b"\t", b"\r",
                          b"\x0b", b"\x0c", b"\n", b"\n", b"  ", b"\xff"])


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces, max_size=40), st.integers(0, 6))
def test_encode_matches_bytes_split(parts, ncut):
    text = b"".join(parts)
    buf = np.frombuffer(text, np.uint8)
    ptr, ids, oov = encode_lines(buf, BV.table, BV.wbuf, BV.woff, BV.mask, UNK)
    rp, ri, ro = reference(text)
    assert ptr.tolist() == rp and ids.tolist() == ri and oov.tolist() == ro
    assert count_span(buf, 0, buf.size) == (len(rp) - 1, len(ri))
    # the parallel encoder: parts of whole lines (each cut just after a newline)
    nl = [i + 1 for i, c in enumerate(text) if c == 10]
    cuts = sorted({0, len(text), *nl[:ncut]})
    p2, i2, o2 = _encode_parts(buf, np.array(cuts, np.int64), BV.table, BV.wbuf, BV.woff, BV.mask, UNK)
    assert p2.tolist() == rp and i2.tolist() == ri and o2.tolist() == ro
