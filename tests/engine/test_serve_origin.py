"""Who a server without a key answers. Any web page its user visits can rebind its own name to
127.0.0.1 and call the server as same-origin (DNS rebinding), or post a form to it across
sites. So without a key the server answers only requests for its own names, takes document
writes only when started with --allow-writes, and reads no body that is not JSON (a form or a
"simple" cross-site fetch cannot send application/json)."""

from __future__ import annotations

import http.client
import json
import urllib.parse

import pytest
from click.testing import CliRunner

from engine.face.serve.config import ServeConfig, host_name
from engine.face.serve.run import ServerThread
from tests.engine.serve_helpers import SIMPLE_QUESTION, call, film_service

KEY = "k" * 32
DOC = {"documents": [{"id": "lang", "title": "Fritz Lang", "text": "Fritz Lang was born in Vienna."}]}


@pytest.fixture(autouse=True)
def _env(isolated_llm_env):
    pass


def as_host(host: str) -> dict:
    return {"Host": host}


def documents(url: str) -> int:
    return call("GET", f"{url}/health").body["kb"]["documents"]


def post_raw(url: str, path: str, body: bytes, headers: dict) -> int:
    """A POST with exactly these headers (urllib would add a Content-Type of its own)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


# ---------------------------------------------------------------- the Host header


def test_the_host_header_is_read_as_a_name_without_port_brackets_or_trailing_dot():
    assert host_name("LocalHost.:8000") == "localhost"
    assert host_name("[::1]:8000") == "::1" and host_name("127.0.0.1") == "127.0.0.1"
    assert host_name("") is None and host_name("[::1") is None and host_name("::1") is None


def test_without_a_key_a_request_for_another_name_is_refused_and_changes_nothing(tmp_path):
    with ServerThread(film_service(tmp_path)) as s:
        port = s.port
        rebound = as_host(f"attacker.example:{port}")
        for method, path, body in [
            ("GET", "/health", None),
            ("GET", "/", None),
            ("POST", "/query", {"question": SIMPLE_QUESTION}),
            ("POST", "/documents", DOC),
            ("DELETE", "/documents/jaws", None),
        ]:
            r = call(method, f"{s.url}{path}", body, headers=rebound)
            assert r.status == 403 and r.error["code"] == "host_not_allowed", (method, path, r)
        assert "--allowed-host" in r.error["message"]
        for lookalike in (f"127.0.0.1.attacker.example:{port}", f"localhost.attacker.example:{port}", ""):
            assert call("GET", f"{s.url}/health", headers=as_host(lookalike)).status == 403, lookalike
        assert documents(s.url) == 5  # neither the POST nor the DELETE reached the knowledge base
        for own in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "LOCALHOST"):
            assert call("GET", f"{s.url}/health", headers=as_host(own)).status == 200, own


def test_an_allowed_host_is_answered_as_the_servers_own_name(tmp_path):
    with ServerThread(film_service(tmp_path, allowed_hosts=("rag.lan",))) as s:
        assert call("GET", f"{s.url}/health", headers=as_host(f"rag.lan:{s.port}")).status == 200
        assert call("GET", f"{s.url}/health", headers=as_host(f"other.lan:{s.port}")).status == 403


def test_with_a_key_the_key_not_the_name_decides(tmp_path):
    with ServerThread(film_service(tmp_path, api_key=KEY)) as s:
        named = {"Host": f"rag.example.com:{s.port}"}
        assert call("GET", f"{s.url}/health", headers=named).status == 401
        assert call("GET", f"{s.url}/health", headers={**named, "Authorization": f"Bearer {KEY}"}).status == 200


# ---------------------------------------------------------------- writes


def test_without_a_key_writes_need_allow_writes_and_questions_still_answer(tmp_path):
    with ServerThread(film_service(tmp_path, allow_writes=False)) as s:
        added = call("POST", f"{s.url}/documents", DOC)
        assert added.status == 403 and added.error["code"] == "writes_disabled"
        assert "--allow-writes" in added.error["message"]
        assert call("DELETE", f"{s.url}/documents/jaws").status == 403
        assert documents(s.url) == 5
        assert call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION}).status == 200


def test_with_a_key_writes_need_only_the_key(tmp_path):
    with ServerThread(film_service(tmp_path, api_key=KEY, allow_writes=False)) as s:
        auth = {"Authorization": f"Bearer {KEY}"}
        assert call("POST", f"{s.url}/documents", DOC, headers=auth).status == 200
        assert call("DELETE", f"{s.url}/documents/jaws", headers=auth).status == 200


def test_allow_writes_takes_posts_and_deletes(tmp_path):
    with ServerThread(film_service(tmp_path, allow_writes=True)) as s:
        assert call("POST", f"{s.url}/documents", DOC).status == 200
        assert call("DELETE", f"{s.url}/documents/jaws").status == 200
        assert documents(s.url) == 5  # one in, one out


# ---------------------------------------------------------------- bodies are JSON


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_a_body_a_cross_site_form_could_send_is_refused_with_415(tmp_path, content_type):
    with ServerThread(film_service(tmp_path)) as s:
        as_form = {"Content-Type": content_type}
        r = call("POST", f"{s.url}/documents", DOC, headers=as_form)
        assert (
            r.status == 415 and r.error["code"] == "unsupported_media_type" and "application/json" in r.error["message"]
        )
        assert call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION}, headers=as_form).status == 415
        assert call("POST", f"{s.url}/v1/chat/completions", {}, headers=as_form).status == 415
        assert documents(s.url) == 5


def test_a_body_without_a_content_type_is_refused_and_json_with_a_charset_is_read(tmp_path):
    with ServerThread(film_service(tmp_path)) as s:
        body = json.dumps(DOC).encode()
        host = {"Host": f"127.0.0.1:{s.port}"}
        assert post_raw(s.url, "/documents", body, host) == 415  # what fetch(no-cors) sends a Blob as
        assert post_raw(s.url, "/documents", body, {**host, "Content-Type": "application/json; charset=utf-8"}) == 200
        assert call("DELETE", f"{s.url}/documents/lang", headers={"Content-Type": ""}).status == 200  # no body


# ---------------------------------------------------------------- the command


def test_serve_passes_allowed_hosts_and_allow_writes_and_says_so_in_its_help(tmp_path, monkeypatch):
    from engine.face.cli import main
    from engine.face.serve.service import AnswerService

    seen: dict[str, ServeConfig] = {}

    def fake_open(cls, kb_dir, config=None, **options):
        seen["config"] = config
        raise SystemExit(0)  # stop before anything loads or listens

    monkeypatch.setattr(AnswerService, "open", classmethod(fake_open))
    monkeypatch.delenv("LOGICROUTE_SERVER_KEY", raising=False)
    (tmp_path / "kb").mkdir()
    kb = ["serve", "--kb", str(tmp_path / "kb")]
    r = CliRunner().invoke(main, [*kb, "--allowed-host", "rag.lan", "--allowed-host", "box", "--allow-writes"])
    assert r.exit_code == 0, r.output
    assert seen["config"].allowed_hosts == ("rag.lan", "box") and seen["config"].allow_writes is True
    assert CliRunner().invoke(main, kb).exit_code == 0 and seen["config"].allow_writes is False
    help_text = " ".join(CliRunner().invoke(main, ["serve", "--help"]).output.split())
    assert "--allowed-host" in help_text and "--allow-writes" in help_text and "application/json" in help_text
