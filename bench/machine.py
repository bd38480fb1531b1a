"""The machine a benchmark ran on, for its report (shared by the benchmarks in bench/).

No numpy or numba here: bench_startup.py measures children's peak memory, which cannot
read below its own, so it imports nothing heavy.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def loadavg(digits: int | None = None) -> list[float]:
    """The 1, 5 and 15-minute load averages (rounded to ``digits``), or [] where unknown."""
    try:
        return [float(x) if digits is None else round(x, digits) for x in os.getloadavg()]
    except OSError:
        return []


def machine_facts() -> dict:
    """platform, python, cores, processor, cpu (model name) and mem_gib (where /proc tells)."""
    info = {"platform": platform.platform(), "python": platform.python_version(), "cores": os.cpu_count(),
            "processor": platform.processor()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["mem_gib"] = round(int(line.split()[1]) / 2**20, 1)
                break
    except OSError:
        pass
    if not info.get("cpu"):
        info["cpu"] = info["processor"]
    return info
