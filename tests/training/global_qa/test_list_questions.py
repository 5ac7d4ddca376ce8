"""List questions about a whole corpus (training.global_qa.list_questions and its generators): the
gold set of each question is computed from the folder's structure, and an answer is scored by the
items it names (training.global_qa.list_score). Fixture folders are written by the tests."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from training.global_qa import list_corpus_node, list_corpus_npm, list_corpus_valgrind
from training.global_qa.list_questions import Item, ListQuestion, load, select, split_halves
from training.global_qa.list_score import named, score

NODE_PAGES = {
    "fs.md": """# File system

> Stability: 2 - Stable

## Class: `fs.ReadStream`

* Extends: {stream.Readable}

### Event: `'close'`

<!-- YAML
added: v0.1.93
-->

### `readStream.close([callback])`

## `fs.watch(filename[, options])`

* `filename` {string}
* `options` {Object}
  * `signal` {AbortSignal}
  * `recursive` {boolean}

> Stability: 1 - Experimental
""",
    "net.md": """# Net

> Stability: 2 - Stable

## Class: `net.Socket`

### Event: `'close'`

### `socket.close()`

### `socket.ref()`

<!-- YAML
added:
  - v22.1.0
  - v20.13.0
-->

## `net.connect(options)`

* `options` {Object}
  * `signal` {AbortSignal}
""",
    "wasi.md": """# WebAssembly System Interface (WASI)

> Stability: 1 - Experimental

## Class: `WASI`

### Event: `'close'`

### `wasi.close()`

* `options` {Object}
  * `signal` {AbortSignal}
""",
    "index.md": "<!--\nno title: not a page of the API\n-->\n",
}


def write_folder(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def asked(corpus, qid: str) -> dict[str, list[str]]:
    """A candidate question's gold: item name -> its sources."""
    (q,) = [q for q in corpus.candidates if q.id == qid]
    return {g.name: list(g.sources) for g in q.gold}


def test_node_a_module_is_named_by_its_stem_its_node_prefix_and_its_title():
    assert list_corpus_node.aliases("fs", "File system") == ("fs", "node:fs", "File system")
    assert list_corpus_node.aliases("tls", "TLS (SSL)") == ("tls", "node:tls", "TLS (SSL)")
    assert list_corpus_node.aliases("modules", "Modules: CommonJS modules") == ("CommonJS modules",)


def test_node_gold_sets_come_from_stability_markers_events_methods_and_options(tmp_path):
    corpus = list_corpus_node.read(str(write_folder(tmp_path, NODE_PAGES)))
    assert set(corpus.vocabulary["module"]) == {"fs", "net", "wasi"}  # index.md has no title
    close = asked(corpus, "node-event-close")
    assert close == {"fs": ["fs.md"], "net": ["net.md"], "wasi": ["wasi.md"]}
    assert set(asked(corpus, "node-method-close")) == {"fs", "net", "wasi"}
    assert set(asked(corpus, "node-method-ref")) == {"net"}
    assert set(asked(corpus, "node-option-signal")) == {"fs", "net", "wasi"}
    assert set(asked(corpus, "node-top-stability-1")) == {"wasi"}  # the marker above the first `##`
    assert set(asked(corpus, "node-any-stability-1")) == {"fs", "wasi"}  # a marker anywhere
    assert set(asked(corpus, "node-extends-stream-Readable")) == {"fs"}
    assert set(asked(corpus, "node-added-v20")) == set(asked(corpus, "node-added-v22")) == {"net"}


def test_npm_a_command_is_asked_for_by_the_options_of_its_configuration_section(tmp_path):
    page = (
        "---\ntitle: npm-{name}\n---\n\n### Synopsis\n\n```bash\nnpm {name}\n{alias}\n```\n\n"
        "### Configuration\n\n{options}\n### See Also\n\n"
        "* [npm install](/commands/npm-install)\n* [npmrc](/configuring-npm/npmrc)\n"
    )
    pages = {
        "ci": ("aliases: clean-install, ic", ["workspaces", "ignore-scripts"]),
        "install": ("aliases: add, i", ["workspaces", "save"]),
        "link": ("alias: ln", ["workspaces"]),
    }
    files = {
        f"commands/npm-{n}.md": page.format(
            name=n, alias=a, options="".join(f"#### `{o}`\n\n* Default: false\n\n" for o in opts)
        )
        for n, (a, opts) in pages.items()
    }
    corpus = list_corpus_npm.read(str(write_folder(tmp_path, files)))
    assert corpus.vocabulary["command"]["ci"].aliases == ("ci", "npm ci", "npm-ci", "npm clean-install", "npm ic")
    assert asked(corpus, "npm-option-workspaces") == {
        "ci": ["commands/npm-ci.md"],
        "install": ["commands/npm-install.md"],
        "link": ["commands/npm-link.md"],
    }
    assert set(asked(corpus, "npm-see-also-npm-install")) == {"ci", "link"}  # not install itself
    assert set(asked(corpus, "npm-command-options-ci")) == {"workspaces", "ignore-scripts"}


VALGRIND_PAGE = """<html><body>
<div class="titlepage"><h2 class="title">
<a name="mc-manual.options"></a>4.3. Memcheck Command-Line Options</h2></div>
<dl class="variablelist">
<dt>
<a name="opt.leak-check"></a><span class="term">
      <code class="option">--leak-check=&lt;no|summary|yes|full&gt; [default: summary] </code>
    </span>
</dt><dd><p>Search for leaks; see also <code class="option">--num-callers</code>.</p></dd>
<dt>
<a name="opt.undef-value-errors"></a><span class="term">
      <code class="option">--undef-value-errors=&lt;yes|no&gt; [default: yes] </code>
    </span>
</dt><dd><p>...</p></dd>
<dt>
<a name="opt.track-origins"></a><span class="term">
      <code class="option">--track-origins=&lt;yes|no&gt; [default: no] </code>
    </span>
</dt><dd><p>...</p></dd>
<dt>
<a name="opt.quiet"></a><span class="term"><code class="option">-q</code>, <code class="option">--quiet</code></span>
</dt><dd><p>...</p></dd>
</dl></body></html>
"""


def test_valgrind_options_are_read_with_their_section_value_form_and_default(tmp_path):
    core = (
        '<h2 class="title">2.7.2. Basic Options</h2><dl><dt><span class="term">'
        '<code class="option">--num-callers=&lt;number&gt; [default: 12] </code></span></dt></dl>'
    )
    folder = write_folder(tmp_path, {"mc-manual.html": VALGRIND_PAGE, "manual-core.html": core})
    options = {o.name: o for o in list_corpus_valgrind.read_options(folder)}
    assert list(options) == ["--num-callers", "--leak-check", "--undef-value-errors", "--track-origins", "--quiet"]
    assert options["--quiet"].short == ("-q",)
    assert options["--leak-check"].default == "summary"
    assert {o.section for o in options.values()} == {"Basic Options", "Memcheck Command-Line Options"}
    corpus = list_corpus_valgrind.read(str(folder))
    section = asked(corpus, "valgrind-section-mc-manual-memcheck-command-line-options")
    assert set(section) == {"--leak-check", "--undef-value-errors", "--track-origins", "--quiet"}
    assert set(asked(corpus, "valgrind-yes-no-memcheck")) == {"--undef-value-errors", "--track-origins"}
    assert set(asked(corpus, "valgrind-default-no-memcheck")) == {"--track-origins"}
    assert asked(corpus, "valgrind-tools-mention-num-callers") == {"Memcheck": ["mc-manual.html"]}  # a core option
    assert corpus.vocabulary["option"]["--quiet"].aliases == ("--quiet", "-q")  # "quiet" alone is a word


def question(qid: str, n_gold: int, family: str = "f") -> ListQuestion:
    return ListQuestion(qid, f"q {qid}", family, "module", tuple(Item(f"m{i}", (f"m{i}",)) for i in range(n_gold)))


def test_selection_keeps_sets_of_three_to_twenty_caps_each_family_and_splits_halves_by_the_seed(tmp_path):
    from training.global_qa.list_questions import Corpus

    corpus = Corpus("c", str(tmp_path))
    corpus.candidates = [question(f"a{i:02d}", 3 + i % 20) for i in range(30)]
    corpus.candidates += [question("empty", 0), question("one", 1), question("huge", 21), question("b", 5, "g")]
    picked = select(corpus, per_family=10, seed=1)
    assert [q.id for q in picked] == sorted(q.id for q in picked)
    assert {q.family for q in picked} == {"f", "g"} and len(picked) == 11
    assert not {"empty", "one", "huge"} & {q.id for q in picked}
    assert [q.id for q in select(corpus, per_family=10, seed=1)] == [q.id for q in picked]  # deterministic
    halves = [q.half for q in split_halves(picked, 1, "c")]
    assert halves.count("tune") == 6 and halves.count("judge") == 5


NODE_VOCAB = {
    "module": [
        Item("fs", ("fs", "node:fs", "File system")),
        Item("child_process", ("child_process", "node:child_process", "Child process")),
        Item("process", ("process", "node:process", "Process")),
        Item("http", ("http", "node:http", "HTTP")),
        Item("http2", ("http2", "node:http2", "HTTP/2")),
        Item("net", ("net", "node:net", "Net")),
    ]
}
CLOSE = {
    "question": "Which modules of the Node.js API docs document a 'close' event?",
    "kind": "module",
    "gold": [{"name": n, "aliases": [n, f"node:{n}"], "sources": [f"{n}.md"]} for n in ("fs", "http2", "net")],
}


def test_an_item_is_named_whole_word_case_insensitively_by_any_alias_longest_first():
    assert named("See NODE:FS and net.Socket", NODE_VOCAB["module"]) == {"fs", "net"}
    assert named("http2 streams", NODE_VOCAB["module"]) == {"http2"}  # not http
    assert named("the Child process module", NODE_VOCAB["module"]) == {"child_process"}  # not process
    assert named("filesystem, fsync", NODE_VOCAB["module"]) == set()


def test_recall_counts_the_gold_items_named_and_precision_the_listed_items_that_are_gold():
    s = score("The 'close' event: fs [1], net [2] and the HTTP module.", CLOSE, NODE_VOCAB)
    assert (s.found, s.missed, s.wrong) == (("fs", "net"), ("http2",), ("http",))
    assert round(s.recall, 3) == 0.667 and round(s.precision, 3) == 0.667
    assert score("Not in the documents.", CLOSE, NODE_VOCAB).precision == 0.0


def test_an_item_the_question_names_is_not_counted_against_the_answer():
    asks = dict(CLOSE, question="Which modules besides Process document a 'close' event?")
    assert score("Unlike process: fs, net and http2.", asks, NODE_VOCAB).precision == 1.0


def test_the_command_writes_the_questions_and_the_vocabulary_beside_them(tmp_path, monkeypatch):
    from training.commands import bench_group

    pages = dict(NODE_PAGES)
    for name in ("dgram", "tls"):  # a fourth and fifth page with the close event: sets of 3+ items
        pages[f"{name}.md"] = f"# {name.upper()}\n\n## Class: `X`\n\n### Event: `'close'`\n\n### `x.close()`\n"
    folder = write_folder(tmp_path / "api", pages)
    out = tmp_path / "lists" / "node.jsonl"
    args = ["global-lists", "--corpus", "node", "--folder", str(folder), "--write", str(out)]
    result = CliRunner().invoke(bench_group(), args)
    assert result.exit_code == 0, result.output
    questions, vocabulary = load(out)
    close = next(q for q in questions if q["id"] == "node-event-close")
    assert [g["name"] for g in close["gold"]] == ["dgram", "fs", "net", "tls", "wasi"]
    assert close["folder"] == str(folder) and close["half"] in ("tune", "judge")
    assert {"id", "question", "corpus", "kind", "family", "gold"} <= set(close)
    assert json.loads(out.with_name("node.vocab.json").read_text())["corpus"] == "node"
    assert {i.name for i in vocabulary["module"]} == {"dgram", "fs", "net", "tls", "wasi"}
