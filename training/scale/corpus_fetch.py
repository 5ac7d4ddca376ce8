"""Fetch the `debian-docs` corpus of `logicroute bench scale --corpus debian-docs`: the HTML
manuals of seven Debian documentation packages, as a folder of Markdown files the KB reads as it
reads any folder (hierarchy.sources): real, varied documentation prose, 100k+ distinct chunks.

    make corpus                                   # = .venv/bin/python -m training.scale.corpus_fetch
    .venv/bin/python -m training.scale.corpus_fetch --dir DIR --force

`apt-get download` brings each package's .deb (Debian's own archive, the version apt's lists
name as the candidate: `apt-get update` first), `dpkg-deb -x` unpacks it into a temporary
folder (nothing is installed), and each HTML page becomes DIR/PACKAGE/PATH.md
(training.scale.corpus_html; search pages, indexes, redirects, static files and translations are
left out).
DIR/manifest.json records each package's version, the .deb's sha256 and its pages and words.

Idempotent: a folder whose manifest names the same packages and conversion is kept as it is
(--force fetches anew). Atomic: everything is written to a temporary folder beside DIR, renamed
into place at the end; an interrupted fetch leaves DIR as it was. Default DIR:
$LOGICROUTE_CACHE_DIR/corpora/debian-docs (~/.cache/logicroute/corpora/debian-docs), never
inside the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import click

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.files import atomic_write_json, cache_dir
from training.common.jsonl_store import exclusive_folder

CORPUS = "debian-docs"
FORMAT = 2  # the conversion's version: a folder written by another one is fetched anew
MANIFEST = "manifest.json"
SKIP_PAGES = ("genindex", "search", "py-modindex", "np-modindex", "modindex", "bookindex")


@dataclass(frozen=True)
class DocPackage:
    """A Debian documentation package: where its HTML pages are, and sub-folders left out."""

    name: str
    html: str
    skip: tuple[str, ...] = ()


# The largest English prose manuals of Debian 12's main archive whose HTML is browsable pages
# (not generated API listings); no one or two of them reach 100k chunks (Linux: ~38k).
DEBIAN_DOCS = (
    DocPackage("linux-doc-6.1", "usr/share/doc/linux-doc-6.1/html", ("translations",)),
    DocPackage("sagemath-doc", "usr/share/doc/sagemath/html/en"),
    DocPackage("python3.11-doc", "usr/share/doc/python3.11/html"),
    DocPackage("postgresql-doc-15", "usr/share/doc/postgresql-doc-15/html"),
    DocPackage("python-pandas-doc", "usr/share/doc/python-pandas-doc/html"),
    DocPackage("python-scipy-doc", "usr/share/doc/python-scipy-doc/html"),
    DocPackage("python-django-doc", "usr/share/doc/python-django-doc/html"),
)


def default_dir() -> Path:
    return cache_dir() / "corpora" / CORPUS


def fetch_hint() -> str:
    return "fetch it with `make corpus` (.venv/bin/python -m training.scale.corpus_fetch; needs apt-get and dpkg-deb)"


def read_manifest(folder: Path) -> dict | None:
    """The corpus folder's manifest, or None when there is none or it does not read."""
    try:
        return json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_current(folder: Path, packages: tuple[DocPackage, ...] = DEBIAN_DOCS) -> bool:
    m = read_manifest(folder)
    return (
        bool(m)
        and m.get("format") == FORMAT
        and [p["name"] for p in m.get("packages", [])] == [p.name for p in packages]
    )


def _run(cmd: list[str], cwd: Path, what: str) -> str:
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as e:
        raise LogicRouteError(f"{what}: {cmd[0]} failed to start ({e})") from None
    if res.returncode != 0:
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith("E:")] or res.stderr.strip().splitlines()
        last = lines[-1] if lines else f"exit status {res.returncode}"
        raise LogicRouteError(f"{what} failed: {last} (run `apt-get update` first?)")
    return res.stdout


def html_pages(root: Path, skip: tuple[str, ...] = ()) -> list[Path]:
    """The HTML pages under root, sorted: regular files only (no links), none in a folder that
    starts with "_" or ".", is in `skip`, nor an index or search page."""
    pages = []
    for dirpath, dirnames, filenames in os.walk(root):  # links to folders are not followed
        rel = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")) and (rel / d).as_posix() not in skip)
        for f in sorted(filenames):
            p = Path(dirpath) / f
            if f.endswith((".html", ".htm")) and not f.startswith(SKIP_PAGES) and not p.is_symlink():
                pages.append(p)
    return sorted(pages)


def page_title(html_title: str, fallback: str) -> str:
    """A page's <title> without its site suffix ("os — ... — Python 3.11.2 documentation")."""
    title = html_title.rsplit(" \u2014 ", 1)[0] if " \u2014 " in html_title else html_title
    return title.strip() or fallback


def convert_package(pkg: DocPackage, unpacked: Path, out: Path) -> dict:
    """Every page of `pkg` (unpacked at `unpacked`) as out/PATH.md; its pages and words."""
    from training.scale.corpus_html import html_to_markdown

    root = unpacked / pkg.html
    if not root.is_dir():
        raise LogicRouteError(f"{pkg.name}: no HTML folder {pkg.html} in the package (another version's layout?)")
    pages = words = 0
    for page in html_pages(root, pkg.skip):
        title, md = html_to_markdown(page.read_text(encoding="utf-8", errors="replace"))
        if not md.strip():
            continue
        rel = page.relative_to(root).with_suffix(".md")
        front = f"---\ntitle: {json.dumps(page_title(title, rel.stem), ensure_ascii=False)}\n---\n\n"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(front + md + "\n", encoding="utf-8")
        pages += 1
        words += len(md.split())
    return {"pages": pages, "words": words}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(
    dest: Path | None = None,
    packages: tuple[DocPackage, ...] = DEBIAN_DOCS,
    force: bool = False,
    echo=print,
) -> dict:
    """Fetch and convert `packages` into `dest` (default_dir()) unless it is current; its manifest."""
    dest = Path(dest or default_dir()).expanduser()
    if not force and is_current(dest, packages):
        echo(f"{dest}: already fetched ({', '.join(p.name for p in packages)}); --force fetches anew")
        return read_manifest(dest) or {}
    if dest.exists() and any(dest.iterdir()) and (read_manifest(dest) or {}).get("corpus") != CORPUS:
        raise LogicRouteError(f"{dest} exists and is not a {CORPUS} corpus folder: choose another --dir")
    missing = [t for t in ("apt-get", "dpkg-deb") if shutil.which(t) is None]
    if missing:
        raise LogicRouteError(f"the {CORPUS} corpus needs {' and '.join(missing)} (Debian or Ubuntu): not found")
    with exclusive_folder(dest.parent, "corpus fetch"):
        for stale in dest.parent.glob(f".{dest.name}.tmp-*"):  # an earlier fetch that was stopped
            shutil.rmtree(stale, ignore_errors=True)
        tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
        try:
            manifest = _fetch_into(tmp, packages, echo)
            old = dest.parent / f".{dest.name}.old-{os.getpid()}"
            if dest.exists():
                dest.rename(old)
            (tmp / "corpus").rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    echo(f"{dest}: {sum(p['pages'] for p in manifest['packages']):,} pages of {len(packages)} packages")
    return manifest


def _fetch_into(tmp: Path, packages: tuple[DocPackage, ...], echo) -> dict:
    debs, corpus = tmp / "debs", tmp / "corpus"
    debs.mkdir(parents=True)
    corpus.mkdir()
    echo(f"downloading {', '.join(p.name for p in packages)} (apt-get download)")
    _run(["apt-get", "download", "-q", *[p.name for p in packages]], debs, "apt-get download")
    manifest = {"corpus": CORPUS, "format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "packages": []}
    for pkg in packages:
        found = sorted(debs.glob(f"{pkg.name}_*.deb"))
        if not found:
            raise LogicRouteError(f"apt-get download left no .deb for {pkg.name}")
        deb = found[-1]
        fields = _run(["dpkg-deb", "-f", str(deb), "Package", "Version"], debs, f"dpkg-deb -f {deb.name}")
        version = dict(ln.split(": ", 1) for ln in fields.splitlines() if ": " in ln).get("Version", "?")
        unpacked = tmp / "x" / pkg.name
        unpacked.mkdir(parents=True)
        _run(["dpkg-deb", "-x", str(deb), str(unpacked)], debs, f"dpkg-deb -x {deb.name}")
        echo(f"{pkg.name} {version}: converting its HTML pages to Markdown")
        got = convert_package(pkg, unpacked, corpus / pkg.name)
        entry = {"name": pkg.name, "version": version, "deb": deb.name, "deb_sha256": _sha256(deb)}
        manifest["packages"].append({**entry, "deb_bytes": deb.stat().st_size, "html": pkg.html, **got})
        echo(f"{pkg.name} {version}: {got['pages']:,} pages, {got['words']:,} words")
        shutil.rmtree(unpacked)
        deb.unlink()
    atomic_write_json(corpus / MANIFEST, manifest)  # not a .md/.txt: the KB's reader passes it by
    return manifest


@click.command()
@click.option(
    "--dir",
    "dest",
    type=click.Path(file_okay=False),
    default=None,
    help="default: $LOGICROUTE_CACHE_DIR/corpora/debian-docs, else ~/.cache/logicroute/corpora/debian-docs",
)
@click.option("--force", is_flag=True, help="fetch anew even when the folder is current")
def main(dest: str | None, force: bool) -> None:
    """Fetch the debian-docs corpus of `logicroute bench scale --corpus debian-docs`."""
    try:
        fetch(Path(dest) if dest else None, force=force, echo=lambda s: click.echo(s, err=True))
    except LogicRouteError as e:
        raise click.ClickException(str(e)) from None


if __name__ == "__main__":
    main()
