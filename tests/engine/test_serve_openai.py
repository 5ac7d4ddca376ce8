"""`logicroute serve`, as an OpenAI client sees it: the real server on a free port, called by
the `openai` package itself, unchanged. The model name picks the route; the reply carries the
answer, the usage of every LLM call and a `logicroute` object; streaming sends progress events
for the logic route's steps, then the answer's tokens."""

from __future__ import annotations

import openai
import pytest

from engine.face.serve.run import ServerThread
from tests.engine.serve_helpers import ANSWER, CHAIN_QUESTION, SIMPLE_QUESTION, SchemaLLM, film_service


@pytest.fixture
def llm():
    return SchemaLLM()


@pytest.fixture
def server(tmp_path, llm, isolated_llm_env):
    with ServerThread(film_service(tmp_path, llm)) as s:
        yield s


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused-on-localhost", max_retries=0)


def ask(client, question: str, model: str = "logicroute-auto", **kw):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": question}], **kw)


def test_models_lists_one_model_per_route(client):
    assert [m.id for m in client.models.list()] == [
        "logicroute-auto",
        "logicroute-chunk",
        "logicroute-summary",
        "logicroute-logic",
    ]
    assert client.models.retrieve("logicroute-logic").owned_by == "logicroute"


def test_auto_model_lets_the_router_choose_and_reports_the_route(client):
    simple = ask(client, SIMPLE_QUESTION)
    assert simple.choices[0].message.content == ANSWER and simple.choices[0].finish_reason == "stop"
    ext = simple.model_extra["logicroute"]
    assert ext["route"] == "chunk" and ext["route_probs"]["chunk"] > ext["route_probs"]["logic"]
    assert ext["decision"]["policy"] == "argmax"
    assert [s["n"] for s in ext["sources"]] == [1, 2, 3]  # the numbered passages the answer cites
    assert ask(client, CHAIN_QUESTION).model_extra["logicroute"]["route"] == "logic"  # 'director' -> logic


@pytest.mark.parametrize("route", ["chunk", "summary", "logic"])
def test_a_route_model_forces_its_route(client, route):
    ext = ask(client, SIMPLE_QUESTION, model=f"logicroute-{route}").model_extra["logicroute"]
    assert ext["route"] == route and ext["route_probs"] is None  # forced: the router is not asked


def test_usage_sums_every_llm_call_of_the_answer(client, llm):
    reply = ask(client, CHAIN_QUESTION, model="logicroute-logic")
    ext = reply.model_extra["logicroute"]
    assert ext["usage"]["llm_calls"] == llm.calls == 3  # two steps (the plan read off the form), the answer
    assert reply.usage.prompt_tokens == ext["usage"]["prompt_tokens"] > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_the_logic_route_returns_its_dag_with_sub_answers_and_their_sources(client):
    ext = ask(client, CHAIN_QUESTION, model="logicroute-logic").model_extra["logicroute"]
    dag = ext["dag"]
    assert [(n["id"], n["answer"]) for n in dag["nodes"]] == [("q1", "Steven Spielberg"), ("q2", "December 18, 1946")]
    assert dag["edges"] == [["q1", "q2"]] and dag["nodes"][1]["question"] == "When was Steven Spielberg born?"
    q2_sources = [ext["sources"][i]["doc_id"] for i in dag["nodes"][1]["sources"]]
    assert q2_sources[0] == "spielberg"  # the hop's retrieval, rewritten with q1's answer


def test_other_routes_have_no_dag(client):
    assert ask(client, SIMPLE_QUESTION, model="logicroute-chunk").model_extra["logicroute"]["dag"] is None


def test_the_last_user_message_is_the_question_and_content_parts_are_read(client):
    reply = client.chat.completions.create(
        model="logicroute-auto",
        messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "an earlier director question"},
            {"role": "assistant", "content": "..."},
            {"role": "user", "content": [{"type": "text", "text": SIMPLE_QUESTION}]},
        ],
        temperature=0.7,  # sampling fields are accepted; the routes answer at temperature 0
        max_tokens=50,
    )
    assert reply.model_extra["logicroute"]["route"] == "chunk"


def test_streaming_sends_progress_for_each_logic_step_then_the_answer_tokens(client):
    chunks = list(
        ask(client, CHAIN_QUESTION, model="logicroute-logic", stream=True, stream_options={"include_usage": True})
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    progress = [c.model_extra["logicroute"]["progress"] for c in chunks if not c.choices and c.usage is None]
    done = [p["step"] for p in progress if p["type"] == "step_done"]
    assert done == ["solve sub-questions q1", "solve sub-questions q2", "answer or rewrite"]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER
    last = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop")
    assert last.model_extra["logicroute"]["dag"]["edges"] == [["q1", "q2"]]
    assert chunks[-1].usage.prompt_tokens == last.model_extra["logicroute"]["usage"]["prompt_tokens"]


def test_streaming_a_cheap_route_sends_one_step_and_no_usage_unless_asked(client):
    chunks = list(ask(client, SIMPLE_QUESTION, stream=True))
    assert all(c.usage is None for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER


def test_an_unknown_model_is_a_404_naming_the_models(client):
    with pytest.raises(openai.NotFoundError) as e:
        ask(client, SIMPLE_QUESTION, model="gpt-4o")
    assert "logicroute-auto" in e.value.message and e.value.code == "not_found"


def test_an_empty_question_is_a_400_even_when_streaming(client):
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, "   ", stream=stream)
        assert e.value.code == "bad_question"


def test_a_chat_without_a_user_message_is_a_400(client):
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="logicroute-auto", messages=[{"role": "system", "content": "hi"}])


def test_an_llm_failure_is_a_502_with_the_reason_and_no_traceback(tmp_path, isolated_llm_env):
    from engine.floor.base.errors import LLMError

    class DownLLM(SchemaLLM):
        def chat(self, messages, **kw):
            raise LLMError("endpoint http://llm:8000 refused the connection")

    with ServerThread(film_service(tmp_path, DownLLM())) as s:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as e:
            ask(client, SIMPLE_QUESTION)
        assert e.value.status_code == 502 and "refused the connection" in e.value.message
        assert "Traceback" not in e.value.response.text
        with pytest.raises(openai.APIError) as streamed:  # after the stream started: an error event
            list(ask(client, SIMPLE_QUESTION, stream=True))
        assert "refused the connection" in streamed.value.message
