"""experiments.report: the helpers every experiment shares."""

import json

from fsmlearn.experiments.report import Stage, device, new_figure, peak_rss_mb, save_figure, write_report


def test_device_and_memory():
    assert device().startswith("cpu: ") and peak_rss_mb() > 10


def test_report_and_figure_are_written_whole(tmp_path):
    write_report(tmp_path / "sub" / "r.json", {"a": 1, "b": [1.5]})
    assert json.loads((tmp_path / "sub" / "r.json").read_text()) == {"a": 1, "b": [1.5]}
    fig, ax = new_figure(2)
    ax[0].plot([0, 1], [1, 0])
    save_figure(fig, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["p.png", "sub"]       # no temporary left


def test_stage_is_fresh_only_with_the_same_parameters(tmp_path):
    st = Stage(tmp_path / "thing", {"n": 1})
    assert not st.fresh()
    (tmp_path / "thing").write_text("x")
    assert not st.fresh()                # built but not stamped
    st.done()
    assert st.fresh() and not Stage(tmp_path / "thing", {"n": 2}).fresh()
    st.stamp.write_text("{broken")
    assert not st.fresh()


def test_a_stage_being_rebuilt_is_not_fresh(tmp_path):
    """Stage.start drops the stamp: a rebuild that dies half-way never looks up to date."""
    st = Stage(tmp_path / "thing", {"n": 1})
    (tmp_path / "thing").write_text("old")
    st.done()
    assert st.fresh()
    st.start()
    (tmp_path / "thing").write_text("half")     # ... and the build fails here
    assert not Stage(tmp_path / "thing", {"n": 1}).fresh()


def test_output_place_refuses_before_the_run_and_creates_nothing(tmp_path):
    """An experiment's model or report path is checked before any work (make mrf-tag once ran
    ten minutes to fail on a models/ folder that did not exist): missing folders are fine (the
    run makes them when it writes) unless the caller says they must exist; a file where a
    folder should be, or a directory where the file should be, is one line; nothing is made."""
    import pytest
    from fsmlearn.errors import ArgumentError
    from fsmlearn.experiments.report import output_place
    output_place(tmp_path / "models" / "deep" / "m.npz")
    output_place(None)
    with pytest.raises(ArgumentError, match="no such folder"):
        output_place(tmp_path / "models" / "m.npz", make=False)
    (tmp_path / "f").write_text("x")
    with pytest.raises(ArgumentError, match="is a file, not a folder"):
        output_place(tmp_path / "f" / "m.npz")
    with pytest.raises(ArgumentError, match="a directory is in the way"):
        output_place(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
