"""What every experiment shares: the machine's description, peak memory, cached
stages, and writing its JSON report and PNG plot atomically.

Public names: device, peak_rss_mb, reset_peak_rss, stage_peak_rss_mb, Stage, write_report, save_figure, new_figure, output_place.
"""

from __future__ import annotations

import json
import os
import platform
import resource
from pathlib import Path

from ..fsm.atomic import atomic_path, atomic_write

__all__ = ["device", "peak_rss_mb", "reset_peak_rss", "stage_peak_rss_mb", "Stage", "write_report", "save_figure", "new_figure", "output_place"]


def device() -> str:
    """The CPU this runs on, e.g. ``"cpu: 2 cores, <model name>"`` (from /proc/cpuinfo where there is one)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"cpu: {n} cores, {cpu}"


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (getrusage's ru_maxrss)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Start a new peak of this process's resident memory (Linux: ``/proc/self/clear_refs``),
    so that :func:`stage_peak_rss_mb` gives the peak of what runs from now on; False where
    the system cannot (the peak then counts from the process's start).  The reset lowers
    getrusage's ``ru_maxrss`` as well (and ``/usr/bin/time``'s figure for the command):
    record :func:`stage_peak_rss_mb` before a reset to keep the earlier peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def stage_peak_rss_mb() -> float:
    """This process's peak resident memory since :func:`reset_peak_rss` (VmHWM), in MB;
    :func:`peak_rss_mb` where /proc is not there."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_rss_mb()


class Stage:
    """A cached stage of an experiment: ``path`` plus ``path.params.json`` recording
    the parameters it was built with; it is fresh when both exist and the
    parameters are the same.  Build it between :meth:`start` and :meth:`done`."""

    def __init__(self, path: Path, params: dict):
        self.path = Path(path)
        self.params = params
        self.stamp = self.path.with_name(self.path.name + ".params.json")

    def fresh(self) -> bool:
        if not (self.path.exists() and self.stamp.exists()):
            return False
        try:
            return json.loads(self.stamp.read_text()) == self.params
        except ValueError:
            return False

    def start(self) -> None:
        """Forget the recorded parameters: call before (re)building ``path``, so that a
        build that fails half-way never leaves a stage that looks fresh."""
        self.stamp.unlink(missing_ok=True)

    def done(self) -> None:
        """Record the parameters: call after ``path`` is complete."""
        atomic_write(self.stamp, lambda f: f.write(json.dumps(self.params, indent=1).encode()))


def output_place(path, make: bool = True) -> None:
    """Refuse, before any work, a place where an experiment's output file (a model, a report)
    cannot be written, with one line: a directory in the way, a file where a folder should be,
    a folder that is not writable, or (without ``make``, as the commands on the user's own
    data refuse an ``-o`` there) a folder that does not exist.  Nothing is created: the run
    makes the folders when it writes (:func:`write_report`, and ``mkdir`` before a model is
    saved), so a run refused later leaves nothing behind."""
    import os

    from ..errors import ArgumentError
    if path is None:
        return
    path = Path(path).absolute()
    if path.is_dir():
        raise ArgumentError(f"{path}: cannot write here: a directory is in the way")
    if not make and not path.parent.is_dir():
        raise ArgumentError(f"{path}: cannot write here: no such folder ({path.parent})")
    q = path.parent
    while not q.exists():
        q = q.parent
    if not q.is_dir():
        raise ArgumentError(f"{path}: cannot write here: {q} is a file, not a folder")
    if not os.access(q, os.W_OK | os.X_OK):
        raise ArgumentError(f"{path}: cannot write here: {q} is not writable")


def write_report(path, report: dict) -> None:
    """Write ``report`` as indented JSON, atomically (its folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: f.write(json.dumps(report, indent=1).encode()))


def new_figure(ncols: int = 1, figsize=(10, 4)):
    """(figure, axes) from matplotlib's Agg backend (no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt.subplots(1, ncols, figsize=figsize)


def save_figure(fig, path, dpi: int = 100) -> None:
    """Save a figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, dpi=dpi, format="png")
    finally:
        plt.close(fig)
