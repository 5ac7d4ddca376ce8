"""The question writer of `logicroute adapt` (training.adapt.adapt_questions) on tiny invented corpora
with a scripted LLM: how bridges are linked and asked, every check that rejects a question,
malformed replies, resuming a cut run, and KBs that cannot give a kind."""

from __future__ import annotations

import json

import pytest

from engine.floor.base.errors import KBEmptyError
from hierarchy.documents import Chunk
from tests.fakes import HashedBowEmbedder, ScriptedLLM, WordOverlapKB, layered_kb
from tests.samples import DOCS, VELMORA
from training.adapt import question_prompts as p
from training.adapt.adapt_candidates import bridge_pairs, kb_chunks
from training.adapt.adapt_checks import bridge_question, names_entity, names_subject
from training.adapt.adapt_questions import question_id, read_written, write_questions

CITY = (
    "Velmora is a river city in Ardun known for its glassworks. The mayor of Velmora is Odile Brankov, elected in 2019."
)
MAYOR = "Odile Brankov is a politician from Ardun. She was born in Kesh, a mountain village, and studied law."


def kb_of(*docs: tuple[str, str]) -> WordOverlapKB:
    """One chunk per (title, text), chunk id c<i> of document d<i>."""
    return WordOverlapKB(Chunk(f"c{i}", f"d{i}", t, x, 0) for i, (t, x) in enumerate(docs))


def two_hop_kb(mayor_title: str = "Odile Brankov") -> WordOverlapKB:
    # the one link: the city's chunk names the mayor's title (the mayor's chunk names no other title)
    return kb_of(("Velmora", CITY), (mayor_title, MAYOR))


def writer(write: dict | str | Exception, closed: str = "I do not know", read: str = "") -> ScriptedLLM:
    """A scripted LLM that answers every writing prompt with `write`, the closed-book prompt with
    `closed` and the passage reader with `read`. A bridge's `write` holds both of its replies: the
    link call gets its description, the second hop its question and answer."""

    def reply(messages: list[dict]):
        system = messages[0]["content"]
        if system.startswith(p.CLOSED_BOOK_SYSTEM):
            return closed
        if "Question:" in messages[-1]["content"]:
            return read
        if isinstance(write, Exception):
            raise write
        if isinstance(write, dict) and "description" in write:
            link = system.startswith(p.LINK_SYSTEM)
            return {k: v for k, v in write.items() if (k == "description") == link}
        return write

    return ScriptedLLM(rules={"": reply})


def run(tmp_path, kb, llm, n=1, kinds=None, name="q.jsonl"):
    return write_questions(kb, llm, n=n, out=tmp_path / name, kinds=kinds, progress=False)


BRIDGE_REPLY = {"description": "the mayor of Velmora", "question": "Where was Odile Brankov born?", "answer": "Kesh"}


def test_a_bridge_links_a_chunk_to_the_other_document_whose_title_it_names():
    kb = kb_of(*((d.title, d.text) for d in VELMORA))
    pairs = {(c.chunks[0].title, c.chunks[1].title, c.entity) for c in bridge_pairs(kb_chunks(kb))}
    assert ("Velmora", "Odile Brankov", "Odile Brankov") in pairs
    assert ("Odile Brankov", "Kesh", "Kesh") in pairs
    assert all(a != b for a, b, _ in pairs)  # never a chunk's own document
    assert not bridge_pairs(kb_chunks(kb_of(*((d.title, d.text) for d in DOCS))))  # no text names another title
    # a file titled by a common word ("path") is not a name other chunks mention
    docs = kb_of(("path", "The path module joins paths."), ("fs", "Use fs.readFile and pass a path to it, or a URL."))
    assert not bridge_pairs(kb_chunks(docs))


def test_a_bridge_asks_the_link_on_the_first_chunk_and_the_second_hop_on_the_second_then_hides_the_entity(tmp_path):
    llm = writer(BRIDGE_REPLY)
    kept, report = run(tmp_path, two_hop_kb(), llm, kinds={"bridge": 1})
    link, hop2 = (c["messages"][-1]["content"] for c in llm.calls[:2])
    assert CITY in link and MAYOR not in link and link.endswith("SUBJECT: Velmora\nENTITY: Odile Brankov")
    assert MAYOR in hop2 and CITY not in hop2
    assert [c["schema"] for c in llm.calls[:2]] == [p.LINK_SCHEMA, p.SINGLE_SCHEMA]
    (q,) = kept
    assert (q.kind, q.question, q.answer) == ("bridge", "Where was the mayor of Velmora born?", "Kesh")
    assert q.chunk_ids == ("c0", "c1") and q.titles == ("Velmora", "Odile Brankov")
    assert report.kept == {"bridge": 1} and not report.rejected


def test_a_link_that_fails_its_checks_costs_no_second_hop_call(tmp_path):
    llm = writer({**BRIDGE_REPLY, "description": "the mayor elected in 2019"})
    kept, report = run(tmp_path, two_hop_kb(), llm, kinds={"bridge": 1})
    assert not kept and report.rejected == {"does not lead from the first chunk's subject": 1}
    assert len(llm.calls) == 1 and report.llm_calls == 1
    row = json.loads((tmp_path / "q.jsonl").read_text())
    assert row["details"]["reply"] == {"description": "the mayor elected in 2019"}  # what was rejected, kept


@pytest.mark.parametrize(
    "reply, mayor_title, reason",
    [
        (
            {**BRIDGE_REPLY, "description": "the Velmora mayor Brankov"},
            "Odile Brankov",
            "names the intermediate answer",
        ),
        (
            {**BRIDGE_REPLY, "question": "Where was Odile Brankov born, and did Brankov study law?"},
            "Odile Brankov",
            "names the intermediate answer",
        ),
        (
            {
                **BRIDGE_REPLY,
                "question": "Where was Odile Brankov born, and where did Odile Brankov (politician) study?",
            },
            "Odile Brankov (politician)",
            "names the second title",
        ),
        (
            {**BRIDGE_REPLY, "question": "Where was the mayor born?"},
            "Odile Brankov",
            "second hop does not name its entity",
        ),
        (
            {**BRIDGE_REPLY, "description": "the mayor elected in 2019"},
            "Odile Brankov",
            "does not lead from the first chunk's subject",
        ),
    ],
)
def test_a_bridge_question_never_names_its_intermediate_answer_or_second_title(tmp_path, reply, mayor_title, reason):
    kept, report = run(tmp_path, two_hop_kb(mayor_title), writer(reply), kinds={"bridge": 1})
    assert not kept and report.rejected == {reason: 1}


def test_naming_is_read_from_capitalised_names_not_from_common_words():
    river = Chunk("c0", "d0", "Ostrel River", "The Ostrel River flows 187 kilometres to Brennick Harbour.", 0)
    assert not names_subject("What is the name of the river?", [river])
    assert names_subject("How long is the Ostrel River?", [river])
    assert names_subject("Where does the river of Brennick Harbour flow from?", [river])
    doc = Chunk("c1", "d1", "path", "path.relative(from, to) returns the relative path from one folder to another.", 0)
    assert names_subject("What does path.relative return?", [doc])
    assert names_entity("Where was Brankov born?", "Odile Brankov")
    assert names_entity("When did the Bank of Vaskarra open?", "Bank of Vaskarra", known="Skell")
    assert not names_entity("When did the central bank of Skell open?", "Bank of Vaskarra", known="Skell")
    # a word of the name that the first chunk also uses on its own does not name the entity
    coin = "Skell is the currency of Vaskarra, issued by the Bank of Vaskarra since 1921."
    assert names_entity("the currency of Vaskarra", "Bank of Vaskarra", known="Skell")
    assert not names_entity("the currency of Vaskarra", "Bank of Vaskarra", known=coin.replace("Bank of Vaskarra", ""))


def test_the_bridge_question_puts_the_description_where_the_entity_was_named():
    hop2 = "When did the Bank of Vaskarra introduce the skell?"
    assert bridge_question(hop2, "the central bank of Skell", "Bank of Vaskarra") == (
        "When did the central bank of Skell introduce the skell?"
    )
    assert bridge_question("Where was Odile Brankov born?", "the mayor of Velmora", "Odile Brankov") == (
        "Where was the mayor of Velmora born?"
    )


def test_a_bridge_may_name_a_place_its_first_chunk_names_apart_from_the_entity(tmp_path):
    kb = kb_of(
        ("Skell", "Skell is the currency of Vaskarra. The Bank of Vaskarra has issued it since 1921."),
        ("Bank of Vaskarra", "The Bank of Vaskarra is the central bank of Vaskarra, founded in 1917 in Brennick."),
    )
    reply = {
        "description": "the issuer of Skell",
        "question": "When was the Bank of Vaskarra founded?",
        "answer": "1917",
    }
    kept, _ = run(
        tmp_path, kb, writer({**reply, "description": "the issuer of Skell in Vaskarra"}), kinds={"bridge": 1}
    )
    assert [q.question for q in kept] == ["When was the issuer of Skell in Vaskarra founded?"]


def test_a_bridge_answer_must_come_from_the_second_chunk(tmp_path):
    reply = {**BRIDGE_REPLY, "answer": "Paris"}
    kept, report = run(tmp_path, two_hop_kb(), writer(reply, read="Kesh"), kinds={"bridge": 1})
    assert not kept and report.rejected == {"not answerable from its chunks": 1}


SINGLE = {"question": "In which village was Odile Brankov born?", "answer": "Kesh"}


@pytest.mark.parametrize(
    "reply, closed, read, reason",
    [
        (SINGLE, "Kesh", "", "answerable without passages"),
        ({**SINGLE, "answer": "Lake Ostrel"}, "no idea", "Kesh", "not answerable from its chunks"),
        (
            {"question": "Was Odile Brankov born in Kesh?", "answer": "Kesh"},
            "no idea",
            "",
            "the answer is in the question",
        ),
        ({**SINGLE, "answer": "  "}, "no idea", "", "malformed"),
        (
            {"question": "In which village was the politician born?", "answer": "Kesh"},
            "no idea",
            "",
            "names no subject",
        ),
    ],
)
def test_a_single_hop_question_is_rejected_by_each_check(tmp_path, reply, closed, read, reason):
    kb = kb_of(("Odile Brankov", MAYOR))
    kept, report = run(tmp_path, kb, writer(reply, closed=closed, read=read), kinds={"single": 1})
    assert not kept and report.rejected == {reason: 1}
    assert report.written == ({} if reason == "malformed" else {"single": 1})


def test_an_answer_not_copied_from_the_chunk_is_kept_when_the_reader_of_the_chunk_gets_it(tmp_path):
    reply = {"question": "Which village was Odile Brankov born in?", "answer": "the village of Kesh"}
    llm = writer(reply, read="Kesh village")
    kept, report = run(tmp_path, kb_of(("Odile Brankov", MAYOR)), llm, kinds={"single": 1})
    assert [q.answer for q in kept] == ["the village of Kesh"]
    reads = [
        c
        for c in llm.calls
        if "Question: Which village" in c["messages"][-1]["content"] and "<passages>" in c["messages"][-1]["content"]
    ]
    assert len(reads) == 1 and MAYOR in reads[0]["messages"][-1]["content"]


def test_a_reply_that_is_not_json_twice_is_dropped_and_counted_as_malformed(tmp_path):
    kept, report = run(
        tmp_path, kb_of(("Odile Brankov", MAYOR)), writer("Sure! Here is a question:"), kinds={"single": 1}
    )
    assert not kept and report.rejected == {"malformed": 1} and report.attempted == {"single": 1}
    assert report.llm_calls == 2  # the schema retry, then no check is paid for
    row = json.loads((tmp_path / "q.jsonl").read_text())
    assert (row["status"], row["reason"]) == ("rejected", "malformed")


ANNA = "Anna Pell is a painter from Ardun. She was born in Kesh in 1931 and painted the bridges of Velmora."
BORIS = "Boris Tay is a painter from Ardun. He was born in Lowen Ferry in 1962 and taught at the art school."
COMPARE = {
    "attribute": "birth year",
    "value_a": "1931",
    "value_b": "1962",
    "question": "Who was born first, Anna Pell or Boris Tay?",
    "answer": "Anna Pell",
}


@pytest.mark.parametrize(
    "change, reason",
    [
        ({}, None),
        ({"answer": "Boris Tay"}, "answer contradicts its values"),
        ({"question": "Who was born first, Anna Pell or her teacher?"}, "does not name both entities"),
        ({"value_b": "1970"}, "not answerable from its chunks"),
        ({"answer": "Kesh"}, "answer is neither entity"),
        ({"answer": "yes"}, "yes/no does not fit the question"),
        ({"question": "Were Anna Pell and Boris Tay born in the same year?"}, "yes/no does not fit the question"),
        ({"question": "Were Anna Pell and Boris Tay born in the same year?", "answer": "no"}, None),
    ],
)
def test_a_comparison_names_both_entities_and_its_answer_follows_from_their_values(tmp_path, change, reason):
    kb = kb_of(("Anna Pell", ANNA), ("Boris Tay", BORIS))
    kept, report = run(tmp_path, kb, writer({**COMPARE, **change}), kinds={"comparison": 1})
    if reason is None:
        reply = {**COMPARE, **change}
        assert [(q.question, q.answer, set(q.chunk_ids)) for q in kept] == [
            (reply["question"], reply["answer"], {"c0", "c1"})
        ]
    else:
        assert not kept and report.rejected == {reason: 1}


def resumable_llm(fail_after: int | None = None) -> ScriptedLLM:
    state = {"writes": 0}

    def reply(messages):
        if messages[0]["content"].startswith(p.CLOSED_BOOK_SYSTEM):
            return "no idea"
        if "Question:" in messages[-1]["content"]:
            return "no idea"
        state["writes"] += 1
        if fail_after is not None and state["writes"] > fail_after:
            raise KeyboardInterrupt  # the run is killed in the middle of an attempt
        title = messages[-1]["content"].split("[1] ", 1)[1].split(":", 1)[0]
        return {"question": f"Where is the subject of the {title} page?", "answer": "Ardun"}

    return ScriptedLLM(rules={"": reply})


def ardun_kb() -> WordOverlapKB:
    names = ["Velmora", "Kesh", "Lowen Ferry", "Harlsey Cross", "Brennick", "Tamsk"]
    return kb_of(
        *((n, f"{n} is a place in the province of Ardun, with a market, a school and a bridge.") for n in names)
    )


def test_a_run_killed_mid_way_resumes_to_the_same_rows_without_repeating_a_kept_questions_calls(tmp_path):
    whole = resumable_llm()
    full, _ = run(tmp_path, ardun_kb(), whole, n=4, kinds={"single": 1}, name="whole.jsonl")
    cut = resumable_llm(fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, ardun_kb(), cut, n=4, kinds={"single": 1})
    assert len(read_written(tmp_path / "q.jsonl")) == 2
    again = resumable_llm()
    resumed, report = run(tmp_path, ardun_kb(), again, n=4, kinds={"single": 1})
    assert resumed == full and report.kept == {"single": 4}
    writes = [c["messages"][-1]["content"] for c in cut.calls if "Question:" not in c["messages"][-1]["content"]]
    kept_prompts = set(writes[:2])  # the third was cut in its call: it is written again
    assert not kept_prompts & {c["messages"][-1]["content"] for c in again.calls}
    rows = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [
        json.loads(line)["id"] for line in (tmp_path / "whole.jsonl").read_text().splitlines()
    ]
    assert report.llm_calls == sum(r["llm_calls"] for r in rows) == len(whole.calls)


def test_question_ids_depend_on_the_kind_and_chunks_only():
    assert question_id("single", ("c1",)) == question_id("single", ("c1",))
    assert len({question_id("single", ("c1",)), question_id("bridge", ("c1",)), question_id("single", ("c2",))}) == 3


def test_an_empty_kb_is_a_clear_error(tmp_path):
    with pytest.raises(KBEmptyError, match="empty"):
        run(tmp_path, kb_of(), writer(SINGLE))


def test_a_kb_too_small_for_bridges_says_so_and_writes_the_other_kinds(tmp_path):
    llm = resumable_llm()
    kept, report = run(tmp_path, ardun_kb(), llm, n=2, kinds={"single": 1, "bridge": 1})
    assert any(note.startswith("no bridge questions: no chunk names another document's title") for note in report.notes)
    assert [q.kind for q in kept] == ["single", "single"] and "bridge" not in report.attempted


def test_overview_questions_come_from_summary_nodes_and_are_skipped_with_a_note_without_layers(tmp_path):
    kb = layered_kb(tmp_path / "kb", HashedBowEmbedder())

    def reply(messages):
        if messages[0]["content"].startswith(p.OVERVIEW_SYSTEM):
            word = messages[-1]["content"].split(": ", 1)[1].split()[1]  # a word of the node's summary
            return {"question": "What do these documents have in common?", "answer": word}
        return "no idea"

    kept, report = run(tmp_path, kb, ScriptedLLM(rules={"": reply}), kinds={"overview": 1})
    (q,) = kept
    assert q.kind == "overview" and len(q.chunk_ids) >= 2 and set(q.chunk_ids) <= set(kb.chunk_ids)
    _, report = run(tmp_path, ardun_kb(), resumable_llm(), n=1, kinds={"overview": 1, "single": 1}, name="o.jsonl")
    assert any(note.startswith("no overview questions: the KB has no summary layers") for note in report.notes)


@pytest.mark.local_llm
@pytest.mark.embedder
def test_the_local_model_writes_kept_questions_from_the_demo_corpus(tmp_path, real_embedder):
    """A couple of questions from the shipped demo corpus with the real local model: each kept
    one passed every check, and a bridge hides the entity that links its two chunks."""
    from pathlib import Path

    from engine.floor.llm.factory import make_llm
    from hierarchy.indexing import index_sources

    corpus = Path(__file__).resolve().parents[3] / "engine" / "demo" / "corpus.jsonl"
    kb = index_sources(tmp_path / "kb", [corpus], summaries="none", embedder=real_embedder).kb
    llm = make_llm(cache=tmp_path / "llm_cache.sqlite")
    kept, report = write_questions(
        kb, llm, n=2, out=tmp_path / "q.jsonl", kinds={"single": 1, "bridge": 1}, minutes=8, progress=False
    )
    assert kept, report.to_dict()
    rows = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert report.llm_calls == sum(r["llm_calls"] for r in rows) > 0
    for q in kept:
        assert q.question and q.answer and set(q.chunk_ids) <= set(kb.chunk_ids)
        if q.kind == "bridge":
            entity = next(r["details"]["entity"] for r in rows if r["id"] == q.id)
            assert entity.lower() not in q.question.lower() and len(set(q.titles)) == 2
