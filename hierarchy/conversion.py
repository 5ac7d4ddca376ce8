"""Converting one PDF, HTML, DOCX or PPTX file, bounded: the checks of hierarchy.intake_limits
first, then the converter of hierarchy.converters, both in a worker process that holds a time
limit and a memory limit. A file that breaks a limit, or kills the worker, is skipped with one
line, and the next file gets a fresh worker: the run goes on.

Why a process: a converter stuck in a parse cannot be stopped from a thread, and a file that
needs gigabytes must fail alone, not take the run (or the machine) with it. The worker is
started on the first file to convert and kept for the rest of the run (its imports cost about
half a second, once), restarted after a file that it could not finish, and ended when the
program exits. Its memory limit is the address space it may map (RLIMIT_AS, where the system
enforces it); its time limit runs from the moment a file is handed to it.

The worker speaks one JSON object a line: the parent sends {path, kind, limits}; the worker
answers {"ok": {title, text, pages}}, {"skip": reason}, or {"oserror": reason}.
"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from engine.floor.base.errors import DataFormatError, MissingExtraError
from engine.floor.base.text import has_text
from hierarchy import converters
from hierarchy.chunking import PAGE_MARK_RE
from hierarchy.intake_limits import MB, PREFIX, IntakeLimits, OverLimit, check_file, check_text

STARTUP_SECONDS = 60  # the worker's imports, on a slow disk
log = logging.getLogger("logicroute.sources")


def convert(path: Path, limits: IntakeLimits | None = None) -> converters.Converted | None:
    """The file at `path` as Markdown, or None (with one warning line) for a file that holds no
    text we can read or breaks a limit: an encrypted or scanned PDF, a damaged file, a zip bomb,
    a conversion that runs out of time or memory."""
    kind = converters.kind_of(path)
    if kind is None:
        raise DataFormatError(f"{path}: no converter for {path.suffix or 'files without an extension'}")
    if not converters.available(kind):
        raise MissingExtraError(f"{path}: reading .{kind} files needs the docs extra: {converters.DOCS_EXTRA}")
    reply = _WORKER.run(path, kind, limits or IntakeLimits())
    if "oserror" in reply:
        raise DataFormatError(f"{path}: unreadable ({reply['oserror']})")
    if "skip" in reply:
        log.warning("%s: skipped, %s", path, reply["skip"])
        return None
    converted = converters.Converted(**reply["ok"])
    if not has_text(PAGE_MARK_RE.sub("", converted.text)):
        log.warning("%s: skipped, no text in it", path)
        return None
    return converted


class _Worker:
    """The parent's end: one worker process at a time, used by one file at a time."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.memory_mb: float | None = None
        self.lock = threading.Lock()

    def run(self, path: Path, kind: str, limits: IntakeLimits) -> dict:
        with self.lock:
            try:
                proc = self._started(limits.max_memory_mb)
            except OSError as e:
                return {"skip": f"the converter process did not start ({e})"}
            try:
                _send(proc, {"path": str(path), "kind": kind, "limits": limits.to_dict()})
                reply = _receive(proc, time.monotonic() + limits.max_seconds)
            except TimeoutError:
                self.stop(kill=True)
                return {"skip": f"converting took longer than {limits.max_seconds:g} s, the limit {PREFIX}max_seconds"}
            except (OSError, ValueError) as e:  # the worker died: out of memory, or killed
                self.stop()
                return {
                    "skip": f"the converter process ended ({e}): the file likely needs more memory than the limit "
                    f"{PREFIX}max_memory_mb={limits.max_memory_mb:g}"
                }
            if reply.pop("restart", False):
                self.stop()
            return reply

    def _started(self, memory_mb: float) -> subprocess.Popen:
        if self.proc is not None and (self.proc.poll() is not None or self.memory_mb != memory_mb):
            self.stop()
        if self.proc is None:
            # the package's own folder first: the worker imports the code the parent runs
            top = str(Path(__file__).resolve().parents[1])
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (top, os.environ.get("PYTHONPATH")) if p)}
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hierarchy.conversion", str(memory_mb)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                # what the libraries print is noise, except to someone finding out why (-v)
                stderr=None if log.isEnabledFor(logging.DEBUG) else subprocess.DEVNULL,
                env=env,
            )
            self.memory_mb = memory_mb
            try:
                _receive(self.proc, time.monotonic() + STARTUP_SECONDS)  # {"ready": true}
            except (TimeoutError, OSError, ValueError) as e:
                self.stop()
                raise OSError(str(e) or f"no answer in {STARTUP_SECONDS} s") from None
        return self.proc

    def stop(self, kill: bool = False) -> None:
        """End the worker: killed (a file it is stuck in), else asked to (its input closed), and
        killed when it does not listen."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        try:
            proc.stdin.close()
            proc.wait(timeout=1)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _send(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _receive(proc: subprocess.Popen, deadline: float) -> dict:
    """The worker's next line: TimeoutError past `deadline`, ValueError when it died."""
    ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
    if not ready:
        raise TimeoutError
    line = proc.stdout.readline()
    if not line.endswith(b"\n"):
        code = proc.wait()
        raise ValueError(f"exit code {code}" if code >= 0 else f"killed by signal {-code}")
    return json.loads(line)


_WORKER = _Worker()


def stop_worker() -> None:
    """End the worker process, if one runs (at exit; a caller that measures what the run cost)."""
    _WORKER.stop()


atexit.register(stop_worker)


# ---------------------------------------------------------------- the worker's end


def handle(request: dict) -> dict:
    """One file: the checks, the converter, the text's size; every outcome as a reply."""
    path, kind = Path(request["path"]), request["kind"]
    limits = IntakeLimits(**request["limits"])
    try:
        check_file(path, kind, limits)
        converted = converters.CONVERTERS[kind](path)
        check_text(converted.text, limits)
    except (OverLimit, converters.Unreadable) as e:
        return {"skip": str(e)}
    except MemoryError:
        memory = f"{PREFIX}max_memory_mb={limits.max_memory_mb:g}"
        return {"skip": f"it needs more memory than the limit {memory}", "restart": True}
    except OSError as e:
        return {"oserror": e.strerror or str(e)}
    except Exception as e:  # the libraries raise their own types for a damaged file: one line, the run goes on
        return {"skip": f"not a readable {kind.upper()} file ({type(e).__name__}: {e})"}
    return {"ok": asdict(converted)}


def _limit_memory(memory_mb: float) -> None:
    try:
        import resource

        limit = int(memory_mb * MB)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # a system without the limit: the time limit still holds
        pass


def main(argv: list[str]) -> None:
    """The worker: replies on the stdout it was given; anything a library prints goes to
    stderr, so it cannot break a reply."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _limit_memory(float(argv[0]))
    for kind, modules in converters.NEEDS.items():  # imported now: a file's time limit is spent on the file
        for module in modules if converters.available(kind) else ():
            importlib.import_module(module)
    replies.write(b'{"ready": true}\n')
    replies.flush()
    for line in sys.stdin.buffer:
        replies.write(json.dumps(handle(json.loads(line))).encode() + b"\n")
        replies.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
