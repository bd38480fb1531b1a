"""The byte tokeniser of the compiled LM (lm.vocab.encode_lines, count_span and encode_span, and the
parallel encoder of lm.compiled) against the definition: one sentence per line, tokens split at
ASCII whitespace as ``bytes.split`` splits, a last line without a newline counted."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmlearn.lm.compiled import _encode_parts
from fsmlearn.lm.vocab import (ByteVocab, _probe_token, build_table, count_span, encode_lines, slot_keys, vocab_find,
                               word_bytes, word_hash)

# words of one to eight bytes and beyond (the tokeniser and the hash take eight bytes at a time)
WORDS = ["a", "bb", "<unk>", "ccc", "é", "a\x00b", "eightchr", "ninechars", "sixteen-bytes-16", "a\x1cword-of-18-bytes",
         "ÉÍы"]
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
                          b"\x0b", b"\x0c", b"\n", b"\n", b"  ", b"\xff", b"eightchr", b"ninechars",
                          b"sixteen-bytes-16", b"a\x1cword-of-18-bytes", b"eightch", b"\xa0\x85",
                          # bytes whose low seven bits are whitespace (0x89-0x8d: "É", "Í", "ы"), and the
                          # bytes either side of the 9-13 range and of the space: all inside tokens
                          "ÉÍы".encode(), b"\x8d", b"\x08", b"\x0e", b"\x1f", b"\x21", b"\x7f",
                          # words not in the vocabulary whose first eight bytes and length are a
                          # word's (where their probe passes that word's slot, the other bytes
                          # decide: the test below makes sure it does)
                          b"ninecharz", b"sixteen-bytes-17", b"a\x1cword-of-18-bytez"])


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces, max_size=40), st.integers(0, 6))
def test_encode_matches_bytes_split(parts, ncut):
    text = b"".join(parts)
    buf = np.frombuffer(text, np.uint8)
    ptr, ids, oov = encode_lines(buf, BV.table, BV.keys, BV.wbuf, BV.woff, BV.mask, UNK)
    rp, ri, ro = reference(text)
    assert ptr.tolist() == rp and ids.tolist() == ri and oov.tolist() == ro
    assert count_span(buf, 0, buf.size) == (len(rp) - 1, len(ri))
    # the parallel encoder: parts of whole lines (each cut just after a newline)
    nl = [i + 1 for i, c in enumerate(text) if c == 10]
    cuts = sorted({0, len(text), *nl[:ncut]})
    p2, i2, o2 = _encode_parts(buf, np.array(cuts, np.int64), BV.table, BV.keys, BV.wbuf, BV.woff, BV.mask, UNK)
    assert p2.tolist() == rp and i2.tolist() == ri and o2.tolist() == ro


pieces_v = st.sampled_from([b"a", b"bb", b"<s>", b"ccc", "é".encode(), b"zz", b" ", b"\t", b"\r", b"\x0b", b"\x0c",
                            b"\n", b"\n", b"  ", b"a\xc2\xa0b", b"\xff", b"\x00", b"x\x1cy"])


@settings(max_examples=200, deadline=None)
@given(st.lists(pieces_v, max_size=60), st.integers(0, 3), st.integers(1, 12))
def test_the_vocabulary_pass_in_numba_equals_the_python_one(tmp_path_factory, parts, lo, width):
    """lm.scale.count.vocab_part: the numba pass over an uncompressed partition (words in order of
    first appearance, <s> and </s> once per line) gives what the Python pass over the same
    partition's lines gives; text the fast pass declines (NUL, not UTF-8, Unicode whitespace)
    takes the Python pass and its located error."""
    import pytest
    from fsmlearn.errors import CorpusFormatError
    from fsmlearn.lm.scale.count import TextPart, part_lines, vocab_part
    text = b"".join(parts)
    path = tmp_path_factory.mktemp("v") / "t.txt"
    path.write_bytes(text)
    part = TextPart(str(path), lo, lo + width)
    try:
        lines = tuple(part_lines(part))
    except CorpusFormatError:
        with pytest.raises(CorpusFormatError):
            vocab_part(part)
        return
    got = vocab_part(part)
    want = vocab_part(TextPart(str(path), lines=lines))
    assert got[0] == want[0] and got[1].tolist() == want[1].tolist()


def test_the_vocabulary_pass_grows_its_table(tmp_path):
    from fsmlearn.lm.scale.count import TextPart, part_lines, vocab_part
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(20_000)]
    lines = [" ".join(words[j] for j in rng.integers(0, len(words), 12)) for _ in range(3000)]
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    part = TextPart(str(tmp_path / "t.txt"), 0, (tmp_path / "t.txt").stat().st_size)
    got = vocab_part(part)
    want = vocab_part(TextPart(str(tmp_path / "t.txt"), lines=tuple(part_lines(part))))
    assert got[0] == want[0] and got[1].tolist() == want[1].tolist() and len(got[0].split("\n")) > 10_000


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 200), st.integers(1, 5), st.integers(1, 9), st.booleans(), st.sampled_from([0, -1]),
       st.integers(0, 10 ** 6))
def test_route_is_a_stable_split_by_range(n, k, B, translate, key, seed):
    """lm.scale.count.route (a counting sort in numba) against its definition in numpy: rows put
    in global ids, split by the range of their first or last word, each range in the rows' order."""
    from fsmlearn.lm.scale.count import route
    rng = np.random.default_rng(seed)
    V = 40
    rows = rng.integers(0, V, (n, k)).astype(np.int32)
    cnt = rng.integers(1, 9, n).astype(np.int64)
    trans = rng.permutation(V).astype(np.int32) if translate else None
    bounds = np.unique(np.concatenate([[0, V], rng.integers(0, V, B - 1)])).astype(np.int64)
    got = route([(rows, cnt)], trans, bounds, key)
    g = trans[rows] if translate else rows
    r = np.searchsorted(bounds, g[:, key], side="right") - 1
    for b in range(bounds.size - 1):
        sel = np.flatnonzero(r == b)
        assert np.array_equal(got[b][0][0], g[sel]) and np.array_equal(got[b][0][1], cnt[sel])


@pytest.mark.parametrize("word,token", [("ninechars", "ninecharz"), ("sixteen-bytes-16", "sixteen-bytes-17"),
                                        ("a\x1cword-of-18-bytes", "a\x1cword-of-18-bytez"),
                                        ("eightchr", "eightchrs"), ("ab", "ab\x00"), ("ab\x00", "ab"), ("é", "è"),
                                        # long words that differ in their first eight bytes only, or
                                        # inside the rest (not at its end)
                                        ("ninechars", "Ninechars"), ("sixteen-bytes-16", "sixteen-Bytes-16"),
                                        ("a\x1cword-of-18-bytes", "a\x1cword-Of-18-bytes")])
def test_the_encoders_probe_tells_a_token_from_a_word_that_shares_its_first_eight_bytes(word, token):
    # the word sits in the very slot the token's hash names, so the probe compares the two
    # (its slot keys: the first eight bytes, zero-filled, and the length; then the other bytes)
    wbuf, woff = word_bytes([word])
    tok = np.frombuffer(token.encode(), np.uint8)
    h = np.uint64(word_hash(tok, 0, tok.size))
    mask = 15
    table = np.full(mask + 1, -1, np.int64)
    table[int(h) & mask] = 0
    keys = slot_keys(wbuf, woff, table)
    assert keys[int(h) & mask].tolist() == [int.from_bytes(word.encode()[:8].ljust(8, b"\0"), "little"),
                                            len(word.encode())]
    assert np.count_nonzero(keys) == np.count_nonzero(keys[int(h) & mask])     # free slots: zeros
    assert _probe_token(h, tok, 0, tok.size, table, keys, wbuf, woff, mask) == -1
    # and the word itself, put where its own hash names, is found
    own = np.frombuffer(word.encode(), np.uint8)
    hw = np.uint64(word_hash(own, 0, own.size))
    table[:] = -1
    table[int(hw) & mask] = 0
    keys = slot_keys(wbuf, woff, table)
    assert _probe_token(hw, own, 0, own.size, table, keys, wbuf, woff, mask) == 0


LOOKALIKES = [b"ab", b"ab\x00", b"abc", b"eightchr", b"eightchs", b"ninechars", b"ninecharz", b"Ninechars",
              b"sixteen-bytes-16", b"sixteen-Bytes-16", b"seventeen-bytes-x", b"\xff\xfe", "é".encode()]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"ab", b"\x00", b"c", b"eightch", b"r", b"s", b"ninechar", b"z", b"N",
                                 b"sixteen-", b"bytes-16", b"Bytes-16", b"-", b"x", b"\xff", b"\xfe",
                                 "é".encode()]), min_size=1, max_size=4),
       st.integers(0, len(LOOKALIKES)))
def test_the_encoders_probe_finds_what_vocab_find_finds_in_a_crowded_table(parts, k):
    # thirteen look-alike words (shared first eight bytes, shared lengths, NUL, non-UTF-8)
    # in a table of sixteen slots, so that probes pass many slots: the encoder's probe
    # through the slot keys and the byte-by-byte probe agree on every token
    words = LOOKALIKES[:k] + LOOKALIKES[k + 1:]           # one word left out, so misses occur too
    wbuf = np.frombuffer(b"".join(words), np.uint8).copy()           # bytes as they are (\xff: not UTF-8)
    woff = np.r_[0, np.cumsum([len(w) for w in words])].astype(np.int64)
    mask = 15
    table = np.full(mask + 1, -1, np.int64)
    build_table(wbuf, woff, table, mask)
    keys = slot_keys(wbuf, woff, table)
    tok = np.frombuffer(b"".join(parts), np.uint8)
    h = np.uint64(word_hash(tok, 0, tok.size))
    want, _ = vocab_find(tok, 0, tok.size, table, wbuf, woff, mask)
    assert _probe_token(h, tok, 0, tok.size, table, keys, wbuf, woff, mask) == want
    # and every word is found, at its id
    for w in range(len(words)):
        b = wbuf[woff[w]:woff[w + 1]].copy()
        hw = np.uint64(word_hash(b, 0, b.size))
        assert _probe_token(hw, b, 0, b.size, table, keys, wbuf, woff, mask) == w


def test_the_encoder_refuses_keys_of_another_table():
    buf = np.frombuffer(b"a bb\n", np.uint8)
    with pytest.raises(ValueError, match="one row per slot"):
        encode_lines(buf, BV.table, BV.keys[:-1], BV.wbuf, BV.woff, BV.mask, UNK)
    with pytest.raises(ValueError, match="one row per slot"):
        _encode_parts(buf, np.array([0, buf.size], np.int64), BV.table, BV.keys[:-1], BV.wbuf, BV.woff, BV.mask, UNK)
