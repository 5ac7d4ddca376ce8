"""`logicroute bench global-lists`: writes a corpus's list questions (training/global_qa/
list_questions.py), their gold sets computed from a documentation folder on this machine, to a
jsonl file and its vocabulary beside it. Registered on the bench group by training/commands.py;
nothing heavy at module level."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from engine.floor.base.errors import LogicRouteError

CORPORA = ("node", "npm", "valgrind", "borg", "commonsio")
DATA_DIR = "training/data/global_lists"


def generators() -> dict:
    """Corpus name -> (its default folder on this machine, its generator: folder -> Corpus)."""
    from training.global_qa import (
        list_corpus_borg,
        list_corpus_commonsio,
        list_corpus_node,
        list_corpus_npm,
        list_corpus_valgrind,
    )

    return {
        "node": (list_corpus_node.FOLDER, list_corpus_node.read),
        "npm": (list_corpus_npm.FOLDER, list_corpus_npm.read),
        "valgrind": (list_corpus_valgrind.FOLDER, list_corpus_valgrind.read),
        "borg": (list_corpus_borg.FOLDER, list_corpus_borg.read),
        "commonsio": (list_corpus_commonsio.FOLDER, list_corpus_commonsio.read),
    }


@click.command("global-lists")
@click.option("--corpus", type=click.Choice(CORPORA), required=True, help="which generator reads the folder")
@click.option(
    "--folder",
    type=click.Path(file_okay=False),
    default=None,
    help="the documentation folder (default: where Debian installs it: /usr/share/doc/nodejs/api, "
    "/usr/lib/node_modules/npm/docs/content, /usr/share/doc/valgrind/html, /usr/share/doc/borgbackup/html, "
    "/usr/share/doc/libcommons-io-java/api)",
)
@click.option(
    "--write",
    "out",
    type=click.Path(dir_okay=False),
    default=None,
    help=f"the questions file (default {DATA_DIR}/<corpus>.jsonl); the vocabulary goes beside it",
)
@click.option("--seed", type=int, default=57, show_default=True, help="picks each family's questions and the halves")
@click.option("--per-family", type=int, default=14, show_default=True, help="at most this many questions a family")
def bench_global_lists(corpus, folder, out, seed, per_family):
    """List questions about a whole corpus, the gold answer a set of items computed by code from the
    folder's structure (Node's stability markers, events, methods; npm's per-command config options;
    Valgrind's option lists): writes them, half `tune`, half `judge`. No LLM."""
    from training.global_qa.list_questions import select, vocabulary_path, write

    default_folder, read = generators()[corpus]
    folder = folder or default_folder
    if not Path(folder).is_dir():
        raise LogicRouteError(f"no folder {folder}: install the package that ships it, or pass --folder")
    found = read(folder)
    questions = select(found, per_family=per_family, seed=seed)
    path = write(found, questions, out or f"{DATA_DIR}/{corpus}.jsonl")
    halves = Counter(q.half for q in questions)
    families = Counter(q.family for q in questions)
    click.echo(
        f"{corpus}: {len(questions)} questions of {len(found.candidates)} candidates "
        f"(tune {halves['tune']}, judge {halves['judge']}) -> {path} (+ {vocabulary_path(path).name})"
    )
    click.echo("families: " + ", ".join(f"{f} {n}" for f, n in sorted(families.items())))
