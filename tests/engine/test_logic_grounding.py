"""The logic route keeps its answers tied to what it read: a later hop may see again the passage
an earlier hop read, facts of the passages read survive the memory, a sub-answer no passage
states is flagged and asked again, and a reader answer's citations name listed sources.

The corpus is tests.samples.VELMORA: "Where was the mayor of Velmora born?" needs the mayor's
page twice, once for who she is (q1), once for where she was born (q2)."""

from __future__ import annotations

import pytest

from engine.core.routes import LogicRoute, RouteContext, _cited, answer_on, make_route
from engine.core.routes.common import cited_numbers, resolve_citations
from engine.core.routes.logic.config import LogicConfig
from engine.core.routes.logic.grounding import supported
from engine.core.routes.logic.solve import answer_logic
from engine.floor.base.types import Answer, RetrievedChunk, Source, Usage
from hierarchy.documents import Chunk
from tests.engine.logic_scripts import SUFFICIENT, node, plan, purposes, step
from tests.fakes import HashedBowEmbedder, ScriptedLLM, WordOverlapKB
from tests.samples import VELMORA
from training.common.logic_experiment import LogicExperiment

QUESTION = "Where was the mayor of Velmora born?"
PLAN = plan(("q1", "Who is the mayor of Velmora?", []), ("q2", "Where was #q1 born?", ["q1"]))


def velmora_kb() -> WordOverlapKB:
    kb = WordOverlapKB(Chunk(d.id, d.id, d.title, d.text, 0) for d in VELMORA)
    kb.embedder = HashedBowEmbedder()
    return kb


def chain(q2_answer: str = "Kesh", memory: str = "The mayor of Velmora is Odile Brankov.") -> list:
    return [PLAN, step({"q1": "Odile Brankov"}, memory), step({"q2": q2_answer}, memory), SUFFICIENT]


# ---------------------------------------------------------------- a later hop sees what it needs


def test_strict_sampling_without_replacement_hides_the_next_hops_passage_from_it():
    ans = answer_logic(QUESTION, velmora_kb(), ScriptedLLM([*chain(), "Kesh"]), LogicConfig())
    assert "odile-brankov" in node(ans, "q1")["chunk_ids"]
    assert "odile-brankov" not in node(ans, "q2")["chunk_ids"]


def test_a_later_hop_is_shown_again_the_passage_that_best_matches_it():
    ans = answer_logic(QUESTION, velmora_kb(), ScriptedLLM([*chain(), "Kesh"]), LogicConfig(reshow_best=True))
    q2 = node(ans, "q2")["chunk_ids"]
    assert q2[0] == "odile-brankov" and ans.trace["reshown"] == ["odile-brankov"]
    assert len(q2) == 3 and len(set(q2)) == 3  # the other two are chunks no hop has read
    assert not set(q2[1:]) & set(node(ans, "q1")["chunk_ids"])


# ---------------------------------------------------------------- memory that keeps what was read


def final_prompt(llm: ScriptedLLM) -> str:
    return llm.calls[-1]["messages"][-1]["content"]


def test_a_fact_the_memory_dropped_reaches_the_final_answer_when_it_names_a_sub_answer():
    llm = ScriptedLLM([*chain(q2_answer="unknown"), "Kesh"])
    answer_logic(QUESTION, velmora_kb(), llm, LogicExperiment(keep_facts=120, reflection=False))
    prompt = final_prompt(llm)
    assert "born in Kesh" in prompt and "From the passages read" in prompt


def test_without_the_fact_rule_the_final_answer_reads_the_memory_alone():
    llm = ScriptedLLM([*chain(q2_answer="unknown"), "Kesh"])
    answer_logic(QUESTION, velmora_kb(), llm, LogicExperiment(reflection=False))
    assert "born in Kesh" not in final_prompt(llm)


# ---------------------------------------------------------------- grounded sub-answers


def test_a_sub_answer_is_supported_when_one_passage_holds_its_names_and_numbers():
    hit = RetrievedChunk("c", "d", "Odile Brankov", "She was born in Kesh in 1970.", 1.0)
    assert supported("Kesh", [hit]) and supported("kesh, 1970", [hit])
    assert supported("Paris", [hit]) is False
    assert supported("yes", [hit]) is None and supported("unknown", [hit]) is None


def test_a_sub_answer_no_passage_states_is_flagged_and_kept_without_the_retry():
    ans = answer_logic(QUESTION, velmora_kb(), ScriptedLLM([*chain("Paris"), "Paris"]), LogicConfig())
    assert any("q2 stated by none of its passages" in f for f in ans.flags)
    assert node(ans, "q2")["answer"] == "Paris" and node(ans, "q2")["supported"] is False
    assert node(ans, "q1")["supported"] is True


def test_a_sub_answer_no_passage_states_is_asked_again_over_every_passage_of_the_dag():
    llm = ScriptedLLM([*chain("Paris")[:3], {"answers": {"q2": "Kesh"}}, SUFFICIENT, "Kesh"])
    ans = answer_logic(QUESTION, velmora_kb(), llm, LogicConfig(ground_retry=True))
    assert "ground q2" in purposes(ans)
    ground = llm.calls[purposes(ans).index("ground q2")]["messages"][-1]["content"]
    assert "born in Kesh" in ground  # q1's passage, which strict sampling kept from q2
    assert node(ans, "q2")["answer"] == "Kesh" and node(ans, "q2")["supported"] is True
    assert ans.trace["grounded_again"] == [{"id": "q2", "was": "Paris", "now": "Kesh"}]


# ---------------------------------------------------------------- citations that resolve


@pytest.mark.parametrize(
    ("text", "numbered", "expected", "dropped"),
    [
        ("Kesh [1].", {1}, "Kesh [1].", []),
        ("Kesh [1] and [4].", {1, 2}, "Kesh [1] and.", [4]),
        ("Kesh [1, 4].", {1}, "Kesh [1].", [4]),
        ("Kesh [2-4].", {2, 3}, "Kesh [2, 3].", [4]),
        ("The mayor [1] was born in Kesh.", set(), "The mayor was born in Kesh.", [1]),
    ],
)
def test_a_citation_that_names_no_listed_source_is_removed(text, numbered, expected, dropped):
    assert resolve_citations(text, numbered) == (expected, dropped)


def test_the_numbers_cited_are_read_as_the_resolution_reads_them():
    assert cited_numbers("Kesh [1, 4] lies south [2-3]. [x]") == [1, 4, 2, 3]


def test_a_dangling_citation_is_removed_from_the_answer_and_flagged():
    src = Source.of(1, RetrievedChunk("c", "d", "Kesh", "Kesh is a village.", 1.0))
    ans = Answer("Kesh [1] is a village [3].", "chunk", Usage(), {"flags": []}, sources=[src])
    _cited(ans, "reader")
    assert ans.text == "Kesh [1] is a village." and ans.flags == ["citation [3] named no listed source: removed"]


@pytest.mark.parametrize("route", ["chunk", "logic"])
def test_every_route_drops_a_reader_citation_that_names_nothing(route):
    replies = [*chain(), "Born in Kesh [2] [9]."] if route == "logic" else ["Born in Kesh [2] [9]."]
    cfg = LogicConfig(cite_passages=True)
    on = make_route(route, cfg if route == LogicRoute.name else None)
    ans = answer_on(on, QUESTION, RouteContext(velmora_kb(), ScriptedLLM(replies), style="reader"))
    numbered = {s.n for s in ans.sources if s.n}
    assert 2 in numbered and 9 not in numbered
    assert ans.text == "Born in Kesh [2]." and any("[9]" in f for f in ans.flags)


def test_a_reader_logic_answer_is_shown_numbered_the_passage_stating_each_sub_answer():
    llm = ScriptedLLM([*chain(), "Odile Brankov [1] was born in Kesh [2]."])
    ans = answer_logic(QUESTION, velmora_kb(), llm, LogicConfig(cite_passages=True), style="reader")
    numbered = [(s.n, s.chunk_id) for s in ans.sources if s.n]
    assert numbered[:2] == [(1, "velmora"), (2, "odile-brankov")] or numbered[:1] == [(1, "odile-brankov")]
    assert "[1] " in final_prompt(llm)
