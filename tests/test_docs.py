"""The documents point at what is there: every relative link of a Markdown file resolves, every
`docs/results/...` path a document names exists (globs and {a,b} alternatives expanded), and every
module, object and source path docs/design.md names is in the code, so moving a result file or
renaming what the design describes without its mentions fails here."""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")
RESULT_PATH = re.compile(r"docs/results/[\w./*{},$-]*")
# where a command writes by default: named in the docs, filled by whoever runs it
OUTPUT_DEFAULTS = {"docs/results/scale/bench_scale"}


def tracked(pattern: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", pattern],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / f for f in listed if (ROOT / f).is_file() and not f.startswith(".venv/")]


def anchors(md: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as '-'."""
    headings = re.findall(r"^#+ (.+)$", md.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def broken_links(md: Path) -> list[str]:
    broken = []
    for target in LINK.findall(md.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        page = md.parent / path if path else md
        if not page.exists() or (anchor and page.suffix == ".md" and anchor not in anchors(page)):
            broken.append(target)
    return broken


def expansions(mention: str) -> list[str]:
    """The glob patterns a mention stands for: {a,b} alternatives apart, $VAR and * as globs."""
    mention = re.sub(r"\*+", "*", re.sub(r"\$(\d+|[A-Za-z]+)", "*", mention.rstrip(".,:;")))
    alt = re.search(r"\{([^{}]*)\}", mention)
    if not alt:
        return [mention]
    return [e for choice in alt.group(1).split(",") for e in expansions(mention.replace(alt.group(0), choice, 1))]


def missing_results(md: Path, files_only: bool = False) -> list[str]:
    """The docs/results paths `md` names that are not there; files_only: only those naming a
    file (code cites reports by file, and names output folders a run fills)."""
    missing = []
    for mention in RESULT_PATH.findall(md.read_text()):
        patterns = expansions(mention)
        if mention.rstrip("/.,") in OUTPUT_DEFAULTS or (files_only and not re.search(r"\.\w+$", mention.rstrip(".,"))):
            continue
        if not all(any(ROOT.glob(p.rstrip("/"))) for p in patterns):
            missing.append(mention)
    return missing


def test_every_relative_link_in_the_documents_resolves():
    broken = {str(md.relative_to(ROOT)): b for md in tracked("*.md") if (b := broken_links(md))}
    assert broken == {}


def test_every_result_file_a_document_names_exists():
    missing = {str(md.relative_to(ROOT)): m for md in tracked("*.md") if (m := missing_results(md))}
    assert missing == {}


def test_every_result_file_the_code_cites_exists():
    code = [py for py in tracked("*.py") if py != Path(__file__).resolve()]  # this file's examples are made up
    missing = {str(py.relative_to(ROOT)): m for py in code if (m := missing_results(py, files_only=True))}
    assert missing == {}


def unknown_names(md: Path) -> list[str]:
    """Backquoted dotted names under our packages (`engine.core.routes.ROUTES`) that do not import,
    and backquoted source paths (`engine/core/routes/`) that are not there."""
    unknown = []
    for name in re.findall(r"`((?:engine|hierarchy|router|training)(?:\.\w+)+)`", md.read_text()):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr, None)
            if obj is None:
                unknown.append(name)
            break
    for path in re.findall(r"`((?:engine|hierarchy|router|training|checkpoints|tests)/[\w/.-]*)`", md.read_text()):
        if not (ROOT / path).exists():
            unknown.append(path)
    return unknown


def test_the_design_document_names_only_what_the_code_has():
    assert unknown_names(ROOT / "docs/design.md") == []


def test_the_checks_catch_a_moved_file(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top: the `page`\n[here](gone.md) [web](https://example.org) [top](#top-the-page) [no](#nowhere)")
    assert broken_links(page) == ["gone.md", "#nowhere"]
    page.write_text("`docs/results/nowhere/x.md`")
    assert missing_results(page) == ["docs/results/nowhere/x.md"]
    page.write_text("DEFAULT_OUT = 'docs/results/new_folder' # see docs/results/gone.md.")
    assert missing_results(page, files_only=True) == ["docs/results/gone.md."]
    assert expansions("docs/results/a_{x,y}_$N.json") == ["docs/results/a_x_*.json", "docs/results/a_y_*.json"]
    page.write_text(
        "`engine.core.routes.ROUTES` `engine.core.routes.NO_SUCH` `hierarchy.no_module` `engine/core/routes/` `engine/gone.py`"
    )
    assert unknown_names(page) == ["engine.core.routes.NO_SUCH", "hierarchy.no_module", "engine/gone.py"]
