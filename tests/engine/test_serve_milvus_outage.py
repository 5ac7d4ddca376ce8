"""`logicroute serve` over a KB on a Milvus server that goes away and comes back: questions
during the outage get a 503 that says what is wrong (and when to ask again), and answers resume
once the server is back, with no restart of serve. The server is tests.milvus_server's
(`milvus_fault_server`); what it prints with -s is recorded in docs/results/milvus_server.md (outage figures)."""

from __future__ import annotations

import time

import pytest

from engine.face.serve.run import ServerThread
from tests.engine.serve_helpers import ANSWER, SIMPLE_QUESTION, call, film_service

pytest.importorskip("pymilvus")

RECOVERY_S = 150.0  # a restarted test server searches again 10-30 s after it starts (docs/results/milvus_server.md)


def test_questions_during_a_milvus_outage_get_a_503_and_answers_resume_after_its_restart_without_restarting_serve(
    milvus_fault_server, tmp_path, isolated_llm_env
):
    server = milvus_fault_server
    service = film_service(tmp_path, store=f"milvus://{server.uri}", workers=2)
    with ServerThread(service) as served:
        ask = {"question": SIMPLE_QUESTION, "route": "chunk"}
        before = call("POST", f"{served.url}/query", ask)
        assert before.status == 200 and before.body["answer"] == ANSWER

        server.kill()
        during = [call("POST", f"{served.url}/query", ask) for _ in range(3)]
        assert [r.status for r in during] == [503] * 3
        error = during[0].error
        assert error["code"] == "store_unavailable" and f"cannot reach Milvus at {server.uri}" in error["message"]
        assert during[0].headers["retry-after"] == "5"
        chat = {"model": "logicroute-chunk", "messages": [{"role": "user", "content": SIMPLE_QUESTION}]}
        assert call("POST", f"{served.url}/v1/chat/completions", chat).status == 503  # the OpenAI face too

        t0 = time.monotonic()
        server.start()
        started_s = time.monotonic() - t0
        statuses = []
        while time.monotonic() - t0 < RECOVERY_S:
            try:
                after = call("POST", f"{served.url}/query", ask)
            except OSError:  # this client's own 30 s timeout, while the server loads the collection
                statuses.append("client timeout")
                continue
            statuses.append(after.status)
            if after.status == 200:
                break
            time.sleep(0.5)
        recovered_s = time.monotonic() - t0
        assert statuses[-1] == 200 and after.body["answer"] == ANSWER, statuses
        assert set(statuses[:-1]) <= {503, "client timeout"}  # until then the same clear answer, never a 500
        print(
            f"\nmilvus outage under serve: before 200, during {[r.status for r in during]} "
            f"({error['code']}: {error['message']}); server up again {started_s:.1f} s after start(), "
            f"first 200 at {recovered_s:.1f} s, statuses after the restart {statuses}"
        )


def test_an_unreachable_store_is_a_503_with_retry_after_and_the_kbs_own_faults_stay_500():
    from engine.face.serve.errors import error_body, headers_of, kind_of
    from engine.floor.base.errors import KBCorruptError, StoreUnavailableError

    down = StoreUnavailableError("cannot reach Milvus at http://127.0.0.1:19530 (connection refused)")
    assert (kind_of(down).status, kind_of(down).code) == (503, "store_unavailable")
    assert headers_of(down) == {"Retry-After": "5"}
    assert error_body(down)["error"]["message"].startswith("cannot reach Milvus at http://127.0.0.1:19530")
    broken = KBCorruptError("the collection is gone")
    assert (kind_of(broken).status, headers_of(broken)) == (500, None)  # a retry would not help: no Retry-After
