"""Public names of a package imported on first use (module-level ``__getattr__``, PEP 562).

A package lists its public names and the submodule that defines each; importing the
package then imports none of them, so a command that needs one model or one kernel
does not pay for the rest at start-up.  A public name must not be the name of a
submodule of its package: importing the submodule binds the package's attribute to the
module (import the defining module eagerly instead, as :mod:`fsmlearn.algo` does for
``compose``).

Public names: lazy_exports.
"""

from __future__ import annotations

import importlib


def lazy_exports(package: str, names: dict[str, str], namespace: dict, submodules=()):
    """``(__getattr__, __dir__)`` for a package's namespace.

    Args:
        package: the package's ``__name__``.
        names: public name -> the submodule (relative name) that defines it.
        namespace: the package's ``globals()``; a name is cached there on first use.
        submodules: submodule names also reachable as attributes (``fsmlearn.algo.shortest``
            after a bare ``import fsmlearn.algo``).

    The package's ``__all__`` becomes the public names when it has none of its own.

    Returns:
        The two functions to bind as the package's ``__getattr__`` and ``__dir__``.
    """
    submodules = frozenset(submodules)
    namespace.setdefault("__all__", list(names))

    def __getattr__(name: str):
        module = names.get(name)
        if module is None:
            if name in submodules:
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(names) | submodules)

    return __getattr__, __dir__
