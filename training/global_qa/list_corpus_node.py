"""List questions over Node.js's API docs (/usr/share/doc/nodejs/api/*.md): the items are the
pages (one per module: `fs`, also `node:fs` or "File system"), the gold sets come from the pages'
structure: stability markers (`> Stability: 1 - Experimental`), event headings
(`### Event: 'close'`), method headings (`### subprocess.kill([signal])`), class headings
(`* Extends: {EventEmitter}` under a class), the properties of `options` parameters and the YAML
`added:` versions. Every page is an item; "module" in a question means a page."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from training.global_qa.list_questions import Corpus, Item

FOLDER = "/usr/share/doc/nodejs/api"
KIND = "module"

LEVELS = {
    "0": "0 - Deprecated",
    "1": "1 - Experimental",
    "1.0": "1.0 - Early development",
    "1.1": "1.1 - Active development",
    "1.2": "1.2 - Release candidate",
    "2": "2 - Stable",
    "3": "3 - Legacy",
}
_STABILITY = re.compile(r"^> Stability: (\d(?:\.\d)?)\b", re.M)
_HEADING = re.compile(r"^(#{1,6}) (.+)$", re.M)
_EVENT = re.compile(r"Event: `'([^'`]+)'`")
_METHOD = re.compile(r"`(?:new )?[\w$.\[\]]*?\.?([A-Za-z_$][\w$]*)\(")
_EXTENDS = re.compile(r"^\* Extends: \{([\w.]+)\}", re.M)
_OPTION = re.compile(r"^  \* `(\w+)`")
_YAML = re.compile(r"<!-- YAML\n(.*?)-->", re.S)
_ADDED = re.compile(r"^added:(.*?)(?=^\w|\Z)", re.S | re.M)


@dataclass
class Page:
    """What one page documents, as sets of names."""

    stem: str
    title: str
    top_level: str = ""  # the stability of the module as a whole: the marker before the first `##`
    levels: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)
    methods: set[str] = field(default_factory=set)
    bases: set[str] = field(default_factory=set)
    options: set[str] = field(default_factory=set)
    added_majors: set[int] = field(default_factory=set)


# pages that are no module, named by a word any answer uses ("the following modules: ..."): only
# their title names them
COMMON_WORDS = frozenset(
    {"module", "modules", "packages", "documentation", "globals", "synopsis", "deprecations", "index"}
)


def aliases(stem: str, title: str) -> tuple[str, ...]:
    """`fs`, `node:fs`, "File system": the stem, its `node:` form, the title without its
    "Modules: " prefix and backticks, and the title without a parenthesis ("TLS" for "TLS (SSL)").
    A page in COMMON_WORDS goes by its title only ("CommonJS modules" for modules.md, `node:module`
    for module.md), never by the bare word."""
    clean = title.removeprefix("Modules: ").replace("`", "").strip()
    names = [] if stem in COMMON_WORDS else [stem, f"node:{stem}"]
    names += [n for n in (clean, re.sub(r"\s*\(.*\)$", "", clean)) if n.lower() not in COMMON_WORDS]
    if "_" in stem:
        names.append(stem.replace("_", " "))
    seen: dict[str, str] = {}
    for n in names:
        seen.setdefault(n.lower(), n)
    return tuple(seen.values())


def parse_page(stem: str, text: str) -> Page | None:
    """A page's sets, or None for a page without a `# Title` first line (index.md)."""
    first = text.lstrip().split("\n", 1)[0]
    if not first.startswith("# "):
        return None
    page = Page(stem, first[2:].strip())
    head = text.split("\n## ", 1)[0]
    top = _STABILITY.search(head)
    page.top_level = top.group(1) if top else ""
    page.levels = {m.group(1) for m in _STABILITY.finditer(text)}
    for _, heading in _HEADING.findall(text):
        page.events.update(_EVENT.findall(heading))
        if heading.startswith(("`", "Static method:")) and not heading.startswith("`new "):
            page.methods.update(m for m in _METHOD.findall(heading))
    page.bases = set(_EXTENDS.findall(text))
    page.options = options(text)
    for block in _YAML.findall(text):
        for added in _ADDED.findall(block):
            page.added_majors.update(int(v) for v in re.findall(r"v(\d+)\.\d+\.\d+", added))
    return page


def options(text: str) -> set[str]:
    """The properties documented in `options` objects: the bullets nested under a top-level
    `* `options` {Object}` bullet of a signature's parameter list."""
    found: set[str] = set()
    inside = False
    for line in text.splitlines():
        if line.startswith("* `options`"):
            inside = True
        elif line and not line.startswith(" "):
            inside = False
        elif inside and (m := _OPTION.match(line)):
            found.add(m.group(1))
    return found


def read_pages(folder: str | Path) -> list[Page]:
    pages = (parse_page(p.stem, p.read_text(errors="replace")) for p in sorted(Path(folder).glob("*.md")))
    return [p for p in pages if p is not None]


def _invert(pages: list[Page], attr: str) -> dict[str, dict[str, set[str]]]:
    """value -> {module: {its file}} over one set attribute of the pages."""
    out: dict[str, dict[str, set[str]]] = defaultdict(dict)
    for p in pages:
        for value in getattr(p, attr):
            out[str(value)][p.stem] = {f"{p.stem}.md"}
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "-", text).strip("-")


def read(folder: str = FOLDER) -> Corpus:
    """The corpus: every page a module item, and the candidate questions of each family."""
    pages = read_pages(folder)
    corpus = Corpus("node", str(folder))
    corpus.add_vocabulary(KIND, (Item(p.stem, aliases(p.stem, p.title)) for p in pages))
    for level, label in LEVELS.items():
        top = {p.stem: {f"{p.stem}.md"} for p in pages if p.top_level == level}
        corpus.ask(
            f"node-top-stability-{level}",
            f"Which modules of the Node.js API docs are marked 'Stability: {label}' as a whole, "
            "by the stability marker at the top of their page?",
            "top_stability",
            KIND,
            top,
        )
    corpus.ask(
        "node-top-stability-not-2",
        "Which modules of the Node.js API docs are marked, by the stability marker at the top of their page, "
        "as anything other than 'Stability: 2 - Stable' (experimental, deprecated or legacy)?",
        "top_stability",
        KIND,
        {p.stem: {f"{p.stem}.md"} for p in pages if p.top_level not in ("", "2")},
    )
    for level, members in _invert(pages, "levels").items():
        corpus.ask(
            f"node-any-stability-{level}",
            f"Which modules of the Node.js API docs mark the module or at least one of its APIs "
            f"'Stability: {LEVELS.get(level, level)}'?",
            "any_stability",
            KIND,
            members,
        )
    _ask_structure(corpus, pages)
    return corpus


def _ask_structure(corpus: Corpus, pages: list[Page]) -> None:
    for event, members in _invert(pages, "events").items():
        corpus.ask(
            f"node-event-{_slug(event)}",
            f"Which modules of the Node.js API docs document {'an' if event[0] in 'aeiou' else 'a'} '{event}' event?",
            "event",
            KIND,
            members,
        )
    for method, members in _invert(pages, "methods").items():
        corpus.ask(
            f"node-method-{_slug(method)}",
            f"Which modules of the Node.js API docs document a method named `{method}()` (on any of their classes "
            "or objects)?",
            "method",
            KIND,
            members,
        )
    for base, members in _invert(pages, "bases").items():
        corpus.ask(
            f"node-extends-{_slug(base)}",
            f"Which modules of the Node.js API docs define a class that extends `{base}`?",
            "extends",
            KIND,
            members,
        )
    for name, members in _invert(pages, "options").items():
        corpus.ask(
            f"node-option-{_slug(name)}",
            f"Which modules of the Node.js API docs document a function or method that takes an `options` object "
            f"with the property `{name}`?",
            "option",
            KIND,
            members,
        )
    for major, members in _invert(pages, "added_majors").items():
        corpus.ask(
            f"node-added-v{int(major):02d}",
            f"Which modules of the Node.js API docs document an API that was added in a Node.js v{major}.x release?",
            "added",
            KIND,
            members,
        )
