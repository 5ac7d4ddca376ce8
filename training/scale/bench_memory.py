"""Resident memory, read from Linux /proc: this process' peak over a step (the bench's own), and the
current and peak memory of another process tree (a server the bench started)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path


def reset_peak_rss() -> float:
    """Start a new peak-RSS window (Linux resets VmHWM to the current RSS when 5 is written to
    /proc/self/clear_refs); returns the resident memory the step starts from."""
    with contextlib.suppress(OSError):  # elsewhere the peak is the process' since it started
        Path("/proc/self/clear_refs").write_text("5")
    return peak_rss_mb()


def peak_rss_mb() -> float:
    """The peak resident set since the last reset (VmHWM), else since the process started."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return round(peak / (2**20 if sys.platform == "darwin" else 1024), 1)


def _procs() -> dict[int, int]:
    """pid -> parent pid of every process /proc shows."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:  # ended while we looked
                continue
            out[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])  # after the name, which may hold spaces
    return out


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, theirs, ...), not pid itself."""
    parents = _procs()
    found, frontier = [], [pid]
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier]
        found += kids
        frontier = kids
    return found


def status_mb(pids: list[int], field: str) -> float:
    """The sum of a /proc/PID/status memory field (VmRSS: now; VmHWM: the peak since the process
    started) over `pids`, in MB; a process that ended counts nothing."""
    kb = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    kb += int(line.split()[1])
        except OSError:
            continue
    return round(kb / 1024, 1)
