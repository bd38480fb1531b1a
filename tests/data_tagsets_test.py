"""Layer 1 (data/): tag sets, the 17-tag mapping and its pynini transducer, the tag dictionary."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

from fsmlearn import data as C
from fsmlearn.data import tagsets as T
from fsmlearn.errors import ArgumentError, DatasetError, FsmError, TagError

GRAMMAR = Path(__file__).resolve().parents[1] / "grammars" / "tagset17.py"

# Smith and Eisner (2005)'s mapping, typed again from the task statement so that the
# module's table is checked against an independent copy.
SPEC = """ADJ = CD JJ JJR JJS PRP$; ADV = RB RBR RBS; CONJ = CC; DET = DT PDT; ENDPUNC = .;
INPUNC = , : LS SYM UH; LPUNC = `` -LRB-; RPUNC = '' -RRB-; N = EX FW NN NNP NNPS NNS PRP;
POS = POS; PREP = IN; PRT = RP; TO = TO; V = MD VB VBD VBP VBZ; VBG = VBG; VBN = VBN;
W = WDT WP WP$ WRB"""


def _spec():
    out = {}
    for part in SPEC.replace("\n", " ").split(";"):
        red, tags = part.split(" = ")
        for t in tags.split():
            out[t] = red.strip()
    return out


@pytest.fixture(scope="module")
def grammar():
    spec = importlib.util.spec_from_file_location("tagset17", GRAMMAR)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def wsj_tag_counts():
    return Counter(t for s in C.iter_wsj_tagged() for _, t in s)


@pytest.fixture(scope="module")
def tagdict():
    return T.tag_dictionary("penn45")


def test_tag_sets():
    assert len(T.PENN_TAGS) == len(set(T.PENN_TAGS)) == 45
    assert len(T.TAG17_TAGS) == len(set(T.TAG17_TAGS)) == 17
    assert T.tagset_tags("penn45") == T.PENN_TAGS and T.tagset_tags("tag17") == T.TAG17_TAGS
    with pytest.raises(DatasetError, match="unknown tag set 'ptb'"):
        T.tagset_tags("ptb")


def test_mapping_is_smith_and_eisner_plus_documented_choices():
    spec = _spec()
    assert {t: T.TAG17_OF[t] for t in spec} == spec
    assert set(spec) | {"$", "#"} == set(T.PENN_TAGS)
    assert set(T.TAG17_OF.values()) == set(T.TAG17_TAGS)
    extra = {t: T.TAG17_OF[t] for t in set(T.TAG17_OF) - set(spec)}
    assert extra == {"$": "N", "#": "N", "(": "LPUNC", ")": "RPUNC", "HYPH": "INPUNC",
                     "NFP": "INPUNC", "ADD": "N", "AFX": "ADJ", "GW": "N", "XX": "N"}


def test_to_tag17_and_map_tags():
    assert T.to_tag17("PRP$") == "ADJ" and T.to_tag17("$") == "N"
    assert T.to_tag17("VBG|NN") == "VBG"
    with pytest.raises(KeyError, match="-NONE-"):
        T.to_tag17("-NONE-")
    with pytest.raises(KeyError, match=r"'ZZ\|NN'"):
        T.to_tag17("ZZ|NN")
    with pytest.raises(TagError) as excinfo:
        T.to_tag17("XYZ")
    assert isinstance(excinfo.value, FsmError) and "'XYZ'" in str(excinfo.value)
    sent = [("The", "DT"), ("cat", "NN"), ("'s", "POS"), ("toys", "NNS"), (".", ".")]
    assert T.map_tags(sent) == [("The", "DET"), ("cat", "N"), ("'s", "POS"), ("toys", "N"),
                                (".", "ENDPUNC")]
    assert T.map_tags(sent, "penn45") == sent


def test_open_class():
    assert T.open_class_tags("penn45") == T.PENN_OPEN_CLASS <= set(T.PENN_TAGS)
    assert T.open_class_tags("tag17") == T.TAG17_OPEN_CLASS == {"ADJ", "ADV", "N", "V", "VBG", "VBN"}
    assert {T.to_tag17(t) for t in T.PENN_OPEN_CLASS} == T.TAG17_OPEN_CLASS
    assert not {"MD", "WRB", "DT", "IN", "PRP", "CC", "FW", "UH"} & T.PENN_OPEN_CLASS


def test_transducer_agrees_with_the_dict_on_every_wsj_tag(grammar, wsj_tag_counts):
    fst = grammar.build()
    assert set(wsj_tag_counts) == set(T.PENN_TAGS)
    for tag in wsj_tag_counts:
        assert grammar.map_tags([tag], fst) == [T.TAG17_OF[tag]], tag
    every = sorted(T.TAG17_OF)
    assert grammar.map_tags(every, fst) == [T.TAG17_OF[t] for t in every]
    assert grammar.map_tags([], fst) == []
    with pytest.raises(KeyError, match="-NONE-"):
        grammar.map_tags(["DT", "-NONE-"], fst)


def test_transducer_symbols_and_shape(grammar):
    fst = grammar.build()
    isyms, osyms = fst.input_symbols(), fst.output_symbols()
    assert isyms.find("<eps>") == 0 and osyms.find("<eps>") == 0
    assert isyms.num_symbols() == 1 + len(T.TAG17_OF)
    assert all(isyms.member(k) for k in range(isyms.num_symbols()))   # dense keys
    assert [osyms.find(i) for i in range(1, 18)] == list(T.TAG17_TAGS)
    assert all(isyms.member(t) for t in T.TAG17_OF)
    assert fst.num_states() == 1 and fst.num_arcs(fst.start()) == len(T.TAG17_OF)
    for arc in fst.arcs(fst.start()):
        assert T.TAG17_OF[isyms.find(arc.ilabel)] == osyms.find(arc.olabel)


def test_tag_dictionary_on_hand_checked_words(tagdict):
    # Counted with unzip/awk over conll2000 train+test and treebank tagged wsj_0001-0199.
    assert tagdict["of"] == {"IN", "RB"}                          # 8,642 tokens, one of/RB
    assert tagdict["set"] == {"NN", "VB", "VBD", "VBN", "VBP"}     # 106 tokens
    assert tagdict["Mr."] == {"NNP"}                              # 1,428 tokens
    assert tagdict["the"] == {"DT", "IN", "CD", "JJ", "NNP"}      # annotation noise included
    assert tagdict["jet"] == {"NN", "VBP"}                        # exactly 5 tokens: covered
    assert "eat" not in tagdict and tagdict["eat"] == T.PENN_OPEN_CLASS   # 4 tokens
    assert "Eat" not in tagdict                                   # case-sensitive
    assert tagdict["("] == {"-LRB-"} and tagdict["$"] == {"$"}
    assert "zzyzx" not in tagdict and tagdict.get("zzyzx") is None
    assert tagdict.allowed("zzyzx") == T.PENN_OPEN_CLASS
    assert tagdict.tagset == "penn45" and tagdict.min_count == 5
    assert all(len(v) >= 1 and v <= set(T.PENN_TAGS) for v in tagdict.values())


def test_tag_dictionary_17(tagdict):
    d17 = T.tag_dictionary("tag17")
    assert set(d17) == set(tagdict)
    assert d17["of"] == {"PREP", "ADV"} and d17["set"] == {"N", "V", "VBN"}
    assert d17["jet"] == {"N", "V"} and d17["eat"] == T.TAG17_OPEN_CLASS
    for w in ("the", "to", "up", "'s", "more"):
        assert d17[w] == {T.to_tag17(t) for t in tagdict[w]}


def test_tag_dictionary_rule_on_synthetic_sentences():
    sents = [[("a", "DT"), ("dog", "NN")]] * 2 + [[("a", "NN"), ("dog", "VB"), ("ran", "VBD")]]
    d = T.tag_dictionary(min_count=3, sentences=sents)
    assert dict(d) == {"a": {"DT", "NN"}, "dog": {"NN", "VB"}}
    assert d["ran"] == T.PENN_OPEN_CLASS
    d1 = T.tag_dictionary("tag17", min_count=1, sentences=sents)
    assert dict(d1) == {"a": {"DET", "N"}, "dog": {"N", "V"}, "ran": {"V"}}
    for bad in (0, -1, 2.5, True, "5", float("nan")):
        with pytest.raises(ArgumentError, match="min_count"):
            T.tag_dictionary(min_count=bad, sentences=sents)
    with pytest.raises(ValueError, match="unknown tag set"):
        T.tag_dictionary("brown", sentences=sents)
