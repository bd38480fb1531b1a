"""The reduced 17-tag set of Smith and Eisner (2005) as a pynini tag-mapping transducer.

Smith and Eisner (2005), "Contrastive estimation: training log-linear models
on unlabeled data", ACL, section 6, map the 45 Penn Treebank tags to 17
coarse tags.  The mapping itself, with the documented choices for tags outside
their list (``$`` and ``#`` -> ``N``; ``(``/``)`` -> ``LPUNC``/``RPUNC``; UD
XPOS extensions; ``-NONE-`` unmapped), lives in ONE place,
:data:`fsmlearn.data.tagsets.TAG17_OF`; this grammar compiles that dict into
a transducer, so the two always agree.

The transducer reads a sequence of Penn tag symbols and writes the sequence of
reduced tags: one state, initial and final, with one arc ``penn:reduced`` per
mapped tag (the closure of a ``string_map`` over symbol tables, optimised).
Compound tags ``A|B`` are not symbols of the machine; resolve them first
(``fsmlearn.data.tagsets.to_tag17`` maps the first alternative).

Public names: penn_symbols, tag17_symbols, build, map_tags.

Run ``python grammars/tagset17.py OUT.fst`` to write the machine in OpenFst
binary form (standard arc type).
"""

from __future__ import annotations

import sys

import pynini

from fsmlearn.data.tagsets import PENN_TAGS, TAG17_OF, TAG17_TAGS

__all__ = ["penn_symbols", "tag17_symbols", "build", "map_tags"]


def penn_symbols() -> pynini.SymbolTable:
    """The input symbol table: ``<eps>`` = 0, the 45 Penn tags, then the other mapped tags.

    Returns:
        A pynini.SymbolTable named ``penn``; keys are dense from 0.
    """
    syms = pynini.SymbolTable(name="penn")
    syms.add_symbol("<eps>", 0)
    extra = sorted(t for t in TAG17_OF if t not in PENN_TAGS)
    for tag in (*PENN_TAGS, *extra):
        syms.add_symbol(tag)
    return syms


def tag17_symbols() -> pynini.SymbolTable:
    """The output symbol table: ``<eps>`` = 0, then the 17 reduced tags in sorted order.

    Returns:
        A pynini.SymbolTable named ``tag17``.
    """
    syms = pynini.SymbolTable(name="tag17")
    syms.add_symbol("<eps>", 0)
    for tag in TAG17_TAGS:
        syms.add_symbol(tag)
    return syms


def build() -> pynini.Fst:
    """Compile the Penn -> 17-tag mapping transducer.

    Returns:
        An optimised ``pynini.Fst`` (standard arc type, all weights one) whose
        input symbols are :func:`penn_symbols` and output symbols
        :func:`tag17_symbols`; it maps any sequence of mapped Penn tags,
        the empty one included, to the sequence of their reduced tags.
    """
    isyms, osyms = penn_symbols(), tag17_symbols()
    # Build each pair on explicit labels: several Penn tags (``$``, ``(``, ``''``)
    # would need escaping in pynini's string syntax.
    one = pynini.Fst()
    s, t = one.add_state(), one.add_state()
    one.set_start(s)
    one.set_final(t)
    w = pynini.Weight.one(one.weight_type())
    for penn, red in sorted(TAG17_OF.items()):
        one.add_arc(s, pynini.Arc(isyms.find(penn), osyms.find(red), w, t))
    fst = pynini.closure(one).optimize()
    fst.set_input_symbols(isyms)
    fst.set_output_symbols(osyms)
    return fst


def map_tags(tags, fst: pynini.Fst | None = None) -> list[str]:
    """Run the transducer on a sequence of Penn tags.

    Args:
        tags: an iterable of Penn tag str.
        fst: the machine from :func:`build` (built when None).

    Returns:
        The list of reduced tags, one per input tag.

    Raises:
        KeyError: a tag that is not an input symbol; the message quotes it.
        ValueError: the machine rejects the sequence (cannot happen for input
            symbols of a machine from :func:`build`).
    """
    fst = build() if fst is None else fst
    isyms, osyms = fst.input_symbols(), fst.output_symbols()
    labels = []
    for tag in tags:
        k = isyms.find(tag)
        if k <= 0:
            raise KeyError(f"tag {tag!r} is not an input symbol of the 17-tag transducer")
        labels.append(k)
    acc = pynini.Fst()
    acc.add_states(len(labels) + 1)
    acc.set_start(0)
    acc.set_final(len(labels))
    w = pynini.Weight.one(acc.weight_type())
    for i, k in enumerate(labels):
        acc.add_arc(i, pynini.Arc(k, k, w, i + 1))
    acc.set_input_symbols(isyms)
    acc.set_output_symbols(isyms)
    out = pynini.compose(acc, fst)
    if out.start() < 0:
        raise ValueError(f"the transducer rejects {list(tags)!r}")
    path = pynini.shortestpath(out).topsort()
    result = []
    state = path.start()
    while True:
        arcs = list(path.arcs(state))
        if not arcs:
            break
        arc = arcs[0]
        if arc.olabel:
            result.append(osyms.find(arc.olabel))
        state = arc.nextstate
    return result


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python grammars/tagset17.py OUT.fst")
    build().write(sys.argv[1])
