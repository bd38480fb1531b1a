"""cq's structure (fsmlearn.tag.ngram.structure): malformed inputs raise MachineError."""

from __future__ import annotations

import numpy as np
import pytest

from fsmlearn.errors import MachineError
from fsmlearn.tag.ngram.structure import CqStructure
from tag_ngram_common import tiny


def test_bad_inputs_raise():
    rng, c, cs, allowed, lt, le = tiny(9)
    with pytest.raises(MachineError, match="no allowed tag"):
        CqStructure.build(c, np.maximum(c.ilabel - 1, 0), np.zeros_like(allowed))
    with pytest.raises(MachineError, match="shape"):
        CqStructure.build(c, np.zeros(3, np.int32), allowed)
    eps = c.replace(ilabel=np.where(c.ilabel == 1, 0, c.ilabel))
    with pytest.raises(MachineError, match="epsilon"):
        CqStructure.build(eps, np.maximum(c.ilabel - 1, 0), allowed)
