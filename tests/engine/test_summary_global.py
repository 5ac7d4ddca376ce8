"""The summary route's global mode (SummaryConfig(mode="global")), with a scripted LLM over a small
tool manual (one Markdown page a command, each with a Configuration section of options): a list
question is answered from passages of many pages in at most `map_calls` structured calls, every
listed item cites a passage that names it, names no passage holds are left out, and "Not in the
indexed documents." when no batch finds anything."""

from __future__ import annotations

import pytest

from engine.core.routes import RouteContext, SummaryRoute, answer_on
from engine.core.routes.common import cited_numbers
from engine.core.routes.summary_config import SummaryConfig, mode_for
from engine.core.routes.summary_gather import compress
from engine.core.routes.summary_global import (
    Item,
    as_spelled,
    batches,
    bounded_config,
    list_answer,
    reduce_items,
    words_of,
)
from engine.floor.base.errors import DeadlineError, LogicRouteError
from engine.floor.base.types import RetrievedChunk
from engine.floor.prompts.answer import NOT_IN_DOCUMENTS
from hierarchy.indexing import index_sources
from tests.fakes import HashedBowEmbedder, ScriptedLLM

GLOBAL = SummaryConfig(mode="global")
COMMANDS = {
    "tool-build": ["force", "jobs", "verbose"],
    "tool-clean": ["force", "dry-run"],
    "tool-fetch": ["offline", "retries"],
    "tool-publish": ["force", "otp", "tag"],
    "tool-test": ["jobs", "coverage"],
    "tool-serve": ["port", "host"],
}
QUESTION = "Which tool commands take the `--force` config option?"


def page(name: str, options: list[str]) -> str:
    sections = "\n\n".join(f"#### `{o}`\n\n* Default: false\n\nThe {o} setting of {name}." for o in options)
    return (
        f"# {name}\n\n### Description\n\nThe {name} command does its own work for the project.\n\n"
        f"### Configuration\n\n{sections}\n\n### See Also\n\n* [tool help](/commands/tool-help)\n"
    )


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    folder = tmp_path_factory.mktemp("manual")
    docs = folder / "docs"
    docs.mkdir()
    for name, options in COMMANDS.items():
        (docs / f"{name}.md").write_text(page(name, options))
    return index_sources(folder / "kb", [docs], embedder=HashedBowEmbedder(dim=128), show_progress=False).kb


def ctx(kb, llm):
    return RouteContext(kb, llm, 3, "reader")


def shown_passages(llm: ScriptedLLM) -> list[str]:
    """The passage lines of every map call, in order."""
    out = []
    for call in llm.calls:
        body = call["messages"][-1]["content"]
        out += [line for line in body.split("\n") if line.startswith("[")]
    return out


def naming(word: str):
    """A map reply that names every passage of the batch whose line holds `word`, by its title's
    command (what a careful model would answer)."""

    def reply(messages):
        items = []
        for line in messages[-1]["content"].split("\n"):
            if line.startswith("[") and word in line:
                n = int(line[1 : line.index("]")])
                title = line[line.index("]") + 2 :].split(" ")[0]
                items.append({"name": title, "passage": n})
        return {"items": items}

    return reply


def test_a_list_question_is_answered_from_many_pages_in_at_most_map_calls_calls(kb):
    llm = ScriptedLLM(rules={"Items:": naming("force")})
    ans = answer_on(SummaryRoute(GLOBAL), QUESTION, ctx(kb, llm))
    assert ans.route == "summary"
    assert 1 <= ans.usage.llm_calls <= GLOBAL.breadth_calls and len(llm.calls) == ans.usage.llm_calls
    assert all(c["schema"] is not None for c in llm.calls)  # structured map calls only
    pages = {line.split(" ")[1].split(">")[0] for line in shown_passages(llm)}
    assert len(pages) > 3  # more pages than the chunk route's k=3 passages
    for name in ("tool-build", "tool-clean", "tool-publish"):
        assert name in ans.text
    assert "tool-serve" not in ans.text
    record = ans.trace["global"]
    assert record["llm_calls"] == ans.usage.llm_calls and record["max_llm_calls"] == GLOBAL.breadth_calls
    assert ans.usage.prompt_tokens > 0 and ans.usage.seconds > 0


def test_every_listed_item_cites_a_passage_that_names_it(kb):
    llm = ScriptedLLM(rules={"Items:": naming("force")})
    ans = answer_on(SummaryRoute(GLOBAL), QUESTION, ctx(kb, llm))
    by_n = {s.n: s for s in ans.sources}
    lines = [line for line in ans.text.splitlines() if line.startswith("- ")]
    assert lines
    for line in lines:
        name = line[2:].split(" [")[0]
        cited = cited_numbers(line)
        assert cited and all(n in by_n for n in cited), line
        assert any(set(words_of(name)) <= set(words_of(f"{by_n[n].title} {by_n[n].text}")) for n in cited)


def test_a_name_no_passage_holds_is_left_out_and_flagged(kb):
    invented = {"items": [{"name": "tool-teleport", "passage": 1}]}
    ans = answer_on(SummaryRoute(GLOBAL), QUESTION, ctx(kb, ScriptedLLM(rules={"Items:": invented})))
    assert ans.text == NOT_IN_DOCUMENTS
    assert any("found in no passage shown" in f for f in ans.flags)
    assert len(ans.trace["global"]["dropped"]) == ans.usage.llm_calls


def test_a_citation_of_the_wrong_passage_is_corrected_to_the_nearest_that_names_the_item():
    batch = [hit("a", "nothing here"), hit("b", "the force option"), hit("c", "no"), hit("d", "force again")]
    items, dropped = reduce_items([(5, batch, [{"name": "force", "passage": 7}, {"name": "force", "passage": 99}])])
    assert [(i.name, i.passages) for i in items] == [("force", [6, 8])] and dropped == []


def test_nothing_found_in_any_batch_is_not_in_the_documents(kb):
    ans = answer_on(SummaryRoute(GLOBAL), QUESTION, ctx(kb, ScriptedLLM(rules={"Items:": {"items": []}})))
    assert ans.text == NOT_IN_DOCUMENTS and ans.usage.llm_calls >= 1


def test_a_batch_whose_reply_fails_validation_twice_is_flagged_and_the_others_still_count(kb):
    replies = [naming("force"), "not json", "still not json"]
    ans = answer_on(SummaryRoute(GLOBAL), QUESTION, ctx(kb, ScriptedLLM(replies)))
    assert any("gave no valid list" in f for f in ans.flags)
    assert ans.usage.llm_calls == 3  # the failed call's retry is booked too
    assert ans.text.startswith("- ") or "found in the documents" in ans.text


def test_a_deadline_stops_the_map_and_the_finished_batches_are_answered(kb):
    replies = [naming("force"), DeadlineError("stopped at the 3 s limit")]
    ans = answer_on(SummaryRoute(GLOBAL), QUESTION, ctx(kb, ScriptedLLM(replies)))
    assert any("answered from 1 of 2 batches" in f for f in ans.flags)
    assert "found in the documents" in ans.text


def test_a_budget_cuts_the_map_calls():
    route = SummaryRoute(GLOBAL).bounded({"max_llm_calls": 1})
    assert route.config.map_calls == 1
    assert bounded_config(GLOBAL, {"max_prompt_tokens": 10}).map_calls == 1  # never below one call
    assert SummaryRoute().bounded({"max_llm_calls": 1}).config is None  # the descent: one call anyway


def test_the_global_mode_is_answered_in_one_call_under_a_one_call_budget(kb):
    llm = ScriptedLLM(rules={"Items:": naming("force")})
    ans = answer_on(SummaryRoute(GLOBAL).bounded({"max_llm_calls": 1}), QUESTION, ctx(kb, llm))
    assert ans.usage.llm_calls == 1 and ans.trace["global"]["max_llm_calls"] == 1


def test_settings_that_mean_nothing_in_the_global_mode_are_refused():
    for bad in ({"collapsed": True}, {"wide_chunks": 9}, {"answer_from": "summaries"}):
        with pytest.raises(LogicRouteError, match="global"):
            SummaryConfig(mode="global", **bad)
    with pytest.raises(LogicRouteError, match="map_calls"):
        SummaryConfig(mode="global", map_calls=7)
    with pytest.raises(LogicRouteError, match="mode"):
        SummaryConfig(mode="everything")


def test_the_descent_keeps_its_fingerprint():
    # stored benchmark answers made before the global mode existed stay valid
    descend = SummaryConfig(mode="descend")
    assert descend.fingerprint() == SummaryConfig(mode="descend", map_calls=2, map_tokens=700).fingerprint()
    assert SummaryConfig().fingerprint() != descend.fingerprint()  # auto answers list questions otherwise


def test_by_default_a_list_question_is_answered_in_the_global_mode_and_any_other_by_the_descent(kb):
    assert mode_for(SummaryConfig(), QUESTION)[0] == "global"
    assert mode_for(SummaryConfig(), "What does the force option of tool-build do?")[0] == "descend"
    assert mode_for(SummaryConfig(mode="descend"), QUESTION)[0] == "descend"
    assert mode_for(SummaryConfig(collapsed=True), QUESTION)[0] == "descend"  # a descent variant stays one
    assert kb.manifest["counts"]["chunks"] > kb.manifest["counts"]["documents"]  # pages, not passages
    llm = ScriptedLLM(["It forces the build [1]."], rules={"Items:": naming("force")})
    listed = answer_on(SummaryRoute(SummaryConfig()), QUESTION, ctx(kb, llm))
    assert listed.trace.details["summary_mode"] == "global: the question asks for a list"
    assert "tool-publish" in listed.text
    one = answer_on(SummaryRoute(SummaryConfig()), "What does the force option of tool-build do?", ctx(kb, llm))
    assert one.trace.details["summary_mode"].startswith("descend") and one.usage.llm_calls == 1


def hit(title: str, text: str = "x", n_words: int = 10) -> RetrievedChunk:
    return RetrievedChunk("c-" + title, "d", title, text or " ".join(["w"] * n_words), 1.0)


def test_a_kb_of_single_passage_documents_answers_a_list_question_by_the_descent():
    class Passages:  # a QA set's paragraphs: one chunk a document
        manifest = {"counts": {"documents": 1200, "chunks": 1200}}

    mode, why = mode_for(SummaryConfig(), QUESTION, Passages())
    assert mode == "descend" and "single passages" in why
    assert mode_for(SummaryConfig(mode="global"), QUESTION, Passages())[0] == "global"  # asked for, it is kept


def test_batches_fill_to_their_token_size_and_stop_at_map_calls():
    ps = [hit(f"t{i}", " ".join(["word"] * 30)) for i in range(10)]
    got = batches(ps, 2, 100)
    assert len(got) == 2 and all(got) and got[0][0].title == "t0"
    assert sum(len(b) for b in got) < 10  # the worst passages are never shown
    assert batches([hit("big", " ".join(["word"] * 500))], 2, 100)[0][0].title == "big"  # alone, it fits


def test_the_reduce_merges_spellings_of_one_item_and_keeps_every_source():
    batch = [hit("npm-publish", "publish the package"), hit("npm publish", "npm publish again")]
    items, dropped = reduce_items(
        [(1, batch, [{"name": "npm-publish", "passage": 1}, {"name": "`npm publish`", "passage": 2}])]
    )
    assert [(i.name, i.passages) for i in items] == [("npm-publish", [1, 2])]
    assert dropped == []


def test_a_flag_is_spelled_as_its_passage_spells_it_or_left_out():
    """Its words in the passage are not enough for a flag, a number or key=value: the answer is
    held to its passages word for word (engine.core.absence)."""
    batch = [hit("Helgrind options", "--delta-stacktrace=no|yes [default: yes] and a note about --history-level")]
    named = [{"name": n, "passage": 1} for n in ("--delta-stacktrace=yes|no", "-a", "--history-level")]
    items, dropped = reduce_items([(1, batch, named)])
    assert [i.name for i in items] == ["--delta-stacktrace=no|yes", "--history-level"]
    assert dropped == ["-a (its flag, number or key=value is written so in no passage)"]
    assert as_spelled("port 8080", ["the port is 8,080"]) == "port 8080"  # thousands separators are one claim


def test_the_answer_lists_items_with_their_passages_or_says_none():
    items = [Item("tool-build", [3, 1]), Item("tool-clean", [2])]
    assert list_answer(items, "reader") == "2 found in the documents:\n- tool-build [1, 3]\n- tool-clean [2]"
    assert list_answer(items, "short") == "tool-build, tool-clean"
    assert list_answer([], "reader") == NOT_IN_DOCUMENTS


def test_a_chunk_is_cut_to_its_item_lines_and_the_lines_with_rare_question_words():
    text = "\n".join(
        [
            "### Configuration",
            "A long paragraph about nothing the question asks for, written in many plain words here.",
            "#### `force`",
            "The force option overrides the lockfile check.",
            "Another plain sentence with no question word at all in it.",
        ]
    )
    c = RetrievedChunk("c", "d", "tool-build", text, 1.0, heading_path="tool-build > Configuration")
    cut = compress(c, {"lockfile": 3.0, "tool": 0.1}, 20)
    assert cut.title == "tool-build > Configuration"
    assert "#### `force`" in cut.text and "lockfile" in cut.text
    assert "no question word" not in cut.text
    assert len(cut.text.split()) <= 24
