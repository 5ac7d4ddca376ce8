"""Progress bars that honour `logicroute -q`.

A bar is drawn when its caller asks for one and the `logicroute` logger is not set above INFO:
`logicroute -q` sets it to WARNING (engine.face.cli_options); a library user silences every bar with
logging.getLogger("logicroute").setLevel(logging.WARNING). The logger's default (NOTSET) draws them.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

LOGGER = "logicroute"


def progress_on(requested: bool = True) -> bool:
    return bool(requested) and logging.getLogger(LOGGER).level <= logging.INFO


def progress_bar(total: int, desc: str, unit: str, requested: bool = True) -> Any:
    """A tqdm bar on stderr, disabled (drawing nothing, still counting) when progress is off."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not progress_on(requested))
