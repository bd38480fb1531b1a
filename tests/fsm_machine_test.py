"""Layer 1: machines, conversion to and from pynini, files, bad input."""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np
import pynini
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import random_machine
from fsmlearn import PHI, Machine, SymbolTable
from fsmlearn.fsm.openfst_io import decode_vector_fst
from fsmlearn.errors import (FsmError, MachineError, NpzFormatError, OpenFstFormatError,
                             SymbolTableError)


def assert_same_fst(f, g):
    """Every state, arc (labels, weight bits, destination), final weight and symbol equal.

    Compared on the decoded binary form (exact floats); only OpenFst's cached
    property bits may differ.
    """
    assert f.arc_type() == g.arc_type()
    d1 = decode_vector_fst(f.write_to_string())
    d2 = decode_vector_fst(g.write_to_string())
    assert d1["start"] == d2["start"]
    for key in ("final", "src_start", "ilabel", "olabel", "weight", "dst"):
        assert np.array_equal(d1[key], d2[key]), key
    for side in ("isyms", "osyms"):
        t1, t2 = d1[side], d2[side]
        assert (t1 is None) == (t2 is None)
        if t1 is not None:
            assert t1.same_as(t2)


@pytest.mark.parametrize("arc_type", ["standard", "log", "log64"])
def test_pynini_round_trip_preserves_everything(arc_type):
    syms = pynini.SymbolTable(name="words")
    for i, s in enumerate(["<eps>", "the", "dog", "cat", "<phi>"]):
        syms.add_symbol(s, i)
    tags = pynini.SymbolTable(name="tags")
    for i, s in enumerate(["<eps>", "DT", "NN"]):
        tags.add_symbol(s, i * 3)  # sparse keys
    f = pynini.Fst(arc_type=arc_type)
    f.add_states(4)
    f.set_start(1)
    W = lambda x: pynini.Weight(f.weight_type(), x)
    f.add_arc(1, pynini.Arc(1, 3, W(0.25), 2))
    f.add_arc(2, pynini.Arc(2, 6, W(1.0 / 3), 3))
    f.add_arc(2, pynini.Arc(3, 6, W(2.75), 3))
    f.add_arc(3, pynini.Arc(4, 0, W(0.5), 0))       # a phi arc (label 4)
    f.add_arc(0, pynini.Arc(2, 6, W(-0.125), 3))     # negative costs are valid
    f.set_final(3, W(0.1))
    f.set_input_symbols(syms)
    f.set_output_symbols(tags)
    m = Machine.from_pynini(f, phi_label=4)
    assert m.has_phi and m.ilabel[m.src_start[3]] == PHI
    assert m.isyms.find("dog") == 2 and m.osyms.symbol(6) == "NN"
    assert_same_fst(f, m.to_pynini())           # arc type remembered, phi mapped back


@given(st.integers(1, 30), st.integers(0, 80), st.integers(0, 2**32 - 1))
def test_round_trip_random_machines(n, E, seed):
    rng = np.random.default_rng(seed)
    m = Machine.from_arcs(n, int(rng.integers(0, n)), np.where(rng.random(n) < 0.5, rng.random(n), np.inf),
                          rng.integers(0, n, E), rng.integers(0, n, E), rng.integers(0, 50, E),
                          rng.integers(0, 50, E), rng.normal(0, 3, E))
    for arc_type in ("log64", "standard"):
        f = m.to_pynini(arc_type)
        back = Machine.from_pynini(f)
        assert_same_fst(f, back.to_pynini())
        if arc_type == "log64":  # float64 weights survive exactly
            assert np.array_equal(back.weight, m.weight) and np.array_equal(back.final, m.final)
            assert np.array_equal(back.dst, m.dst) and np.array_equal(back.olabel, m.olabel)


def test_transducer_from_pynini_grammar():
    f = (pynini.cross("ab", "x") + pynini.cross("c", "yz").closure()).optimize()
    m = Machine.from_pynini(f)
    assert not m.is_acceptor
    assert pynini.equal(m.to_pynini(), f)


def test_npz_and_openfst_files(tmp_path, rng):
    m = random_machine(rng, 50, 200, cyclic=True)
    m = m.replace(isyms=SymbolTable.from_symbols([f"w{i}" for i in range(1, 10)], name="w"))
    p = tmp_path / "m.npz"
    m.save(p)
    m2 = Machine.load(p)
    for name in ("final", "src_start", "dst", "ilabel", "olabel", "weight"):
        assert np.array_equal(getattr(m, name), getattr(m2, name))
    assert m2.isyms.same_as(m.isyms) and m2.semiring == m.semiring
    q = tmp_path / "m.fst"
    m.write(q)
    assert pynini.Fst.read(str(q)).num_states() == m.num_states
    m3 = Machine.read(q)
    assert np.array_equal(m3.weight, m.weight) and m3.isyms == m.isyms


def test_real_semiring_machine_round_trips_as_negative_logs():
    m = Machine.from_arcs(2, 0, [0.0, 0.5], [0], [1], [1], weight=[0.25], semiring="real")
    f = m.to_pynini()
    assert f.arc_type() == "log64"
    assert math.isclose(float(next(iter(f.arcs(0))).weight.to_string()), -math.log(0.25), rel_tol=1e-9)


# ---------------------------------------------------------------- bad input
def _arcs(**kw):
    d = dict(num_states=3, start=0, final=[np.inf, np.inf, 0.0], src=[0, 1], dst=[1, 2], ilabel=[1, 2],
             weight=[0.5, 0.5])
    d.update(kw)
    return d


@pytest.mark.parametrize("weight,semiring,needle", [
    ([0.5, float("nan")], "log", "arc 1 (state 1 -> 2"),
    ([0.5, -np.inf], "log", "arc 1"),
    ([0.5, -0.25], "real", "arc 1"),
    ([np.inf, 0.5], "real", "arc 0 (state 0 -> 1"),
])
def test_bad_weights_name_the_arc(weight, semiring, needle):
    kw = _arcs(weight=weight)
    if semiring == "real":
        kw["final"] = [0.0, 0.0, 1.0]
    with pytest.raises(MachineError) as e:
        Machine.from_arcs(semiring=semiring, **kw)
    assert needle in str(e.value) and "weight" in str(e.value)


def test_bad_states_and_labels_are_named():
    with pytest.raises(MachineError, match=r"arc 1 \(state 1 -> 7.*destination state 7 is out of range"):
        Machine.from_arcs(**_arcs(dst=[1, 7]))
    with pytest.raises(MachineError, match="source state 5 is out of range"):
        Machine.from_arcs(**_arcs(src=[0, 5]))
    with pytest.raises(MachineError, match="start state 3 is out of range"):
        Machine.from_arcs(**_arcs(start=3))
    with pytest.raises(MachineError, match="input label -7 is negative"):
        Machine.from_arcs(**_arcs(ilabel=[1, -7]))
    with pytest.raises(MachineError, match="state 2: final weight nan"):
        Machine.from_arcs(**_arcs(final=[np.inf, np.inf, np.nan]))


def test_symbol_table_mismatch_is_an_error():
    t = SymbolTable.from_symbols(["a"], name="ab")  # keys 0 <eps>, 1 a
    with pytest.raises(SymbolTableError, match=r"arc 1 .*input label 2 is not in the input symbol table 'ab'"):
        Machine.from_arcs(isyms=t, **_arcs())
    with pytest.raises(SymbolTableError, match="two keys"):
        SymbolTable(["a", "a"])


def test_corrupt_npz_files(tmp_path, rng):
    m = random_machine(rng, 5, 10)
    good = tmp_path / "good.npz"
    m.save(good)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(good.read_bytes()[:200])
    with pytest.raises(NpzFormatError, match="bad.npz"):
        Machine.load(bad)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip at all")
    with pytest.raises(NpzFormatError, match="garbage.npz"):
        Machine.load(garbage)
    # a valid zip whose arrays do not form a machine: the message names file, array and arc
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["dst"] = arrays["dst"].copy()
    arrays["dst"][3] = 99
    tampered = tmp_path / "tampered.npz"
    np.savez(tampered, **arrays)
    with pytest.raises(NpzFormatError, match=r"tampered.npz: array 'dst': arc 3 \(state \d\) has "
                                             r"destination 99, out of range for 5 states"):
        Machine.load(tampered)
    arrays.pop("weight")
    np.savez(tampered, **arrays)
    with pytest.raises(NpzFormatError, match="missing array 'weight'"):
        Machine.load(tampered)
    with pytest.raises(NpzFormatError, match="no such file"):
        Machine.load(tmp_path / "absent.npz")


def test_nothing_written_on_failure(tmp_path, rng, monkeypatch):
    m = random_machine(rng, 5, 10)
    target = tmp_path / "m.npz"
    m.save(target)
    before = target.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(OSError):
        random_machine(rng, 7, 20).save(target)
    assert target.read_bytes() == before                  # old file intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz"]  # no temporary left
    monkeypatch.undo()
    m.save(tmp_path / "any-name.bin")           # any file name works
    assert Machine.load(tmp_path / "any-name.bin").num_arcs == m.num_arcs
    with pytest.raises(OpenFstFormatError):
        m.write(tmp_path / "y.fst", arc_type="nonsense")
    assert not (tmp_path / "y.fst").exists()


def test_openfst_reader_rejects_garbage(tmp_path):
    p = tmp_path / "x.fst"
    p.write_bytes(b"\x00" * 40)
    with pytest.raises(OpenFstFormatError, match="x.fst"):
        Machine.read(p)
    f = pynini.accep("abc")
    data = f.write_to_string()
    p.write_bytes(data[:-5])
    with pytest.raises(OpenFstFormatError, match="truncated"):
        Machine.read(p)


def test_errors_are_fsm_errors():
    assert issubclass(MachineError, FsmError) and issubclass(MachineError, ValueError)
    with pytest.raises(FsmError):
        Machine(start=0, final=[0.0], src_start=[0, 1], dst=[2], ilabel=[1], weight=[0.0])


# ------------------------------------------------- inputs that once broke the readers
# (found by tests/fuzz_models_test.py; kept in tests/data/fuzz/models/)
STORED = Path(__file__).parent / "data" / "fuzz" / "models"


@pytest.mark.parametrize("name, match", [
    # were ValueError / OverflowError / TypeError from int() of a metadata value
    ("machine-start-not-int.npz", r"metadata 'start' is 'tropical'; expected an integer"),
    ("machine-start-inf.npz", r"metadata 'start' is inf; expected an integer"),
    ("machine-phi-not-int.npz", r"metadata 'openfst_phi' is 'fsmlearn-machine'; expected an OpenFst label"),
    ("machine-available-list.npz", r"metadata 'osyms_available' is \[\]; expected a key"),
    # was a TypeError ('unhashable type: list') from the membership test of arc_type
    ("machine-arc-type-list.npz", r"metadata 'arc_type' is \[\]; expected one of standard, log, log64"),
    # was a RecursionError from json
    ("machine-deep-json.npz", r"array 'meta': corrupt metadata: maximum recursion depth"),
    # were SymbolTableErrors naming neither the file nor the array
    ("machine-label-not-in-isyms.npz", r"array 'ilabel': arc 1 \(state 0\) has input label 10, which is not a "
                                       r"key of the input symbol table \(array 'isyms_keys'\)"),
    ("machine-olabel-not-in-osyms.npz", r"array 'olabel': arc 0 \(state 0\) has output label 4, which is not a "
                                        r"key of the output symbol table \(array 'osyms_keys'\)"),
    # src_start [0, 2, -2**63, -1, 9]: np.diff wrapped around, the check passed and the
    # validation kernel read out of bounds (an IndexError, or worse)
    ("machine-src-start-wraps.npz", r"array 'src_start': entry 2 is -9223372036854775808, below entry 1 \(2\)"),
    # was a MemoryError: np.load allocated the declared 4 PB before reading
    ("machine-forged-shape.npz", r"array 'dst': the header declares shape \(999999999999999,\) of int32 "
                                 r"\(3999999999999996 bytes\) but the member holds 48 bytes"),
])
def test_stored_npz_inputs_raise_located_errors(name, match):
    with pytest.raises(NpzFormatError, match=match) as e:
        Machine.load(STORED / name)
    assert str(STORED / name) in str(e.value)


@pytest.mark.parametrize("name, match", [
    # were MachineError / SymbolTableError naming neither the file nor the byte
    ("fst-nan-weight.fst", r"arc 1 of state 0 \(byte 219\): weight nan is invalid"),
    ("fst-start-out-of-range.fst", r"the header's start state 216172782113783808 is out of range for 0 states"),
    ("fst-negative-label.fst", r"arc 3 of state 2 \(byte 376\): input label -1082130432 is negative"),
    ("fst-negative-dst.fst", r"arc 4 of state 2 \(byte 392\): destination state -268435456 is out of range "
                             r"for 4 states"),
    ("fst-dst-out-of-range.fst", r"arc 3 of state 1 \(byte 285\): destination state 262148 is out of range"),
    ("fst-label-not-in-isyms.fst", r"arc 4 of state 2 \(byte 321\): input label 4 is not in the input "
                                   r"symbol table 'words'"),
    ("fst-symbol-key-range.fst", r"symbol table at byte 63: .*key 1099511627524 for 'w4' is outside"),
    ("fst-symbol-key-twice.fst", r"symbol table at byte 61: .*key 0 has two symbols"),
    # were MemoryError / ValueError ('array is too big'): counts of arcs or states that the
    # data cannot hold were allocated, or overflowed the scan's byte position
    ("fst-huge-arc-count.fst", r"truncated or corrupt in state 3 of 5: its record at byte 321 declares "
                               r"461842991413301504 arcs of 20 bytes; 178 bytes follow"),
    ("fst-arc-count-wraps.fst", r"truncated or corrupt in state 2 of 5: its record at byte 285 declares"),
    ("fst-huge-state-count.fst", r"the header declares 9187283445301116933 states; the 320 bytes from byte "
                                 r"193 hold at most 20"),
    ("fst-many-states.fst", r"the header declares 21474836485 states"),
])
def test_stored_openfst_inputs_raise_located_errors(name, match):
    with pytest.raises(OpenFstFormatError, match=match) as e:
        Machine.read(STORED / name)
    assert str(STORED / name) in str(e.value)


def test_symbol_table_rejects_keys_that_are_not_integers():
    for keys, match in [([1.5], "key 1.5 is not an integer"), (["x"], "key 'x' is not an integer"),
                        ([True], "key True is not an integer"), ([2**70], "key 1180591620717411303424 is outside"),
                        (np.array([1.0]), "keys must be integers, got float64")]:
        with pytest.raises(SymbolTableError, match=match):
            SymbolTable(["a"], keys)
    with pytest.raises(SymbolTableError, match="available key 'x' is not an integer"):
        SymbolTable(["a"], available_key="x")
    assert SymbolTable(["a", "b"], np.array([0, 5], np.int32)).keys.tolist() == [0, 5]
