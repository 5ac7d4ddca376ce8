"""List questions over Apache Commons IO's Javadoc (Debian's libcommons-io-java-doc:
/usr/share/doc/libcommons-io-java/api), a site no rule of the global mode was tuned on (issue 66,
item 3). The items are the library's classes and interfaces (`TeeInputStream`, also written
`org.apache.commons.io.input.TeeInputStream`); the gold sets come from each type's own page: the
signature under its title (`extends X`, `implements Y, Z`) and its Method Summary table (the
methods the type declares itself, not those it inherits)."""

from __future__ import annotations

import html
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from training.global_qa.list_questions import Corpus, Item

FOLDER = "/usr/share/doc/libcommons-io-java/api"
TYPE = "class"
PACKAGE_ROOT = "org/apache/commons/io"

_TITLE = re.compile(r'<h[12] title="(Class|Interface|Enum) ([^"]+)" class="title">')
_SIGNATURE = re.compile(r'<pre>public [^<]*<span class="typeNameLabel">.*?</pre>', re.S)
_EXTENDS = re.compile(r"\bextends\s+(.*?)(?=\bimplements\b|$)", re.S)
_IMPLEMENTS = re.compile(r"\bimplements\s+(.*)$", re.S)
_METHODS = re.compile(r"<h3>Method Summary</h3>(.*?)</table>", re.S)
_MEMBER = re.compile(r'<span class="memberNameLink"><a href="[^"]*">([\w$]+)</a></span>')


@dataclass
class JavaType:
    name: str  # the simple name, nested types dotted: "DirectoryWalker.CancelException"
    package: str
    kind: str  # Class, Interface, Enum
    file: str
    supertypes: set[str] = field(default_factory=set)  # simple names, generics dropped
    interfaces: set[str] = field(default_factory=set)
    methods: set[str] = field(default_factory=set)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).replace("\u200b", "")


def _names(text: str) -> set[str]:
    """`ProxyInputStream`, `java.io.Serializable`, `Comparator<File>` -> simple names."""
    text = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", text))  # generics, nested once
    return {n.strip().split(".")[-1] for n in text.split(",") if n.strip()}


def parse_type(path: Path, root: Path) -> JavaType | None:
    text = path.read_text(errors="replace")
    title = _TITLE.search(text)
    if not title:
        return None
    rel = path.relative_to(root)
    name = title.group(2).split("<")[0]
    t = JavaType(name, ".".join(rel.parent.parts), title.group(1), str(rel))
    sig = _SIGNATURE.search(text, title.end())
    if sig:
        s = " ".join(_text(sig.group(0)).split())
        m = _EXTENDS.search(s)
        if m:
            (t.interfaces if t.kind == "Interface" else t.supertypes).update(_names(m.group(1)))
        m = _IMPLEMENTS.search(s)
        if m:
            t.interfaces |= _names(m.group(1))
    m = _METHODS.search(text)
    if m:
        t.methods = set(_MEMBER.findall(m.group(1)))
    return t


def read_types(folder: str | Path) -> list[JavaType]:
    root = Path(folder)
    out = []
    for path in sorted((root / PACKAGE_ROOT).rglob("*.html")):
        if "class-use" in path.parts or path.name.startswith("package-"):
            continue
        t = parse_type(path, root)
        if t:
            out.append(t)
    return out


def type_item(t: JavaType) -> Item:
    return Item(t.name, tuple(dict.fromkeys([t.name, f"{t.package}.{t.name}"])))


def read(folder: str = FOLDER) -> Corpus:
    """The corpus: every class, interface and enum as an item, and the candidate questions."""
    types = read_types(folder)
    corpus = Corpus("commonsio", str(folder))
    corpus.add_vocabulary(TYPE, (type_item(t) for t in types))
    known = {t.name for t in types}
    by_super: dict[str, dict[str, set[str]]] = defaultdict(dict)
    by_interface: dict[str, dict[str, set[str]]] = defaultdict(dict)
    by_method: dict[str, dict[str, set[str]]] = defaultdict(dict)
    for t in types:
        for s in t.supertypes:
            by_super[s][t.name] = {t.file}
        for i in t.interfaces:
            by_interface[i][t.name] = {t.file}
        for m in t.methods:
            by_method[m][t.name] = {t.file}
    for s, members in sorted(by_super.items()):
        if s in known:  # a class of the library, not java.io.InputStream
            corpus.ask(
                f"commonsio-extends-{s}",
                f"Which Commons IO classes directly extend `{s}`?",
                "extends",
                TYPE,
                members,
            )
    for i, members in sorted(by_interface.items()):
        corpus.ask(
            f"commonsio-implements-{i}",
            f"Which Commons IO classes or interfaces declare that they implement (or extend) the interface `{i}`?",
            "implements",
            TYPE,
            members,
        )
    for m, members in sorted(by_method.items()):
        corpus.ask(
            f"commonsio-method-{m}",
            f"Which Commons IO classes list a method named `{m}` in their own Method Summary?",
            "method_types",
            TYPE,
            members,
        )
    return corpus
