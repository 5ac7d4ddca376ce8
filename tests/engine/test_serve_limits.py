"""The server's limits: the bearer token, the body size caps, the bounded queue (503 +
Retry-After), the per-request deadline (504), how many answers run at once, and the command
that starts it all."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import openai
import pytest
from click.testing import CliRunner

from engine.face.serve.config import ServeConfig, bearer_matches
from engine.face.serve.run import ServerThread
from engine.floor.base.errors import LogicRouteError
from tests.engine.serve_helpers import SIMPLE_QUESTION, SchemaLLM, call, film_service, post_chunked

KEY = "k" * 32


@pytest.fixture(autouse=True)
def _env(isolated_llm_env):
    pass


def start_in_background(url: str, n: int) -> list[threading.Thread]:
    threads = [
        threading.Thread(target=call, args=("POST", f"{url}/query", {"question": SIMPLE_QUESTION})) for _ in range(n)
    ]
    for t in threads:
        t.start()
    return threads


def wait_until(condition, timeout: float = 30.0) -> None:
    t0 = time.monotonic()
    while not condition():
        assert time.monotonic() - t0 < timeout, "condition not reached"
        time.sleep(0.01)


# ---------------------------------------------------------------- who may call


def test_listening_beyond_this_machine_needs_a_key():
    with pytest.raises(LogicRouteError, match="LOGICROUTE_SERVER_KEY"):
        ServeConfig(host="0.0.0.0")
    with pytest.raises(LogicRouteError, match="at least 16"):
        ServeConfig(host="0.0.0.0", api_key="short")
    assert ServeConfig(host="0.0.0.0", api_key=KEY).api_key == KEY
    assert ServeConfig(host="127.0.0.1").api_key is None  # localhost: no key needed


def test_the_token_is_compared_as_a_bearer_credential():
    assert bearer_matches(f"Bearer {KEY}", KEY) and bearer_matches(f"bearer {KEY}", KEY)
    assert not bearer_matches(KEY, KEY) and not bearer_matches(f"Basic {KEY}", KEY)
    assert not bearer_matches(f"Bearer {KEY[:-1]}", KEY) and not bearer_matches(None, KEY)


def test_with_a_key_every_api_call_needs_it_but_the_page_loads(tmp_path):
    with ServerThread(film_service(tmp_path, api_key=KEY)) as s:
        refused = call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION})
        assert refused.status == 401 and refused.error["type"] == "authentication_error"
        assert refused.headers["www-authenticate"] == "Bearer"
        wrong = call("GET", f"{s.url}/health", headers={"Authorization": "Bearer " + "x" * 32})
        assert wrong.status == 401
        assert call("GET", f"{s.url}/health", headers={"Authorization": f"Bearer {KEY}"}).status == 200
        assert call("GET", f"{s.url}/").status == 200 and call("GET", f"{s.url}/page/app.js").status == 200
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{s.url}/v1", api_key="wrong", max_retries=0).models.list()
        assert openai.OpenAI(base_url=f"{s.url}/v1", api_key=KEY).models.list().data


# ---------------------------------------------------------------- sizes


def test_a_body_over_the_cap_is_refused_with_413_before_it_is_read(tmp_path):
    with ServerThread(film_service(tmp_path, max_body_bytes=1000, max_document_bytes=5000)) as s:
        big = call("POST", f"{s.url}/query", {"question": "x " * 600})
        assert big.status == 413 and big.error["code"] == "payload_too_large"
        doc = {"documents": [{"id": "d", "text": "word " * 800}]}  # 4 KB: over the query cap, under the documents cap
        assert call("POST", f"{s.url}/documents", doc).status == 200
        chunked = post_chunked(f"{s.url}/query", [b'{"question": "', b"x" * 2000, b'"}'])
        assert chunked.status == 413  # no Content-Length: counted as it arrives
        small = post_chunked(f"{s.url}/query", [b'{"question": "', SIMPLE_QUESTION.encode(), b'"}'])
        assert small.status == 200 and small.body["answer"]


def test_a_long_question_is_a_400_naming_the_limit(tmp_path):
    with ServerThread(film_service(tmp_path)) as s:
        r = call("POST", f"{s.url}/query", {"question": "word " * 700})
    assert r.status == 400 and r.error["code"] in ("bad_question", "invalid_body")


# ---------------------------------------------------------------- queue and deadline


def test_a_full_queue_answers_503_with_retry_after(tmp_path):
    gate = threading.Event()
    service = film_service(tmp_path, SchemaLLM(gate=gate), workers=1, queue_size=2)
    with ServerThread(service) as s:
        held = start_in_background(s.url, 3)  # one answering, two waiting
        wait_until(lambda: service.admission.state()["waiting"] == 2)
        r = call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION})
        assert r.status == 503 and r.error["code"] == "queue_full" and int(r.headers["retry-after"]) >= 1
        with pytest.raises(openai.APIStatusError) as e:  # streaming too: a status, not a broken stream
            client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0)
            client.chat.completions.create(
                model="logicroute-auto", messages=[{"role": "user", "content": SIMPLE_QUESTION}], stream=True
            )
        assert e.value.status_code == 503
        gate.set()
        for t in held:
            t.join(timeout=30)
        assert call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION}).status == 200  # the places came back
        assert call("GET", f"{s.url}/metrics").body["queue"]["refused"] == 2


def test_a_request_past_its_deadline_is_a_504_and_its_place_comes_back(tmp_path):
    service = film_service(tmp_path, SchemaLLM(delay=0.8), workers=1, queue_size=4, deadline_seconds=0.3)
    with ServerThread(service) as s:
        r = call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION})
        assert r.status == 504 and r.error["code"] == "deadline_exceeded"
        wait_until(lambda: service.admission.state()["running"] == 0)
        state = service.admission.state()
        assert state["waiting"] == 0 and state["timed_out"] == 1


def test_an_answer_ready_after_its_deadline_is_a_504_even_when_the_loop_sees_it_first():
    """A busy event loop can take the answering thread's result before its own timer fires: the
    answer the deadline cut short is still a 504, never a 200."""
    import asyncio

    from engine.face.serve.admission import Admission
    from engine.face.serve.errors import DeadlineExceeded

    admission = Admission(workers=1, queue_size=0)

    async def late_answer():
        deadline = time.monotonic() + 0.2
        admission.admit()
        job = asyncio.ensure_future(admission.run(lambda: time.sleep(0.4) or "cut short", deadline))
        await asyncio.sleep(0)  # the job is on its thread
        time.sleep(0.6)  # the loop is blocked past the deadline and the thread's end
        return await job

    with pytest.raises(DeadlineExceeded):
        asyncio.run(late_answer())
    assert admission.state()["timed_out"] == 1
    admission.shutdown()


def test_the_deadline_caps_the_answers_time_budget(tmp_path):
    service = film_service(tmp_path, deadline_seconds=30)
    budget = service.budget_for({"max_seconds": 100, "max_llm_calls": 4}, seconds_left=12.0)
    assert budget.max_seconds == 12.0 and budget.max_llm_calls == 4
    assert service.budget_for(None, seconds_left=12.0).max_seconds == 12.0
    assert service.budget_for({"max_seconds": 5}, seconds_left=12.0).max_seconds == 5


@pytest.mark.parametrize("workers, expected_at_once", [(1, 1), (4, 4)])
def test_answers_run_one_at_a_time_for_the_local_model_and_n_at_once_for_an_endpoint(
    tmp_path, workers, expected_at_once
):
    llm = SchemaLLM(delay=0.3)
    with ServerThread(film_service(tmp_path, llm, workers=workers, queue_size=8)) as s:
        for t in start_in_background(s.url, 4):
            t.join(timeout=30)
    assert llm.max_active == expected_at_once


# ---------------------------------------------------------------- the command


def test_logicroute_help_loads_no_web_framework():
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from engine.face.cli import main\n"
        "r = CliRunner().invoke(main, ['--help'])\n"
        "assert r.exit_code == 0 and 'serve' in r.output, r.output\n"
        "heavy = [m for m in ('fastapi', 'uvicorn', 'starlette', 'engine.face.serve.app', 'torch') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_serve_refuses_another_host_without_a_key_before_loading_anything(tmp_path, monkeypatch):
    from engine.face.cli import main

    monkeypatch.delenv("LOGICROUTE_SERVER_KEY", raising=False)
    (tmp_path / "kb").mkdir()
    r = CliRunner().invoke(
        main, ["serve", "--kb", str(tmp_path / "kb"), "--host", "0.0.0.0", "--llm", "openai:m@http://x/v1"]
    )
    assert r.exit_code == 2 and "LOGICROUTE_SERVER_KEY" in r.output


def test_serve_passes_the_escalation_threshold_to_every_answer(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from engine.face.cli import main
    from engine.face.serve.service import AnswerService

    seen = {}

    def fake_open(cls, kb_dir, config=None, **options):
        seen.update(options)
        raise SystemExit(0)  # stop before anything loads or listens

    monkeypatch.setattr(AnswerService, "open", classmethod(fake_open))
    (tmp_path / "kb").mkdir()
    r = CliRunner().invoke(main, ["serve", "--kb", str(tmp_path / "kb"), "--escalate", "--set", "escalate_below=0.6"])
    assert r.exit_code == 0, r.output
    assert seen["escalate"] is True and seen["escalate_below"] == 0.6
