"""``fsmlearn rcms train / decode / eval`` on your own pairs (issue 29): a made-up spelling rule
("ph" -> "f", "k" -> "c", doubled letters collapse) learned from 300 pairs with unobserved
alignments, applied to held-out words, and the model reloaded to the same outputs."""

from __future__ import annotations

import random
import subprocess
import sys

FSMLEARN = [sys.executable, "-m", "fsmlearn.cli.main"]


def run(args, stdin=None):
    return subprocess.run(FSMLEARN + [str(a) for a in args], input=stdin, capture_output=True, text=True)


def _rule(w: str) -> str:
    w = w.replace("ph", "f").replace("k", "c")
    out = []
    for ch in w:
        if not out or out[-1] != ch:
            out.append(ch)
    return "".join(out)


def _words(rng, n):
    out = []
    for _ in range(n):
        w = "".join(rng.choice("abdeiklmnoprst") for _ in range(rng.randint(3, 6)))
        if rng.random() < .3:
            w = w[:2] + "ph" + w[2:]
        if rng.random() < .3:
            w = w[:1] + w[1] * 2 + w[2:]
        out.append(w)
    return out


def test_rcms_train_decode_eval_on_a_spelling_rule(tmp_path):
    rng = random.Random(5)
    (tmp_path / "train.txt").write_text("".join(f"{w}\t{_rule(w)}\n" for w in _words(rng, 300)))
    test = _words(rng, 40)
    (tmp_path / "test.txt").write_text("".join(f"{w}\t{_rule(w)}\n" for w in test))
    r = run(["rcms", "train", tmp_path / "train.txt", "-o", tmp_path / "m.json", "--chars", "--passes", "2",
             "--hash-bits", "16", "--dev", tmp_path / "test.txt"])
    assert r.returncode == 0, r.stderr
    assert "pass 2/2" in r.stderr and "CER" in r.stderr
    r = run(["rcms", "eval", tmp_path / "m.json", tmp_path / "test.txt", "--chars"])
    assert r.returncode == 0, r.stderr
    exact = float(r.stdout.split("exact match ")[1].split("%")[0])
    assert exact >= 80.0, r.stdout
    r1 = run(["rcms", "decode", tmp_path / "m.json", "--chars", "--probability"], stdin="\n".join(test) + "\n")
    r2 = run(["rcms", "decode", tmp_path / "m.json", "--chars", "--probability"], stdin="\n".join(test) + "\n")
    assert r1.returncode == 0 and r1.stdout == r2.stdout            # a reloaded model, the same outputs
    r3 = run(["rcms", "decode", tmp_path / "m.json", "--chars", "--probability", "--threads", "2"],
             stdin="\n".join(test) + "\n")
    assert r3.returncode == 0 and r3.stdout == r1.stdout, r3.stderr     # two worker processes, in input order
    outs = [ln.split("\t") for ln in r1.stdout.splitlines()]
    assert sum(o == _rule(w) for (o, _), w in zip(outs, test)) >= 0.8 * len(test)
    assert all(0.0 < float(p) <= 1.0 + 1e-9 for _, p in outs)
    # the k best: the first is decode's, probabilities distinct outputs' (summing to at most 1)
    r = run(["rcms", "decode", tmp_path / "m.json", "--chars", "--kbest", "3"], stdin="\n".join(test[:5]) + "\n")
    assert r.returncode == 0, r.stderr
    blocks = [b.splitlines() for b in r.stdout.strip("\n").split("\n\n")]
    assert len(blocks) == 5
    for block, (best, p_best) in zip(blocks, outs):
        rows = [ln.split("\t") for ln in block]
        assert [int(x[0]) for x in rows] == list(range(1, len(rows) + 1)) and 1 <= len(rows) <= 3
        assert rows[0][1] == best and abs(float(rows[0][2]) - float(p_best)) <= 1e-5 * float(p_best)
        assert len({x[1] for x in rows}) == len(rows) and sum(float(x[2]) for x in rows) <= 1 + 1e-6
    # the posterior marginals: the first position's tokens sum to 1, the most probable first
    r = run(["rcms", "decode", tmp_path / "m.json", "--chars", "--marginals", "--min-probability", "0"],
            stdin=test[0] + "\n")
    assert r.returncode == 0, r.stderr
    rows = [ln.split("\t") for ln in r.stdout.strip("\n").splitlines()]
    assert [int(x[0]) for x in rows] == list(range(1, len(rows) + 1)) and len(rows) >= len(_rule(test[0]))
    first = [(t.rsplit(" ", 1)[0], float(t.rsplit(" ", 1)[1])) for t in rows[0][1:]]
    assert abs(sum(p for _, p in first) - 1.0) < 1e-3 and [p for _, p in first] == sorted((p for _, p in first),
                                                                                          reverse=True)
    if float(outs[0][1]) > 0.5:         # a confident best output: its first token is the likeliest
        assert first[0][0] == outs[0][0][0]
    r = run(["rcms", "decode", tmp_path / "m.json", "--chars", "--kbest", "0"], stdin="abc\n")
    assert r.returncode == 2 and "--kbest" in r.stderr
    for threads in ("1", "2"):
        r = run(["rcms", "decode", tmp_path / "m.json", "--chars", "--threads", threads], stdin="abe\nzzz\n")
        assert r.returncode == 2 and "<stdin>:2" in r.stderr and "never saw" in r.stderr, r.stderr
    (tmp_path / "bad.txt").write_text("abc\tabc\nno tab here\n")
    r = run(["rcms", "train", tmp_path / "bad.txt", "-o", tmp_path / "x.json"])
    assert r.returncode == 2 and "bad.txt" in r.stderr and ":2" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_rcms_decipher_your_own_cipher(tmp_path):
    """A word-substitution cipher of sentences from a small grammar whose words have distinct
    frequencies and neighbours, deciphered with a plaintext LM of other sentences: most tokens
    come back; the key goes to --key atomically."""
    rng = random.Random(7)
    D, N, V, A = ["the", "a"], ["cat", "dog", "man", "bird"], ["sees", "likes", "eats"], ["big", "small"]

    def c(xs, w):
        return rng.choices(xs, weights=w)[0]

    def sent():
        return ([c(D, [3, 1])] + ([c(A, [3, 1])] if rng.random() < .4 else []) + [c(N, [8, 4, 2, 1]),
                c(V, [6, 3, 1]), c(D, [1, 3]), c(N, [1, 2, 4, 8])])
    plain = [sent() for _ in range(600)]
    words = sorted({w for s in plain for w in s})
    symbols = [f"s{i}" for i in range(len(words))]
    rng.shuffle(symbols)
    key = dict(zip(words, symbols))
    hidden = [sent() for _ in range(150)]
    (tmp_path / "plain.txt").write_text("\n".join(" ".join(s) for s in plain) + "\n")
    (tmp_path / "cipher.txt").write_text("\n".join(" ".join(key[w] for w in s) for s in hidden) + "\n")
    r = run(["rcms", "decipher", "--cipher", tmp_path / "cipher.txt", "--plain", tmp_path / "plain.txt",
             "--key", tmp_path / "key.txt", "--runs", "rcms:2:20", "--iterations", "15", "-q"])
    assert r.returncode == 0, r.stderr
    got = [line.split() for line in r.stdout.splitlines()]
    assert [len(x) for x in got] == [len(x) for x in hidden]
    right = sum(a == b for g, h in zip(got, hidden) for a, b in zip(g, h))
    assert right >= 0.7 * sum(map(len, hidden)), right
    learned = dict(line.split("\t") for line in (tmp_path / "key.txt").read_text().splitlines())
    assert set(learned) == set(symbols) and sum(learned[key[w]] == w for w in words) >= 7
    r = run(["rcms", "decipher", "--cipher", tmp_path / "cipher.txt"])
    assert r.returncode == 2 and "--plain" in r.stderr


def _aligned(w: str):
    """The rule's output of w and how many letters of w each output letter covers."""
    out, i = [], 0
    while i < len(w):
        ch, a = ("f", 2) if w[i:i + 2] == "ph" else ("c" if w[i] == "k" else w[i], 1)
        if out and out[-1][0] == ch:
            out[-1] = (ch, out[-1][1] + a)
        else:
            out.append((ch, a))
        i += a
    return "".join(c for c, _ in out), [a for _, a in out]


def test_rcms_train_on_given_alignments(tmp_path):
    rng = random.Random(6)
    lines = []
    for w in _words(rng, 300):
        y, adv = _aligned(w)
        if y == _rule(w) and max(adv) <= 2:
            lines.append(f"{w}\t{y}\t{' '.join(map(str, adv))}")
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    test = [w for w in _words(rng, 40)]
    (tmp_path / "test.txt").write_text("".join(f"{w}\t{_rule(w)}\n" for w in test))
    r = run(["rcms", "train", tmp_path / "train.txt", "-o", tmp_path / "m.json", "--chars", "--passes", "2",
             "--hash-bits", "16"])
    assert r.returncode == 0, r.stderr
    assert "alignments given" in r.stderr
    r = run(["rcms", "eval", tmp_path / "m.json", tmp_path / "test.txt", "--chars", "--beam"])
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.split("exact match ")[1].split("%")[0]) >= 80.0, r.stdout
    (tmp_path / "bad.txt").write_text("abc\tabc\t1 1 1\nphase\tfase\t1 1 1 1\n")
    r = run(["rcms", "train", tmp_path / "bad.txt", "-o", tmp_path / "x.json", "--chars"])
    assert r.returncode == 2 and "bad.txt" in r.stderr and ":2" in r.stderr and "alignment" in r.stderr, r.stderr
    r = run(["rcms", "train", tmp_path / "train.txt", "-o", tmp_path / "x.json", "--chars", "--strategy", "rcms"])
    assert r.returncode == 2 and "forced" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_given_alignments_may_share_an_input_token(tmp_path):
    """An advance of 0: the output token shares the previous one's input token ("x" -> "ks"),
    as the model's alignments allow; 0 after a token covering two, a first 0, a wrong sum and
    a line that is only a tab are located errors."""
    import pytest
    from fsmlearn.errors import CorpusFormatError
    from fsmlearn.rcm.transduce import read_pairs
    (tmp_path / "ok.txt").write_text("ax\taks\t1 1 0\nab\tab\t1 1\n")
    assert read_pairs(tmp_path / "ok.txt", chars=True)[0] == (["a", "x"], ["a", "k", "s"], [1, 1, 0])
    for i, bad in enumerate(["abc\tab\t2 0\n", "ab\tab\t0 2\n", "ab\tabc\t1 0 0\n", "ab\tab\t1 1\n\t\n"]):
        (tmp_path / f"b{i}.txt").write_text(bad)
        with pytest.raises(CorpusFormatError, match=f"b{i}.txt"):
            read_pairs(tmp_path / f"b{i}.txt", chars=True)
