"""The folder corpora of `logicroute bench scale` (training.scale.bench_scale_corpus): a folder of files
in several formats, read by the KB's own reader, gives deduplicated real chunks; Debian's HTML
manuals become Markdown (training.scale.corpus_html) in a folder that training.scale.corpus_fetch writes
atomically and only once; a corpus that is not there is one clear error line that says how to
fetch it. No network: a .deb built here stands in for apt-get's."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.face.cli import main
from engine.floor.base.errors import LogicRouteError
from training.scale import corpus_fetch
from training.scale.bench_scale_corpus import corpus_lines, folder_corpus, load_corpus, plan_sizes
from training.scale.corpus_fetch import DocPackage, convert_package, fetch, html_pages
from training.scale.corpus_html import html_to_markdown

PAGE = """<!DOCTYPE html><html><head><title>Write-ahead log &#8212; Demo 1.0 documentation</title>
<script>var x = "<p>not text</p>";</script><style>p {color: red}</style></head>
<body><nav role="navigation"><a href="index.html">Home</a> | <a href="next.html">next</a></nav>
<div class="document"><div role="main" class="body">
<section><h1>Write-ahead log<a class="headerlink" href="#wal">&#182;</a></h1>
<p>The <em>write-ahead log</em> records every change before the data files, so a crash
   loses nothing that was <code>COMMIT</code>ted.</p>
<ul><li><p>Segments are 16 MB.</p></li><li>Old segments are recycled.</li></ul>
<pre>wal_level = replica
checkpoint_timeout = 5min</pre>
<table><tr><th>setting</th><th>default</th></tr><tr><td>wal_buffers</td><td><p>-1</p></td></tr></table>
<h2>Archiving</h2><p># is not a heading here, and <acronym>WAL</acronym> files are archived by a command.</p>
</section></div></div><div class="footer">&#169; Demo authors</div></body></html>"""


def test_a_pages_main_content_becomes_markdown_its_navigation_and_scripts_do_not():
    title, md = html_to_markdown(PAGE)
    assert title == "Write-ahead log \u2014 Demo 1.0 documentation"
    assert md.startswith("# Write-ahead log\n\nThe write-ahead log records every change before the data files,")
    assert "a crash loses nothing that was `COMMIT`ted." in md  # whitespace collapsed, inline code kept
    assert "- Segments are 16 MB.\n\n- Old segments are recycled." in md  # <li><p> on the marker's line
    assert "```\nwal_level = replica\ncheckpoint_timeout = 5min\n```" in md  # <pre> verbatim, fenced
    assert "\n\n| setting | default\n| wal_buffers | -1\n\n" in md
    assert "## Archiving\n\n\\# is not a heading here, and WAL files are archived by a command." in md
    for gone in ("not text", "color", "Home", "next", "\u00b6", "Demo authors"):
        assert gone not in md
    # no main element: the whole page
    assert html_to_markdown("<html><body><h2>Only</h2><p>text here</p></body></html>")[1] == "## Only\n\ntext here"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


SHARED_TEXT = "Checkpoints flush every dirty page to disk, and the log before them can be recycled."


@pytest.fixture
def folder(tmp_path) -> Path:
    """A corpus folder of two parts: Markdown (front matter, headings), a .markdown page, plain
    text; one document repeated word for word in the other part; a hidden file; the manifest."""
    root = tmp_path / "docs"
    long = " ".join(f"Sentence {i} of the long guide says what step {i} of the upgrade does." for i in range(60))
    _write(root / "pg" / "wal.md", f"---\ntitle: WAL\n---\n\n# WAL\n\n## Checkpoints\n\n{SHARED_TEXT}\n")
    _write(root / "pg" / "guide" / "upgrade.markdown", f"# Upgrading\n\n{long}\n")
    _write(root / "pg" / "notes.txt", "Vacuum reclaims the space of dead rows.\n\nIt runs by itself.\n")
    _write(root / "kernel" / "copy.md", f"---\ntitle: WAL\n---\n\n# WAL\n\n## Checkpoints\n\n{SHARED_TEXT}\n")
    _write(root / "kernel" / "rcu.txt", "# RCU\n\nRead-copy update lets readers run without locks.\n")
    _write(root / "kernel" / ".hidden.md", "# Hidden\n\nan editor's file, never read\n")
    manifest = {"corpus": "debian-docs", "format": 1, "packages": [{"name": "pg", "version": "15.1-1", "deb": "x"}]}
    _write(root / "manifest.json", json.dumps(manifest))
    return root


def test_a_folder_corpus_is_the_deduplicated_real_chunks_of_every_format(folder):
    corpus = folder_corpus(folder)
    ids = sorted(d.id for d in corpus.docs)
    assert ids == ["kernel/copy.md", "kernel/rcu.txt", "pg/guide/upgrade.markdown", "pg/notes.txt", "pg/wal.md"]
    sources = " ".join(" ".join(p.read_text().split()) for p in folder.rglob("*.*") if p.suffix != ".json")
    for text in corpus.texts:  # every chunk is text of the files (its title or heading path in front)
        assert " ".join(text.splitlines()[-1].split()) in sources
    assert len(set(corpus.texts)) == corpus.chunks == sum(corpus.adds)
    assert sum(SHARED_TEXT in t for t in corpus.texts) == 1  # the repeated document adds no chunk
    assert sum(1 for t in corpus.texts if "of the upgrade does" in t) >= 3  # a long page is cut
    assert set(corpus.parts) == {"pg", "kernel"}
    assert sum(p["chunks"] for p in corpus.parts.values()) == corpus.chunks
    assert sum(p["documents"] for p in corpus.parts.values()) == len(corpus.docs) == 5
    assert corpus.packages == [{"name": "pg", "version": "15.1-1", "deb": "x", "deb_sha256": None}]
    assert "pg 15.1-1" in corpus.about and str(folder) in corpus.about
    assert [d.id for d in folder_corpus(folder).docs] == [d.id for d in corpus.docs]  # the same order every run
    lines = corpus_lines(corpus)
    assert f"{corpus.chunks:,} distinct chunks" in lines[0] and any(
        ln.startswith("  pg 15.1-1: 3 documents") for ln in lines
    )
    plan, notes = plan_sizes((2, 10_000), corpus)
    assert plan[-1][1] == corpus.max_kb and "make corpus" not in notes[0]  # the hint is for the shared sets


def test_a_folder_corpus_is_asked_the_leading_words_of_chunks_no_kb_holds(folder):
    from tests.fakes import HashedBowEmbedder
    from training.scale.bench_scale import QUERY_WORDS, query_set

    corpus = folder_corpus(folder)
    largest = 2  # the KB of the largest size: the first documents reaching 2 chunks, and their 1% add
    in_kbs = corpus.texts[: corpus.chunks_for(largest)]
    q = query_set(50, HashedBowEmbedder(), corpus, largest)
    assert 0 < len(q.texts) == len(corpus.texts) - len(in_kbs) and q.vectors.shape == (len(q.texts), 64)
    held = [" ".join(t.split()[:QUERY_WORDS]) for t in corpus.texts[len(in_kbs) :]]
    assert sorted(q.texts) == sorted(held)  # every held-out chunk once, cut to its first words
    assert not set(q.texts) & {" ".join(t.split()[:QUERY_WORDS]) for t in in_kbs}  # no KB chunk is asked
    assert query_set(50, HashedBowEmbedder(), corpus, largest).texts == q.texts  # the same draw every run


def test_count_only_prints_the_corpus_and_embeds_nothing(folder, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["bench", "scale", "--corpus", str(folder), "--count-only", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "distinct chunks" in res.stdout.splitlines()[0] and "  kernel: 2 documents" in res.stdout
    assert not out.exists()


def test_a_missing_corpus_is_one_error_line_that_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LOGICROUTE_CACHE_DIR", str(tmp_path / "cache"))
    for corpus, says in [
        (
            "debian-docs",
            f"no corpus folder at {tmp_path / 'cache' / 'corpora' / 'debian-docs'}: fetch it with `make corpus`",
        ),
        (str(tmp_path / "nowhere"), "no such folder (shared, debian-docs or a folder of .md/.txt files"),
    ]:
        res = CliRunner().invoke(main, ["bench", "scale", "--corpus", corpus, "--out", str(tmp_path / "out")])
        assert res.exit_code == 2
        assert res.output.strip().splitlines() == [res.output.strip()] and says in res.output
        assert "make corpus" in res.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(LogicRouteError, match="make corpus"):
        load_corpus("debian-docs")


# ---------------------------------------------------------------- fetching


def _package(tmp_path: Path) -> Path:
    """A documentation package's tree: pages, a page in a translation, static files, an index,
    a link; as dpkg-deb -x leaves it."""
    root = tmp_path / "unpacked"
    html = root / "usr/share/doc/demo/html"
    _write(html / "wal.html", PAGE)
    _write(html / "admin" / "vacuum.html", "<html><body><div role='main'><h1>Vacuum</h1><p>Reclaims rows.</p></div>")
    _write(html / "translations" / "it" / "wal.html", "<div role='main'><p>Il registro</p></div>")
    _write(html / "_static" / "x.html", "<p>theme</p>")
    _write(html / "genindex.html", "<div role='main'><p>A | B</p></div>")
    _write(html / "empty.html", "<div role='main'><script>1</script></div>")
    moved = '<html><head><meta http-equiv="refresh" content="0;URL=wal.html"/></head><body><p>Moved</p></body>'
    _write(html / "moved.html", moved)
    (html / "alias.html").symlink_to(html / "wal.html")
    return root


PKG = DocPackage("demo-doc", "usr/share/doc/demo/html", ("translations",))


def test_pages_are_the_packages_own_html_and_become_titled_markdown(tmp_path):
    root = _package(tmp_path)
    pages = html_pages(root / PKG.html, PKG.skip)
    assert [p.relative_to(root / PKG.html).as_posix() for p in pages] == [
        "admin/vacuum.html",
        "empty.html",
        "moved.html",
        "wal.html",
    ]
    got = convert_package(PKG, root, tmp_path / "out")
    assert got["pages"] == 2 and got["words"] > 30  # the empty page and the redirect write nothing
    wal = (tmp_path / "out" / "wal.md").read_text()
    assert wal.startswith('---\ntitle: "Write-ahead log"\n---\n\n# Write-ahead log\n')  # the site suffix is cut
    assert (tmp_path / "out" / "admin" / "vacuum.md").exists()


@pytest.fixture
def fake_apt(tmp_path, monkeypatch):
    """apt-get download answered by a .deb built here (dpkg-deb --build); dpkg-deb itself is real."""
    if shutil.which("dpkg-deb") is None:
        pytest.skip("needs dpkg-deb (Debian or Ubuntu)")
    root = _package(tmp_path)
    (root / "usr/share/doc/demo/html/alias.html").unlink()
    (root / "DEBIAN").mkdir()
    control = "Package: demo-doc\nVersion: 1.0-1\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: d\n"
    (root / "DEBIAN" / "control").write_text(control)
    deb = tmp_path / "demo-doc_1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(root), str(deb)], check=True, capture_output=True)
    real_run, calls = corpus_fetch._run, []

    def run(cmd, cwd, what):
        calls.append(cmd[:2])
        if cmd[:2] == ["apt-get", "download"]:
            shutil.copy(deb, cwd)
            return ""
        return real_run(cmd, cwd, what)

    monkeypatch.setattr(corpus_fetch, "_run", run)
    monkeypatch.setattr(corpus_fetch.shutil, "which", lambda name: f"/usr/bin/{name}")
    return calls


def test_fetch_writes_the_corpus_atomically_once_and_the_bench_reads_it(tmp_path, fake_apt):
    dest = tmp_path / "corpora" / "debian-docs"
    manifest = fetch(dest, (PKG,), echo=lambda s: None)
    assert manifest["packages"][0] | {"deb_sha256": "-"} == {
        "name": "demo-doc",
        "version": "1.0-1",
        "deb": "demo-doc_1.0-1_all.deb",
        "deb_sha256": "-",
        "deb_bytes": (tmp_path / "demo-doc_1.0-1_all.deb").stat().st_size,
        "html": PKG.html,
        "pages": 2,
        "words": manifest["packages"][0]["words"],
    }
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "demo-doc/admin/vacuum.md",
        "demo-doc/wal.md",
        "manifest.json",
    ]
    assert sorted(p.name for p in dest.parent.iterdir()) == [".lock", "debian-docs"]  # no temporary folder left
    corpus = folder_corpus(dest, name="debian-docs")
    assert corpus.parts["demo-doc"]["documents"] == 2 and "debian-docs (demo-doc 1.0-1;" in corpus.about
    n = len(fake_apt)
    fetch(dest, (PKG,), echo=lambda s: None)  # current: nothing is downloaded again
    assert len(fake_apt) == n


def test_a_fetch_that_fails_leaves_the_folder_as_it_was(tmp_path, fake_apt, monkeypatch):
    dest = tmp_path / "corpora" / "debian-docs"
    fetch(dest, (PKG,), echo=lambda s: None)
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}

    def broken(*args):
        raise LogicRouteError("disk full")

    monkeypatch.setattr(corpus_fetch, "convert_package", broken)
    with pytest.raises(LogicRouteError, match="disk full"):
        fetch(dest, (PKG,), force=True, echo=lambda s: None)
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in dest.parent.iterdir()) == [".lock", "debian-docs"]


def test_fetch_refuses_a_folder_it_did_not_write_and_a_machine_without_apt(tmp_path, monkeypatch):
    mine = tmp_path / "notes"
    _write(mine / "a.md", "# Mine\n\nkeep me")
    with pytest.raises(LogicRouteError, match="is not a debian-docs corpus folder"):
        fetch(mine, (PKG,), force=True, echo=lambda s: None)
    assert (mine / "a.md").exists()
    monkeypatch.setattr(corpus_fetch.shutil, "which", lambda name: None)
    with pytest.raises(LogicRouteError, match="needs apt-get and dpkg-deb"):
        fetch(tmp_path / "new", (PKG,), echo=lambda s: None)
