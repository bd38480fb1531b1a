"""The ``fsmlearn`` command line."""

from __future__ import annotations

import io

from fsmlearn.cli.main import main
from fsmlearn.experiments.demo import run_demo


def test_demo_runs_and_agrees_with_openfst():
    out = io.StringIO()
    run_demo(out)
    text = out.getvalue()
    z = float(text.split("total weight Z = ")[1].split()[0])
    assert abs(z - 1.0) < 1e-9
    diff = float(text.split("max |difference| = ")[1].split()[0])
    assert diff < 1e-9


def test_cli_without_command_prints_help(capsys):
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out
