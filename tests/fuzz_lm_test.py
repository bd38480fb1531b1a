"""Fuzzing the LM file readers (issue 16): ARPA files and Web1T count directories.

Each test mutates a valid file (tests/fuzz.py) and holds the reader to the
property "a located FsmError or a correct result, and nothing written".  A
result is correct when it equals what a small reference reader of the
documented format gives (the accepted forms listed in the readers'
docstrings, written here independently in plain Python); and a file the
reference accepts must not be refused.
"""

from __future__ import annotations

import gzip
import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz import check_reader, fuzz_settings, mutated
from fsmlearn.lm.arpa import read_arpa
from fsmlearn.lm.web1t import read_web1t

# ------------------------------------------------------------------------- ARPA
VALID_ARPA = b"""\\data\\
ngram 1=6
ngram 2=5
ngram 3=2

\\1-grams:
-1.5\t<unk>\t0
-99\t<s>\t-0.30103
-0.6\t</s>
-0.7\tthe\t-0.2
-0.8\tcat\t-0.25
-1.25e0\tsat\t-1.5E-1

\\2-grams:
-0.3\t<s> the\t-0.1
-0.5\tthe cat\t-0.05
-0.2\tcat </s>
-0.45\tcat sat
-0.1\tsat </s>

\\3-grams:
-0.01\t<s> the cat
-0.02\tthe cat sat

\\end\\
"""

_NUM = re.compile(rb"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_HEAD = re.compile(rb"^ngram\s+(\d+)\s*=\s*(\d+)\s*$")
_SECT = re.compile(rb"^\\(\d+)-grams:\s*$")


class Refused(Exception):
    pass


def _number(tok: bytes) -> float:
    if not _NUM.match(tok):
        raise Refused(f"not a number {tok!r}")
    v = float(tok)
    if not math.isfinite(v):
        raise Refused("not finite")
    return v


def reference_arpa(data: bytes):
    """The ARPA format of read_arpa's docstring, line by line in Python: (vocab,
    ngrams, logprob, backoff, has_backoff) or Refused."""
    lines = data.split(b"\n")
    i = 0
    while i < len(lines) and lines[i].strip() != b"\\data\\":
        i += 1
    if i == len(lines):
        raise Refused("no data")
    i += 1
    counts = []
    while True:
        if i == len(lines):
            raise Refused("header")
        s = lines[i].strip()
        i += 1
        if not s:
            continue
        m = _HEAD.match(s)
        if m:
            if int(m.group(1)) != len(counts) + 1:
                raise Refused("order")
            counts.append(int(m.group(2)))
            continue
        if _SECT.match(s):
            break
        raise Refused("header line")
    if not counts:
        raise Refused("no counts")
    N = len(counts)
    vocab, wid = [], {}
    ngrams, lps, bos, hbs = [], [], [], []
    for k in range(1, N + 1):
        m = _SECT.match(lines[i - 1].strip())
        if not m or int(m.group(1)) != k:
            raise Refused("section")
        rows, lp, bo, hb = [], [], [], []
        while i < len(lines):
            s = lines[i].strip()
            if not s or s.startswith(b"\\"):
                break
            f = s.split()
            if len(f) not in (k + 1, k + 2):
                raise Refused("fields")
            p = _number(f[0])
            if p > 0:
                raise Refused("positive")
            words = f[1:k + 1]
            if k == 1:
                try:
                    w = words[0].decode("utf-8")
                except UnicodeDecodeError:
                    raise Refused("utf8") from None
                if w in wid:
                    raise Refused("dup word")
                wid[w] = len(vocab)
                vocab.append(w)
                rows.append([wid[w]])
            else:
                try:
                    rows.append([wid[w.decode("utf-8")] for w in words])
                except (KeyError, UnicodeDecodeError):
                    raise Refused("unknown word") from None
            lp.append(p)
            if len(f) == k + 2:
                if k == N:
                    raise Refused("backoff at the top order")
                bo.append(_number(f[-1]))
                hb.append(True)
            else:
                bo.append(0.0)
                hb.append(False)
            i += 1
        if len(rows) != counts[k - 1]:
            raise Refused("count")
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i == len(lines):
            raise Refused("no end")
        i += 1
        ngrams.append(np.array(rows, np.int32).reshape(-1, k))
        lps.append(np.array(lp))
        bos.append(np.array(bo))
        hbs.append(np.array(hb, bool))
    if lines[i - 1].strip() != b"\\end\\":
        raise Refused("end")
    for w in ("<s>", "</s>", "<unk>"):
        if w not in wid:
            raise Refused("marker")
    for k in range(2, N + 1):
        seen = {tuple(r) for r in ngrams[k - 1].tolist()}
        if len(seen) != len(ngrams[k - 1]):
            raise Refused("duplicate")
        lower = {tuple(r) for r in ngrams[k - 2].tolist()}
        if any(tuple(r[:-1]) not in lower for r in ngrams[k - 1].tolist()):
            raise Refused("context")
    return vocab, ngrams, lps, bos, hbs


def _check_arpa(data: bytes):
    def check(lm):
        try:
            vocab, ngrams, lp, bo, hb = reference_arpa(data)
        except Refused as e:
            raise AssertionError(f"read_arpa accepted a file the format refuses ({e})") from None
        assert lm.vocab == vocab
        for k in range(len(ngrams)):
            assert np.array_equal(lm.ngrams[k], ngrams[k])
            assert np.array_equal(lm.logprob[k], lp[k])
            assert np.array_equal(lm.backoff[k], bo[k])
            assert np.array_equal(lm.has_backoff[k], hb[k])
    return check


def _arpa_case(data: bytes, name: str = "m.arpa"):
    result = check_reader("ARPA", read_arpa, data, name, check=_check_arpa(data))
    if result is None:     # refused: the format must refuse it too
        try:
            reference_arpa(data)
        except Refused:
            return
        raise AssertionError("read_arpa refused a file the format accepts")


def test_the_valid_file_reads_and_the_reference_agrees(tmp_path):
    assert reference_arpa(VALID_ARPA)[0] == ["<unk>", "<s>", "</s>", "the", "cat", "sat"]
    _arpa_case(VALID_ARPA)


@fuzz_settings()
@given(data=mutated(VALID_ARPA))
def test_fuzz_arpa(data):
    _arpa_case(data)


@fuzz_settings(max(20, __import__("fuzz").EXAMPLES // 5))
@given(data=mutated(VALID_ARPA))
def test_fuzz_arpa_gzip(data):
    """The same through gzip (a truncated stream, a bad CRC: 'cannot decompress', named)."""
    raw = gzip.compress(data, mtime=0)
    cut = len(raw) if len(data) % 3 else len(raw) * 2 // 3
    result = check_reader("ARPA (.gz)", read_arpa, raw[:cut], "m.arpa.gz",
                          check=_check_arpa(data))
    assert result is None or cut == len(raw)


# ------------------------------------------------------------------------ Web1T
VALID_VOCAB = b"the\t9\ncat\t5\n<S>\t4\n</S>\t4\nsat\t3\n"
VALID_2GMS = b"<S> the\t4\ncat sat\t3\nsat </S>\t3\nthe cat\t5\n"
VALID_3GMS = b"<S> the cat\t4\nthe cat sat\t3\n"


def _web1t_files(vocab=VALID_VOCAB, two=VALID_2GMS, three=VALID_3GMS):
    return {"1gms/vocab": vocab, "2gms/2gm-0000": two, "3gms/3gm-0000": three}


def reference_web1t(files: dict):
    """The Web1T layout of read_web1t's docstring, in Python: (vocab, counts per order) or Refused."""
    vocab, c1 = [], []
    to_ours = {"<S>": "<s>", "</S>": "</s>", "<UNK>": "<unk>"}
    try:
        text = files["1gms/vocab"].decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("utf8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise Refused("empty vocab")
    for line in lines:
        parts = line.split("\t")
        if len(parts) != 2 or not re.fullmatch(r"[0-9]+", parts[1]) or not 1 <= int(parts[1]) < 2**63:
            raise Refused("vocab line")
        w = to_ours.get(parts[0], parts[0])
        if not w or any(c.isspace() for c in w) or w in vocab:
            raise Refused("vocab word")
        vocab.append(w)
        c1.append(int(parts[1]))
    wid = {w: i for i, w in enumerate(vocab)}
    out = []
    for k in (2, 3):
        try:
            text = files[f"{k}gms/{k}gm-0000"].decode("utf-8")
        except UnicodeDecodeError:
            raise Refused("utf8") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        prev = None
        grams = {}
        for line in lines:
            if line.count("\t") != 1:
                raise Refused("tab")
            head, c = line.split("\t")
            words = head.split(" ")
            if len(words) != k or not re.fullmatch(r"[0-9]+", c) or not 1 <= int(c) < 2**63:
                raise Refused("line")
            try:
                row = tuple(wid[to_ours.get(w, w)] for w in words)
            except KeyError:
                raise Refused("word") from None
            key = [w.encode("utf-8") for w in words]
            if prev is not None and key <= prev:
                raise Refused("order")
            prev = key
            if int(c) > min(c1[r] for r in row):
                raise Refused("count above a word's count")
            if k > 2 and row[:-1] not in out[-1]:
                raise Refused("prefix not listed")
            grams[row] = int(c)
        out.append(grams)
    return vocab, c1, out


def _read_dir(folder_file):
    return read_web1t(folder_file.parent.parent)


def _web1t_case(which: str, data: bytes):
    files = _web1t_files()
    files[which] = data

    def setup(folder):
        for name, content in files.items():
            if name != which:
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(content)

    def check(counts):
        try:
            vocab, c1, grams = reference_web1t(files)
        except Refused as e:
            raise AssertionError(f"read_web1t accepted a directory the format refuses ({e})") from None
        assert counts.vocab == vocab
        assert counts.counts[0].tolist() == c1
        for k in (2, 3):
            got = {tuple(r): int(c) for r, c in zip(counts.ngrams[k - 1].tolist(), counts.counts[k - 1])}
            assert got == grams[k - 2]

    result = check_reader("Web1T", _read_dir, data, which, check=check, setup=setup)
    if result is None:
        try:
            reference_web1t(files)
        except Refused:
            return
        raise AssertionError("read_web1t refused a directory the format accepts")


def test_the_valid_directory_reads():
    _web1t_case("2gms/2gm-0000", VALID_2GMS)


@fuzz_settings()
@given(which=st.sampled_from(["1gms/vocab", "2gms/2gm-0000", "3gms/3gm-0000"]), data=st.data())
def test_fuzz_web1t(which, data):
    valid = _web1t_files()[which]
    _web1t_case(which, data.draw(mutated(valid)))


# ------------------------------------------------------------------ compiled LM
def _compiled_bytes() -> bytes:
    import tempfile
    from pathlib import Path

    from fsmlearn.lm.model import compile_lm
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "m.arpa"
        src.write_bytes(VALID_ARPA)
        out = Path(d) / "m.fsm"
        compile_lm(read_arpa(src)).save(out)
        return out.read_bytes()


VALID_COMPILED = _compiled_bytes()
SENTENCES = ["the cat sat", "cat", "dog the cat sat", ""]


def _load_and_score(path):
    from fsmlearn.lm.compiled import CompiledLM
    lm = CompiledLM.load(path, verify=True)
    return lm.score(SENTENCES)


def _check_scores(result):
    scores, oov = result
    # a changed word (its bytes or hash slot) makes another, valid vocabulary: OOVs may move
    assert scores.shape == (len(SENTENCES),)
    assert all(0 <= o <= len(s.split()) for o, s in zip(oov.tolist(), SENTENCES))
    assert not np.isnan(scores).any() and (scores <= 1e-9).all(), scores


def test_the_valid_compiled_model_scores_as_its_arpa():
    scores, _ = check_reader("compiled LM", _load_and_score, VALID_COMPILED, "m.fsm", binary=True,
                             check=_check_scores)
    # <s> the cat sat </s>: <s> the -0.3, <s> the cat -0.01, the cat sat -0.02, then
    # cat sat </s> is not listed: backoff of 'cat sat' (0) + sat </s> -0.1
    assert abs(scores[0] - (-0.3 - 0.01 - 0.02 - 0.1)) < 1e-9


@fuzz_settings()
@given(data=mutated(VALID_COMPILED, numbers=False))
def test_fuzz_compiled_lm(data):
    check_reader("compiled LM", _load_and_score, data, "m.fsm", binary=True, check=_check_scores)


@fuzz_settings()
@given(data=st.data())
def test_fuzz_compiled_lm_values(data):
    """Overwrite 8 aligned bytes of the array area with a float64 (NaN, inf, negative, huge,
    an integer's bits): load(verify=True) names the array and entry, or the model still
    scores finite log-probabilities."""
    import struct
    raw = bytearray(VALID_COMPILED)
    hlen = struct.unpack("<Q", raw[8:16])[0]
    start = (16 + hlen + 63) // 64 * 64
    pos = data.draw(st.integers(start // 8, len(raw) // 8 - 1)) * 8
    value = data.draw(st.sampled_from([float("nan"), float("inf"), -float("inf"), -1.0, 1e300, -0.5,
                                       3.0, 1e9, 0.0]))
    raw[pos:pos + 8] = struct.pack("<d", value)
    check_reader("compiled LM", _load_and_score, bytes(raw), "m.fsm", binary=True, check=_check_scores)
