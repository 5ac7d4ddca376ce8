"""`logicroute ask --questions` when some questions fail: each is named by FILE:LINE with its
error, the failures are counted, the others are answered, and the exit status says some failed.
No model loads: RoutedRAG.open is replaced by a RoutedRAG over fakes."""

from __future__ import annotations

import json

from click.testing import CliRunner

from engine.core.pipeline import RoutedRAG
from engine.face.cli import main
from engine.face.cli_ask import BATCH_FAILED
from engine.floor.base.errors import LLMError
from tests.fakes import ScriptedLLM, make_rag


def test_failed_questions_are_named_by_file_and_line_counted_and_the_exit_status_says_some_failed(
    monkeypatch, tmp_path
):
    def down_for_some(messages):
        for word in ("Q2", "Q5", "Q9"):
            if f"{word} " in messages[-1]["content"]:
                raise LLMError(f"http://llm/v1 (m): no answer within 5s after 3 tries ({word})")
        return "Paris"

    qfile = tmp_path / "qs.txt"
    qfile.write_text("".join(f"Q{i} where is the Eiffel Tower?\n" for i in range(1, 11)))
    llm = ScriptedLLM(rules={"": down_for_some})
    monkeypatch.setattr(RoutedRAG, "open", classmethod(lambda cls, kb, **options: make_rag(llm, **options)))
    res = CliRunner().invoke(main, ["ask", "--questions", str(qfile), "--kb", str(tmp_path), "--route", "chunk"])
    assert res.exit_code == BATCH_FAILED == 3
    assert [json.loads(line)["line"] for line in res.stdout.splitlines()] == [1, 3, 4, 6, 7, 8, 10]
    failures = [line for line in res.stderr.splitlines() if line.startswith(f"{qfile}:") or "error" in line]
    assert failures == [
        f"{qfile}:2: http://llm/v1 (m): no answer within 5s after 3 tries (Q2)",
        f"{qfile}:5: http://llm/v1 (m): no answer within 5s after 3 tries (Q5)",
        f"{qfile}:9: http://llm/v1 (m): no answer within 5s after 3 tries (Q9)",
        "error: 3 of 10 questions failed; the others were answered",
    ]
    help_text = CliRunner().invoke(main, ["ask", "--help"]).output
    assert "3 (--questions) some questions failed" in help_text


def test_a_failure_that_is_a_bug_is_named_with_the_others_then_raised_with_its_traceback(monkeypatch, tmp_path):
    def broken_for_q2(messages):
        if "Q2 " in messages[-1]["content"]:
            raise KeyError("answers")
        return "Paris"

    qfile = tmp_path / "qs.txt"
    qfile.write_text("Q1 where is the Eiffel Tower?\nQ2 where is the Eiffel Tower?\n")
    llm = ScriptedLLM(rules={"": broken_for_q2})
    monkeypatch.setattr(RoutedRAG, "open", classmethod(lambda cls, kb, **options: make_rag(llm, **options)))
    res = CliRunner().invoke(main, ["ask", "--questions", str(qfile), "--kb", str(tmp_path), "--route", "chunk"])
    assert isinstance(res.exception, KeyError) and res.exit_code == 1
    assert f"{qfile}:2: KeyError: 'answers'\n" in res.stderr and "1 of 2 questions failed" in res.stderr
    assert [json.loads(line)["line"] for line in res.stdout.splitlines()] == [1]


INVISIBLE = ["\u200b\u200b", "\x01\x02", "\x00", "\ufe0f\u034f", "\u180b \u2060"]


def test_a_question_of_invisible_characters_is_refused_in_one_line_with_no_llm_call(monkeypatch, tmp_path):
    llm = ScriptedLLM(rules={"": lambda messages: "Paris"})
    monkeypatch.setattr(RoutedRAG, "open", classmethod(lambda cls, kb, **options: make_rag(llm, **options)))
    for question in INVISIBLE:
        res = CliRunner().invoke(main, ["ask", question, "--kb", str(tmp_path)])
        assert res.exit_code == 2, (question, res.output)
        assert res.stderr == "error: the question has no visible text (only invisible, control or format characters)\n"
    qfile = tmp_path / "qs.txt"
    qfile.write_text("Where is the Eiffel Tower?\n\u200b\u200b\n")
    res = CliRunner().invoke(main, ["ask", "--questions", str(qfile), "--kb", str(tmp_path), "--route", "chunk"])
    assert res.exit_code == 2 and f"{qfile}:2: the question has no visible text" in res.stderr  # as an empty line
    assert llm.calls == []
