"""A command's stdout whose reader may leave: `logicroute check --kb K | head -1` closes the pipe
after one line, and a command writing on must end as it would have (the check's exit status 0
on a healthy KB), not with "Broken pipe" and the exit status of a failure. engine.face.cli runs every
command inside `reader_may_leave`."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


class ReaderMayLeave:
    """A stream (stdout, or its binary buffer) that, once its reader has gone, takes what is
    written and drops it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.gone = False

    def write(self, data):
        if not self.gone:
            try:
                return self._inner.write(data)
            except BrokenPipeError:
                self._drop()
        return len(data)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._inner.flush()
            except BrokenPipeError:
                self._drop()

    @property
    def buffer(self) -> ReaderMayLeave:
        # click writes to the binary buffer when the text stream's encoding will not do
        return ReaderMayLeave(self._inner.buffer)

    def _drop(self) -> None:
        self.gone = True
        # the interpreter flushes stdout once more at exit: what its buffer still holds then goes
        # to /dev/null, not to the closed pipe ("Exception ignored ... BrokenPipeError", exit 120)
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._inner.fileno())
            os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextlib.contextmanager
def reader_may_leave() -> Iterator[None]:
    """sys.stdout, while inside, is a ReaderMayLeave over the one before."""
    before = sys.stdout
    sys.stdout = ReaderMayLeave(before)
    try:
        yield
    finally:
        sys.stdout = before
