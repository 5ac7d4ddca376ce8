"""The native endpoints of `logicroute serve`: /query with answer()'s options, /route (the
decision only), /documents (indexed through the KB's writer lock while queries go on),
/health, /metrics, and errors that are always JSON bodies with the right status."""

from __future__ import annotations

import threading

import pytest

from engine.face.serve.run import ServerThread
from tests.engine.serve_helpers import ANSWER, CHAIN_QUESTION, SIMPLE_QUESTION, SchemaLLM, call, film_service


@pytest.fixture
def llm():
    return SchemaLLM()


@pytest.fixture
def service(tmp_path, llm, isolated_llm_env):
    return film_service(tmp_path, llm, workers=4)


@pytest.fixture
def url(service):
    with ServerThread(service) as s:
        yield s.url


def test_query_answers_with_route_probabilities_sources_and_cost(url):
    r = call("POST", f"{url}/query", {"question": SIMPLE_QUESTION})
    assert r.status == 200
    assert r.body["answer"] == ANSWER and r.body["route"] == "chunk"
    assert set(r.body["route_probs"]) == {"chunk", "summary", "logic"}
    assert r.body["sources"][0]["n"] == 1 and r.body["sources"][0]["doc_id"] == "hitchcock"
    assert r.body["usage"]["llm_calls"] == 1 and r.body["usage"]["seconds"] > 0
    assert r.body["confidence"] is None  # this fake model reports no token probabilities
    assert "llm_calls" in r.body["trace"]  # trace on by default; {"trace": false} leaves it out
    assert "trace" not in call("POST", f"{url}/query", {"question": SIMPLE_QUESTION, "trace": False}).body


def test_query_takes_answer_options_route_style_escalate_and_budget(url, llm):
    r = call(
        "POST",
        f"{url}/query",
        {"question": CHAIN_QUESTION, "route": "logic", "style": "short", "budget": {"max_llm_calls": 3}},
    )
    assert r.status == 200 and r.body["route"] == "logic"
    assert r.body["usage"]["llm_calls"] <= 3 and any("budget" in f or "limit" in f for f in r.body["flags"])
    escalated = call("POST", f"{url}/query", {"question": SIMPLE_QUESTION, "escalate": True}).body
    assert escalated["trace"]["self_check"] == {"answered": True}  # escalation ran its check, and kept the answer


def test_query_rejects_unknown_options_with_400(url):
    for body in (
        {"question": SIMPLE_QUESTION, "route": "graph"},
        {"question": SIMPLE_QUESTION, "style": "poem"},
        {"question": SIMPLE_QUESTION, "budget": {"max_llm_calls": 0}},
        {"question": SIMPLE_QUESTION, "temperature": 1},
    ):
        r = call("POST", f"{url}/query", body)
        assert r.status == 400 and r.error["type"] == "invalid_request_error", body


def test_route_decides_without_any_llm_call(url, llm):
    r = call("POST", f"{url}/route", {"question": CHAIN_QUESTION})
    assert r.status == 200 and r.body["route"] == "logic" and r.body["policy"] == "argmax"
    assert r.body["probs"]["logic"] == pytest.approx(0.7) and llm.calls == 0
    threshold = call("POST", f"{url}/route", {"question": SIMPLE_QUESTION, "budget": {"threshold": 0.05}}).body
    assert threshold["route"] == "logic" and threshold["policy"] == "threshold"  # P(logic) 0.1 >= 0.05


def test_documents_are_added_and_answer_at_once(url):
    doc = {"id": "lang", "title": "Fritz Lang", "text": "Fritz Lang was born on 5 December 1890 in Vienna."}
    r = call("POST", f"{url}/documents", {"documents": [doc]})
    assert r.status == 200 and r.body["added_chunks"] == 1 and r.body["kb"]["documents"] == 6
    ans = call("POST", f"{url}/query", {"question": "When was Fritz Lang born in Vienna?", "route": "chunk"}).body
    assert ans["sources"][0]["doc_id"] == "lang"
    again = call("POST", f"{url}/documents", {"documents": [doc]}).body  # the same text again: nothing new
    assert (again["added_chunks"], again["unchanged_chunks"], again["duplicate_chunks"]) == (0, 1, 0)


@pytest.mark.parametrize("blank", [" \n\t ", "\u200b", "\u2060\ufeff", "\x00"], ids=["spaces", "zwsp", "wj-bom", "nul"])
def test_a_document_of_only_whitespace_or_invisible_characters_is_refused_in_one_line_and_nothing_is_indexed(
    url, blank
):
    fine = {"id": "lang", "title": "Fritz Lang", "text": "Fritz Lang was born on 5 December 1890 in Vienna."}
    r = call("POST", f"{url}/documents", {"documents": [fine, {"id": "blank", "text": blank}]})
    assert r.status == 400 and r.error["code"] == "bad_document"
    message = r.error["message"]
    assert "'blank'" in message and "only whitespace, zero-width" in message and "\n" not in message
    assert call("GET", f"{url}/health").body["kb"]["documents"] == 5


def test_a_markdown_document_is_cut_along_its_headings_and_keeps_its_source(url):
    text = "# Lang\n\n## Early life\n\nFritz Lang grew up in Vienna.\n"
    doc = {"id": "md", "title": "Lang", "text": text, "format": "markdown", "source": "notes/lang.md"}
    assert call("POST", f"{url}/documents", {"documents": [doc]}).status == 200
    hit = call("POST", f"{url}/query", {"question": "Where did Fritz Lang grow up?", "route": "chunk"}).body
    assert hit["sources"][0]["path"] == "notes/lang.md" and "Early life" in hit["sources"][0]["heading_path"]


def test_delete_removes_a_document_and_404s_an_unknown_one(url):
    r = call("DELETE", f"{url}/documents/metropolis")
    assert r.status == 200 and r.body["deleted_chunks"] == 1 and r.body["kb"]["documents"] == 4
    gone = call("DELETE", f"{url}/documents/metropolis")
    assert gone.status == 404 and gone.error["code"] == "document_not_found"


def test_the_server_writes_through_the_same_writer_lock_as_the_cli(service, url):
    from hierarchy.kb import KnowledgeBase
    from hierarchy.store import dir_lock

    kb_path = service.base.kb.path
    with dir_lock(kb_path):  # a `logicroute index` holding the lock
        writer = threading.Thread(
            target=call, args=("POST", f"{url}/documents", {"documents": [{"id": "x", "text": "Lang was tall."}]})
        )
        writer.start()
        writer.join(timeout=1.0)
        assert writer.is_alive()  # the server's write waits its turn
    writer.join(timeout=30)
    assert "x" in KnowledgeBase.open(kb_path, service.base.kb.embedder).doc_ids


def test_documents_change_while_queries_run_and_every_query_answers(url):
    errors: list = []
    stop = threading.Event()

    def ask_repeatedly():
        while not stop.is_set():
            r = call("POST", f"{url}/query", {"question": SIMPLE_QUESTION, "route": "summary", "trace": False})
            if r.status != 200:
                errors.append(r.body)

    askers = [threading.Thread(target=ask_repeatedly) for _ in range(3)]
    for t in askers:
        t.start()
    for i in range(5):
        doc = {"id": f"extra{i}", "title": f"Film {i}", "text": f"Film {i} was directed by Person {i} in 19{i}0."}
        assert call("POST", f"{url}/documents", {"documents": [doc]}).status == 200
        assert call("DELETE", f"{url}/documents/extra{i}").status == 200
    stop.set()
    for t in askers:
        t.join(timeout=30)
    assert errors == []
    assert call("GET", f"{url}/health").body["kb"]["documents"] == 5


@pytest.mark.parametrize("question", ["\u200b\u200b", "\x01\x02", "\x00", "\ufe0f\u034f\u180b"])
def test_a_question_of_invisible_characters_is_a_400_in_one_line_with_no_llm_call(url, llm, question):
    for path in ("query", "route"):
        r = call("POST", f"{url}/{path}", {"question": question})
        assert r.status == 400 and r.error["code"] == "bad_question", r.body
        assert r.error["message"] == "the question has no visible text (only invisible, control or format characters)"
    assert llm.calls == 0


def test_health_names_the_kb_the_llm_and_the_queue(url):
    h = call("GET", f"{url}/health").body
    assert h["status"] == "ok" and h["kb"]["chunks"] == 5 and h["llm"] == "fake:by-schema"
    assert h["queue"]["workers"] == 4 and h["queue"]["running"] == 0


def test_metrics_count_latencies_and_tokens_per_route(url):
    for question, route in ((SIMPLE_QUESTION, "chunk"), (SIMPLE_QUESTION, "chunk"), (CHAIN_QUESTION, "logic")):
        call("POST", f"{url}/query", {"question": question, "route": route})
    call("POST", f"{url}/query", {"question": ""})
    call("POST", f"{url}/route", {"question": SIMPLE_QUESTION})
    m = call("GET", f"{url}/metrics").body
    assert m["answers"] == 3 and m["route_decisions"] == 1
    assert m["routes"]["chunk"]["answers"] == 2 and m["routes"]["chunk"]["llm_calls"] == 2
    assert m["routes"]["logic"]["prompt_tokens"] > m["routes"]["chunk"]["prompt_tokens"] > 0
    latency = m["routes"]["logic"]["latency_seconds"]
    assert 0 < latency["p50"] <= latency["p95"] and latency["window"] == 1
    assert m["errors"] == {"400": 1}


def test_unknown_paths_and_methods_are_json_errors(url):
    assert call("GET", f"{url}/nowhere").error["code"] == "not_found"
    r = call("GET", f"{url}/query")
    assert r.status == 405 and r.error["code"] == "method_not_allowed"
    bad = call("POST", f"{url}/query", raw=b"{not json")
    assert bad.status == 400 and bad.error["code"] == "invalid_body"


def test_an_unexpected_error_is_a_bare_500_with_no_traceback_or_details(tmp_path, isolated_llm_env):
    class BrokenLLM(SchemaLLM):
        def chat(self, messages, **kw):
            raise RuntimeError("secret /home/me/.env contents")

    with ServerThread(film_service(tmp_path, BrokenLLM())) as s:
        r = call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION})
    assert r.status == 500 and r.error == {
        "message": "internal server error (see the server log)",
        "type": "server_error",
        "code": "internal_error",
    }
    assert "secret" not in str(r.body) and "Traceback" not in str(r.body)
