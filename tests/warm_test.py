"""Kernels that can be cached, and ``make warm`` (fsmlearn.experiments.warm) that caches them.

A numba kernel built inside a function (a closure, or ``njit(f)`` called at run time) is a
new dispatcher in every process and never hits the on-disk cache (numba issue 6264): the
static test reads every module under fsmlearn/ and names each kernel defined or built inside
a function, and each module-level ``njit``/``jit`` kernel without ``cache=True`` (kernels
with ``inline="always"`` compile into their callers and are exempt).  The other tests run
the warm module's engine and LM families in this process, and its ``main`` (with the MRF
family, a failing family and an unknown one); the tag, RCM, TRF and command families run at
install time (``make install``, ``make warm``), each within a few seconds once cached.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fsmlearn.experiments import warm

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fsmlearn"

# numba's compiling decorators (resolved through the module's imports, e.g. nb.njit -> numba.njit)
JIT = {"numba.njit", "numba.jit", "numba.cuda.jit", "numba.vectorize", "numba.guvectorize", "numba.cfunc",
       "numba.generated_jit", "numba.stencil"}
CPU_JIT = {"numba.njit", "numba.jit"}        # the ones that must say cache=True at module level


def _aliases(tree: ast.Module) -> dict:
    """Local name -> the numba name it stands for, from the module's imports (any depth)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "numba" or a.name.startswith("numba."):
                    if a.asname:
                        out[a.asname] = a.name
                    else:
                        out["numba"] = "numba"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == "numba" or node.module.startswith("numba.")):
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _jit_name(expr, aliases: dict) -> str | None:
    """The numba decorator an expression names (``nb.njit``, ``nb.njit(...)``, ``cuda.jit``), or None."""
    func = expr.func if isinstance(expr, ast.Call) else expr
    name = _dotted(func)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    if head not in aliases:
        return None
    full = aliases[head] + ("." + rest if rest else "")
    return full if full in JIT else None


def _keywords(expr) -> dict:
    if not isinstance(expr, ast.Call):
        return {}
    return {k.arg: k.value for k in expr.keywords if k.arg}


def _is_const(node, value) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def kernel_problems(source: str, path: str = "<source>") -> list[str]:
    """'file:line: message' for each kernel defined or built inside a function (a closure,
    a lambda, ``njit(f)`` at run time), and each module-level njit/jit kernel that is not
    inline="always" and lacks cache=True."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    problems = []

    def check_cache(expr, name, line):
        kind = _jit_name(expr, aliases)
        kw = _keywords(expr)
        if kind in CPU_JIT and not _is_const(kw.get("inline"), "always") and not _is_const(kw.get("cache"), True):
            problems.append(f"{path}:{line}: {name} is a {kind} kernel without cache=True "
                            f"(it compiles again in every process)")

    def visit(node, enclosing: str | None):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:            # evaluated where the function is defined
                kind = _jit_name(d, aliases)
                if kind is None:
                    visit(d, enclosing)
                elif enclosing is not None:
                    problems.append(f"{path}:{node.lineno}: {kind} kernel {node.name} is defined inside "
                                    f"function {enclosing}: a new dispatcher per call never hits the cache "
                                    f"(make it a module-level kernel)")
                else:
                    check_cache(d, node.name, node.lineno)
            visit(node.args, enclosing)
            for stmt in node.body:
                visit(stmt, node.name)
            return
        if isinstance(node, ast.Lambda):
            visit(node.args, enclosing)
            visit(node.body, "<lambda>")
            return
        if isinstance(node, ast.Call):
            # njit(f) or njit(...)(f): a kernel built from a function object
            target = node.func if isinstance(node.func, ast.Call) else node
            if _jit_name(target, aliases) is not None and (isinstance(node.func, ast.Call) or node.args):
                fn = _dotted(node.args[0]) if node.args else None
                if enclosing is not None:
                    problems.append(f"{path}:{node.lineno}: a {_jit_name(target, aliases)} kernel is built at "
                                    f"run time inside function {enclosing}: it never hits the cache "
                                    f"(make it a module-level kernel)")
                else:
                    check_cache(target, f"the kernel built from {fn}", node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, enclosing)

    visit(tree, None)
    return sorted(set(problems), key=lambda p: (p.split(":")[0], int(p.split(":")[1])))


def test_every_kernel_is_module_level_and_cached():
    problems = []
    for path in sorted(PKG.rglob("*.py")):
        problems += kernel_problems(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not problems, "\n".join(problems)


def test_the_static_check_finds_closures_run_time_kernels_and_missing_cache():
    src = '''
import numba as nb
from numba import cuda, njit

@nb.njit(cache=True)
def good(x):
    return x

@nb.njit(inline="always")
def inlined(x):
    return x

@nb.njit
def bare(x):
    return x

@njit(parallel=True)
def parallel(x):
    return x

@cuda.jit
def device_kernel(x):
    pass

def factory(R):
    @nb.njit(cache=True)
    def inner(x):
        return x + R
    return inner

def builds(f):
    return nb.njit(cache=True)(f)

class Holder:
    @staticmethod
    @nb.njit
    def method(x):
        return x

def gpu_factory():
    if True:
        @cuda.jit(device=True)
        def dev(x):
            return x
    return dev
'''
    got = kernel_problems(src, "m.py")
    lines = {int(p.split(":")[1]) for p in got}
    assert lines == {14, 18, 27, 32, 37, 43}, got
    assert any("bare is a numba.njit kernel without cache=True" in p for p in got)
    assert any("inner is defined inside function factory" in p for p in got)
    assert any("built at run time inside function builds" in p for p in got)
    assert any("numba.cuda.jit kernel dev is defined inside function gpu_factory" in p for p in got)


# ------------------------------------------------------------------ the warm module runs


def test_the_engine_and_lm_families_run(tmp_path):
    (tmp_path / "engine").mkdir()
    (tmp_path / "lm").mkdir()
    warm.warm_engine(tmp_path / "engine")
    warm.warm_lm(tmp_path / "lm")


def test_main_runs_the_named_families_and_reports_each(capsys):
    assert warm.main(["--only", "mrf,engine"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split()[1] for line in err] == ["engine", "mrf", "total"]
    assert all(line.startswith("warm: ") and line.endswith(" s") for line in err)


def test_every_model_family_and_the_commands_are_warmed():
    assert list(warm.FAMILIES) == ["engine", "lm", "tag", "rcm", "trf", "mrf", "cli"]


def test_an_unknown_family_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        warm.main(["--only", "engine,nosuch"])
    assert e.value.code == 2 and "unknown family 'nosuch'" in capsys.readouterr().err


def test_a_failing_family_is_named_and_the_others_still_run(monkeypatch, capsys):
    ran = []

    def boom(tmp):
        raise RuntimeError("broken on purpose")

    monkeypatch.setitem(warm.FAMILIES, "engine", boom)
    monkeypatch.setitem(warm.FAMILIES, "mrf", lambda tmp: ran.append(tmp.is_dir()))
    assert warm.main(["--only", "engine,mrf"]) == 1
    err = capsys.readouterr().err
    assert "warm: engine  FAILED" in err and "broken on purpose" in err and ran == [True]


def test_the_synthetic_data_is_fixed_and_covers_the_17_tags():
    from fsmlearn.data.tagsets import tagset_tags, to_tag17
    assert warm.synthetic_sentences(50) == warm.synthetic_sentences(50)
    tagged = warm.synthetic_tagged(300)
    assert tagged == warm.synthetic_tagged(300)
    assert {to_tag17(t) for s in tagged for _, t in s} == set(tagset_tags("tag17"))
