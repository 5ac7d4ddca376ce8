"""Time limits are wall-clock limits on the whole LLM call, and the caller's own limit is not the
endpoint's fault: an endpoint that trickles its reply is cut at the timeout and at the answer's
deadline (library, `ask`, `serve`), the cut connection is closed; a try the deadline cut opens
no circuit breaker, so the logic route's reserved final call and the next request still run;
and when the deadline ends an answer, what was found is returned, flagged in words."""

from __future__ import annotations

import json
import os
import threading
import time

import openai  # noqa: F401  # imported once at collection, not inside the first timed test
import pytest
from click.testing import CliRunner

from engine.core.budget import Budget
from engine.core.pipeline import RoutedRAG
from engine.face.cli import main
from engine.face.serve.run import ServerThread
from engine.floor.base.errors import DeadlineError
from engine.floor.llm.base import answer_scope, solving
from engine.floor.llm.factory import make_llm
from tests.engine.fake_endpoint import HANG, FakeEndpoint, Trickle, timed
from tests.engine.logic_scripts import CHAIN_PLAN, CHAIN_Q, corpus_kb, step
from tests.engine.serve_helpers import CHAIN_QUESTION, SIMPLE_QUESTION, call, film_service
from tests.fakes import FakeRouter, HashedBowEmbedder, layered_kb, make_rag
from tests.samples import MSGS

pytestmark = pytest.mark.usefixtures("isolated_llm_env")  # no user cache, no real key or endpoint
QUESTION = "Who founded the company?"  # FakeRouter: chunk


@pytest.fixture(scope="module", autouse=True)
def warm_process():
    """What the first call of a process loads (the logic route's modules, the HTTP client's
    certificates, the reply's models: over a second on a busy machine), loaded before the timed
    specs, so their limits of a second or less measure the endpoint alone."""
    import engine.core.routes.logic.solve  # noqa: F401

    with FakeEndpoint("warm") as server:
        server.llm().chat(MSGS)


# ---------------------------------------------------------------- a trickling endpoint


@pytest.mark.parametrize("head", [False, True], ids=["body", "head-and-body"])
def test_a_trickling_reply_is_cut_at_the_timeout_and_its_connection_closed(head):
    with FakeEndpoint(Trickle(every=0.05, head=head)) as server:
        llm = make_llm(f"openai:m@{server.url}?timeout=0.5&retries=0", cache=False)
        error, seconds = timed(llm.chat, MSGS)
        assert str(error) == f"{server.url} (m): no answer within 0.5s after 1 try"
        assert seconds < 3  # the whole reply takes 12 s; no single byte took 0.5 s
        assert server.hung_up.wait(2)  # the client closed the connection, it is not still reading


def test_a_trickling_reply_is_cut_at_the_answers_deadline():
    with FakeEndpoint(Trickle()) as server:
        rag = make_rag(server.llm(timeout=30, max_retries=3), cache=False)
        error, seconds = timed(rag.answer, QUESTION, route="chunk", budget=Budget(max_seconds=1))
        assert isinstance(error, DeadlineError) and seconds < 3 and server.requests == 1
        assert str(error) == f"{server.url} (m): stopped at the 1 s limit before a reply"
        assert server.hung_up.wait(2)


@pytest.mark.parametrize("route", ["chunk", "summary"])
def test_ask_on_a_trickling_endpoint_ends_at_max_seconds(monkeypatch, tmp_path, route):
    # the real RoutedRAG and LLM, on a KB with summary layers and a fake embedder, built before the clock starts
    kb = layered_kb(tmp_path / "kb", HashedBowEmbedder(dim=128))
    opened = lambda cls, _, **options: RoutedRAG(kb=kb, router=FakeRouter(), **options)  # noqa: E731
    monkeypatch.setattr(RoutedRAG, "open", classmethod(opened))
    with FakeEndpoint(Trickle()) as server:
        spec = f"openai:m@{server.url}?timeout=5&retries=0"
        args = ["ask", QUESTION, "--kb", str(tmp_path), "--route", route, "--set", "budget.max_seconds=1"]
        t0 = time.perf_counter()
        res = CliRunner().invoke(main, [*args, "--set", "cache=false", "--llm", spec])
        seconds = time.perf_counter() - t0
    assert (res.exit_code, res.output) == (2, f"error: {server.url} (m): stopped at the 1 s limit before a reply\n")
    assert seconds < 4  # not the 12 s the reply takes, nor the 5 s timeout


def test_ask_on_the_logic_route_ends_inside_max_seconds_final_answer_included(monkeypatch, tmp_path):
    monkeypatch.setattr(RoutedRAG, "open", classmethod(lambda cls, kb, **options: make_rag(None, **options)))
    with FakeEndpoint(Trickle(every=0.2)) as server:  # ~50 s a reply
        spec = f"openai:m@{server.url}?timeout=60&retries=0"
        args = ["ask", QUESTION, "--kb", str(tmp_path), "--route", "logic", "--set", "budget.max_seconds=5"]
        t0 = time.perf_counter()
        res = CliRunner().invoke(main, [*args, "--set", "cache=false", "--llm", spec])
        seconds = time.perf_counter() - t0
    # the plan is cut at 3.75 s, the final answer at 5 s: nothing was answered, and the message says why
    assert (res.exit_code, res.output) == (2, f"error: {server.url} (m): stopped at the 5 s limit before a reply\n")
    assert server.requests == 2 and 4.5 < seconds < 8  # not the 60 s timeout of the final answer's try


def warm(service, llm, server, reply) -> None:
    """Everything a first request loads, loaded (router, KB, the HTTP client), so the deadline
    counts the endpoint's time alone; then the endpoint gives `reply` to every request."""
    service.warm_up()
    assert llm.chat(MSGS).text
    server.replies = [reply]


def test_serve_on_a_trickling_endpoint_frees_its_worker_at_the_deadline(tmp_path):
    with FakeEndpoint("Paris") as server:
        llm = server.llm(timeout=30, max_retries=0)
        service = film_service(tmp_path, llm, workers=1, queue_size=0, deadline_seconds=0.8)
        warm(service, llm, server, Trickle())
        with ServerThread(service) as s:
            t0 = time.perf_counter()
            cut = call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION, "route": "chunk"})
            assert cut.status == 504 and time.perf_counter() - t0 < 3
            assert server.hung_up.wait(2)  # the worker stopped reading the trickle
            t0 = time.perf_counter()
            while service.admission.state()["running"] and time.perf_counter() - t0 < 2:
                time.sleep(0.01)
            # the one worker is free again: not 503 (no queue), not pinned for the 12 s trickle
            server.replies = ["Paris was founded by the Parisii [1]."]
            after = call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION, "route": "chunk"})
            assert after.status == 200 and after.body["answer"].startswith("Paris")


def test_serve_makes_no_call_past_the_request_deadline(tmp_path):
    with FakeEndpoint("ready") as server:
        llm = server.llm(timeout=30, max_retries=0)
        service = film_service(tmp_path, llm, workers=1, queue_size=0, deadline_seconds=0.8)
        warm(service, llm, server, HANG)
        with ServerThread(service) as s:
            cut = call("POST", f"{s.url}/query", {"question": CHAIN_QUESTION, "route": "logic"})
            assert cut.status == 504
            t0 = time.perf_counter()
            while service.admission.state()["running"] and time.perf_counter() - t0 < 2:
                time.sleep(0.01)
            assert service.admission.state()["running"] == 0  # not held 30 s by the final answer's try
    # the warm-up, the step cut at 0.6 s, the final answer cut at the 0.8 s deadline: the 504 was the answer
    assert server.requests == 3


def test_serve_ends_a_logic_answer_at_the_requests_max_seconds_not_its_deadline(tmp_path):
    with FakeEndpoint("ready") as server:
        llm = server.llm(timeout=30, max_retries=0)
        service = film_service(tmp_path, llm, workers=1, queue_size=0, deadline_seconds=30)
        warm(service, llm, server, Trickle())
        with ServerThread(service) as s:
            body = {"question": CHAIN_QUESTION, "route": "logic", "budget": {"max_seconds": 1}}
            t0 = time.perf_counter()
            cut = call("POST", f"{s.url}/query", body)
            seconds = time.perf_counter() - t0
    assert cut.status == 504 and "stopped at the 1 s limit" in cut.error["message"]
    assert seconds < 3  # not held until the 30 s deadline by the final answer's try


# ---------------------------------------------------------------- the caller's deadline is not the endpoint's fault


def test_a_try_cut_by_the_answers_deadline_opens_no_breaker():
    with FakeEndpoint(HANG, "Paris", "Rome") as server:
        llm = server.llm(timeout=5, max_retries=0)  # the default 30 s cool-down
        with answer_scope(1.2):
            with solving():  # a logic step, cut at 0.9 s
                cut, _ = timed(llm.chat, MSGS)
            assert isinstance(cut, DeadlineError)
            assert llm.chat(MSGS).text == "Paris"  # the same answer's final call is made
        assert llm.chat(MSGS).text == "Rome"  # and the next answer's
        assert server.requests == 3


def test_the_logic_routes_final_call_runs_after_a_step_the_deadline_cut():
    import json

    replies = [json.dumps(CHAIN_PLAN), json.dumps(step({"q1": "Steven Spielberg"})), HANG, "December 18, 1946"]
    with FakeEndpoint(*replies) as server:
        rag = RoutedRAG(kb=corpus_kb(), llm=server.llm(timeout=5, max_retries=0), router=FakeRouter(), cache=False)
        ans = rag.answer(CHAIN_Q, route="logic", budget=Budget(max_seconds=1.0))
    assert server.requests == 4
    # the final answer, not the last sub-answer ("Steven Spielberg") a fail-fast final call fell back to
    assert ans.text == "December 18, 1946"
    assert any("stopped at the 1 s limit" in f for f in ans.flags)


def test_serve_after_a_deadline_cut_answers_the_next_request_on_a_healthy_endpoint(tmp_path):
    answer = "Alfred Hitchcock was born in London [1]."
    with FakeEndpoint(answer) as server:
        llm = server.llm(timeout=30, max_retries=0)  # the default 30 s cool-down
        service = film_service(tmp_path, llm, workers=1, queue_size=4, deadline_seconds=0.6)
        warm(service, llm, server, HANG)  # a slow endpoint
        with ServerThread(service) as s:
            body = {"question": SIMPLE_QUESTION, "route": "chunk"}
            replies: list = []
            both = [threading.Thread(target=lambda: replies.append(call("POST", f"{s.url}/query", body))) for _ in "12"]
            for t in both:
                t.start()
            for t in both:
                t.join()
            assert sorted(r.status for r in replies) == [504, 504]  # one cut while answering, one in the queue
            server.replies = [answer]  # the endpoint is healthy again
            alone = call("POST", f"{s.url}/query", body)
    assert (alone.status, alone.body["answer"]) == (200, answer)  # not 502 "not tried again for another 29s"


# ---------------------------------------------------------------- the deadline ends an answer: what was found


def test_an_answer_the_deadline_ends_keeps_what_was_found_and_says_the_limit(monkeypatch, tmp_path):
    # the chunk answer comes at once; the self-check that would escalate it hangs past the 1 s limit
    monkeypatch.setattr(RoutedRAG, "open", classmethod(lambda cls, kb, **options: make_rag(None, **options)))
    with FakeEndpoint("Acme was founded by Ann Lee [1].", HANG) as server:
        args = [
            "ask",
            QUESTION,
            "--kb",
            str(tmp_path),
            "--route",
            "chunk",
            "--escalate",
            "--set",
            "budget.max_seconds=1",
        ]
        res = CliRunner().invoke(
            main, [*args, "--set", "cache=false", "--llm", f"openai:m@{server.url}?timeout=5&retries=0"]
        )
    assert res.exit_code == 0 and "answer: Acme was founded by Ann Lee [1]." in res.output
    flags = [line for line in res.output.splitlines() if line.startswith("flag: ")]
    assert flags == [
        f"flag: self-check failed ({server.url} (m): stopped at the 1 s limit before a reply); answer kept"
    ]


def test_a_logic_retry_stopped_by_the_time_limit_names_the_answers_limit_not_what_was_left():
    from engine.core.routes import RouteContext
    from tests.fakes import ScriptedLLM

    # the logic route as a retry runs: 0.3 s of the answer's 0.5 s spent, its budget the 0.2 s left; every
    # call takes 0.3 s, so its first step (its plan read off the question's form) ends past the limit
    llm = ScriptedLLM([json.dumps(step({"q1": "Steven Spielberg"})), "December 18, 1946"], delay=0.3)
    rag = make_rag(llm)
    with answer_scope(0.5, start=time.perf_counter() - 0.3):
        ans = rag.route("logic", Budget(max_seconds=0.2)).answer(CHAIN_Q, RouteContext(rag.kb, llm, rag.k, rag.style))
    assert len(llm.calls) == 1 and ans.text == "Steven Spielberg"  # no final call past the limit
    assert "budget exhausted (stopped at the 0.5 s limit): answered from the memory so far" in ans.flags


@pytest.mark.embedder
@pytest.mark.parametrize("route", ["logic", "auto"])
def test_a_new_question_with_an_empty_cache_ends_inside_the_limit_start_up_included(tmp_path, real_embedder, route):
    """The real command in a process of its own, its embedder not loaded and nothing cached: the
    limit counts from the command's start, so loading the embedder spends it, and the answer is
    never blank with exit 0 (it was, after 7.5-11.6 s: the embedder loaded inside the route's
    own clock, and the logic route answered blank once the time was gone)."""
    import subprocess
    import sys

    from hierarchy.indexing import index_sources

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("The Ardmere lighthouse was built by Ada Brankov, born in Kesh.")
    index_sources(tmp_path / "kb", [tmp_path / "docs"], summaries="none", embedder=real_embedder)
    with FakeEndpoint(Trickle(every=1.0)) as server:
        command = [
            sys.executable,
            "-m",
            "engine.face.cli",
            "ask",
            "Where was the builder of the Ardmere lighthouse born?",
        ]
        command += ["--kb", str(tmp_path / "kb"), "--route", route, "--set", "budget.max_seconds=3"]
        command += ["--set", "cache=false", "--llm", f"openai:m@{server.url}?timeout=60&retries=0"]
        t0 = time.perf_counter()
        done = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, "LOGICROUTE_CACHE_DIR": str(tmp_path / "c")}
        )
        seconds = time.perf_counter() - t0
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: ") and "stopped at the 3 s limit" in done.stderr
    assert seconds < 3 + 1.5
