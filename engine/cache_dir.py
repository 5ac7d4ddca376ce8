"""Where logicroute keeps models, caches and the demo KB: $LOGICROUTE_CACHE_DIR or ~/.cache/logicroute."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache root (not created here: callers create what they write)."""
    env = os.environ.get("LOGICROUTE_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "logicroute"
