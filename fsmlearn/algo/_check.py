"""The check every public engine function makes of its machine argument.

:func:`require_machine` raises :class:`~fsmlearn.errors.NotAMachineError` (a
``TypeError``) when it is given anything but a :class:`~fsmlearn.fsm.Machine`,
saying how to get one: a ``pynini.Fst`` (or ``pywrapfst`` FST) is converted
with ``Machine.from_pynini``; an object that holds its machine as ``.machine``
(a compiled LM, a tagging lattice) is pointed at that attribute.

Public names: require_machine.
"""

from __future__ import annotations

from types import MemberDescriptorType

from ..errors import NotAMachineError
from ..fsm.machine import Machine


def _describe(obj) -> str:
    t = type(obj)
    mod = t.__module__ or ""
    return t.__name__ if mod == "builtins" else f"{mod}.{t.__qualname__}"


def require_machine(obj, func: str, arg: str = "machine") -> Machine:
    """Return ``obj`` if it is a :class:`Machine`, else raise with a hint on converting it.

    Args:
        obj: the argument to check.
        func: the public function's name, for the message (e.g. ``"forward_backward"``).
        arg: the argument's name, for the message.

    Returns:
        ``obj`` itself.

    Raises:
        NotAMachineError: (a ``TypeError``) ``obj`` is not a Machine; the message names
            ``func``, ``arg`` and the type, and says to convert a pynini FST with
            ``fsmlearn.Machine.from_pynini(fst)``.
    """
    if isinstance(obj, Machine):
        return obj
    what = _describe(obj)
    mod = (type(obj).__module__ or "").lstrip("_")
    from ..fsm.batch import MachineBatch
    from ..fsm.chain import ChainBatch
    if isinstance(obj, ChainBatch):
        raise NotAMachineError(
            f"{func}: {arg} must be a fsmlearn.Machine; a ChainBatch ({len(obj)} chains) is solved by the "
            "dense-chain schedule in forward_backward, total_weight, best_path, expectation and entropy; for the "
            "other routines "
            "write its arcs out with chains.materialise(), whose first item is a MachineBatch")
    if isinstance(obj, MachineBatch):
        raise NotAMachineError(
            f"{func}: {arg} must be a fsmlearn.Machine; it does not take a MachineBatch ({len(obj)} machines: "
            "its .machine is their union, whose own start reaches only one of them): call it on each "
            "batch[b], or use a routine that takes a batch (forward, backward, total_weight, forward_backward, "
            "arc_posteriors, final_posteriors, expectation, entropy, best_path, sample_paths)")
    if mod.startswith(("pynini", "pywrapfst")):
        hint = "convert it first with fsmlearn.Machine.from_pynini(fst)"
    elif isinstance(getattr(type(obj), "machine", None), (property, MemberDescriptorType)) or \
            isinstance(getattr(obj, "__dict__", {}).get("machine"), Machine):
        hint = ("pass its .machine attribute, or convert a pynini FST with "
                "fsmlearn.Machine.from_pynini(fst)")
    else:
        hint = "convert a pynini FST with fsmlearn.Machine.from_pynini(fst)"
    raise NotAMachineError(f"{func}: {arg} must be a fsmlearn.Machine, got {what}; {hint}")
