"""List questions over Valgrind's HTML manual (/usr/share/doc/valgrind/html): the items are
command-line options (`--leak-check`, `-q`/`--quiet`) or tools (Memcheck, also `memcheck` and
`--tool=memcheck`); the gold sets come from the manual's option lists (a `<dt>` term of
`<code class="option">` per option, under a numbered section heading, with its value form
`=<yes|no>` and `[default: ...]`) and from which tool manuals mention a core option."""

from __future__ import annotations

import html
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from training.global_qa.list_questions import Corpus, Item

FOLDER = "/usr/share/doc/valgrind/html"
OPTION = "option"
TOOL = "tool"
CORE = "manual-core.html"

# file -> (tool name, the spellings an answer may use besides the name)
TOOLS = {
    "mc-manual.html": ("Memcheck", ("--tool=memcheck",)),
    "cg-manual.html": ("Cachegrind", ("--tool=cachegrind",)),
    "cl-manual.html": ("Callgrind", ("--tool=callgrind",)),
    "hg-manual.html": ("Helgrind", ("--tool=helgrind",)),
    "drd-manual.html": ("DRD", ("--tool=drd",)),
    "ms-manual.html": ("Massif", ("--tool=massif",)),
    "dh-manual.html": ("DHAT", ("--tool=dhat",)),
    "lk-manual.html": ("Lackey", ("--tool=lackey",)),
    "nl-manual.html": ("Nulgrind", ("--tool=none",)),
    "bbv-manual.html": ("BBV", ("exp-bbv", "--tool=exp-bbv")),
}

_HEADING = re.compile(r"<h[1-4][^>]*>\s*(?:<a [^>]*></a>)?\s*([^<]+)</h[1-4]>", re.S)
_TERM = re.compile(r'<dt>\s*(?:<a name="[^"]*"></a>)?<span class="term">(.*?)</span>\s*</dt>', re.S)
_CODE = re.compile(r'<code class="option">(.*?)</code>', re.S)
_FLAG = re.compile(r"^(--?[A-Za-z0-9][\w-]*)")
_DEFAULT = re.compile(r"\[default:\s*([^\]]*)\]")
_MENTION = re.compile(r"(?<![\w-])(--[A-Za-z0-9][\w-]*)")
_NUMBER = {"number", "n", "count", "integer", "hexnumber", "4..1000", "0--100"}


@dataclass(frozen=True)
class Option:
    name: str  # the long form when there is one
    short: tuple[str, ...]  # the other forms (`-q`)
    value: str  # what follows `=`: "<yes|no>", "<number>", "" for a flag
    default: str
    file: str
    section: str  # the section heading's title, without its number


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def parse_term(term: str, file: str, section: str) -> Option | None:
    """One `<dt>` term: its flags (`-q`, `--quiet`), value form and default; None for a term
    that is not an option (a command name)."""
    codes = [_text(c) for c in _CODE.findall(term)]
    flags = [m.group(1) for c in codes for w in c.split() if (m := _FLAG.match(w))]
    if not flags:
        return None
    first = codes[0]
    longs = [f for f in flags if f.startswith("--")]
    name = longs[0] if longs else flags[0]
    value = first.split("=", 1)[1].split(" [", 1)[0].strip() if "=" in first.split()[0] else ""
    default = m.group(1).strip() if (m := _DEFAULT.search(" ".join(codes))) else ""
    others = tuple(dict.fromkeys(f for f in flags if f != name))
    return Option(name, others, value, default, file, section)


def parse_file(path: Path) -> list[Option]:
    """The options of one manual page, each under the heading it follows."""
    text = path.read_text(errors="replace")
    headings = [(m.start(), re.sub(r"^[\d.]+\s*", "", _text(m.group(1)))) for m in _HEADING.finditer(text)]
    out = []
    for m in _TERM.finditer(text):
        section = next((t for pos, t in reversed(headings) if pos < m.start()), "")
        opt = parse_term(m.group(1), path.name, " ".join(section.split()))
        if opt is not None:
            out.append(opt)
    return out


def read_options(folder: str | Path) -> list[Option]:
    return [o for p in sorted(Path(folder).glob("*.html")) for o in parse_file(p)]


def option_item(opt_name: str, short: tuple[str, ...]) -> Item:
    """`--leak-check`, also `leak-check` (a bare word only when it has a hyphen: "help" is not
    an option), and its short forms."""
    bare = opt_name.lstrip("-")
    return Item(opt_name, (opt_name, *((bare,) if "-" in bare else ()), *short))


def mentions(folder: str | Path) -> dict[str, set[str]]:
    """Tool manual file -> the long options its text names anywhere (tags removed)."""
    paths = {f: Path(folder) / f for f in TOOLS}
    return {f: set(_MENTION.findall(_text(p.read_text(errors="replace")))) for f, p in paths.items() if p.exists()}


def read(folder: str = FOLDER) -> Corpus:
    options = read_options(folder)
    corpus = Corpus("valgrind", str(folder))
    corpus.add_vocabulary(OPTION, (option_item(o.name, o.short) for o in options))
    corpus.add_vocabulary(TOOL, (Item(n, (n, n.lower(), *more)) for n, more in TOOLS.values()))
    _ask_sections(corpus, options)
    _ask_values(corpus, options)
    core = {o.name for o in options if o.file == CORE}
    by_option: dict[str, dict[str, set[str]]] = defaultdict(dict)
    for file, seen in mentions(folder).items():
        for name in seen & core:
            by_option[name][TOOLS[file][0]] = {file}
    for name, members in sorted(by_option.items()):
        corpus.ask(
            f"valgrind-tools-mention-{name.lstrip('-')}",
            f"Which Valgrind tools' manual chapters mention the core option `{name}`?",
            "tools_mentioning",
            TOOL,
            members,
        )
    return corpus


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _ask_sections(corpus: Corpus, options: list[Option]) -> None:
    by_section: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(dict)
    for o in options:
        by_section[(o.file, o.section)][o.name] = {o.file}
    for (file, section), members in sorted(by_section.items()):
        corpus.ask(
            f"valgrind-section-{file.removesuffix('.html')}-{_slug(section)}",
            f"Which command-line options does the Valgrind manual list in its section '{section}'?",
            "section_options",
            OPTION,
            members,
        )


def _owner(file: str) -> str:
    return TOOLS[file][0] if file in TOOLS else "core options" if file == CORE else ""


def _choices(value: str) -> set[str]:
    return {v.strip().lower() for v in value.strip("<>").split("|")} if "|" in value else set()


def _ask_values(corpus: Corpus, options: list[Option]) -> None:
    """Per chapter (a tool's, or the core's): its options by the form of their value (yes/no, a
    number, a choice of keywords) and by their default (no, yes)."""
    kinds = {
        "yes_no": ("take a yes/no value", lambda o: _choices(o.value) == {"yes", "no"}),
        "number": ("take a number as their value", lambda o: o.value.strip("<>").lower() in _NUMBER),
        "keywords": (
            "take one of several keywords (other than just yes/no) as their value",
            lambda o: len(_choices(o.value)) >= 2 and _choices(o.value) != {"yes", "no"},
        ),
        "default_no": ("are off by default ([default: no])", lambda o: o.default == "no"),
        "default_yes": ("are on by default ([default: yes])", lambda o: o.default == "yes"),
    }
    for family, (words, keep) in kinds.items():
        by_owner: dict[str, dict[str, set[str]]] = defaultdict(dict)
        for o in options:
            if _owner(o.file) and keep(o):
                by_owner[_owner(o.file)][o.name] = {o.file}
        for owner, members in sorted(by_owner.items()):
            corpus.ask(
                f"valgrind-{family.replace('_', '-')}-{_slug(owner)}",
                f"Which command-line options documented in the {owner} chapter of the Valgrind manual {words}?",
                family,
                OPTION,
                members,
            )
