"""Latency percentiles: one definition for the server's /metrics and every benchmark report."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between the closest ranks (numpy's default);
    0.0 for no values."""
    s = sorted(values)
    if not s:
        return 0.0
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
