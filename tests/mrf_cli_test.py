"""``fsmlearn mrf`` on your own data: train-tagger, tag, eval, lm TEXT, neighbours (issue 29).

A toy treebank whose unknown words are told apart by their suffix; a toy text whose two
word classes fill the same slots: the commands train, save, reload and apply the models as
a user would, in their own processes.
"""

from __future__ import annotations

import random
import subprocess
import sys

FSMLEARN = [sys.executable, "-m", "fsmlearn.cli.main"]


def run(args, stdin=None):
    return subprocess.run(FSMLEARN + [str(a) for a in args], input=stdin, capture_output=True, text=True)


def _treebank(rng, n):
    lex = {"D": ["the", "a", "every"], "N": ["dog", "cat", "dogs", "bird", "horse"], "V": ["runs", "sees", "eats"]}
    out = []
    for _ in range(n):
        s = [(rng.choice(lex["D"]), "D"), (rng.choice(lex["N"]), "N"), (rng.choice(lex["V"]), "V")]
        if rng.random() < 0.5:
            s += [(rng.choice(lex["D"]), "D"), (rng.choice(lex["N"]), "N")]
        out.append(s)
    return out


def test_mrf_tagger_train_tag_eval(tmp_path):
    rng = random.Random(0)
    (tmp_path / "train.txt").write_text("\n".join(" ".join(f"{w}/{t}" for w, t in s) for s in _treebank(rng, 60))
                                        + "\n")
    test = [[("a", "D"), ("cats", "N"), ("sees", "V")], [("every", "D"), ("horses", "N"), ("eats", "V")]]
    (tmp_path / "test.txt").write_text("\n".join(" ".join(f"{w}/{t}" for w, t in s) for s in test) + "\n")
    r = run(["mrf", "train-tagger", tmp_path / "train.txt", "-o", tmp_path / "t.npz", "--max-iter", "40",
             "--l2", "1e-4", "--dev", tmp_path / "test.txt", "--eval-every", "20"])
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr and "total" in r.stderr
    r = run(["mrf", "tag", tmp_path / "t.npz", "--format", "word/tag"], stdin="the cats runs\na dogs sees\n\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == ["the/D cats/N runs/V", "a/D dogs/N sees/V"]
    r = run(["mrf", "eval", tmp_path / "t.npz", tmp_path / "test.txt", "-q"])
    assert r.returncode == 0, r.stderr
    assert "total 100.00% (6 tokens)" in r.stdout and "unknown 100.00% (2)" in r.stdout
    # a file that is not a tagger: one line, exit 2
    r = run(["mrf", "tag", tmp_path / "test.txt"], stdin="the dog\n")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_mrf_lm_on_own_text_and_neighbours(tmp_path):
    rng = random.Random(1)
    animals, foods = ["cat", "dog", "cow", "pig"], ["bread", "rice", "soup", "cake"]
    lines = [f"the {rng.choice(animals)} eats {rng.choice(foods)}" for _ in range(400)]
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    r = run(["mrf", "lm", tmp_path / "t.txt", "-o", tmp_path / "m.npz", "--rank", "3", "--max-iter", "15",
             "--minutes", "2"])
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m.npz").exists() and (tmp_path / "m.json").exists()
    r = run(["mrf", "neighbours", tmp_path / "m.npz", "cat", "bread", "-k", "3"])
    assert r.returncode == 0, r.stderr
    near = {ln.split("\t")[0]: ln.split("\t")[1].split()[::2] for ln in r.stdout.splitlines()}
    # a word's nearest words are those of its own class (they fill the same slot)
    assert set(near["cat"]) == {"dog", "cow", "pig"} and set(near["bread"]) == {"rice", "soup", "cake"}
    sims = [float(x) for x in r.stdout.splitlines()[0].split("\t")[1].split()[1::2]]
    assert all(-1.0 - 1e-9 <= s <= 1.0 + 1e-9 for s in sims) and sims == sorted(sims, reverse=True)
    r = run(["mrf", "neighbours", tmp_path / "m.npz", "unicorn"])
    assert r.returncode == 2 and "unicorn" in r.stderr and r.stdout == ""
    r = run(["mrf", "lm", tmp_path / "t.txt"])
    assert r.returncode == 2 and "-o" in r.stderr
    # the default rank (30) on a text of 13 word states: the largest rank the states allow
    r = run(["mrf", "lm", tmp_path / "t.txt", "-o", tmp_path / "d.npz", "--max-iter", "3", "--minutes", "1"])
    assert r.returncode == 0 and "rank 30 is at least" in r.stderr, r.stderr
    r = run(["mrf", "lm", tmp_path / "t.txt", "-o", tmp_path / "e.npz", "--rank", "-1"])
    assert r.returncode == 2 and "rank -1 (expected >= 1, or 0 for full rank)" in r.stderr
    assert not (tmp_path / "e.npz").exists()
