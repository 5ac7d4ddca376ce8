"""List questions over BorgBackup's Sphinx manual (Debian's borgbackup-doc:
/usr/share/doc/borgbackup/html), a site no rule of the global mode was tuned on (issue 66, item
3). The items are borg's commands (`borg create`, `borg key export`) or their options
(`--dry-run`); the gold sets come from each command's options table (Sphinx renders one
`<table class="borg-options-table">` under the command's heading, a bold row per option group:
"options", "Archive filters", "Exclusion options"...)."""

from __future__ import annotations

import html
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from training.global_qa.list_questions import Corpus, Item

FOLDER = "/usr/share/doc/borgbackup/html"
COMMAND = "command"
OPTION = "option"

# A command's heading, then (after its synopsis) its options table.
_SECTION = re.compile(r"<h[1-3]>(borg [a-z][\w -]*?)<a class=\"headerlink\"", re.S)
_TABLE = re.compile(r'<table class="borg-options-table[^"]*">(.*?)</table>', re.S)
_ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S)
_GROUP = re.compile(r'<td colspan="3"><p><strong>(.*?)</strong>', re.S)
_CELL = re.compile(r"<td><p>(.*?)</p></td>", re.S)
_FLAG = re.compile(r"(?<![\w-])(--[a-z0-9][\w-]*)")


@dataclass
class Command:
    name: str  # "create", "key export"
    file: str
    groups: dict[str, set[str]] = field(default_factory=dict)  # group title -> its long options

    def options(self) -> set[str]:
        return {o for opts in self.groups.values() for o in opts}


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def parse_table(table: str) -> dict[str, set[str]]:
    """Option group -> the long options of its rows (the first cell that holds a flag)."""
    groups: dict[str, set[str]] = {}
    current = ""
    for row in _ROW.findall(table):
        g = _GROUP.search(row)
        if g:
            current = _text(g.group(1)).strip()
            groups.setdefault(current, set())
            continue
        cells = _CELL.findall(row)
        if cells and current:
            groups[current] |= set(_FLAG.findall(_text(cells[0])))
    return {g: o for g, o in groups.items() if o}


def read_commands(folder: str | Path) -> list[Command]:
    """Every `borg X` heading of usage/*.html followed by an options table before the next heading."""
    root = Path(folder)
    out: list[Command] = []
    for path in sorted((root / "usage").glob("*.html")):
        text = path.read_text(errors="replace")
        heads = list(_SECTION.finditer(text))
        for i, m in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            t = _TABLE.search(text, m.end(), end)
            if t:
                name = " ".join(_text(m.group(1)).split()).removeprefix("borg ")
                out.append(Command(name, str(path.relative_to(root)), parse_table(t.group(1))))
    return out


def command_item(name: str) -> Item:
    """`create`, `borg create`, `borg-create` (the man page's name); a one-word name is also a
    common word, but npm's commands are scored the same way (list_corpus_npm)."""
    return Item(name, tuple(dict.fromkeys([name, f"borg {name}", "borg-" + name.replace(" ", "-")])))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "-", text).strip("-").lower()


def read(folder: str = FOLDER) -> Corpus:
    """The corpus: commands and options as items, and the candidate questions of each family."""
    commands = read_commands(folder)
    corpus = Corpus("borg", str(folder))
    corpus.add_vocabulary(COMMAND, (command_item(c.name) for c in commands))
    corpus.add_vocabulary(OPTION, (Item(o, (o,)) for o in sorted({o for c in commands for o in c.options()})))
    by_option: dict[str, dict[str, set[str]]] = defaultdict(dict)
    by_group: dict[str, dict[str, set[str]]] = defaultdict(dict)
    for c in commands:
        for o in c.options():
            by_option[o][c.name] = {c.file}
        for g in c.groups:
            if g.lower() != "options":
                by_group[g][c.name] = {c.file}
    for option, members in sorted(by_option.items()):
        corpus.ask(
            f"borg-option-{_slug(option)}",
            f"Which borg commands accept the `{option}` option?",
            "option_commands",
            COMMAND,
            members,
        )
    for group, members in sorted(by_group.items()):
        corpus.ask(
            f"borg-group-{_slug(group)}",
            f"Which borg commands have the '{group}' group of options in their usage?",
            "group_commands",
            COMMAND,
            members,
        )
    for c in commands:
        own = c.groups.get("options", set())
        corpus.ask(
            f"borg-command-options-{_slug(c.name)}",
            f"Which options does `borg {c.name}` list under 'options' in its usage?",
            "command_options",
            OPTION,
            {o: {c.file} for o in own},
        )
    return corpus
