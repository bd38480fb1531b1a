"""The public API: the engine at the top level, the models' main classes at their packages
(imported on first use), and a TypeError that says how to convert what is not a Machine."""

from __future__ import annotations

import pydoc
import subprocess
import sys

import numpy as np
import pynini
import pytest

import fsmlearn
from conftest import random_machine
from fsmlearn import Machine, NotAMachineError

ENGINE = ["shortest_distance", "forward", "backward", "total_weight", "forward_backward", "arc_posteriors",
          "final_posteriors", "log_partition_gradient", "expectation", "entropy", "best_path", "k_best_paths", "sample_paths",
          "label_strings", "compose", "intersect", "trim", "phi_expand"]


def test_the_engine_is_at_the_top_level_and_help_lists_it():
    for name in ENGINE + ["Machine", "SymbolTable", "ForwardBackward", "Path", "Samples", "FsmError",
                          "NoAcceptingPathError", "NotAMachineError", "SymbolTableError"]:
        assert name in fsmlearn.__all__, name
    for name in ENGINE:
        assert getattr(fsmlearn, name) is getattr(fsmlearn.algo, name), name
    assert len(set(fsmlearn.__all__)) == len(fsmlearn.__all__)
    assert all(hasattr(fsmlearn, name) for name in fsmlearn.__all__)
    text = pydoc.render_doc(fsmlearn, renderer=pydoc.plaintext)
    for name in ENGINE:
        assert name in text, name
    for where in ("fsmlearn.lm", "CompiledLM", "fsmlearn.tag", "HMM.load"):
        assert where in fsmlearn.__doc__


MODELS = {
    "fsmlearn.lm": ["CompiledLM", "BackoffLM", "compile_lm", "load_lm", "read_arpa"],
    "fsmlearn.tag": ["HMM"],
    "fsmlearn.rcm": ["NGramRCM", "AlignRCM", "rcms", "load_rcm"],
    "fsmlearn.trf": ["TRF", "load_trf", "FeatureSet"],
    "fsmlearn.mrf": ["MRFModel", "TaggerMRF", "load_mrf", "load_tagger", "train_lifted"],
}


@pytest.mark.parametrize("package", list(MODELS))
def test_each_model_package_exports_its_main_classes(package):
    mod = __import__(package, fromlist=["*"])
    for name in MODELS[package]:
        assert name in mod.__all__, name
        assert name in dir(mod), name
        obj = getattr(mod, name)
        assert getattr(obj, "__name__", name) == name
        assert sys.modules[obj.__module__].__name__.startswith(package + ".")
    for name in mod.__all__:
        assert name in dir(mod) and getattr(mod, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        getattr(mod, "NoSuchThing")
    ns: dict = {}
    exec(f"from {package} import *", ns)
    assert set(mod.__all__) <= set(ns)


def test_model_classes_load_from_their_packages():
    from fsmlearn.lm import CompiledLM
    from fsmlearn.tag import HMM
    assert callable(CompiledLM.load) and callable(HMM.load)


def test_importing_the_packages_does_not_import_the_models():
    # the model packages resolve their names on first use: importing them loads no model
    # module and not scipy.optimize (which the MRF trainer needs)
    code = ("import sys, fsmlearn, fsmlearn.lm, fsmlearn.rcm, fsmlearn.trf, fsmlearn.mrf\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('fsmlearn.lm.', 'fsmlearn.rcm.',"
            " 'fsmlearn.trf.', 'fsmlearn.mrf.')) or m == 'scipy.optimize')\n"
            "print(' '.join(bad))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


# ---------------------------------------------------------------- not a Machine


def _calls(x, m):
    """Each public engine function called with ``x`` where a machine goes (``m``: a real one)."""
    from fsmlearn.algo import paths
    return {
        "shortest_distance": lambda: fsmlearn.shortest_distance(x),
        "forward": lambda: fsmlearn.forward(x),
        "backward": lambda: fsmlearn.backward(x),
        "total_weight": lambda: fsmlearn.total_weight(x),
        "forward_backward": lambda: fsmlearn.forward_backward(x),
        "arc_posteriors": lambda: fsmlearn.arc_posteriors(x),
        "final_posteriors": lambda: fsmlearn.final_posteriors(x),
        "log_partition_gradient": lambda: fsmlearn.log_partition_gradient(x),
        "expectation": lambda: fsmlearn.expectation(x, np.ones(3)),
        "entropy": lambda: fsmlearn.entropy(x),
        "best_path": lambda: fsmlearn.best_path(x),
        "k_best_paths": lambda: fsmlearn.k_best_paths(x, 2),
        "sample_paths": lambda: fsmlearn.sample_paths(x, 3),
        "label_strings": lambda: fsmlearn.label_strings(x, paths.Samples(np.zeros(1, np.int64),
                                                                         np.zeros(0, np.int64))),
        "compose": lambda: fsmlearn.compose(x, m),
        "compose ": lambda: fsmlearn.compose(m, x),
        "intersect": lambda: fsmlearn.intersect(x, m),
        "intersect ": lambda: fsmlearn.intersect(m, x),
        "trim": lambda: fsmlearn.trim(x),
        "phi_expand": lambda: fsmlearn.phi_expand(x),
    }


def test_a_pynini_fst_gets_a_type_error_that_says_to_convert_it(rng):
    m = random_machine(rng, 5, 10, cyclic=False)
    fst = m.to_pynini()
    assert isinstance(fst, pynini.Fst)
    calls = _calls(fst, m)
    assert {k.strip() for k in calls} == set(ENGINE)
    for name, call in calls.items():
        with pytest.raises(TypeError) as e:
            call()
        assert isinstance(e.value, NotAMachineError) and isinstance(e.value, fsmlearn.FsmError)
        msg = str(e.value)
        assert msg.startswith(name.strip() + ":"), msg
        assert "Fst" in msg and "Machine.from_pynini(fst)" in msg, msg
    # and the conversion it names works
    assert fsmlearn.total_weight(Machine.from_pynini(fst)) == pytest.approx(fsmlearn.total_weight(m), abs=1e-6)


class _HasMachine:
    """Like a compiled LM or a lattice: an object that holds its machine."""

    def __init__(self, m):
        self._m = m

    @property
    def machine(self):
        return self._m


@pytest.mark.parametrize("x", [None, "a.fst", np.zeros(3), 3.0])
def test_anything_else_gets_the_same_type_error(rng, x):
    m = random_machine(rng, 5, 10, cyclic=False)
    for name, call in _calls(x, m).items():
        with pytest.raises(NotAMachineError, match=rf"^{name.strip()}: .* must be a fsmlearn\.Machine, got "
                                                   rf"(\w+\.)?{type(x).__name__}; .*Machine\.from_pynini"):
            call()


def test_an_object_holding_a_machine_is_pointed_at_it(rng):
    m = random_machine(rng, 5, 10, cyclic=False)
    with pytest.raises(NotAMachineError, match=r"pass its \.machine attribute"):
        fsmlearn.forward_backward(_HasMachine(m))
    assert fsmlearn.forward_backward(_HasMachine(m).machine).cost == pytest.approx(fsmlearn.total_weight(m))


def test_the_engine_is_imported_on_first_use_and_compose_is_the_function():
    code = ("import sys, fsmlearn\n"
            "assert 'fsmlearn.algo.chain' not in sys.modules and 'fsmlearn.algo.paths' not in sys.modules\n"
            "import fsmlearn.lm.compiled\n"           # imports the submodule fsmlearn.algo.compose
            "assert callable(fsmlearn.compose) and fsmlearn.compose.__module__ == 'fsmlearn.algo.compose'\n"
            "assert callable(fsmlearn.algo.compose) and fsmlearn.algo.best_path is fsmlearn.best_path\n"
            "assert fsmlearn.algo.shortest.forward is fsmlearn.forward and fsmlearn.lm.CompiledLM\n"
            "from fsmlearn.cli.main import build_parser\n"
            "build_parser('lm')\n"
            "bad = [m for m in sys.modules if m.startswith(('fsmlearn.data', 'fsmlearn.experiments', "
            "'fsmlearn.rcm', 'fsmlearn.trf', 'fsmlearn.mrf', 'fsmlearn.tag'))]\n"
            "assert not bad, bad\n"
            "assert len(build_parser()._subparsers._group_actions[0].choices) == 6\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("package", ["algo", "data", "lm", "tag", "rcm", "trf", "mrf"])
def test_no_public_name_is_shadowed_by_a_submodule_and_every_name_resolves(package):
    import importlib
    import pkgutil
    m = importlib.import_module(f"fsmlearn.{package}")
    subs = {x.name for x in pkgutil.iter_modules(m.__path__)}
    lazy = getattr(m, "_LAZY", {})
    assert not set(lazy) & subs, set(lazy) & subs       # the submodule would win once imported
    for name in m.__all__:
        assert not isinstance(getattr(m, name), type(importlib)), name
        assert name in dir(m)
