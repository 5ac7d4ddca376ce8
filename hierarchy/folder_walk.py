"""The files of a folder that `logicroute index` reads: what the user named, and nothing else.

The walk stays inside the folder named, taken at its resolved path (the root). A link, to a
file or to a folder, is followed only when its target resolves inside the root; one that leads
outside it, or nowhere, is skipped and named in one warning line (`-v` lists every one). The
user named this folder, not what its links point at: a `notes.txt -> /etc/passwd` would
otherwise serve the password file's lines as a source. Inside the root every file and folder
is read once, however many paths lead to it: a file reached by its own path and by a link is
read under its own path, and a folder link that points at an ancestor ends there instead of
looping. Named pipes, sockets and devices are never opened (opening a pipe blocks until a
writer comes, a device can stream forever): they are skipped with a note. Hidden files and
folders (.git, editor swap files) are left out, and a subfolder that cannot be listed is
skipped with a warning. A file whose name is bytes that are no UTF-8 (an archive from another
system) is skipped and named with its bytes escaped (engine.floor.base.text.shown): no id, line or
tokenizer can carry its name, and the rest of the folder is read.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from engine.floor.base.errors import DataFormatError
from engine.floor.base.text import lone_surrogates, shown

log = logging.getLogger("logicroute.sources")
NAMED = 5  # entries a warning line names; -v lists the rest
_SPECIAL = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


@dataclass
class Walk:
    """What a folder holds: the files to read, as (id: the path below the root, the file's
    resolved path), and the entries left out, each as a line naming it."""

    files: list[tuple[str, Path]] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)  # "notes.txt -> /etc/passwd"
    broken: list[str] = field(default_factory=list)  # links to nothing, or to themselves
    special: list[str] = field(default_factory=list)  # "feed (a named pipe)"
    undecodable: list[str] = field(default_factory=list)  # "caf\\xe9.txt": names that are no UTF-8


def special_kind(mode: int) -> str | None:
    """What a file that is neither a regular file nor a folder is ("a named pipe"), else None."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((name for test, name in _SPECIAL if test(mode)), "not a regular file")


def walk_folder(folder: Path) -> Walk:
    """The files below `folder` under the rules above, sorted by id. The tree is walked first and
    its links after, so a file or folder that a link also reaches keeps its own path as id."""
    root = folder.resolve()
    walk = Walk()
    seen: set[Path] = {root}  # folders and files taken, by resolved path
    pending: list[tuple[Path, str]] = [(root, "")]  # folders to list: (resolved path, id prefix)
    links: list[tuple[str, Path]] = []
    while pending or links:
        while pending:
            where, prefix = pending.pop()
            for entry in _entries(where, root):
                rel = prefix + entry.name
                if entry.is_symlink():
                    links.append((rel, Path(entry.path)))
                else:
                    _take(walk, seen, pending, rel, Path(entry.path), entry.stat(follow_symlinks=False).st_mode)
        if links:
            rel, link = links.pop(0)
            target = _target(link)
            if target is None:
                walk.broken.append(rel)
            elif not target.is_relative_to(root):
                walk.outside.append(f"{rel} -> {target}")
            else:
                _take(walk, seen, pending, rel, target, target.stat().st_mode)
    walk.files.sort()
    return walk


def _entries(where: Path, root: Path) -> list[os.DirEntry]:
    """The visible entries of a folder, sorted by name; none (with a warning) for a subfolder
    that cannot be listed. The root that cannot be listed stops the run."""
    try:
        with os.scandir(where) as it:
            return sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    except OSError as e:
        if where == root:
            raise DataFormatError(f"{where}: cannot list the folder ({e.strerror or e})") from None
        log.warning("%s: skipped, cannot list the folder (%s)", where, e.strerror or e)
        return []


def _target(link: Path) -> Path | None:
    """The resolved path a link leads to, or None when it leads nowhere (its target is missing,
    or the links loop)."""
    try:
        target = link.resolve(strict=True)
        target.stat()
        return target
    except (OSError, RuntimeError):  # RuntimeError: a loop of links, on Python < 3.13
        return None


def _take(walk: Walk, seen: set[Path], pending: list, rel: str, path: Path, mode: int) -> None:
    if path in seen:
        return
    if stat.S_ISDIR(mode):
        seen.add(path)
        pending.append((path, rel + "/"))
    elif stat.S_ISREG(mode):
        seen.add(path)
        if lone_surrogates(rel):
            walk.undecodable.append(shown(rel))
        else:
            walk.files.append((rel, path))
    else:
        walk.special.append(f"{rel} ({special_kind(mode)})")


def report(folder: Path, walk: Walk) -> None:
    """One warning line for each kind of entry the walk left out, naming the first few; every
    one at debug level (`index -v`)."""
    for items, one, many in (
        (walk.outside, "link that leads outside the folder", "links that lead outside the folder"),
        (walk.broken, "link that leads nowhere", "links that lead nowhere"),
        (walk.special, "entry that is not a file (never opened)", "entries that are not files (never opened)"),
        (
            walk.undecodable,
            "file whose name is not UTF-8 (rename it to index it)",
            "files whose names are not UTF-8 (rename them to index them)",
        ),
    ):
        for item in items:
            log.debug("%s: skipped %s: %s", folder, item, one)
        if items:
            log.warning("%s: skipped %d %s: %s", folder, len(items), one if len(items) == 1 else many, some(items))


def some(items: list[str]) -> str:
    """The first few items, and how many more `-v` lists."""
    more = f" and {len(items) - NAMED} more (-v lists them)" if len(items) > NAMED else ""
    return ", ".join(items[:NAMED]) + more
