"""The layers of ../shared/DESIGN.md hold: no module imports from a layer listed after its own.

Every ``import`` and ``from ... import`` under fsmlearn/ (module level and inside
functions, absolute and relative) is resolved to the fsmlearn package it names
and compared by rank.  The ranks follow DESIGN.md's list: errors and fsm/ (1),
data/ beside them (it may import errors and fsm, not the reverse), semiring/ (2),
algo/ and the test helpers of fsmlearn.testing (3), the models in their order
lm/, tag/, rcm/, trf/, mrf/ (4), experiments/ (5), cli/ (6).  The top-level
fsmlearn/__init__.py is the public facade and may re-export anything.  A new
top-level package fails the test until it is given a rank here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fsmlearn"

# rank of each top-level part of fsmlearn: a module may import its own part and lower ranks
RANKS = {
    "errors": 1.0, "fsm": 1.0, "_lazy": 1.0,     # _lazy: the packages' PEP 562 exports, beside errors
    "_threads": 1.0,    # _threads: numba's TBB library, loaded when fsmlearn is imported
    "_memory": 1.0,     # _memory: huge pages for the arrays numba kernels allocate
    "data": 1.5,
    "semiring": 2.0,
    "algo": 3.0, "testing": 3.0,
    "lm": 4.0, "tag": 4.1, "rcm": 4.2, "trf": 4.3, "mrf": 4.4,
    "experiments": 5.0,
    "cli": 6.0,
}


def part_of(module: str) -> str | None:
    """The top-level part of an fsmlearn module name ('fsmlearn.lm.arpa' -> 'lm'); None for
    the facade 'fsmlearn' itself and for modules outside fsmlearn."""
    parts = module.split(".")
    if parts[0] != "fsmlearn" or len(parts) < 2:
        return None
    return parts[1]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool):
    """(line, module) for every fsmlearn module that ``source`` (the module ``module``) imports;
    ``from X import y`` yields ``X.y`` too, since y may be a subpackage."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            for a in node.names:
                yield node.lineno, f"{target}.{a.name}"


def violations(source: str, module: str, is_package: bool, path: str = "<source>"):
    """The imports of ``module`` that break the layer order, as 'file:line: message' strings."""
    own = part_of(module)
    if own is None:                       # the facade
        return []
    if own not in RANKS:
        return [f"{path}:1: {module} belongs to fsmlearn.{own}, which has no layer: "
                f"give it a rank in tests/layers_test.py (and DESIGN.md)"]
    out = []
    for line, target in imported_modules(source, module, is_package):
        other = part_of(target)
        if target == "fsmlearn":
            out.append(f"{path}:{line}: {module} imports the facade fsmlearn (import the package it needs)")
            continue
        if other is None or other == own or other not in RANKS:
            continue                    # outside fsmlearn, its own part, or a name from the facade's parts
        if RANKS[other] > RANKS[own]:
            out.append(f"{path}:{line}: {module} (layer of {own}) imports {target} "
                       f"(layer of {other}, listed after it)")
    return out


def _modules():
    return sorted(PKG.rglob("*.py"))


def test_every_part_has_a_rank():
    parts = {p.relative_to(PKG).parts[0].removesuffix(".py") for p in _modules()} - {"__init__", "__main__"}
    assert parts - set(RANKS) == set(), "give each new top-level part of fsmlearn a rank in this test"


def test_no_module_imports_a_later_layer():
    found = []
    for p in _modules():
        found += violations(p.read_text(), module_name(p), p.name == "__init__.py", str(p.relative_to(ROOT)))
    assert not found, "\n".join(found)


def test_each_package_states_its_layer():
    missing = []
    for init in sorted(PKG.glob("*/__init__.py")):
        part = init.parent.name
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        m = re.search(r"\bLayer (\d)\b", doc)
        if not m or int(m.group(1)) != int(RANKS.get(part, 0)):
            missing.append(f"fsmlearn/{part}/__init__.py: docstring should say 'Layer {int(RANKS.get(part, 0))}'")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("module, source, bad", [
    ("fsmlearn.lm.arpa", "from ..tag import HMM\n", True),               # a model imports a later model
    ("fsmlearn.data.readers", "import fsmlearn.algo.paths\n", True),      # layer 1 imports layer 3
    ("fsmlearn.fsm.machine", "def f():\n    from ..data import iter_sentences\n", True),   # inside a function
    ("fsmlearn.algo", "from .. import experiments\n", True),              # a subpackage by 'from .. import'
    ("fsmlearn.semiring.ops", "from fsmlearn import Machine\n", True),     # the facade
    ("fsmlearn.newpart.x", "import numpy\n", True),                        # a part with no rank
    ("fsmlearn.tag.hmm", "from ..lm.model import BOS\nfrom . import lattice\n", False),
    ("fsmlearn.cli.tag", "from ..experiments import giga200\nfrom ..errors import FsmError\n", False),
    ("fsmlearn.data.readers", "from ..errors import CorpusFormatError\nfrom ..fsm import Machine\n", False),
])
def test_the_checker_catches_upward_imports(module, source, bad):
    is_package = module == "fsmlearn.algo"
    assert bool(violations(source, module, is_package)) is bad


def test_only_experiments_plot_or_read_proc():
    """DESIGN.md: the library below experiments/ never plots or reads /proc."""
    found = []
    for p in _modules():
        part = p.relative_to(PKG).parts[0].removesuffix(".py")
        if part in ("experiments", "cli", "__init__"):
            continue
        src = p.read_text()
        for line, target in imported_modules(src, module_name(p), p.name == "__init__.py"):
            if target.split(".")[0] == "matplotlib":
                found.append(f"{p.relative_to(ROOT)}:{line}: imports matplotlib")
        for i, text in enumerate(src.splitlines(), 1):
            if "/proc/" in text:
                found.append(f"{p.relative_to(ROOT)}:{i}: reads /proc")
    assert not found, "\n".join(found)
