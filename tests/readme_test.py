"""The README's code blocks run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def python_blocks():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("i", range(len(python_blocks())))
def test_readme_python_block_runs(i, tmp_path):
    code = python_blocks()[i]
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()


def test_readme_names_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert "make test" in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
