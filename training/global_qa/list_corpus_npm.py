"""List questions over npm's docs (/usr/lib/node_modules/npm/docs/content/**/*.md): the items are
npm's commands (commands/npm-ci.md is `ci`, also `npm ci`, `npm-ci`, `npm clean-install`) or its
config options (`--workspaces`, `workspaces`); the gold sets come from the command pages'
`### Configuration` sections (one `#### \\`option\\`` heading per option the command takes), their
`### See Also` links, and the options of using-npm/config.md."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from training.global_qa.list_questions import Corpus, Item

FOLDER = "/usr/lib/node_modules/npm/docs/content"
COMMAND = "command"
OPTION = "option"

_ALIASES = re.compile(r"^alias(?:es)?: (.+)$", re.M)
_OPTION = re.compile(r"^#### `([\w-]+)`", re.M)
_LINK = re.compile(r"^\* \[([^\]]+)\]\(([^)]+)\)", re.M)


@dataclass
class CommandPage:
    name: str  # `ci` for commands/npm-ci.md, `npm` and `npx` for their own pages
    file: str  # relative to the folder
    aliases: tuple[str, ...] = ()
    options: set[str] = field(default_factory=set)
    see_also: set[str] = field(default_factory=set)  # the link texts: "npm install", "package-lock.json"


def section(text: str, title: str) -> str:
    """The body of a `### title` section, up to the next `###` heading (or the end)."""
    m = re.search(rf"^### {re.escape(title)}\s*$(.*?)(?=^### |\Z)", text, re.S | re.M)
    return m.group(1) if m else ""


def command_aliases(name: str, alias_line: str) -> tuple[str, ...]:
    """`ci`, `npm ci`, `npm-ci`, and `npm X` for each alias the synopsis declares (bare aliases such
    as "add" or "list" are common words: only their `npm` form counts)."""
    names = [name] if name in ("npm", "npx") else [name, f"npm {name}", f"npm-{name}"]
    names += [f"npm {a.strip()}" for a in alias_line.split(",") if a.strip()]
    return tuple(dict.fromkeys(names))


def parse_command(path: Path, folder: Path) -> CommandPage:
    text = path.read_text(errors="replace")
    name = path.stem.removeprefix("npm-")
    m = _ALIASES.search(section(text, "Synopsis"))
    page = CommandPage(name, str(path.relative_to(folder)), command_aliases(name, m.group(1) if m else ""))
    page.options = set(_OPTION.findall(section(text, "Configuration")))
    page.see_also = {t.strip().strip("`") for t, _ in _LINK.findall(section(text, "See Also"))}
    return page


def read_commands(folder: str | Path) -> list[CommandPage]:
    root = Path(folder)
    return [parse_command(p, root) for p in sorted((root / "commands").glob("*.md"))]


def config_options(folder: str | Path) -> set[str]:
    """Every option using-npm/config.md documents (its `#### \\`name\\`` headings)."""
    path = Path(folder) / "using-npm" / "config.md"
    return set(_OPTION.findall(path.read_text(errors="replace"))) if path.exists() else set()


def option_item(name: str) -> Item:
    return Item(name, (f"--{name}", name))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "-", text).strip("-")


def read(folder: str = FOLDER) -> Corpus:
    """The corpus: commands and options as items, and the candidate questions of each family."""
    pages = read_commands(folder)
    corpus = Corpus("npm", str(folder))
    corpus.add_vocabulary(COMMAND, (Item(p.name, p.aliases) for p in pages))
    all_options = config_options(folder) | {o for p in pages for o in p.options}
    corpus.add_vocabulary(OPTION, (option_item(o) for o in sorted(all_options)))
    by_option: dict[str, dict[str, set[str]]] = defaultdict(dict)
    by_link: dict[str, dict[str, set[str]]] = defaultdict(dict)
    for p in pages:
        for o in p.options:
            by_option[o][p.name] = {p.file}
        for link in p.see_also:
            if link not in (p.name, f"npm {p.name}"):
                by_link[link][p.name] = {p.file}
    for option, members in sorted(by_option.items()):
        corpus.ask(
            f"npm-option-{_slug(option)}",
            f"Which npm commands take the `--{option}` config option (listed in the Configuration section "
            "of their docs page)?",
            "option_commands",
            COMMAND,
            members,
        )
    for link, members in sorted(by_link.items()):
        corpus.ask(
            f"npm-see-also-{_slug(link)}",
            f"Which npm commands' docs pages list `{link}` under 'See Also'?",
            "see_also",
            COMMAND,
            members,
        )
    for p in pages:
        corpus.ask(
            f"npm-command-options-{_slug(p.name)}",
            f"Which config options does the docs page of `npm {p.name}` list in its Configuration section?",
            "command_options",
            OPTION,
            {o: {p.file} for o in p.options},
        )
    return corpus
