"""Where logicroute keeps models, caches and the demo KB: $LOGICROUTE_CACHE_DIR or ~/.cache/logicroute."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    p = Path(os.environ.get("LOGICROUTE_CACHE_DIR") or Path.home() / ".cache" / "logicroute")
    p.mkdir(parents=True, exist_ok=True)
    return p
